"""Side effects without a server: the policy's `side_effect`, operation keys, and the repeat message."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest

from argwatch.server.policy.loader import PolicyError, parse_policy
from argwatch.server.policy.model import SideEffect
from argwatch.server.repair.message import repeat_message
from argwatch.server.state.operations import operation_key
from argwatch.server.verdict.repeats import OperationOutcome, OperationRecord

POLICY = """
tools:
  refund_order:
    mode: reject
    schema:
      type: object
      properties: {order_id: {type: string}, amount_cents: {type: integer}, note: {type: string}}
    side_effect: {same_operation: [order_id, amount_cents], window: 5m, status_tool: get_refund_status}
  get_refund_status: {mode: observe}
  issue_credit: {side_effect: true}
  read_only: {side_effect: false}
"""
REFUND = SideEffect(same_operation=("order_id", "amount_cents"))


def parse(text: str):
    return parse_policy(textwrap.dedent(text).encode(), "/etc/argwatch/policy.yaml")


def errors_of(text: str) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        parse(text)
    return [f"{issue.path}: {issue.message}" for issue in raised.value.issues]


def test_the_policy_marks_tools_with_side_effects() -> None:
    tools = parse(POLICY).tools
    assert tools["refund_order"].side_effect == SideEffect(("order_id", "amount_cents"), 300.0, "get_refund_status")
    assert tools["issue_credit"].side_effect == SideEffect()  # every argument, 15 minutes, no status tool
    assert tools["read_only"].side_effect is None and tools["get_refund_status"].side_effect is None


def test_side_effect_errors_name_the_key_and_what_was_expected() -> None:
    text = POLICY.replace("status_tool: get_refund_status", "status_tool: refund_status").replace(
        "[order_id, amount_cents]", "[order_id, amount]"
    )
    assert errors_of(text) == [
        "tools.refund_order.side_effect.same_operation: 'amount' is not an argument of this tool "
        "(known: amount_cents, note, order_id)",
        "tools.refund_order.side_effect.status_tool: 'refund_status' is not a tool of this policy: list it under "
        "tools (its calls must pass the gateway, which lets a repeat through once the model has checked)",
    ]
    assert errors_of(POLICY.replace("[order_id, amount_cents]", "[]")) == [
        "tools.refund_order.side_effect.same_operation: expected at least one argument name "
        "(or leave it out: every argument)"
    ]
    assert errors_of(POLICY.replace("window: 5m", "window: never")) == [
        "tools.refund_order.side_effect.window: expected a duration such as "
        "300, '30s', '250ms', '5m' or '1h30m', got 'never'"
    ]
    assert errors_of(POLICY.replace("side_effect: true", "side_effect: {identity: [a]}")) == [
        "tools.issue_credit.side_effect.identity: unknown key; expected one of same_operation, status_tool, window"
    ]


def test_the_key_is_the_operation_not_its_wording() -> None:
    key = operation_key("refund_order", "conv-1", {"order_id": "ord_1", "amount_cents": 1200, "note": "a"}, b"", REFUND)
    same = [
        {"amount_cents": 1200, "order_id": "ord_1", "note": "something else entirely"},
        {"order_id": "ord_1", "amount_cents": 1200.0},
    ]
    for arguments in same:
        assert operation_key("refund_order", "conv-1", arguments, b"", REFUND) == key
    different: list[tuple[str, str, dict[str, object]]] = [
        ("refund_order", "conv-2", {"order_id": "ord_1", "amount_cents": 1200}),
        ("refund_order", "conv-1", {"order_id": "ord_1", "amount_cents": 1201}),
        ("refund_order", "conv-1", {"order_id": "ORD_1", "amount_cents": 1200}),
        ("refund_order", "conv-1", {"order_id": "ord_1"}),
        ("issue_credit", "conv-1", {"order_id": "ord_1", "amount_cents": 1200}),
    ]
    keys = {operation_key(tool, conversation, arguments, b"", REFUND) for tool, conversation, arguments in different}
    assert key not in keys and len(keys) == len(different)


def test_every_argument_is_identity_without_a_list_and_odd_values_still_get_a_key() -> None:
    every = SideEffect()
    assert operation_key("t", "c", {"a": 1}, b"", every) != operation_key("t", "c", {"a": 1, "memo": ""}, b"", every)
    huge = {"a": 2**70}  # past orjson's integers: the text as sent decides
    assert operation_key("t", "c", huge, b'{"a": 1180591620717411303424}', every).startswith("aw1_")
    deep: object = "x"
    for _ in range(1000):
        deep = [deep]
    assert operation_key("t", "c", {"a": deep}, b"", every) == operation_key("t", "c", {"a": deep}, b"", every)


def test_the_repeat_message_says_what_happened_what_is_known_and_what_to_do() -> None:
    policy = parse(POLICY)
    earlier = OperationRecord(
        "aw1_k", "refund_order", "conv-1", "call-1", 1_764_470_000.0, OperationOutcome.UNREPORTED, 2, 300
    )
    unknown = repeat_message("refund_order", policy, earlier, "")
    assert unknown.splitlines() == [
        "The call to refund_order was not executed: it repeats an earlier call of the same operation "
        "(refund_order with the same order_id and amount_cents in this conversation).",
        "- The earlier call: call-1, at 2025-11-30 02:33:20 UTC; idempotency key aw1_k; "
        "2 calls of this operation so far, this one included.",
        "- Its outcome was never reported: it may have succeeded (a timeout does not mean it failed), so running "
        "refund_order again could do it twice.",
        "What to do: call get_refund_status first to see whether the earlier call took effect. If it did, do not "
        "call refund_order again; tell the user it is done. If it did not, you may then call refund_order again "
        "with the same arguments.",
    ]
    done = repeat_message("refund_order", policy, replace(earlier, outcome=OperationOutcome.SUCCEEDED), "")
    assert "It succeeded" in done and "get_refund_status" not in done
    credit = repeat_message("issue_credit", policy, earlier, "")
    assert "the same arguments" in credit and "do not call issue_credit again" in credit
    stop = repeat_message("refund_order", policy, earlier, "it repeated the same invalid call")
    assert "Do not call refund_order again in this conversation: it repeated the same invalid call" in stop


async def test_a_success_survives_a_racing_rewrite_of_the_record() -> None:
    """Replica B read the record (no outcome yet), A stored the success, then B wrote back what it read:
    the success must still hold, for repeats and for later reports."""
    from prometheus_client import CollectorRegistry

    from argwatch.server.state.operations import OperationLog
    from argwatch.server.state.shared_cache import SharedCache
    from argwatch.server.telemetry.metrics import GatewayMetrics

    cache = SharedCache(None, GatewayMetrics(CollectorRegistry()))
    log = OperationLog(cache)
    refund = SideEffect(("order_id",), 300.0, "get_refund_status")
    first = await log.sight("aw1_k", "refund_order", "c", "call-1", refund, runs=False)
    stale_copy = await cache.get("argwatch:operation:aw1_k")  # what replica B read
    assert first.earlier is None and stale_copy.outcome is OperationOutcome.UNREPORTED

    await log.report("c", "call-1", OperationOutcome.SUCCEEDED)  # replica A
    await cache.set("argwatch:operation:aw1_k", stale_copy, ttl=300)  # replica B writes back its read
    await log.status_checked("c", (("refund_order", 300.0),))  # a status check would let an unknown through

    repeat = await log.sight("aw1_k", "refund_order", "c", "call-2", refund, runs=False)
    assert repeat.is_repeat and repeat.earlier is not None and repeat.earlier.outcome is OperationOutcome.SUCCEEDED
    late = await log.report("c", "call-1", OperationOutcome.FAILED)
    assert late is not None and late.outcome is OperationOutcome.SUCCEEDED
