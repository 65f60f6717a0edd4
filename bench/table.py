"""The table `make bench` ends with: every figure the benches reported (bench/figures.py) against its goal, in markdown.

FILE holds JSON lines: first the run's machine (written by --begin), then, in the
order they happened, each figure a bench reported and, from the Makefile, each
bench's exit status ({"ran": "churn.py", "exit": 1}). The table lists the figures
in that order; a bench that failed gets a row of its own, so a crash shows
rather than leaving its figures silently missing; the benches that ran cleanly
without a figure for this table are named below it.

    python bench/table.py --begin FILE                  # a fresh FILE, describing this machine
    python bench/table.py FILE [--out bench/results/table.md]

Exits 1 when a bench of the run failed (after printing and writing the table), so `make bench` fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from importlib import metadata


def machine() -> dict[str, object]:
    """What the figures depend on: the CPU, how many, the Python and gRPC under the benches, and when."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        grpcio = metadata.version("grpcio")
    except metadata.PackageNotFoundError:
        grpcio = "not installed"
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "grpcio": grpcio,
        "started": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def number(value: float) -> str:
    """As the benches print them: whole numbers with separators, fractions to about three figures."""
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    if value.is_integer():
        return f"{int(value):,}"
    size = abs(value)
    if size >= 100:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def verdict(record: dict[str, object]) -> str:
    if record.get("met") is True:
        return "yes"
    if record.get("met") is False:
        return "**no**"
    return "not judged" if record.get("goal") else "—"  # a goal in words the figure cannot settle, or none


def render(records: list[dict[str, object]]) -> tuple[str, list[str]]:
    """The markdown, and the benches that failed."""
    described = next((r["machine"] for r in records if "machine" in r), None)
    note = ""
    if not isinstance(described, dict):  # figures from benches run by hand: this machine, now
        described, note = machine(), " (described when the table was made: no --begin record)"
    runs = [r for r in records if "ran" in r]
    failed = [f"{r['ran']} (exit {r['exit']})" for r in runs if r.get("exit") != 0]
    reported = {r["bench"] for r in records if "figure" in r}
    lines = [
        f"## `make bench`, {described.get('started')}",
        "",
        f"{described.get('cpu')}, {described.get('cpus')} CPUs, Python {described.get('python')}, "
        f"grpcio {described.get('grpcio')}{note}."
        + (f" {len(runs)} benches run, {len(failed)} failed." if runs else ""),
        "",
        "| figure | measured | goal | met |",
        "| --- | --- | --- | --- |",
    ]
    for record in records:
        if "figure" in record:
            measured = f"{number(float(record['value']))} {record['unit']}".strip()  # type: ignore[arg-type]
            if record.get("baseline"):
                measured += f" ({record['baseline']})"
            lines.append(
                f"| {cell(str(record['figure']))} (`{record['bench']}`) | {cell(measured)} "
                f"| {cell(str(record.get('goal') or '—'))} | {verdict(record)} |"
            )
        elif "ran" in record and record.get("exit") != 0:
            what = "its figures above" if record["ran"] in reported else "reported nothing"
            lines.append(f"| `{record['ran']}` failed (exit {record['exit']}) | {what} | — | **failed** |")
    quiet = [str(r["ran"]) for r in runs if r.get("exit") == 0 and r["ran"] not in reported]
    if quiet:
        lines += [
            "",
            "Ran cleanly, with no figure for this table (their own output above, and `bench/results/`): "
            + ", ".join(f"`{name}`" for name in quiet)
            + ".",
        ]
    return "\n".join(lines) + "\n", failed


def read(path: str) -> list[dict[str, object]]:
    records = []
    with open(path) as handle:
        for number_, line in enumerate(handle, 1):
            try:
                records.append(json.loads(line))
            except ValueError:  # a line cut short by a bench killed mid-write: say so, keep the rest
                print(f"{path}:{number_}: not a JSON line, skipped", file=sys.stderr)
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", help="the JSON lines (ARGWATCH_BENCH_FIGURES)")
    parser.add_argument("--begin", action="store_true", help="start FILE afresh with this machine's description")
    parser.add_argument("--out", help="also write the table here")
    args = parser.parse_args()
    if args.begin:
        with open(args.file, "w") as handle:
            handle.write(json.dumps({"machine": machine()}) + "\n")
        return 0
    table, failed = render(read(args.file))
    print("\n" + table, end="")
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(table)
        print(f"\nwritten: {os.path.relpath(args.out)}")
    if failed:
        print(f"{len(failed)} bench(es) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
