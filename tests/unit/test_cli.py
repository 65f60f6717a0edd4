"""The `argwatch` command's one convention: --version, a description and every default in each --help, the
same Admin API options on every command that reads it, and a usage error that names the command run."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from argwatch.server.cli import main
from argwatch.server.cli.parser import build_parser

_, COMMANDS = build_parser()
LEAF_COMMANDS = [
    "serve",
    "policy check",
    "tui",
    "watch",
    "report",
    "tools export",
    "health",
    "replay",
    "sets export",
    "coverage",
    "mode list",
    "mode set",
    "mode clear",
    "shadow set",
    "shadow clear",
    "shadow report",
    "shadow promote",
]


def options_of(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {
        action.dest: action
        for action in parser._actions
        if action.option_strings and action.dest != "help" and action.help != argparse.SUPPRESS
    }


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("argwatch 0.")


@pytest.mark.parametrize("name", LEAF_COMMANDS)
def test_each_help_has_a_description_and_shows_every_default(name: str) -> None:
    parser = COMMANDS[name]
    assert parser.description and len(parser.description) > 40
    text = parser.format_help()
    assert "default ]" not in text and "default: None" not in text
    for dest, action in options_of(parser).items():
        if isinstance(action, argparse._StoreTrueAction | argparse._AppendAction) or action.default in (None, ""):
            continue
        if action.default == 0 and "0:" in (action.help or ""):
            continue  # "(0: never)" says it
        assert "default" in parser._get_formatter()._format_action(action), f"{name} --{dest}: default not shown"


def test_serve_names_each_settings_default_and_environment_variable() -> None:
    text = COMMANDS["serve"].format_help()
    for shown in ("default: 0.0.0.0:50051", "default: 127.0.0.1:50052", "ARGWATCH_TLS_KEY", "default: 1000"):
        assert shown in " ".join(text.split()), shown


def test_the_old_address_flag_is_still_accepted_but_not_shown() -> None:
    args, _ = build_parser()[0].parse_known_args(["watch", "--target", "gw:1"])
    assert args.admin == "gw:1"
    assert "--target" not in COMMANDS["watch"].format_help()
    args, _ = build_parser()[0].parse_known_args(["tools", "export", "--target", "gw:2"])
    assert args.gateway == "gw:2"


def test_every_admin_command_takes_the_same_address_token_and_tls_options() -> None:
    shared = {"admin", "token_file", "tls_ca", "tls_cert", "tls_key", "tls_server_name"}
    for name in ("tui", "watch", "report", "coverage", "mode list", "mode set", "mode clear"):
        options = options_of(COMMANDS[name])
        assert shared <= set(options), f"{name} lacks {shared - set(options)}"
        assert options["admin"].option_strings[0] == "--admin" and options["admin"].default == "127.0.0.1:50052"


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["tui", "--no-such-flag"], "usage: argwatch tui"),
        (["report", "--window", "soon"], "usage: argwatch report"),
        (["serve"], "usage: argwatch serve"),
        (["policy", "check"], "usage: argwatch policy check"),
        (["tools", "export", "--tls-cert", "me.pem"], "usage: argwatch tools export"),
        (["mode", "set", "refund_order", "obsrve", "--reason", "INC-7"], "usage: argwatch mode set"),
        (["mode", "set", "refund_order", "observe", "--reason", " "], "usage: argwatch mode set"),
        (
            ["mode", "set", "refund_order", "observe", "--reason", "INC-7", "--expires", "soon"],
            "usage: argwatch mode set",
        ),
        (["mode", "clear", "--reason", "INC-7"], "usage: argwatch mode clear"),
        (["mode", "clear", "refund_order", "--global", "--reason", "INC-7"], "usage: argwatch mode clear"),
    ],
)
def test_a_usage_error_prints_the_commands_usage_and_exits_2(
    argv: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith(usage)


@pytest.mark.slow
def test_the_tui_without_its_extra_says_how_to_install_it() -> None:
    """The server's image has no Textual: `argwatch tui` there says what to install and exits 1."""
    code = (
        "import sys; sys.modules['textual'] = None\n"
        "from argwatch.server.cli import main\n"
        "sys.exit(main(['tui', '--admin', '127.0.0.1:9']))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "pip install 'argwatch[tui]'" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("argv", "usage", "named"),
    [
        (["--bogus"], "usage: argwatch [", "argwatch: error: unrecognized option --bogus;"),
        (["--bogus", "serve"], "usage: argwatch [", "argwatch: error: unrecognized option --bogus;"),
        (["policy", "--bogus"], "usage: argwatch policy", "argwatch policy: error: unrecognized option --bogus;"),
    ],
)
def test_an_unknown_option_before_the_command_is_named_and_the_commands_listed(
    argv: list[str], usage: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not "the following arguments are required: COMMAND", which blamed a command that was there."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage) and named in err and "required" not in err
    commands = "serve, policy, tui, watch, report, tools, health, replay, sets, coverage"
    assert (commands if argv[0] != "policy" else "the commands are check") in err


def test_known_options_and_their_prefixes_still_work_before_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    """--version (and --vers, as argparse abbreviates) still work; after the command, its own error names it."""
    for option in ("--version", "--vers"):
        with pytest.raises(SystemExit) as exited:
            main([option])
        assert exited.value.code == 0 and capsys.readouterr().out.startswith("argwatch ")
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--bogus"])  # after the command: that command's own error, as before
    assert exited.value.code == 2
    assert "argwatch serve: error: unrecognized arguments: --bogus" in capsys.readouterr().err
