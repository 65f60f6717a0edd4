"""The `argwatch` command: serve, policy check, tui, watch, report, mode, tools export and more, under one convention.

Every command has a description and shows its defaults in `--help`; commands
that read the Admin API (tui, watch, report) take the same `--admin`, token and
TLS options; a usage error prints that command's usage and exits 2 (so does
serve when it cannot start as configured); a failure while running (a refused
call, an unreadable input file) exits 1 with the reason on stderr. `mode set`
and `mode clear` say more, for scripts: 3 when the Admin API is unreachable or
does not let the caller in, apart from 1 for a change the gateway refused.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from argwatch.server.cli.parser import build_parser


def main(argv: Sequence[str] | None = None) -> int:
    parser, commands = build_parser()
    args, extra = parser.parse_known_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what `serve --workers` hands each worker
    command = " ".join(part for part in (args.command, getattr(args, "subcommand", None)) if part)
    chosen = commands[command]
    if extra:  # argparse would blame the top-level command; name the one that was run
        chosen.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.run(args, os.environ))
    except ValueError as error:  # an option that cannot work, found after parsing
        chosen.error(str(error))
    return 2  # not reached: error() exits
