"""A second attacker's pass at the issue 17 fixes found these ways around them; each is closed, and shown here.

(An id of the wrong type skipped a record's ownership check and every rule on it;
a subschema naming draft 2019-09 reached Python's backtracking `re`; `format: regex`
cached the model's patterns; a rejected call kept megabyte messages; repeated
tool names stalled GetToolDefinitions; a foreign value in Redis crashed Repair
and stopped the fleet's mode following; 1,000 levels of nesting raised instead
of answering; a 545-byte policy of aliases took 1.5 GB to load; SetMode kept a
2 MB tool name in the audit; a cut line in the middle of the mode journal
stopped the next start.)
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
import redis as redis_client

from argwatch.server.policy.loader import PolicyError, parse_policy
from argwatch.sources import RecordStore, serve
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on
from tests.redis_server import RedisProcess, start_redis
from tests.service.helpers import admin_stub, gateway_stub, request, value

RECORDS = """
sources:
  orders_db: {{grpc: {{target: "127.0.0.1:{port}", timeout: 2s}}}}
tools:
  refund_order:
    mode: reject
    records:
      order: {{source: orders_db, kind: order, id_argument: order_id, owner: customer_id, failure: closed}}
    rules:
      - {{name: not_above_paid, expr: "args.amount_cents <= record.order.paid_cents", argument: amount_cents,
          types: {{amount_cents: integer}}}}
"""


@pytest.fixture
async def orders() -> AsyncIterator[int]:
    store = RecordStore({("order", "ord_1"): {"customer_id": "cus_other", "paid_cents": 100}})
    server, port = await serve("127.0.0.1:0", records=store)
    yield port
    await server.stop(0)


@pytest.mark.parametrize(
    ("order_id", "code"),
    [
        (1, pb.PROBLEM_CODE_WRONG_TYPE),
        (["ord_1"], pb.PROBLEM_CODE_WRONG_TYPE),
        ("", pb.PROBLEM_CODE_MISSING_REQUIRED),
        (None, pb.PROBLEM_CODE_MISSING_REQUIRED),
        ("o" * 257, pb.PROBLEM_CODE_OUT_OF_RANGE),
    ],
)
async def test_an_id_that_cannot_be_looked_up_is_a_problem_not_a_skipped_ownership_check(
    tmp_path: Path, orders: int, order_id: object, code: int
) -> None:
    gateway = await gateway_on(tmp_path, RECORDS.format(port=orders))
    channel, stub = gateway_stub(gateway)
    try:
        arguments: dict[str, Any] = {"amount_cents": 99999999}
        if order_id is not None:
            arguments["order_id"] = order_id
        message = request("refund_order", arguments)
        message.session.customer_id = "cus_me"
        verdict = await stub.Validate(message, timeout=5)
        assert verdict.decision == pb.DECISION_REJECT
        assert [(p.code, p.argument) for p in verdict.problems] == [(code, "order_id")]
        as_string = request("refund_order", {"amount_cents": 1, "order_id": "ord_1"})
        as_string.session.customer_id = "cus_me"
        owned = await stub.Validate(as_string, timeout=5)
        # The check the number skipped: another customer's order, told to the caller as not found.
        assert [p.code for p in owned.problems] == [pb.PROBLEM_CODE_NOT_FOUND]
    finally:
        await channel.close()
        await gateway.stop(0)


STALL_2019 = """
tools:
  stall:
    mode: reject
    schema:
      type: object
      properties:
        meta:
          $schema: https://json-schema.org/draft/2019-09/schema
          type: object
          patternProperties: {"^(a+)+$": {type: string}}
          unevaluatedProperties: false
        day: {type: string, format: regex}
        n: {type: integer}
"""


async def test_a_2019_09_subschema_and_format_regex_stay_linear_and_uncached(tmp_path: Path) -> None:
    import jsonschema._keywords
    import jsonschema._legacy_keywords
    import jsonschema._utils

    from argwatch.server.policy import linear_regex

    gateway = await gateway_on(tmp_path, STALL_2019)
    assert all(module.re is not re for module in (jsonschema._keywords, jsonschema._legacy_keywords, jsonschema._utils))
    channel, stub = gateway_stub(gateway)
    try:
        started = time.monotonic()
        evil = await stub.Validate(request("stall", {"meta": {"a" * 40 + "!": 1}}), timeout=2)
        assert evil.problems and time.monotonic() - started < 2.0
        cached = len(linear_regex._COMPILED)
        for index in range(50):  # the model's own patterns, each with another problem so the full check runs
            await stub.Validate(request("stall", {"day": f"[\\\\w\\\\W]{{9000}}x{index}", "n": "x"}), timeout=5)
        assert len(linear_regex._COMPILED) == cached  # compiled, answered, let go
    finally:
        await channel.close()
        await gateway.stop(0)


SIMPLE = """
tools:
  refund_order:
    mode: reject
    schema: {type: object, properties: {note: {type: integer}, deep: {type: object, properties: {x: {type: integer}}}}}
"""


async def test_kept_problems_are_cut_repeated_tool_names_are_one_and_deep_nesting_gets_a_verdict(
    tmp_path: Path,
) -> None:
    gateway = await gateway_on(tmp_path, SIMPLE)
    channel, stub = gateway_stub(gateway)
    try:
        huge = await stub.Validate(request("refund_order", {"note": "x" * 1_000_000}), timeout=5)
        repair = await stub.Repair(pb.RepairRequest(call_id=huge.call_id), timeout=5)
        assert len(repair.message) < 4_000
        started = time.monotonic()
        described = await stub.GetToolDefinitions(
            pb.GetToolDefinitionsRequest(tools=["refund_order"] * 100_000), timeout=5
        )
        assert [tool.name for tool in described.tools] == ["refund_order"] and time.monotonic() - started < 2.0
        # JSON text 1,000 levels deep (orjson reads up to 1,024; the schema library's recursion gives out first).
        deep_text = b'{"deep": ' + b'{"x": ' * 1_000 + b"1" + b"}" * 1_000 + b"}"
        deep = await stub.Validate(request("refund_order", raw=deep_text), timeout=5)
        assert deep.decision == pb.DECISION_REJECT and deep.problems
    finally:
        await channel.close()
        await gateway.stop(0)


def test_a_policy_of_aliases_is_refused_at_once() -> None:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(7)
    )
    started = time.monotonic()
    with pytest.raises(PolicyError, match="aliases"):
        parse_policy(laughs.encode(), "/srv/policy.yaml")
    assert time.monotonic() - started < 1.0


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = start_redis(str(tmp_path))
    yield server
    server.kill()


async def test_foreign_values_in_redis_are_read_as_nothing_and_the_fleet_keeps_following(
    tmp_path: Path, redis: RedisProcess
) -> None:
    gateway = await gateway_on(tmp_path, SIMPLE, redis=redis.url)
    channel, stub = gateway_stub(gateway)
    admin_channel, admin = admin_stub(gateway)
    try:
        first = await stub.Validate(request("refund_order", {"note": "x"}, conversation="c1", call_id="k1"), timeout=5)
        assert first.decision == pb.DECISION_REJECT
        with redis_client.Redis(host="127.0.0.1", port=redis.port) as direct:
            for key in direct.scan_iter("*"):
                direct.set(key, b'["int", 7]')  # a value of another type under every key
            direct.set("argwatch:modes", orjson.dumps({"version": 10**9, "overrides": {"x": {"mode": "boom"}}}))
        again = await stub.Validate(request("refund_order", {"note": "y"}, conversation="c1", call_id="k2"), timeout=5)
        assert again.decision == pb.DECISION_REJECT
        repair = await stub.Repair(pb.RepairRequest(call_id="k1", conversation_id="c1"), timeout=5)
        assert "note" in repair.message
        change = admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE, reason="after the forgery")
        await admin.SetMode(change, timeout=5)
        for _ in range(50):
            if value(gateway.registry, "argwatch_shared_cache_rejected_total", reason="bad_mode_state") >= 1:
                break
            await asyncio.sleep(0.1)
        assert value(gateway.registry, "argwatch_shared_cache_rejected_total", reason="bad_mode_state") >= 1
        verdict = await stub.Validate(request("refund_order", {"note": "z"}), timeout=5)
        assert verdict.mode == pb.MODE_OBSERVE
    finally:
        await channel.close()
        await admin_channel.close()
        await gateway.stop(0)


async def test_set_mode_refuses_a_tool_or_reason_past_its_limit(tmp_path: Path) -> None:
    gateway = await gateway_on(tmp_path, SIMPLE)
    admin_channel, admin = admin_stub(gateway)
    try:
        for change in (
            admin_pb2.SetModeRequest(tool="t" * 129, mode=pb.MODE_OBSERVE, reason="x"),
            admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE, reason="r" * 1025),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await admin.SetMode(change, timeout=5)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        await admin_channel.close()
        await gateway.stop(0)


def test_a_line_cut_in_the_middle_of_the_mode_journal_costs_only_that_line(tmp_path: Path) -> None:
    from argwatch.server.modes.store import ModeStore

    policy = parse_policy(SIMPLE.encode(), str(tmp_path / "policy.yaml"))
    journal = tmp_path / "modes.jsonl"
    store = ModeStore(policy, state_file=str(journal))
    store.set_mode("refund_order", None, actor="ana", reason="first")
    with open(journal, "ab") as handle:
        handle.write(b'{"version": 2, "change": {"at": 1, "act\n')  # a full disk, mid-append
    store.set_mode("refund_order", None, actor="ana", reason="second")
    reread = ModeStore(policy, state_file=str(journal))
    assert [c.reason for c in reread.changes()] == ["second", "first"]
