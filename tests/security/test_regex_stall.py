"""Issue 17.2: one short value must not freeze the gateway. A schema pattern `^(a+)+$` passed policy check,
and a call with 28 `a`s and a `!` ran Python's backtracking `re` on the event loop: an unrelated call on
another tool waited 10 s, doubling with each added character. Every policy regex now runs in a linear-time
engine (schema pattern and patternProperties, in both checks, and CEL's matches()), and a pattern that engine
cannot run is a load error."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from argwatch.server.policy.loader import PolicyError, parse_policy
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on
from tests.service.helpers import gateway_stub, request

POLICY = """
tools:
  stall:
    mode: reject
    schema:
      type: object
      properties:
        word: {type: string, pattern: "^(a+)+$"}
        meta:
          type: object
          patternProperties: {"^(a+)+$": {type: string}}
          additionalProperties: false
    rules:
      - {name: no_runs, expr: "!has(args.note) || !args.note.matches('^(a+)+$')", argument: note, types: {note: string}}
  other:
    mode: reject
    schema: {type: object, properties: {n: {type: integer}}}
"""
EVIL = "a" * 10_000 + "!"


async def test_a_catastrophic_pattern_answers_within_the_deadline_and_stalls_no_other_call(tmp_path: Path) -> None:
    gateway = await gateway_on(tmp_path, POLICY)
    channel, stub = gateway_stub(gateway)
    try:
        started = time.monotonic()
        evil, meta, note, other = await asyncio.gather(
            stub.Validate(request("stall", {"word": EVIL}), timeout=2),
            stub.Validate(request("stall", {"meta": {EVIL: "x"}}), timeout=2),
            stub.Validate(request("stall", {"note": "a" * 10_000}), timeout=2),
            stub.Validate(request("other", {"n": 1}), timeout=2),
        )
        elapsed = time.monotonic() - started
        assert [p.code for p in evil.problems] == [pb.PROBLEM_CODE_OUT_OF_RANGE]
        assert [p.code for p in meta.problems] == [pb.PROBLEM_CODE_UNEXPECTED_ARGUMENT]
        assert [p.code for p in note.problems] == [pb.PROBLEM_CODE_RULE_FAILED]  # a run of a's: the rule refuses
        assert other.decision == pb.DECISION_ALLOW
        assert elapsed < 2.0  # the callers' deadline (each call above would have raised past it anyway)
    finally:
        await channel.close()
        await gateway.stop(0)


@pytest.mark.parametrize("pattern", ["(?=a)b", "(a)\\\\1"])
def test_a_pattern_the_linear_engine_cannot_run_is_a_load_error_naming_where(pattern: str) -> None:
    text = f'tools:\n  t:\n    schema: {{type: object, properties: {{code: {{type: string, pattern: "{pattern}"}}}}}}\n'
    with pytest.raises(PolicyError, match=r"tools\.t\.schema\.properties\.code\.pattern: .*no lookaround"):
        parse_policy(text.encode(), "/srv/policy.yaml")


def test_a_unicode_property_escape_is_one_the_engine_runs() -> None:
    text = 'tools:\n  t:\n    schema: {type: object, properties: {name: {type: string, pattern: "^\\\\p{Letter}+$"}}}\n'
    assert parse_policy(text.encode(), "/srv/policy.yaml").tools["t"].schema_validator is not None
