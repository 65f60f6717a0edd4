"""Every `argwatch` command's options, descriptions and defaults, in one place so they follow one convention."""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from typing import Any

from argwatch.common.durations import duration
from argwatch.common.tls_flags import add_tls_arguments
from argwatch.server.cli import (
    commands,
    coverage_command,
    decisions_command,
    mode_command,
    policy_test_command,
    replay_command,
    serve,
    shadow_command,
)
from argwatch.server.process.settings import add_serve_arguments


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written; every default shown, except where there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or action.default is False or action.default in ("", argparse.SUPPRESS):
            return text
        if "%(default)" in text or "default" in text:
            return text
        return text + " (default: %(default)s)"


class CommandParser(argparse.ArgumentParser):
    """A parser that names an unknown option given before its command as such, and lists the commands.

    argparse sets an unknown option aside and then complains that the command is missing, which sends the
    reader looking for the wrong mistake (`argwatch --bogus` said "the following arguments are required:
    COMMAND"). A command's own parser (serve, policy check, ...) has no command below it: it parses as usual.
    """

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:  # the overloads of argparse's, as one
        if not self._commands():
            return super().parse_known_args(args, namespace)
        for token in sys.argv[1:] if args is None else list(args):
            if token == "--" or not token.startswith("-"):
                break  # the command: what follows is its own to parse
            if not self._known_option(token):
                self.error(f"unrecognized option {token}; {self._commands_sentence()}")
        return super().parse_known_args(args, namespace)

    def _known_option(self, token: str) -> bool:
        name = token.split("=", 1)[0]
        if name in self._option_string_actions:
            return True
        # argparse also takes an unambiguous prefix of a long option (--vers for --version).
        return name.startswith("--") and any(known.startswith(name) for known in self._option_string_actions)

    def _commands(self) -> list[str]:
        return [
            name
            for action in self._actions
            if isinstance(action, argparse._SubParsersAction)
            for name in action.choices
        ]

    def _commands_sentence(self) -> str:
        listed = ", ".join(self._commands())
        return f"the commands are {listed} (a command's options go after it: {self.prog} COMMAND --help)"


def _version() -> str:
    try:
        return metadata.version("argwatch")
    except metadata.PackageNotFoundError:  # run from a tree that was never installed
        return "unknown"


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser, and each command's own parser by name ("serve", "policy check", ...)."""
    # The TUI package's options and Admin client only (no Textual): the server imports the TUI
    # package nowhere else, and only here, when the command line is built.
    from argwatch.tui.run import add_admin_arguments, add_tui_arguments

    parser = CommandParser(
        prog="argwatch",
        description="A gRPC gateway that checks LLM agents' tool-call arguments before the call runs.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"argwatch {_version()}")
    top = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    found: dict[str, argparse.ArgumentParser] = {}

    def command(
        name: str,
        summary: str,
        description: str,
        within: argparse._SubParsersAction[argparse.ArgumentParser] | None = None,
        full: str = "",
    ) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = (within or top).add_parser(
            name, help=summary, description=description, formatter_class=HelpFormatter
        )
        found[full or name] = sub
        return sub

    run = command(
        "serve",
        "run the gateway",
        "Run the gateway: the Gateway API, the Admin API and /metrics, on the policy given.\n"
        "Every option can also come from its ARGWATCH_* environment variable; a flag wins.",
    )
    add_serve_arguments(run)
    run.set_defaults(run=serve.run)

    policy = command("policy", "work with policy files", "Work with policy files.")
    policy_commands = policy.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    check = command(
        "check",
        "validate a policy file offline",
        "Validate a policy file offline, without its sources: every error with its file, key path and\n"
        "what was expected. Exits 1 when there is any.",
        policy_commands,
        "policy check",
    )
    check.add_argument("file", help="the policy YAML file")
    check.set_defaults(run=commands.check_policy)
    policy_test_command.add_command(policy_commands, command)

    tui = command(
        "tui",
        "the on-call TUI: live figures, and mode changes",
        "The on-call TUI: per tool and argument, live out-of-set rates, repairs and set health from the\n"
        "Admin API; flip tools between observe and reject (not with --readonly). Needs argwatch[tui].",
    )
    add_tui_arguments(tui)
    tui.set_defaults(run=commands.tui)

    watch = command(
        "watch",
        "a live one-line status",
        "Print a live one-line status from the Admin API: calls/s, and per tool its mode, out-of-set\n"
        "rates, rejections and checks failed open. Exits 1 if the Admin API refuses the call.",
    )
    add_admin_arguments(watch)
    watch.add_argument(
        "--interval", type=duration, default=1.0, metavar="DURATION", help="time between lines, at least 0.2s"
    )
    watch.add_argument("--count", type=int, default=0, help="stop after this many lines (0: never)")
    watch.set_defaults(run=commands.watch)

    report = command(
        "report",
        "the mismatch-shape report",
        "The mismatch-shape report: per bound argument, how often values miss their set, and why\n"
        "(case, separator, retired, invented). From the Admin API, or from a sampled-value log file.",
    )
    add_admin_arguments(report)
    report.add_argument("--samples", default="", metavar="FILE", help="read a sampled-value log (JSON lines) instead")
    report.add_argument("--window", default="0", help="with the Admin API: 15m, 1h, ... (0: since start)")
    report.set_defaults(run=commands.report)

    tools = command("tools", "the policy's tools as model clients describe them", "Tool definitions.")
    tools_commands = tools.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    export = command(
        "export",
        "print the tool definitions, enums from today's value sets",
        "Print the policy's tools as a model client describes them (MCP, OpenAI or Anthropic), each\n"
        "bound argument's enum filled from its value set as a running gateway holds it now.",
        tools_commands,
        "tools export",
    )
    gateway = export.add_argument_group("the Gateway API")
    gateway.add_argument("--gateway", default="127.0.0.1:50051", metavar="HOST:PORT", help="its address")
    # --target: this command's name for it before --gateway; still accepted, not shown.
    gateway.add_argument("--target", dest="gateway", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    add_tls_arguments(gateway)
    export.add_argument("--format", choices=["mcp", "openai", "anthropic"], default="mcp", help="the shape")
    export.add_argument("--tool", action="append", default=[], help="only this tool (repeatable; default: all)")
    export.set_defaults(run=commands.export_tools)

    health = command(
        "health",
        "ask a gateway whether it is serving",
        "Ask a gateway's Gateway listener whether it is serving (grpc.health.v1): exits 0 when SERVING, 1\n"
        "otherwise (still loading its value sets, draining, or unreachable). The image's health check.",
    )
    target = health.add_argument_group("the Gateway API")
    target.add_argument("--gateway", default="127.0.0.1:50051", metavar="HOST:PORT", help="its address")
    add_tls_arguments(target)
    health.add_argument("--service", default="", help="the health service name ('' is the whole server)")
    health.add_argument("--timeout", type=duration, default=2.0, metavar="DURATION", help="how long to wait")
    health.set_defaults(run=commands.health)

    replay_command.add_commands(command)
    coverage_command.add_command(command)
    mode_command.add_command(command)
    decisions_command.add_command(command)
    shadow_command.add_command(command)
    return parser, found
