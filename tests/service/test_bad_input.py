"""Bad input from a model: a clear verdict or status each, the gateway serves on, no label or log line breaks."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.server.telemetry.samples import SAMPLES_LOGGER
from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc
from tests.conftest import REASON_CODES, SourceServer, loopback_settings, make_policy

DEEP = 1000
MAX_MESSAGE = 4 * 1024 * 1024  # gRPC's default receive limit, which the gateway keeps


@pytest.fixture
async def gateway(tmp_path: Path, source: SourceServer) -> AsyncIterator[RunningGateway]:
    policy = make_policy(str(tmp_path), source.target, refund_mode="reject")
    running = await build_gateway(loopback_settings(policy.path), policy=policy, registry=CollectorRegistry())
    yield running
    await running.stop(0)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# (what, the arguments' bytes as the model wrote them, the problem codes expected)
CASES = [
    ("1,000-deep nesting", f'{{"reason_code": {nested(DEEP)}}}'.encode(), ["PROBLEM_CODE_WRONG_TYPE"]),
    ("a 3 MB string", json.dumps({"reason_code": "X" * 3_000_000}).encode(), ["PROBLEM_CODE_OUT_OF_SET"]),
    ("a 100,000-item array", json.dumps({"reason_code": list(range(100_000))}).encode(), ["PROBLEM_CODE_WRONG_TYPE"]),
    ("invalid UTF-8", b'{"reason_code": "DAMAGED\xff"}', ["PROBLEM_CODE_MALFORMED_ARGUMENTS"]),
    ("NaN", b'{"reason_code": NaN}', ["PROBLEM_CODE_MALFORMED_ARGUMENTS"]),
    ("Infinity", b'{"reason_code": Infinity}', ["PROBLEM_CODE_MALFORMED_ARGUMENTS"]),
    ("1e400", b'{"reason_code": 1e400}', ["PROBLEM_CODE_MALFORMED_ARGUMENTS"]),
    ("-0", b'{"reason_code": -0}', ["PROBLEM_CODE_WRONG_TYPE"]),
    ("a lone surrogate", b'{"reason_code": "\\ud800"}', ["PROBLEM_CODE_MALFORMED_ARGUMENTS"]),
    ("control characters", b'{"reason_code": "DAMAGED_ITEM\\u0000\\u001b[31m\\n"}', ["PROBLEM_CODE_OUT_OF_SET"]),
    ("JSON that is not an object", b'["DAMAGED_ITEM"]', ["PROBLEM_CODE_MALFORMED_ARGUMENTS"]),
    # Duplicate keys: the last one counts, as in JSON.parse, Go's encoding/json, Python's json and
    # Jackson's default, so the value checked is the value the tool's own parser will take.
    ("duplicate keys", b'{"reason_code": "WRONG_ITEM", "reason_code": "EVIL"}', ["PROBLEM_CODE_OUT_OF_SET"]),
    ("nesting past the parser's limit", f'{{"a": {nested(5000)}}}'.encode(), ["PROBLEM_CODE_MALFORMED_ARGUMENTS"]),
]


async def validate(target: str, message: pb.ValidateRequest) -> pb.ValidateResponse:
    async with grpc.aio.insecure_channel(target, options=[("grpc.max_send_message_length", 64 << 20)]) as channel:
        response: pb.ValidateResponse = await gateway_pb2_grpc.GatewayStub(channel).Validate(message, timeout=30)
        return response


@pytest.mark.parametrize(("what", "raw", "codes"), CASES, ids=[case[0] for case in CASES])
async def test_bad_arguments_get_a_clear_verdict_twice_and_the_gateway_serves_on(
    gateway: RunningGateway, what: str, raw: bytes, codes: list[str]
) -> None:
    message = pb.ValidateRequest(tool="refund_order", arguments_json=raw, call_id="bad-1")
    first = await validate(gateway.target, message)
    again = await validate(gateway.target, message)
    assert [pb.ProblemCode.Name(p.code) for p in first.problems] == codes
    assert first.decision == pb.DECISION_REJECT
    assert [(p.code, p.message) for p in again.problems] == [(p.code, p.message) for p in first.problems]
    assert all(len(p.value) <= 1024 and len(p.message) <= 2048 for p in first.problems)  # echoed values are cut
    clean = await validate(
        gateway.target, pb.ValidateRequest(tool="refund_order", arguments_json=b'{"reason_code":"WRONG_ITEM"}')
    )
    assert clean.decision == pb.DECISION_ALLOW


@pytest.mark.parametrize(
    ("what", "tool"),
    [
        ("an empty tool name", ""),
        # Longer than the 128-character limit is INVALID_ARGUMENT (tests/security/test_bounded_memory.py).
        ("a 128-character tool name", "t" * 128),
        ("control characters", "refund\x00\x1b[2J"),
    ],
)
async def test_bad_tool_names_are_unknown_tools_and_never_labels(gateway: RunningGateway, what: str, tool: str) -> None:
    response = await validate(gateway.target, pb.ValidateRequest(tool=tool, arguments_json=b"{}"))
    assert [pb.ProblemCode.Name(p.code) for p in response.problems] == ["PROBLEM_CODE_UNKNOWN_TOOL"]
    labels = {
        value for family in gateway.registry.collect() for sample in family.samples for value in sample.labels.values()
    }
    assert tool not in labels and "_unknown" in labels


async def test_a_request_over_the_size_limit_is_refused_naming_the_limit(gateway: RunningGateway) -> None:
    oversized = pb.ValidateRequest(
        tool="refund_order", arguments_json=json.dumps({"reason_code": "X" * (10 << 20)}).encode()
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await validate(gateway.target, oversized)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert str(MAX_MESSAGE) in (refused.value.details() or "")
    clean = await validate(
        gateway.target, pb.ValidateRequest(tool="refund_order", arguments_json=b'{"reason_code":"WRONG_ITEM"}')
    )
    assert clean.decision == pb.DECISION_ALLOW


async def test_nothing_a_model_wrote_reaches_a_label_and_the_sampled_log_stays_json(
    gateway: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=SAMPLES_LOGGER)
    for _what, raw, _codes in CASES:
        await validate(gateway.target, pb.ValidateRequest(tool="refund_order", arguments_json=raw, call_id="x"))
    sneaky = {"reason_code": "EVIL\nline", "made_up_argument\x00": "x", "other": nested(3)}
    await validate(gateway.target, pb.ValidateRequest(tool="refund_order", arguments_json=json.dumps(sneaky).encode()))
    labels = {
        value for family in gateway.registry.collect() for sample in family.samples for value in sample.labels.values()
    }
    assert not any("EVIL" in label or "\x00" in label or "X" * 50 in label or "[" in label for label in labels)
    assert {"reason_code", "_unknown"} <= labels
    # The sampled log's lines, as the logger gets them (`argwatch serve` queues them to its file).
    lines = [record.getMessage() for record in caplog.records if record.name == SAMPLES_LOGGER]
    assert lines and all(isinstance(json.loads(line), dict) for line in lines)
    assert all(len(line) < 16_384 for line in lines)
    assert REASON_CODES  # the policy's codes are the only legal values
