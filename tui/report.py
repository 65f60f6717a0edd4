"""`argwatch report`: the mismatch-shape report, from a gateway's Admin API or from a sampled-value log.

From the Admin API: per bound argument over a window, the out-of-set rate, the
rate that survives normalisation, and each shape's share of the mismatches.
From a sampled log: each shape's share of the sampled out-of-set values (the
log holds offenders only, so it gives shares, not rates).
"""

from __future__ import annotations

import io
import sys
from collections import Counter
from collections.abc import Iterable
from typing import IO

import grpc
import orjson

from argwatch.common.files import open_regular
from argwatch.tui.admin_client import AdminClient, Connection
from argwatch.v1 import admin_pb2


def render_admin(report: admin_pb2.GetShapeReportResponse) -> list[str]:
    covered = f"last {report.covered_seconds}s" if report.window_seconds else f"since start ({report.covered_seconds}s)"
    lines = [f"mismatch shapes, {covered}"]
    if not report.rows:
        lines.append("  no value checks in this window")
    for row in report.rows:
        shares = ", ".join(f"{s.shape} {100 * s.share:.1f}% ({s.count})" for s in row.shapes) or "none"
        lines.append(
            f"  {row.tool}.{row.argument} ({row.value_set}): {row.checks} checks, "
            f"out of set {100 * row.out_of_set_rate:.1f}%, after normalisation "
            f"{100 * row.out_of_set_normalised_rate:.1f}% | shapes: {shares}"
        )
    return lines


def shares_from_samples(lines: Iterable[str]) -> tuple[dict[tuple[str, str], Counter[str]], int]:
    """Out-of-set sample counts by (tool, argument) and shape, and how many lines were not usable records."""
    counts: dict[tuple[str, str], Counter[str]] = {}
    bad = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            bad += 1
            continue
        if not isinstance(record, dict) or record.get("code") != "out_of_set":
            continue
        key = (str(record.get("tool", "")), str(record.get("argument", "")))
        counts.setdefault(key, Counter())[str(record.get("shape") or "unknown")] += 1
    return counts, bad


def render_samples(counts: dict[tuple[str, str], Counter[str]], bad: int) -> list[str]:
    lines = ["mismatch shapes in the sampled log (shares of sampled out-of-set values)"]
    if not counts:
        lines.append("  no out-of-set samples")
    for (tool, argument), shapes in sorted(counts.items()):
        total = sum(shapes.values())
        shares = ", ".join(f"{shape} {100 * n / total:.1f}% ({n})" for shape, n in shapes.most_common())
        lines.append(f"  {tool}.{argument}: {total} samples | {shares}")
    if bad:
        lines.append(f"  ({bad} lines were not JSON and were skipped)")
    return lines


async def report_from_admin(connection: Connection, window_seconds: int, out: IO[str] = sys.stdout) -> int:
    """The report from a gateway's Admin API; 1, with the reason on stderr, when it does not answer."""
    client = AdminClient(connection)
    try:
        report = await client.shape_report(window_seconds)
    except grpc.aio.AioRpcError as error:
        print(f"argwatch report: {connection.target}: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
    finally:
        await client.close()
    out.write("\n".join(render_admin(report)) + "\n")
    return 0


def report_from_samples(path: str, out: IO[str] = sys.stdout) -> int:
    with io.TextIOWrapper(open_regular(path), encoding="utf-8", errors="replace") as handle:
        counts, bad = shares_from_samples(handle)
    out.write("\n".join(render_samples(counts, bad)) + "\n")
    return 0
