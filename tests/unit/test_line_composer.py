"""The decision log's line as composed in C (`_digest.c`) equals, field for field, the line as the format defines
it (built here with orjson from the same call and verdict): over real verdicts of a real Validator, with
problems, skipped checks, unknown tools, undecodable and unencodable arguments, clear and unlogged values,
sessions hashed and clear, and model-written text of every kind."""

from __future__ import annotations

import hashlib
import re
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from argwatch.server.decisions.record import MAX_TEXT, LineBuilder, ValueHasher
from argwatch.server.decisions.value_plan import ValuePlan, value_plans
from argwatch.server.modes.document import source_in
from argwatch.server.policy.model import ValueLogging
from argwatch.server.process.app import RunningGateway
from argwatch.server.verdict.decision import Verdict
from argwatch.server.verdict.tool_call import ToolCall, decode_json_arguments
from tests.conftest import gateway_on

POLICY = textwrap.dedent(
    """
    default_mode: reject
    sources:
      local: {file: sets.yaml}
    value_sets:
      wms.warehouses: {source: local}
    decision_log: {session: clear}
    tools:
      transfer_stock:
        arguments:
          warehouse_code: {value_set: wms.warehouses}
      annotate:
        schema:
          type: object
          properties: {warehouse_code: {type: string}, note: {type: string}, secret: {type: string}}
        log_values: {note: clear, secret: none}
        arguments:
          warehouse_code: {value_set: wms.warehouses}
    """
)
KEY = b"k" * 48


def reference(
    at: float, call: ToolCall, verdict: Verdict, gateway: RunningGateway, latency: float, plan: ValuePlan
) -> dict[str, Any]:
    """The line's fields by the format's definition (docs/operating.md), for the common parts; the values' and the
    session's fields are compared against the hasher directly."""
    modes = gateway.modes.document
    return {
        "ts": at,
        "call_id": call.call_id[:MAX_TEXT],
        "conversation_id": call.conversation_id[:MAX_TEXT],
        "tool": call.tool[:MAX_TEXT],
        "model": call.model[:MAX_TEXT],
        "decision": verdict.decision.value,
        "mode": verdict.mode.value,
        "mode_source": source_in(modes, call.tool)[0],
        "downgraded_by_staleness": verdict.downgraded_by_staleness,
        "overrides": [],
        "problems": [
            {"code": p.code.value, "path": p.argument[:MAX_TEXT], "set": p.value_set, "shape": p.shape.value}
            for p in verdict.problems
        ],
        "skipped": [
            {"path": s.argument[:MAX_TEXT], "set": s.value_set, "reason": s.reason.value} for s in verdict.skipped
        ],
        "policy_version": verdict.policy_version,
        "sets": {r.snapshot.name: r.snapshot.version for r in verdict.readings_used},
        "latency_seconds": latency,
    }


def expected_values(call: ToolCall, plan: ValuePlan, hasher: ValueHasher) -> dict[str, Any]:
    if call.arguments is None:
        return {"arguments": None, "raw_arguments": hasher.digest_bytes(call.raw_arguments)}
    hashed, clear, unlogged = {}, {}, []
    for name, value in call.arguments.items():
        how = plan.of(name)
        if how is ValueLogging.NONE:
            unlogged.append(name[:MAX_TEXT])
        elif how is ValueLogging.CLEAR:
            clear[name[:MAX_TEXT]] = value
        else:
            hashed[name[:MAX_TEXT]] = hasher.digest(value)
    found: dict[str, Any] = {"arguments": hashed}
    if clear:
        found["clear"] = clear
    if unlogged:
        found["unlogged"] = unlogged
    return found


@pytest.fixture
async def gateway(tmp_path: Path) -> Any:
    (tmp_path / "sets.yaml").write_text("wms.warehouses:\n  version: 3\n  members: [AMS-1, FRA-2]\n")
    running = await gateway_on(tmp_path, POLICY)
    yield running
    await running.stop()


text = st.text(max_size=20) | st.text(min_size=250, max_size=300)  # short, and around the cut at 256
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tool=st.sampled_from(["transfer_stock", "annotate", "no_such_tool"]),
    arguments=st.dictionaries(st.sampled_from(["warehouse_code", "note", "secret", "qty"]) | text, values, max_size=5),
    call_id=text,
    conversation=text,
    model=text,
    customer=st.sampled_from(["", "cus_1"]),
    tenant=st.sampled_from(["", "acme"]),
    raw=st.booleans(),
)
async def test_the_composed_line_equals_the_format(
    gateway: RunningGateway,
    tool: str,
    arguments: dict[str, Any],
    call_id: str,
    conversation: str,
    model: str,
    customer: str,
    tenant: str,
    raw: bool,
) -> None:
    try:
        encoded = orjson.dumps(arguments)
    except orjson.JSONEncodeError:  # a value orjson cannot write (u64 inside a list, say): the call is undecodable
        encoded = b"{not json"
    if raw:
        encoded = b"[1, 2]"  # decodes, but not to an object
    decoded, error = decode_json_arguments(encoded)
    call = ToolCall(tool, decoded, call_id, conversation, customer, tenant, error, encoded, model)
    verdict = await gateway.validator.validate(call)
    plans, unknown = value_plans(gateway.policy)
    plan = plans.get(tool, unknown)
    hasher = ValueHasher(KEY)
    line = orjson.loads(
        LineBuilder(hasher).line(1_796_000_000_125_000_999, call, verdict, gateway.modes.document, 35_001, plan)
    )
    want = reference(1_796_000_000.125, call, verdict, gateway, 3.5001e-05, plan)
    want.update(expected_values(call, plan, hasher))
    if customer or tenant:
        want["session"] = {name: sent for name, sent in (("customer_id", customer), ("tenant", tenant)) if sent}
    assert line == want


async def test_a_hashed_session_and_a_too_deep_value_fall_back_to_the_raw_digest(gateway: RunningGateway) -> None:
    hasher = ValueHasher(KEY)
    deep: Any = "x"
    for _ in range(300):  # orjson reads 1,024 levels but writes 255
        deep = [deep]
    raw = b'{"warehouse_code": ' + b"[" * 300 + b'"x"' + b"]" * 300 + b"}"
    decoded, _ = decode_json_arguments(raw)
    call = ToolCall("transfer_stock", decoded, "deep", "", "cus_1", "acme", "", raw, "")
    verdict = await gateway.validator.validate(call)
    plan = ValuePlan(session=ValueLogging.HASHED)
    line = orjson.loads(LineBuilder(hasher).line(10**9, call, verdict, gateway.modes.document, 0, plan))
    assert line["arguments"] is None and line["raw_arguments"] == hasher.digest_bytes(raw)
    assert line["session"] == {"customer_id": hasher.digest("cus_1"), "tenant": hasher.digest("acme")}


def _hashlib_digest(value: object) -> str:
    """The digest by its definition: keyed BLAKE2b-256 (hashlib) of the value's sorted-key orjson."""
    encoded = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return "blake2b-256:" + hashlib.blake2b(encoded, key=KEY, digest_size=32).hexdigest()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(
        # JSON of 1 to 130 bytes: across the one-block edge (128) where a digest leaves the batch of four
        st.text(alphabet='ab"\\\n', min_size=0, max_size=126)
        | st.integers(-(2**63), 2**63 - 1)
        | st.booleans()
        | st.none(),
        min_size=1,
        max_size=13,
    ),
    customer=st.sampled_from(["", "cus_1"]),
    tenant=st.sampled_from(["", "acme"]),
)
async def test_a_lines_digests_made_four_at_a_time_equal_hashlibs(
    gateway: RunningGateway, values: list[object], customer: str, tenant: str
) -> None:
    arguments = {f"a{n}": value for n, value in enumerate(values)}
    encoded = orjson.dumps(arguments)
    decoded, error = decode_json_arguments(encoded)
    call = ToolCall("no_such_tool", decoded, "c", "", customer, tenant, error, encoded, "")
    verdict = await gateway.validator.validate(call)
    plan = ValuePlan(session=ValueLogging.HASHED)
    line = orjson.loads(LineBuilder(ValueHasher(KEY)).line(0, call, verdict, gateway.modes.document, 0, plan))
    assert line["arguments"] == {name: _hashlib_digest(value) for name, value in arguments.items()}
    session = {name: _hashlib_digest(sent) for name, sent in (("customer_id", customer), ("tenant", tenant)) if sent}
    assert line.get("session", {}) == session


@pytest.mark.parametrize(
    ("at_ns", "latency_ns", "ts", "latency"),
    [
        (1_796_000_000_125_000_999, 35_001, b"1796000000.125000", b"0.000035001"),
        (1_000_000_000, 0, b"1.000000", b"0.000000000"),
        (0, 2_500_000_000, b"0.000000", b"2.500000000"),
        (999, -5, b"0.000000", b"-0.000000005"),  # a clock stepped back: still a JSON number
    ],
)
async def test_times_are_written_as_fixed_point_seconds_from_integer_nanoseconds(
    gateway: RunningGateway, at_ns: int, latency_ns: int, ts: bytes, latency: bytes
) -> None:
    call = ToolCall("no_such_tool", {}, "c", "", "", "", "", b"{}", "")
    verdict = await gateway.validator.validate(call)
    line = LineBuilder(ValueHasher(KEY)).line(at_ns, call, verdict, gateway.modes.document, latency_ns, ValuePlan())
    assert line.startswith(b'{"ts":' + ts + b",")
    written = re.search(rb'"latency_seconds":([^,}]*)', line)
    assert written is not None and written.group(1) == latency
    assert orjson.loads(line)["latency_seconds"] == float(latency)
