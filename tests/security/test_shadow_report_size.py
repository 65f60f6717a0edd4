"""The shadow's report stays bounded whatever callers send: rows per policy tool and kind, and under gRPC's 4 MiB.

A shadow that differs on every tool of a 2,000-tool policy, each example with
ten problems of 10,000-character invented paths and values, still answers
GetShadowReport in one message: every row with its count, examples while the
answer stays under 3 MiB, the rest counted.
"""

from __future__ import annotations

import pytest

from argwatch.server.edge.shadow_wire import report_to_wire
from argwatch.server.policy.model import Mode
from argwatch.server.shadow.compare import KINDS, example
from argwatch.server.shadow.report import EXAMPLES_PER_ROW, ShadowReport
from argwatch.server.verdict.decision import Decision, Verdict
from argwatch.server.verdict.findings import Problem, ProblemCode

TOOLS = 2000
LIMIT = 4 * 1024 * 1024


@pytest.mark.slow
def test_the_largest_report_fits_in_one_answer() -> None:
    long = "x" * 10_000
    invented = ProblemCode.UNEXPECTED_ARGUMENT
    problems = tuple(Problem(invented, "m", argument=f"{long}{i}", value=long) for i in range(20))
    shadow = Verdict(long, Decision.REJECT, Mode.REJECT, problems, (), (), "v2")
    report = ShadowReport("v2", "next.yaml", 0.0)
    for tool in range(TOOLS + 1):
        label = f"tool_{tool:04d}_with_a_name_of_a_realistic_length" if tool < TOOLS else "_unknown"
        for kind in KINDS:
            for _ in range(EXAMPLES_PER_ROW + 2):
                report.differed(label, kind, example(0.0, long, long, (Decision.REJECT, problems), shadow, frozenset()))
    answer = report_to_wire(report.snapshot(), None)
    assert len(answer.differences) == (TOOLS + 1) * len(KINDS)
    assert answer.ByteSize() < LIMIT
    listed = sum(len(row.examples) for row in answer.differences)
    assert listed > 0 and listed + answer.examples_left_off == (TOOLS + 1) * len(KINDS) * EXAMPLES_PER_ROW
