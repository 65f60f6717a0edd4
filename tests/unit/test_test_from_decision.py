"""A policy test drafted from decision-log lines: what the line holds becomes the case, what it does not is said."""

from __future__ import annotations

import yaml

from argwatch.server.policytest.from_decision import draft_test_file

LINE = {
    "ts": 1764558724.1,
    "call_id": "call_7",
    "conversation_id": "conv_9",
    "tool": "refund_order",
    "model": "gpt-4.1-mini",
    "decision": "reject",
    "mode": "reject",
    "problems": [{"code": "out_of_set", "path": "reason_code", "set": "refunds.reason_codes", "shape": "case"}],
    "skipped": [],
    "sets": {"refunds.reason_codes": 12},
    "arguments": {"order_id": "blake2b-256:aa"},
    "clear": {"reason_code": "damaged"},
    "session": {"customer_id": "blake2b-256:bb"},
}


def test_a_line_becomes_a_case_with_its_clear_values_and_the_rest_named_to_fill_in() -> None:
    text = draft_test_file([LINE], "../policy.yaml")
    drafted = yaml.safe_load(text)
    (case,) = drafted["cases"]
    assert drafted["policy"] == "../policy.yaml"
    assert case["call"] == {
        "tool": "refund_order",
        "arguments": {"reason_code": "damaged"},
        "session": {"conversation": "conv_9"},
        "model": "gpt-4.1-mini",
    }
    assert case["expect"] == {
        "decision": "reject",
        "problems": [{"code": "out_of_set", "path": "reason_code", "shape": "case"}],
    }
    assert "# logged hashed, fill in: order_id" in text and "the session was logged hashed" in text


def test_a_repeat_is_left_out_with_a_note_since_a_test_judges_each_call_as_its_first() -> None:
    repeat = {**LINE, "problems": [{"code": "repeated_call", "path": "", "set": "", "shape": ""}]}
    text = draft_test_file([repeat], "p.yaml")
    (case,) = yaml.safe_load(text)["cases"]
    assert case["expect"] == {"decision": "allow"}
    assert "refused then as a repeat of an earlier call" in text
