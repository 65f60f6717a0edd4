"""Issue 17.3 and 17.9: no caller can make the gateway keep without bound what it sends.

Before, conversation and call ids had no length limit and the tables keyed by
them no entry limit: 150 rejected calls with 2 MB conversation ids took a
gateway from 218 to 808 MiB, and the fuzzer's RSS climbed ~1 KB a call until
libFuzzer's 2 GB limit. Now every caller string has a limit (a longer one is
INVALID_ARGUMENT naming the field), and every table keyed by one a maximum
entry count, past which the oldest go, counted.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import grpc
import pytest

from argwatch.server.edge.request_limits import (
    MAX_CALL_ID,
    MAX_CONVERSATION_ID,
    MAX_CUSTOMER_ID,
    MAX_MODEL,
    MAX_TENANT,
    MAX_TOOL,
)
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on
from tests.service.helpers import gateway_stub, run_program, value

POLICY = """
tools:
  refund_order:
    mode: reject
    schema: {type: object, properties: {amount_cents: {type: integer, maximum: 5000}}}
"""


def call(**fields: object) -> pb.ValidateRequest:
    session = {k: fields.pop(k) for k in ("customer_id", "tenant") if k in fields}
    return pb.ValidateRequest(
        tool=str(fields.pop("tool", "refund_order")),
        arguments_json=b'{"amount_cents": 1}',
        session=pb.Session(**session),  # type: ignore[arg-type]
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("field", "limit", "wire_name"),
    [
        ("tool", MAX_TOOL, "tool"),
        ("call_id", MAX_CALL_ID, "call_id"),
        ("conversation_id", MAX_CONVERSATION_ID, "conversation_id"),
        ("customer_id", MAX_CUSTOMER_ID, "session.customer_id"),
        ("tenant", MAX_TENANT, "session.tenant"),
        ("model", MAX_MODEL, "model"),
    ],
)
async def test_a_string_past_its_limit_is_invalid_argument_naming_field_and_limit(
    tmp_path: Path, field: str, limit: int, wire_name: str
) -> None:
    gateway = await gateway_on(tmp_path, POLICY)
    channel, stub = gateway_stub(gateway)
    try:
        at_limit = await stub.Validate(call(**{field: "x" * limit}), timeout=5)
        assert at_limit.decision in (pb.DECISION_ALLOW, pb.DECISION_REJECT)  # a verdict (an unknown tool, say)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.Validate(call(**{field: "x" * (limit + 1)}), timeout=5)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert refused.value.details() == f"{wire_name} is {limit + 1} characters; at most {limit}"
        stream = stub.ValidateStream(timeout=5)
        await stream.write(call(**{field: "x" * (limit + 1)}))
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await stream.read()
        assert ended.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert value(gateway.registry, "argwatch_requests_refused_total", field=wire_name) == 2
    finally:
        await channel.close()
        await gateway.stop(0)


async def test_repair_and_report_outcome_refuse_a_call_id_past_its_limit(tmp_path: Path) -> None:
    gateway = await gateway_on(tmp_path, POLICY)
    channel, stub = gateway_stub(gateway)
    try:
        for method, message in (
            (stub.Repair, pb.RepairRequest(call_id="x" * (MAX_CALL_ID + 1))),
            (stub.ReportOutcome, pb.ReportOutcomeRequest(call_id="x" * (MAX_CALL_ID + 1), outcome=pb.OUTCOME_FAILED)),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await method(message, timeout=5)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        await channel.close()
        await gateway.stop(0)


# The gateway in a child process of its own, so its resident size is its alone: rejected calls (each
# remembered for Repair) with every id at its limit, first a few thousand, then 100,000 distinct ones.
CHILD = textwrap.dedent(
    """
    import asyncio, json, os, sys, tempfile
    import orjson
    from argwatch.server.edge import wire
    from argwatch.server.edge.request_limits import MAX_CALL_ID, MAX_CONVERSATION_ID, MAX_CUSTOMER_ID, MAX_TENANT
    from argwatch.server.policy.loader import load_policy
    from argwatch.server.process.app import build_gateway
    from argwatch.server.process.settings import Settings
    from argwatch.v1 import gateway_pb2 as pb

    POLICY = sys.argv[1]

    def rss_mib():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024

    def long(prefix, n, limit):
        return (f"{prefix}{n:08d}" * limit)[:limit]

    async def main():
        folder = tempfile.mkdtemp()
        path = os.path.join(folder, "policy.yaml")
        with open(path, "w") as handle:
            handle.write(POLICY)
        settings = Settings(policy=path, listen="127.0.0.1:0", admin_listen="127.0.0.1:0",
                            metrics_listen="127.0.0.1:0", log_level="ERROR")
        gateway = await build_gateway(settings, policy=load_policy(path))
        arguments = orjson.dumps({"amount_cents": 99999})
        figures = {}

        async def calls(start, count):
            for n in range(start, start + count):
                request = pb.ValidateRequest(
                    tool="refund_order", arguments_json=arguments, call_id=long("c", n, MAX_CALL_ID),
                    conversation_id=long("v", n, MAX_CONVERSATION_ID),
                    session=pb.Session(customer_id=long("u", n, MAX_CUSTOMER_ID), tenant=long("t", n, MAX_TENANT)))
                verdict = await gateway.validator.validate(wire.call_from_request(request))
                assert verdict.problems

        await calls(0, 1_000)  # warm-up: allocator arenas, caches
        before = rss_mib()
        await calls(1_000, 2_000)
        figures["two_thousand_mib"] = rss_mib() - before
        await calls(3_000, 47_000)
        half = rss_mib()
        await calls(50_000, 50_000)
        figures["second_fifty_thousand_mib"] = rss_mib() - half
        figures["total_mib"] = rss_mib() - before
        figures["evictions"] = gateway.registry.get_sample_value(
            "argwatch_table_evictions_total", {"table": "shared_cache_local"}) or 0
        print(json.dumps(figures))
        await gateway.stop(0)

    asyncio.run(main())
    """
)


async def test_what_callers_can_make_the_gateway_keep_has_a_ceiling(tmp_path: Path) -> None:
    """Each remembered rejected call with every id at its limit holds at most 4 KiB (2,000 of them: at most
    8 MiB, and 4 MiB of allocator slack); the tables stop at their caps, so 100,000 distinct calls plateau:
    the second 50,000 add less than a tenth of the first's growth, and the drops are counted."""
    out = await run_program(sys.executable, "-c", CHILD, POLICY, seconds=240)
    figures = json.loads(out.splitlines()[-1])
    print("resident size growth:", figures)
    assert figures["two_thousand_mib"] <= 2_000 * 4 / 1024 + 4
    assert figures["evictions"] > 0  # the local memory reached its cap and said so
    assert figures["second_fifty_thousand_mib"] <= 0.1 * figures["total_mib"] + 4
    assert figures["total_mib"] <= 160  # 100,000 entries at ~1.2 KiB each, and the repair tracker's 50,000
