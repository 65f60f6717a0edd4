"""How a shadow's verdict is compared with the live one, and what an example keeps (pure)."""

from __future__ import annotations

from argwatch.server.policy.model import Mode
from argwatch.server.shadow.compare import (
    MAX_EXAMPLE_CHARS,
    MAX_EXAMPLE_PROBLEMS,
    Kind,
    difference,
    example,
    live_before_repeats,
)
from argwatch.server.shadow.report import EXAMPLES_PER_ROW, ShadowReport
from argwatch.server.verdict.decision import Decision, Verdict
from argwatch.server.verdict.findings import Problem, ProblemCode
from argwatch.server.verdict.repeats import OperationOutcome, OperationRecord, Retry, Sighting


def verdict(decision: Decision, *problems: Problem, sighting: Sighting | None = None) -> Verdict:
    return Verdict("c1", decision, Mode.REJECT, problems, (), (), "v1", sighting=sighting)


OUT = Problem(ProblemCode.OUT_OF_SET, "not in the set", argument="reason", value='"X"')
MISSING = Problem(ProblemCode.MISSING_REQUIRED, "missing", argument="amount")


def test_each_kind_of_difference_and_none() -> None:
    assert difference(Decision.ALLOW, (), verdict(Decision.REJECT, OUT)) is Kind.WOULD_REFUSE
    assert difference(Decision.REJECT, (OUT,), verdict(Decision.ALLOW)) is Kind.WOULD_ALLOW
    assert difference(Decision.REJECT, (OUT,), verdict(Decision.REJECT, OUT, MISSING)) is Kind.DIFFERENT_PROBLEMS
    # Messages may differ (the wording of another policy): only codes and paths are compared.
    reworded = Problem(ProblemCode.OUT_OF_SET, "another message", argument="reason", value='"X"')
    assert difference(Decision.REJECT, (OUT,), verdict(Decision.REJECT, reworded)) is None


def test_a_repeat_is_left_out_of_the_live_side() -> None:
    earlier = OperationRecord("k", "refund", "conv", "c0", 0.0, OperationOutcome.UNREPORTED, 1, 900.0)
    repeat = Sighting("k", earlier, Retry.NO, True)
    repeated = Problem(ProblemCode.REPEATED_CALL, "repeats c0")
    live = verdict(Decision.REJECT, repeated, sighting=repeat)
    assert live_before_repeats(live) == (Decision.ALLOW, ())
    first = Sighting("k", None, Retry.NO, True)
    assert live_before_repeats(verdict(Decision.REJECT, OUT, sighting=first)) == (Decision.REJECT, (OUT,))


def test_an_example_cuts_model_text_and_hides_redacted_values() -> None:
    long = "x" * 10_000
    problems = [Problem(ProblemCode.OUT_OF_SET, "m", argument=f"card.{i}", value=long) for i in range(30)]
    shown = example(1.0, long, long, (Decision.ALLOW, ()), verdict(Decision.REJECT, *problems), frozenset({"card"}))
    assert len(shown.call_id) == len(shown.tool) == MAX_EXAMPLE_CHARS
    assert len(shown.shadow_problems) == MAX_EXAMPLE_PROBLEMS and shown.problems_left_off == 30 - MAX_EXAMPLE_PROBLEMS
    assert {problem.value for problem in shown.shadow_problems} == {"REDACTED"}


def test_the_report_keeps_the_newest_examples_and_a_row_per_label_and_kind() -> None:
    report = ShadowReport("v2", "next.yaml", 0.0)
    for index in range(100):
        found = example(
            float(index), f"c{index}", "t", (Decision.ALLOW, ()), verdict(Decision.REJECT, OUT), frozenset()
        )
        report.differed("_unknown", Kind.WOULD_REFUSE, found)
    (row,) = report.snapshot().rows
    assert row.count == 100 and len(row.examples) == EXAMPLES_PER_ROW
    assert [found.call_id for found in row.examples] == ["c99", "c98", "c97", "c96", "c95"]
