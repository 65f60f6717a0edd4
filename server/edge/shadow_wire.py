"""The shadow's report and changes as the Admin API answers them."""

from __future__ import annotations

from argwatch.server.edge import wire
from argwatch.server.edge.reloading import ReloadResult
from argwatch.server.edge.shadowing import PolicyDiff
from argwatch.server.shadow.compare import Example, ShownProblem
from argwatch.server.shadow.report import ReportSnapshot
from argwatch.v1 import admin_pb2

MAX_LISTED_TOOLS = 1000  # per list of a diff, as ReloadPolicy lists them
# Examples are listed while the answer stays under this: every row of (tools + 1) x 3 is listed with its count,
# but 5 examples a row on a policy of thousands of tools would pass gRPC's 4 MiB.
MAX_EXAMPLE_BYTES = 3 << 20


def report_to_wire(report: ReportSnapshot | None, diff: PolicyDiff | None) -> admin_pb2.GetShadowReportResponse:
    if report is None:
        return admin_pb2.GetShadowReportResponse(loaded=False)
    response = admin_pb2.GetShadowReportResponse(
        loaded=True,
        shadow_version=report.version,
        name=report.name,
        since=wire.timestamp(report.since),
        calls=report.calls,
        busy=report.busy,
        raised=report.raised,
        unavailable_sets=report.unavailable_sets,
    )
    rows = [response.differences.add(tool=row.tool, kind=row.kind.value, count=row.count) for row in report.rows]
    size = 0
    # The rows with the most calls get their examples first.
    for index in sorted(range(len(report.rows)), key=lambda at: -report.rows[at].count):
        for found in report.rows[index].examples:
            shown = _example(found)
            size += shown.ByteSize() + 8
            if size > MAX_EXAMPLE_BYTES:
                response.examples_left_off += 1
                continue
            rows[index].examples.append(shown)
    if diff is not None:
        lists = (diff.tools_added, diff.tools_removed, diff.tools_changed)
        response.live_version = diff.live_version
        response.tools_added.extend(diff.tools_added[:MAX_LISTED_TOOLS])
        response.tools_removed.extend(diff.tools_removed[:MAX_LISTED_TOOLS])
        response.tools_changed.extend(diff.tools_changed[:MAX_LISTED_TOOLS])
        response.tools_left_off = sum(max(0, len(names) - MAX_LISTED_TOOLS) for names in lists)
    return response


def promoted_to_wire(result: ReloadResult) -> admin_pb2.PromoteShadowResponse:
    lists = (result.tools_added, result.tools_removed, result.tools_changed)
    return admin_pb2.PromoteShadowResponse(
        outcome=result.outcome,
        policy_version=result.policy_version,
        previous_version=result.previous_version,
        tools_added=result.tools_added[:MAX_LISTED_TOOLS],
        tools_removed=result.tools_removed[:MAX_LISTED_TOOLS],
        tools_changed=result.tools_changed[:MAX_LISTED_TOOLS],
        tools_left_off=sum(max(0, len(names) - MAX_LISTED_TOOLS) for names in lists),
    )


def _example(found: Example) -> admin_pb2.ShadowExample:
    return admin_pb2.ShadowExample(
        at=wire.timestamp(found.at),
        call_id=found.call_id,
        tool=found.tool,
        live_decision=found.live_decision,
        shadow_decision=found.shadow_decision,
        live_problems=[_problem(problem) for problem in found.live_problems],
        shadow_problems=[_problem(problem) for problem in found.shadow_problems],
        problems_left_off=found.problems_left_off,
    )


def _problem(problem: ShownProblem) -> admin_pb2.ShadowProblem:
    return admin_pb2.ShadowProblem(code=problem.code, path=problem.path, value=problem.value)
