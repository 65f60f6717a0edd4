"""What a span tells of a judged call: the GenAI conventions' names, the verdict, and model-written text cut to a
bound (span names never carry it)."""

from __future__ import annotations

from argwatch.server.policy.model import Mode
from argwatch.server.tracing.traced_gateway import MAX_TEXT, REPAIR_SPAN, STREAM_SPAN, VALIDATE_SPAN, verdict_attributes
from argwatch.server.verdict.decision import Decision, Verdict
from argwatch.server.verdict.findings import Problem, ProblemCode
from argwatch.server.verdict.tool_call import ToolCall


def _verdict(problems: tuple[Problem, ...]) -> Verdict:
    decision = Decision.REJECT if problems else Decision.ALLOW
    return Verdict("id", decision, Mode.REJECT, problems, (), (), "v7", False, False, 0, None)


def test_model_written_text_is_cut_and_the_verdict_is_told() -> None:
    long = "x" * 5000
    call = ToolCall(long, {}, long, conversation_id=long, model="gpt-x")
    problems = (
        Problem(code=ProblemCode.OUT_OF_SET, message="m", argument="a"),
        Problem(code=ProblemCode.OUT_OF_SET, message="m", argument="b"),
        Problem(code=ProblemCode.MISSING_REQUIRED, message="m", argument="c"),
    )
    shown = verdict_attributes(call, _verdict(problems))
    assert shown["gen_ai.tool.name"] == "x" * MAX_TEXT
    assert shown["gen_ai.tool.call.id"] == "x" * MAX_TEXT and shown["gen_ai.conversation.id"] == "x" * MAX_TEXT
    assert shown["gen_ai.request.model"] == "gpt-x"
    assert shown["argwatch.decision"] == "reject" and shown["argwatch.mode"] == "reject"
    assert shown["argwatch.problem_count"] == 3
    assert shown["argwatch.problem_codes"] == sorted({"out_of_set", "missing_required"})
    assert shown["argwatch.policy_version"] == "v7"


def test_what_the_caller_left_empty_is_not_set() -> None:
    shown = verdict_attributes(ToolCall("t", {}, "c1"), _verdict(()))
    assert "gen_ai.conversation.id" not in shown and "gen_ai.request.model" not in shown
    assert "argwatch.problem_codes" not in shown and shown["argwatch.problem_count"] == 0


def test_span_names_are_fixed() -> None:
    assert {VALIDATE_SPAN, STREAM_SPAN, REPAIR_SPAN} == {
        "argwatch.Validate",
        "argwatch.ValidateStream",
        "argwatch.Repair",
    }
