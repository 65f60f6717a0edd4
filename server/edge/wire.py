"""Translates between protobuf messages and the domain's frozen values; nothing else touches the wire types."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import orjson
from google.protobuf import timestamp_pb2

from argwatch.common.struct_values import struct_to_dict
from argwatch.server.edge._request import configure, read_call, read_validate
from argwatch.server.edge.request_limits import (
    FIELD_LIMITS,
    MAX_CALL_ID,
    MAX_CONVERSATION_ID,
    MAX_CUSTOMER_ID,
    MAX_MODEL,
    MAX_PROMPT_VERSION,
    MAX_TENANT,
    MAX_TOOL,
    first_too_long,
)
from argwatch.server.policy.model import Mode
from argwatch.server.repair.legal_values import LegalValues
from argwatch.server.repair.message import RepairAdvice
from argwatch.server.sets.snapshot import SetReading
from argwatch.server.verdict.decision import Decision, Verdict
from argwatch.server.verdict.findings import Problem, ProblemCode, Shape, SkippedCheck, SkipReason
from argwatch.server.verdict.repeats import OperationOutcome, OperationRecord, Retry
from argwatch.server.verdict.tool_call import ToolCall, decode_json_arguments
from argwatch.v1 import gateway_pb2 as pb

DECISIONS = {Decision.ALLOW: pb.DECISION_ALLOW, Decision.REJECT: pb.DECISION_REJECT}
MODES = {Mode.OBSERVE: pb.MODE_OBSERVE, Mode.REJECT: pb.MODE_REJECT}
MODES_FROM_WIRE = {wire: mode for mode, wire in MODES.items()}
# Every domain code has its wire twin of the same name.
PROBLEM_CODES: dict[ProblemCode, pb.ProblemCode] = {
    code: pb.ProblemCode.Value(f"PROBLEM_CODE_{code.name}")  # type: ignore[misc]
    for code in ProblemCode
}
OUTCOMES = {
    OperationOutcome.UNREPORTED: pb.OUTCOME_UNSPECIFIED,
    OperationOutcome.SUCCEEDED: pb.OUTCOME_SUCCEEDED,
    OperationOutcome.FAILED: pb.OUTCOME_FAILED,
    OperationOutcome.UNKNOWN: pb.OUTCOME_UNKNOWN,
}
OUTCOMES_FROM_WIRE = {wire: outcome for outcome, wire in OUTCOMES.items() if outcome is not OperationOutcome.UNREPORTED}
SHAPES = {
    Shape.NONE: pb.SHAPE_UNSPECIFIED,
    Shape.CASE: pb.SHAPE_CASE,
    Shape.SEPARATOR: pb.SHAPE_SEPARATOR,
    Shape.RETIRED: pb.SHAPE_RETIRED,
    Shape.INVENTED: pb.SHAPE_INVENTED,
    Shape.OTHER_SCOPE: pb.SHAPE_OTHER_SCOPE,
}


def new_call_id() -> str:
    return uuid.uuid4().hex


def call_from_request(request: pb.ValidateRequest) -> ToolCall:
    """The domain call for a request; undecodable arguments become `arguments=None` with a reason.
    TooLong for a caller string past its limit (request_limits.py).

    Each field is read once: a read from a upb message makes a new str (about 1,300 instructions a
    field), so the limits are checked on the values the call is built from, not read a second time."""
    session = request.session
    which = request.WhichOneof("arguments")
    arguments: Mapping[str, object] | None
    error, raw = "", b""
    if which == "arguments_json":
        raw = request.arguments_json
        arguments, error = decode_json_arguments(raw)
    elif which == "arguments_struct":
        arguments = struct_to_dict(request.arguments_struct)
    else:
        arguments = {}
    return _checked_call(
        request.tool,
        arguments,
        request.call_id,
        request.conversation_id,
        session.customer_id,
        session.tenant,
        error,
        raw,
        request.model,
        request.prompt_version,
    )


_parse = pb.ValidateRequest.FromString


# The order _request.c fills a ToolCall's fields in: a field added to ToolCall fails here, at import.
_CALL_FIELDS = (
    "tool",
    "arguments",
    "call_id",
    "conversation_id",
    "customer_id",
    "tenant",
    "arguments_error",
    "raw_arguments",
    "model",
    "prompt_version",
)
if ToolCall._fields != _CALL_FIELDS:
    raise ImportError(f"ToolCall's fields changed, and _request.c builds it by position: {ToolCall._fields}")
configure(
    ToolCall,
    orjson.loads,
    orjson.JSONDecodeError,
    FIELD_LIMITS,
)


def call_from_body(body: bytes) -> ToolCall:
    """The domain call for a ValidateRequest's bytes: DecodeError for bytes that are not one, TooLong for a
    caller string past its limit.

    A request in the plain form every client sends (JSON arguments, each field once) is read by _request.c
    in one call, about a fifth of parsing it and reading its fields from the message, and, when its strings
    are within their limits and its arguments a JSON object, made into the call there too. Any other is
    read the slower way below: its fields read in C but the call made here (a string past its limit, or
    arguments that are no JSON object), or parsed by protobuf, which stays the definition
    (tests/unit/test_request_reader.py compares them)."""
    call = read_call(body)
    if call is not None:
        return call
    fields = read_validate(body)
    if fields is None:
        return call_from_request(_parse(body))
    tool, raw, conversation_id, call_id, customer_id, tenant, model, prompt_version = fields
    arguments: Mapping[str, object] | None
    if raw is None:
        arguments, error, raw = {}, "", b""
    else:
        arguments, error = decode_json_arguments(raw)
    return _checked_call(
        tool, arguments, call_id, conversation_id, customer_id, tenant, error, raw, model, prompt_version
    )


def _checked_call(
    tool: str,
    arguments: Mapping[str, object] | None,
    call_id: str,
    conversation_id: str,
    customer_id: str,
    tenant: str,
    error: str,
    raw: bytes,
    model: str,
    prompt_version: str,
) -> ToolCall:
    """The call, once every caller string is within its limit (TooLong for the first that is not)."""
    if (
        len(tool) > MAX_TOOL
        or len(call_id) > MAX_CALL_ID
        or len(conversation_id) > MAX_CONVERSATION_ID
        or len(customer_id) > MAX_CUSTOMER_ID
        or len(tenant) > MAX_TENANT
        or len(model) > MAX_MODEL
        or len(prompt_version) > MAX_PROMPT_VERSION
    ):
        # Named only once one is past its limit: the tuple of names is no cost on a call within them.
        too_long = first_too_long(
            (
                ("tool", tool, MAX_TOOL),
                ("call_id", call_id, MAX_CALL_ID),
                ("conversation_id", conversation_id, MAX_CONVERSATION_ID),
                ("session.customer_id", customer_id, MAX_CUSTOMER_ID),
                ("session.tenant", tenant, MAX_TENANT),
                ("model", model, MAX_MODEL),
                ("prompt_version", prompt_version, MAX_PROMPT_VERSION),
            )
        )
        assert too_long is not None
        raise too_long
    # Positional: keyword arguments double a NamedTuple's construction cost.
    return ToolCall(
        tool,
        arguments,
        call_id or new_call_id(),
        conversation_id,
        customer_id,
        tenant,
        error,
        raw,
        model,
        prompt_version,
    )


def verdict_to_wire(verdict: Verdict) -> bytes:
    """The serialized response for `verdict`.

    A verdict with no problem and no skipped check (the common case) is a prototype's
    bytes, serialized once per (decision, mode, versions, ...), followed by the call id
    as field 1: protobuf parsers accept fields in any order, so this is the same message
    as building and serializing it, at well under half the cost and with no message object.
    """
    # Unpacked in one step rather than read field by field: a Verdict's fields, in order (a field added to
    # Verdict fails this line at once, in every test that answers a call).
    call_id, decision, mode, problems, skipped, readings, version, downgraded, give_up, attempt, sighting = verdict
    if problems or skipped or sighting is not None:
        return _built(verdict).SerializeToString()
    # Enum members by id: they are singletons, and an Enum's __hash__ is Python code. Readings are reused
    # until their set changes; the cache holds them, so their ids stay theirs.
    key = (id(decision), id(mode), version, downgraded, give_up, attempt, *map(id, readings))
    found = _prototypes.get(key)
    # Compared as tuples (identity first, in C): an id reused by a newer reading never matches an older one.
    if found is None or found[0] != readings:
        if len(_prototypes) > 1024:  # a new entry per set version, mode or policy: drop the old ones
            _prototypes.clear()
        found = _prototypes[key] = (readings, answer_prefix(verdict))
    encoded = call_id.encode()
    size = len(encoded)
    return b"".join((found[1], _HEADS[size] if size < 0x80 else _CALL_ID_TAG + _varint(size), encoded))


def answer_prefix(verdict: Verdict) -> bytes:
    """A verdict's response serialized without its call id: the answer is these bytes, then the call id as
    field 1 (a verdict with no problem, skipped check or sighting, as verdict_to_wire answers it)."""
    return _built(verdict._replace(call_id="")).SerializeToString()


_CALL_ID_TAG = bytes([1 << 3 | 2])  # field 1, length-delimited
# The call id's tag and length for every length that fits one byte (every id the SDKs make).
_HEADS = tuple(_CALL_ID_TAG + bytes((size,)) for size in range(0x80))


def _varint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _built(verdict: Verdict) -> pb.ValidateResponse:
    response = pb.ValidateResponse(
        call_id=verdict.call_id,
        decision=DECISIONS[verdict.decision],
        mode=MODES[verdict.mode],
        policy_version=verdict.policy_version,
        downgraded_by_staleness=verdict.downgraded_by_staleness,
        give_up=verdict.give_up,
        repair_attempt=verdict.repair_attempt,
    )
    if verdict.problems:
        response.problems.extend([problem_to_wire(p) for p in verdict.problems])
    if verdict.skipped:
        response.skipped.extend([_skipped(s) for s in verdict.skipped])
    for reading in verdict.readings_used:
        response.value_sets.append(version_of(reading))
    sighting = verdict.sighting
    if sighting is not None:
        response.idempotency_key = sighting.key
        response.repeat_check = pb.REPEAT_CHECK_SHARED if sighting.shared else pb.REPEAT_CHECK_LOCAL_ONLY
        if sighting.earlier is not None:
            response.repeat_of.CopyFrom(earlier_call(sighting.earlier, sighting.retry, sighting.status_tool))
    return response


def earlier_call(earlier: OperationRecord, retry: Retry, status_tool: str) -> pb.EarlierCall:
    return pb.EarlierCall(
        call_id=earlier.call_id,
        seen_at=timestamp(earlier.seen_at),
        outcome=OUTCOMES[earlier.outcome],
        calls=earlier.calls,
        retry_allowed=retry is not Retry.NO,
        status_tool=status_tool,
    )


_prototypes: dict[tuple[object, ...], tuple[tuple[SetReading, ...], bytes]] = {}


def problem_to_wire(problem: Problem) -> pb.Problem:
    return pb.Problem(
        code=PROBLEM_CODES[problem.code],
        argument=problem.argument,
        value_set=problem.value_set,
        shape=SHAPES[problem.shape],
        message=problem.message,
        value=problem.value,
        suggestion=problem.suggestion,
        in_set_normalised=problem.in_set_normalised,
        expected=problem.expected,
    )


def advice_to_response(advice: RepairAdvice) -> pb.RepairResponse:
    return pb.RepairResponse(
        call_id=advice.call_id,
        message=advice.message,
        problems=[problem_to_wire(p) for p in advice.problems],
        legal_values=[_legal(v) for v in advice.legal_values],
        attempt=advice.attempt,
        give_up=advice.give_up,
        executed=False,
    )


def timestamp(epoch_seconds: float) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(epoch_seconds * 1e9))
    return stamp


_SKIP_REASONS = {
    SkipReason.UNAVAILABLE: pb.SKIP_REASON_SOURCE_UNAVAILABLE,
    SkipReason.ELEMENTS_LIMIT: pb.SKIP_REASON_ELEMENTS_LIMIT,
}


def _skipped(skipped: SkippedCheck) -> pb.SkippedCheck:
    return pb.SkippedCheck(
        argument=skipped.argument,
        value_set=skipped.value_set,
        reason=_SKIP_REASONS[skipped.reason],
    )


# Keyed by plain values, never by the reading: a key holding a snapshot would keep
# old copies of (perhaps million-member) sets alive.
_versions: dict[tuple[str, int, float, bool], pb.ValueSetVersion] = {}


def version_of(reading: SetReading) -> pb.ValueSetVersion:
    """The reading's version message, built once per confirmation (a Timestamp is dear to build)."""
    snapshot = reading.snapshot
    key = (snapshot.name, snapshot.version, reading.confirmed_at, reading.stale)
    message = _versions.get(key)
    if message is None:
        if len(_versions) > 1024:  # one entry per confirmation of each set: drop the old ones
            _versions.clear()
        message = _versions[key] = pb.ValueSetVersion(
            name=snapshot.name,
            version=snapshot.version,
            confirmed_at=timestamp(reading.confirmed_at),
            stale=reading.stale,
        )
    return message


def _legal(legal: LegalValues) -> pb.LegalValues:
    return pb.LegalValues(
        argument=legal.argument,
        value_set=legal.value_set,
        values=legal.values,
        total=legal.total,
        complete=legal.complete,
    )
