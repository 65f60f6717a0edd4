"""Fuzzes the request path: bytes -> ValidateRequest -> call -> verdict -> response bytes (atheris, coverage-guided).

The invariant: only expected outcomes (a request that does not parse is refused
with INVALID_ARGUMENT; everything else gets a verdict, never an exception), and
the same verdict for the same input twice. For the tool with side effects the
second call is a repeat by design: there, the same idempotency key twice, and
the same verdict but for the REPEATED_CALL problem.

    python tests/fuzz/fuzz_validate.py -max_total_time=60      # make fuzz runs it longer
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile

import atheris

# Only our modules: instrumenting every library the gateway imports costs ~40 s at start.
with atheris.instrument_imports(include=["argwatch"]):
    from google.protobuf.message import DecodeError

    from argwatch.server.edge import wire
    from argwatch.server.edge.request_limits import TooLong
    from argwatch.server.policy.loader import load_policy
    from argwatch.server.process.app import build_gateway
    from argwatch.server.process.settings import Settings
    from argwatch.v1 import gateway_pb2 as pb

POLICY = """
default_mode: reject
sources: {local: {file: sets.yaml}}
value_sets:
  refunds.reason_codes: {source: local}
  wms.warehouses: {source: local}
tools:
  refund_order:
    arguments:
      reason_code: {value_set: refunds.reason_codes}
    schema:
      type: object
      properties:
        order_id: {type: string, pattern: "^ord_[0-9]+$"}
        amount_cents: {type: integer, minimum: 1}
  transfer_stock:
    arguments:
      warehouse_code: {value_set: wms.warehouses}
    rules:
      - {name: positive, expr: "args.quantity > 0", argument: quantity, types: {quantity: number}}
  issue_credit:
    side_effect: true
sampling: {rate: 0.0}
"""
SETS = """
refunds.reason_codes: {version: 1, members: [DAMAGED_ITEM, NOT_RECEIVED, WRONG_ITEM], retired: [BROKEN]}
wms.warehouses: {version: 1, members: [AMS-1, BER-1]}
"""


def start() -> tuple[asyncio.AbstractEventLoop, object]:
    folder = tempfile.mkdtemp(prefix="argwatch-fuzz-")
    for name, text in (("policy.yaml", POLICY), ("sets.yaml", SETS)):
        with open(os.path.join(folder, name), "w") as handle:
            handle.write(text)
    path = os.path.join(folder, "policy.yaml")
    settings = Settings(
        policy=path, listen="127.0.0.1:0", admin_listen="127.0.0.1:0", metrics_listen="127.0.0.1:0", log_level="ERROR"
    )
    loop = asyncio.new_event_loop()
    gateway = loop.run_until_complete(build_gateway(settings, policy=load_policy(path)))
    return loop, gateway


LOOP, GATEWAY = start()


def verdict_for(request: pb.ValidateRequest) -> tuple[object, ...]:
    verdict = LOOP.run_until_complete(GATEWAY.validator.validate(wire.call_from_request(request)))  # type: ignore[attr-defined]
    response = pb.ValidateResponse.FromString(wire.verdict_to_wire(verdict))
    assert response.decision in (pb.DECISION_ALLOW, pb.DECISION_REJECT)
    assert not (response.decision == pb.DECISION_REJECT and not response.problems)
    if request.tool == SIDE_EFFECT_TOOL:  # a repeat (of this input, or of an earlier one) by design
        problems = tuple((p.code, p.argument) for p in response.problems if p.code != pb.PROBLEM_CODE_REPEATED_CALL)
        # The tool checks nothing else: every call whose arguments are a JSON object runs, and gets a key.
        assert response.idempotency_key.startswith("aw1_") is (problems == ()), (response.idempotency_key, problems)
        return (response.idempotency_key, problems)
    return (response.decision, tuple((p.code, p.argument, p.message) for p in response.problems))


SIDE_EFFECT_TOOL = "issue_credit"


def test_one_input(data: bytes) -> None:
    fuzzed = atheris.FuzzedDataProvider(data)
    if fuzzed.ConsumeBool():
        # Raw bytes as the request itself: a parse error is the expected refusal.
        try:
            request = pb.ValidateRequest.FromString(fuzzed.ConsumeBytes(fuzzed.remaining_bytes()))
        except DecodeError:
            return
    else:
        tools = ["refund_order", "transfer_stock", SIDE_EFFECT_TOOL, fuzzed.ConsumeUnicodeNoSurrogates(12)]
        tool = tools[fuzzed.ConsumeIntInRange(0, 3)]
        request = pb.ValidateRequest(tool=tool, arguments_json=fuzzed.ConsumeBytes(fuzzed.remaining_bytes()))
    try:
        wire.call_from_request(request)
    except TooLong:  # a caller string past its limit: refused with INVALID_ARGUMENT before any check
        return
    assert verdict_for(request) == verdict_for(request), "the same input got two different verdicts"


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
