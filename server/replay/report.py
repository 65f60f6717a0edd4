"""A replay's figures per tool and argument, as text for people and as JSON for machines.

Every figure is read from the counters the replay's Validator bumped
(run.ReplayResult.counts, GatewayMetrics.counts folded), so it
means what the same figure means on a live gateway. The shapes of an argument's
out-of-set values are shares of them that add up to 100%, with "unshaped" for
values no shape describes (a wrong type, say).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from argwatch.server.policy.model import Policy
from argwatch.server.replay.corpus import ReadCounts
from argwatch.server.replay.run import ReplayResult
from argwatch.server.telemetry.counts import ArgumentCounts, ToolCounts

UNSHAPED = "unshaped"


@dataclass(frozen=True)
class ArgumentReport:
    argument: str
    value_set: str
    counts: ArgumentCounts
    top: list[tuple[str, int, str]]  # the most frequent offending values: (value, count, shape)
    # Per (model, prompt version) with value checks, where the policy declares models.
    by_model: dict[tuple[str, str], ArgumentCounts] = field(default_factory=dict)

    def shapes(self) -> dict[str, int]:
        """Out-of-set values by shape, adding up to out_of_set (UNSHAPED for the rest), largest first."""
        shapes = {shape: count for shape, count in self.counts.shapes.items() if count}
        rest = self.counts.out_of_set - sum(shapes.values())
        if rest > 0:
            shapes[UNSHAPED] = rest
        return dict(sorted(shapes.items(), key=lambda item: -item[1]))

    def shape_shares(self) -> dict[str, float]:
        out_of_set = self.counts.out_of_set
        return {shape: count / out_of_set for shape, count in self.shapes().items()} if out_of_set else {}


@dataclass(frozen=True)
class ToolReport:
    tool: str
    counts: ToolCounts  # `rejected`: refused in the policy's mode; `with_problems`: what reject mode refuses
    arguments: list[ArgumentReport] = field(default_factory=list)

    def problems(self) -> dict[str, int]:
        """Every argument's problems by code, the most frequent first (ties in the arguments' order)."""
        summed: dict[str, int] = {}
        for argument in self.arguments:
            for code, count in argument.counts.problems.items():
                summed[code] = summed.get(code, 0) + count
        return dict(sorted(summed.items(), key=lambda item: -item[1]))


@dataclass(frozen=True)
class ReplayReport:
    read: ReadCounts
    result: ReplayResult
    tools: list[ToolReport]


def build_report(policy: Policy, read: ReadCounts, result: ReplayResult) -> ReplayReport:
    """Per tool that was called (policy order, then tools it does not know), per argument with any count."""
    table = result.counts
    bound = {(tool.name, b.name): b.value_set for tool in policy.tools.values() for b in tool.arguments}
    called = [tool for tool in policy.tools if table.tool(tool).calls]
    called += sorted(tool for tool, counts in table.tools.items() if tool not in policy.tools and counts.calls)
    tools = []
    for tool in called:
        arguments = [
            ArgumentReport(
                argument,
                bound.get((tool, argument), ""),
                counts,
                result.offenders.get((tool, argument), []),
                {
                    cohort: split
                    for cohort, split in sorted(table.cohorts.get((tool, argument), {}).items())
                    if split.checks
                },
            )
            for (row_tool, argument), counts in table.arguments.items()
            if row_tool == tool
        ]
        arguments.sort(key=lambda report: (report.value_set == "", -report.counts.checks, report.argument))
        tools.append(ToolReport(tool, table.tool(tool), arguments))
    return ReplayReport(read, result, tools)


def as_json(report: ReplayReport) -> dict[str, Any]:
    read, result = report.read, report.result
    return {
        "read": {
            "files": read.files,
            "lines": read.lines,
            "lines_with_calls": read.lines_with_calls,
            "lines_without_calls": read.lines_without_calls,
            "duplicates": read.duplicates,
            "malformed": dict(read.malformed),
        },
        "sets": {"from": result.sets_from, "versions": result.set_versions, "not_loaded": result.sets_not_loaded},
        "calls": result.calls,
        "seconds": round(result.seconds, 3),
        "tools": [
            {
                "tool": tool.tool,
                "calls": tool.counts.calls,
                "refused": tool.counts.rejected,
                "reject_would_refuse": tool.counts.with_problems,
                "with_invented_values": tool.counts.with_invented,
                "problems": tool.problems(),
                "arguments": [
                    {
                        "argument": figures.argument,
                        "value_set": figures.value_set,
                        "checks": figures.counts.checks,
                        "out_of_set": figures.counts.out_of_set,
                        "out_of_set_rate": round(figures.counts.out_of_set_rate, 6),
                        "out_of_set_normalised": figures.counts.out_of_set_normalised,
                        "out_of_set_normalised_rate": round(figures.counts.out_of_set_normalised_rate, 6),
                        "shapes": figures.shapes(),
                        "shape_shares": {shape: round(share, 6) for shape, share in figures.shape_shares().items()},
                        "problems": {code: count for code, count in figures.counts.problems.items() if count},
                        "checks_not_run": figures.counts.failed_open,
                        "by_model": [
                            {
                                "model": model,
                                "prompt_version": version,
                                "checks": split.checks,
                                "out_of_set": split.out_of_set,
                                "out_of_set_rate": round(split.out_of_set_rate, 6),
                                "out_of_set_normalised": split.out_of_set_normalised,
                            }
                            for (model, version), split in figures.by_model.items()
                        ],
                        "top_offending_values": [
                            {"value": value, "count": count, "shape": shape} for value, count, shape in figures.top
                        ],
                    }
                    for figures in tool.arguments
                ],
            }
            for tool in report.tools
        ],
    }


def as_text(report: ReplayReport) -> str:
    read, result = report.read, report.result
    malformed = sum(read.malformed.values())
    why = ", ".join(f"{reason} {count:,}" for reason, count in read.malformed.most_common())
    lines = [
        f"replayed {result.calls:,} calls from {read.files} file(s): {read.lines:,} lines, "
        f"{read.lines_with_calls:,} with tool calls, {read.lines_without_calls:,} without, "
        f"{malformed:,} malformed{f' ({why})' if why else ''}"
        + (
            f"; {read.duplicates:,} repeated calls (a transcript's earlier turns) judged once"
            if read.duplicates
            else ""
        ),
        f"value sets from {result.sets_from}: "
        + (", ".join(f"{name} v{version}" for name, version in sorted(result.set_versions.items())) or "none")
        + (
            f"; NOT LOADED (their checks fail as the policy says): {', '.join(result.sets_not_loaded)}"
            if result.sets_not_loaded
            else ""
        ),
        f"{result.calls:,} calls judged in {result.seconds:.2f} s"
        + (f" ({result.calls / result.seconds:,.0f} calls/s)" if result.seconds > 0 else ""),
    ]
    for tool in report.tools:
        lines.append("")
        counts = tool.counts
        problems = ", ".join(f"{code} {count:,}" for code, count in tool.problems().items()) or "none"
        lines.append(
            f"{tool.tool}: {counts.calls:,} calls; reject mode would refuse {counts.with_problems:,} "
            f"({_percent(counts.with_problems, counts.calls)}), {counts.with_invented:,} with invented values; "
            f"refused in its mode: {counts.rejected:,}; problems: {problems}"
        )
        if not tool.arguments:
            continue
        header = ("argument", "set", "checks", "oos%", "norm%", "not run", "shapes of the out-of-set values")
        rows = [
            (
                figures.argument,
                figures.value_set or "-",
                f"{figures.counts.checks:,}",
                _percent(figures.counts.out_of_set, figures.counts.checks) if figures.value_set else "-",
                _percent(figures.counts.out_of_set_normalised, figures.counts.checks) if figures.value_set else "-",
                f"{figures.counts.failed_open:,}",
                ", ".join(f"{shape} {percent}%" for shape, percent in _whole_percents(figures.shapes()).items()) or "-",
            )
            for figures in tool.arguments
        ]
        widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
        for row in (header, *rows):
            cells = [
                cell.ljust(width) if i < 2 else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(row[:-1], widths, strict=True))
            ]
            lines.append("  " + "  ".join(cells) + "  " + row[-1])
        for figures in tool.arguments:
            if figures.by_model:
                split = "; ".join(
                    f"{model} / {version} {_percent(split.out_of_set, split.checks)} of {split.checks:,}"
                    for (model, version), split in figures.by_model.items()
                )
                lines.append(f"    {figures.argument} by model / prompt version: {split}")
            if figures.top:
                shown = ", ".join(f"{value} x{count:,} ({shape or '-'})" for value, count, shape in figures.top)
                lines.append(f"    {figures.argument} most often: {shown}")
    return "\n".join(lines)


def _whole_percents(counts: dict[str, int]) -> dict[str, int]:
    """Whole percentages that add up to exactly 100 (largest remainder): three equal shapes read
    34%, 33%, 33%, not 33% three times."""
    total = sum(counts.values())
    if not total:
        return {}
    exact = {key: 100 * count / total for key, count in counts.items()}
    whole = {key: int(value) for key, value in exact.items()}
    short = 100 - sum(whole.values())
    for key in sorted(exact, key=lambda k: whole[k] - exact[k])[:short]:
        whole[key] += 1
    return whole


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"
