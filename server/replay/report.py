"""A replay's figures per tool and argument, as text for people and as JSON for machines.

Every figure is read from the counters the replay's Validator bumped
(run.ReplayResult.counts, the keys GatewayMetrics.window_counts gives), so it
means what the same figure means on a live gateway. The shapes of an argument's
out-of-set values are shares of them that add up to 100%, with "unshaped" for
values no shape describes (a wrong type, say).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from argwatch.server.policy.model import Policy
from argwatch.server.replay.corpus import ReadCounts
from argwatch.server.replay.run import ReplayResult
from argwatch.server.telemetry.metrics import parse_cohort_what

UNSHAPED = "unshaped"


@dataclass(frozen=True)
class ArgumentFigures:
    argument: str
    value_set: str
    checks: int
    out_of_set: int
    out_of_set_normalised: int
    shapes: dict[str, int]  # adds up to out_of_set (UNSHAPED for the rest)
    problems: dict[str, int]
    checks_not_run: int  # failed open: the set (or record source) could not be read
    top: list[tuple[str, int, str]]  # the most frequent offending values: (value, count, shape)
    # (model, prompt version) -> (checks, out of set, out of set normalised), where the policy declares models
    by_model: dict[tuple[str, str], tuple[int, int, int]] = field(default_factory=dict)

    @property
    def out_of_set_rate(self) -> float:
        return self.out_of_set / self.checks if self.checks else 0.0

    @property
    def out_of_set_normalised_rate(self) -> float:
        return self.out_of_set_normalised / self.checks if self.checks else 0.0

    def shape_shares(self) -> dict[str, float]:
        return {shape: count / self.out_of_set for shape, count in self.shapes.items()} if self.out_of_set else {}


@dataclass(frozen=True)
class ToolFigures:
    tool: str
    calls: int
    refused: int  # refused in the policy's mode for the tool
    would_refuse: int  # calls with a problem: what reject mode refuses, whatever the mode
    with_invented: int  # of those, calls with an invented value
    problems: dict[str, int]
    arguments: list[ArgumentFigures] = field(default_factory=list)


@dataclass(frozen=True)
class ReplayReport:
    read: ReadCounts
    result: ReplayResult
    tools: list[ToolFigures]


def build_report(policy: Policy, read: ReadCounts, result: ReplayResult) -> ReplayReport:
    """Per tool that was called (policy order, then tools it does not know), per argument with any count."""
    by_row: dict[tuple[str, str], dict[str, int]] = {}
    for (tool, argument, what), count in result.counts.items():
        by_row.setdefault((tool, argument), {})[what] = int(count)
    bound = {(tool.name, b.name): b.value_set for tool in policy.tools.values() for b in tool.arguments}
    called = [tool for tool in policy.tools if by_row.get((tool, ""), {}).get("calls")]
    called += sorted(
        {tool for tool, _ in by_row if tool not in policy.tools and by_row.get((tool, ""), {}).get("calls")}
    )
    tools = []
    for tool in called:
        counts = by_row[tool, ""]
        arguments = [
            _argument(argument, bound.get((tool, argument), ""), row, result.offenders.get((tool, argument), []))
            for (row_tool, argument), row in by_row.items()
            if row_tool == tool and argument
        ]
        arguments.sort(key=lambda figures: (figures.value_set == "", -figures.checks, figures.argument))
        problems: dict[str, int] = {}
        for figures in arguments:
            for code, count in figures.problems.items():
                problems[code] = problems.get(code, 0) + count
        tools.append(
            ToolFigures(
                tool,
                calls=counts.get("calls", 0),
                refused=counts.get("reject", 0),
                would_refuse=counts.get("with_problems", 0),
                with_invented=counts.get("with_invented", 0),
                problems=dict(sorted(problems.items(), key=lambda item: -item[1])),
                arguments=arguments,
            )
        )
    return ReplayReport(read, result, tools)


def _argument(
    argument: str, value_set: str, row: Mapping[str, int], top: list[tuple[str, int, str]]
) -> ArgumentFigures:
    out_of_set = row.get("out_of_set", 0)
    shapes = {what[6:]: count for what, count in row.items() if what.startswith("shape:") and count}
    rest = out_of_set - sum(shapes.values())
    if rest > 0:
        shapes[UNSHAPED] = rest
    return ArgumentFigures(
        argument,
        value_set,
        checks=row.get("checks", 0),
        out_of_set=out_of_set,
        out_of_set_normalised=row.get("out_of_set_normalised", 0),
        shapes=dict(sorted(shapes.items(), key=lambda item: -item[1])),
        problems={what[8:]: count for what, count in row.items() if what.startswith("problem:") and count},
        checks_not_run=row.get("failed_open", 0),
        top=top,
        by_model=_by_model(row),
    )


def _by_model(row: Mapping[str, int]) -> dict[tuple[str, str], tuple[int, int, int]]:
    split: dict[tuple[str, str], dict[str, int]] = {}
    for what, count in row.items():
        if (parsed := parse_cohort_what(what)) is not None:
            model, version, kind = parsed
            split.setdefault((model, version), {})[kind] = count
    return {
        key: (kinds.get("checks", 0), kinds.get("out_of_set", 0), kinds.get("out_of_set_normalised", 0))
        for key, kinds in sorted(split.items())
        if kinds.get("checks", 0)
    }


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
                "calls": tool.calls,
                "refused": tool.refused,
                "reject_would_refuse": tool.would_refuse,
                "with_invented_values": tool.with_invented,
                "problems": tool.problems,
                "arguments": [
                    {
                        "argument": figures.argument,
                        "value_set": figures.value_set,
                        "checks": figures.checks,
                        "out_of_set": figures.out_of_set,
                        "out_of_set_rate": round(figures.out_of_set_rate, 6),
                        "out_of_set_normalised": figures.out_of_set_normalised,
                        "out_of_set_normalised_rate": round(figures.out_of_set_normalised_rate, 6),
                        "shapes": figures.shapes,
                        "shape_shares": {shape: round(share, 6) for shape, share in figures.shape_shares().items()},
                        "problems": figures.problems,
                        "checks_not_run": figures.checks_not_run,
                        "by_model": [
                            {
                                "model": model,
                                "prompt_version": version,
                                "checks": checks,
                                "out_of_set": out,
                                "out_of_set_rate": round(out / checks, 6),
                                "out_of_set_normalised": normalised,
                            }
                            for (model, version), (checks, out, normalised) in figures.by_model.items()
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
        problems = ", ".join(f"{code} {count:,}" for code, count in tool.problems.items()) or "none"
        lines.append(
            f"{tool.tool}: {tool.calls:,} calls; reject mode would refuse {tool.would_refuse:,} "
            f"({_percent(tool.would_refuse, tool.calls)}), {tool.with_invented:,} with invented values; "
            f"refused in its mode: {tool.refused:,}; problems: {problems}"
        )
        if not tool.arguments:
            continue
        header = ("argument", "set", "checks", "oos%", "norm%", "not run", "shapes of the out-of-set values")
        rows = [
            (
                figures.argument,
                figures.value_set or "-",
                f"{figures.checks:,}",
                _percent(figures.out_of_set, figures.checks) if figures.value_set else "-",
                _percent(figures.out_of_set_normalised, figures.checks) if figures.value_set else "-",
                f"{figures.checks_not_run:,}",
                ", ".join(f"{shape} {percent}%" for shape, percent in _whole_percents(figures.shapes).items()) or "-",
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
                    f"{model} / {version} {_percent(out, checks)} of {checks:,}"
                    for (model, version), (checks, out, _normalised) in figures.by_model.items()
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
