"""`argwatch decisions tail|grep`: the decision log read back, across rotated and gzipped files."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from argwatch.common.durations import parse_duration
from argwatch.common.printable import printable

if TYPE_CHECKING:  # the reader is imported when a command runs
    from argwatch.server.decisions.reader import LineFilter, ReadCounts

OK, NOTHING_FOUND, USAGE = 0, 1, 2
# At most this many lines become test cases: a draft to edit, not a corpus.
MAX_TEST_CASES = 50


def add_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    """Registers `decisions tail` and `decisions grep` through build_parser's `command` helper."""
    decisions = command(
        "decisions", "read the decision log", "Read a gateway's decision log (serve --decision-log DIR)."
    )
    within = decisions.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    tail = command(
        "tail",
        "the last decisions, or follow new ones",
        "Print the last decisions in the log folder (rotated and gzipped files included), oldest first;\n"
        "with --follow, keep printing new ones as the gateway writes them (across rotations).",
        within,
        "decisions tail",
    )
    _add_common(tail)
    tail.add_argument("-n", "--lines", type=_count, default=20, help="how many (default 20)")
    tail.add_argument("-f", "--follow", action="store_true", help="then print new decisions until interrupted")
    tail.set_defaults(run=run_tail)
    grep = command(
        "grep",
        "the decisions that match",
        "Print every decision in the log folder that matches the filters, oldest first. Exits 1 when none\n"
        "matches. --as-test drafts a policy test file (argwatch policy test) from the matches.",
        within,
        "decisions grep",
    )
    _add_common(grep)
    grep.add_argument("--as-test", action="store_true", help="print a policy test file drafted from the matches")
    grep.add_argument("--policy", default="", help="with --as-test: the policy path the test file names")
    grep.set_defaults(run=run_grep)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="the decision log folder (serve --decision-log)")
    found = parser.add_argument_group("filters (all given must match)")
    found.add_argument("--call-id", default="", help="the call's id")
    found.add_argument("--conversation", default="", help="the conversation's id")
    found.add_argument("--tool", default="", help="the tool's name")
    found.add_argument("--decision", choices=["allow", "reject"], default="", help="the decision")
    found.add_argument("--since", default="", metavar="DURATION", help="only the last 15m, 2h, ...")
    parser.add_argument("--json", action="store_true", help="print the lines as the log holds them (JSON lines)")


def run_tail(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    return _piped(_tail, args)


def run_grep(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    return _piped(_grep, args)


def _piped(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """`command`, ending quietly when what reads its output stops (`| head`), as a Unix tool does."""
    try:
        return command(args)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error as Python exits
        return OK


def _tail(args: argparse.Namespace) -> int:
    from argwatch.server.decisions.reader import ReadCounts, follow, last_lines

    folder, wanted, counts = _folder(args), _filter(args), ReadCounts()
    if folder is None or wanted is None:
        return USAGE
    _print(last_lines(folder, args.lines, wanted, counts), args.json)
    if args.follow:
        try:
            for line in follow(folder, wanted, counts):
                _print([line], args.json)
                sys.stdout.flush()
        except KeyboardInterrupt:
            pass
    _report(counts)
    return OK


def _grep(args: argparse.Namespace) -> int:
    from argwatch.server.decisions.reader import ReadCounts, read_lines

    folder, wanted, counts = _folder(args), _filter(args), ReadCounts()
    if folder is None or wanted is None:
        return USAGE
    if args.as_test:
        from argwatch.server.policytest.from_decision import draft_test_file

        lines = []
        for line in read_lines(folder, wanted, counts):
            lines.append(line)
            if len(lines) == MAX_TEST_CASES:
                print(f"argwatch decisions grep: the first {MAX_TEST_CASES} matches only", file=sys.stderr)
                break
        if lines:
            print(draft_test_file(lines, args.policy), end="")
        _report(counts)
        return OK if lines else NOTHING_FOUND
    found = 0
    for line in read_lines(folder, wanted, counts):
        _print([line], args.json)
        found += 1
    _report(counts)
    return OK if found else NOTHING_FOUND


def _folder(args: argparse.Namespace) -> Path | None:
    folder = Path(args.directory)
    if not folder.is_dir():
        print(f"argwatch decisions: {folder}: no such folder", file=sys.stderr)
        return None
    return folder


def _filter(args: argparse.Namespace) -> LineFilter | None:
    from argwatch.server.decisions.reader import LineFilter

    since = 0.0
    if args.since:
        try:
            since = time.time() - parse_duration(args.since)
        except ValueError as error:
            print(f"argwatch decisions: --since: {error}", file=sys.stderr)
            return None
    return LineFilter(args.call_id, args.conversation, args.tool, args.decision, since)


def _print(lines: Iterable[dict[str, Any]], as_json: bool) -> None:
    for line in lines:
        print(orjson.dumps(line).decode() if as_json else summary(line))


def summary(line: dict[str, Any]) -> str:
    """One decision on one line: when, what, which call, and why (model-written text escaped: a call id cannot
    print a second line, or move the cursor)."""
    return printable(_summary(line))


def _summary(line: dict[str, Any]) -> str:
    ts = float(line.get("ts", 0.0))
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"
    problems = "; ".join(_problem(problem) for problem in line.get("problems") or [])
    skipped = ", ".join(f"{s.get('path', '')} ({s.get('reason', '')})" for s in line.get("skipped") or [])
    parts = [
        at,
        f"{line.get('decision', '?'):<6}",
        str(line.get("tool", "")),
        f"call={line.get('call_id', '')}",
    ]
    if line.get("conversation_id"):
        parts.append(f"conv={line['conversation_id']}")
    parts.append(f"mode={line.get('mode', '')}({line.get('mode_source', '')})")
    if problems:
        parts.append(f"· {problems}")
    if skipped:
        parts.append(f"· skipped {skipped}")
    parts.append(f"· {float(line.get('latency_seconds', 0.0)) * 1000:.2f} ms")
    return "  ".join(parts)


def _problem(problem: dict[str, Any]) -> str:
    shape = f"({problem['shape']})" if problem.get("shape") else ""
    return " ".join(part for part in (problem.get("code", ""), problem.get("path", ""), shape) if part)


def _report(counts: ReadCounts) -> None:
    if counts.unreadable_lines:
        print(f"argwatch decisions: {counts.unreadable_lines} line(s) did not parse and were skipped", file=sys.stderr)
    for problem in counts.unreadable_files:
        print(f"argwatch decisions: not read to the end: {problem}", file=sys.stderr)


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("expected at least 1")
    return value
