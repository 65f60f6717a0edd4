"""Settings: flags win over ARGWATCH_* environment, which wins over defaults; bad values name their origin."""

from __future__ import annotations

import argparse

import pytest

from argwatch.server.policy.model import Mode
from argwatch.server.process.settings import Settings, add_serve_arguments, settings_from


def parse(argv: list[str], environ: dict[str, str]) -> Settings:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return settings_from(parser.parse_args(argv), environ)


def test_flags_beat_environment_which_beats_defaults() -> None:
    settings = parse(
        ["--policy", "p.yaml", "--listen", "127.0.0.1:7000"],
        {"ARGWATCH_LISTEN": "127.0.0.1:9", "ARGWATCH_GLOBAL_MODE": "observe", "ARGWATCH_GRACE_SECONDS": "30s"},
    )
    assert settings.policy == "p.yaml"
    assert settings.listen == "127.0.0.1:7000"
    assert settings.global_mode is Mode.OBSERVE
    assert settings.grace_seconds == 30
    assert settings.admin_listen == "127.0.0.1:50052"


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        ([], {}, "a policy is required"),
        (["--policy", "p", "--listen", "50051"], {}, "--listen: expected HOST:PORT"),
        (["--policy", "p"], {"ARGWATCH_METRICS_LISTEN": "host:99999"}, "ARGWATCH_METRICS_LISTEN: expected HOST:PORT"),
        (["--policy", "p", "--global-mode", "enforce"], {}, "--global-mode: expected observe, reject or none"),
        (["--policy", "p"], {"ARGWATCH_LOG_LEVEL": "chatty"}, "ARGWATCH_LOG_LEVEL: expected DEBUG"),
    ],
)
def test_bad_values_are_refused_naming_the_flag_or_variable(
    argv: list[str], environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        parse(argv, environ)
