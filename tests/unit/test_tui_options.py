"""`argwatch tui` options: the token from a file or the environment, TLS files that go together."""

from __future__ import annotations

import argparse

import pytest

from argwatch.tui.run import TOKEN_ENV, add_tui_arguments, connection_from


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_tui_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_token_comes_from_a_file_before_the_environment(tmp_path) -> None:
    (tmp_path / "token").write_text("from-the-file-0123456789\n")
    args = parsed("--admin", "gw:50052", "--token-file", str(tmp_path / "token"), "--actor", "ana")
    connection = connection_from(args, {TOKEN_ENV: "from-the-environment"})
    assert (connection.target, connection.token, connection.actor) == ("gw:50052", "from-the-file-0123456789", "ana")
    assert connection_from(parsed(), {TOKEN_ENV: "from-the-environment"}).token == "from-the-environment"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--interval", "0.1"), "at least 0.2 seconds"),
        (("--tls-cert", "me.pem"), "--tls-cert and --tls-key go together"),
        (("--tls-cert", "me.pem", "--tls-key", "me-key.pem"), "--tls-cert needs --tls-ca"),
        (("--tls-ca", "missing.pem"), "--tls-ca missing.pem: no such file"),
        (("--token-file", "missing-token"), "--token-file missing-token"),
    ],
)
def test_options_that_cannot_work_are_refused_with_the_option_named(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        connection_from(parsed(*argv), {})
