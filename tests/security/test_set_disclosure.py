"""A value set marked `disclose: none` cannot be enumerated through wrong guesses; `nearest` is never listed whole.

The attack: through Repair's nearest-5 suggestions, 400 guesses in 2 s
revealed 291 of 2,000 handles, and GetToolDefinitions listed any set of up to
`repair.list_limit` members in full, to any caller. Some sets are not for the
model's eyes: internal handles, other customers' ids.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import grpc
import orjson
from google.protobuf import json_format

from argwatch.server.policy.loader import parse_policy
from argwatch.server.repair.tool_export import export_tools
from argwatch.server.sets.snapshot import SetReading
from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc
from tests.conftest import gateway_on
from tests.snapshots import make_snapshot

HANDLES = sorted({"".join(random.Random(seed).choices(string.ascii_lowercase, k=8)) for seed in range(2000)})
DESKS = [f"DESK-{n}" for n in range(10)]
POLICY = """
    sources:
      local: {file: sets.yaml}
    value_sets:
      identity.handles: {source: local, disclose: none}
      support.desks: {source: local, disclose: nearest}
    tools:
      assign:
        mode: reject
        arguments:
          handle: {value_set: identity.handles}
      route:
        mode: reject
        arguments:
          desk: {value_set: support.desks}
    repair: {list_limit: 5000, nearest: 5}
"""


def _guesses(count: int) -> list[str]:
    """What an attacker sends: near misses of real handles (one letter changed, case, a separator) and noise."""
    rng = random.Random(7)
    found: list[str] = []
    while len(found) < count:
        handle = rng.choice(HANDLES)
        kind = len(found) % 4
        if kind == 0:
            spot = rng.randrange(len(handle))
            guess = handle[:spot] + rng.choice("0123456789") + handle[spot + 1 :]
        elif kind == 1:
            guess = handle.upper()
        elif kind == 2:
            guess = handle[:4] + "-" + handle[4:]
        else:
            guess = "".join(rng.choices(string.ascii_lowercase, k=8))
        if guess not in HANDLES:
            found.append(guess)
    return found


async def test_four_hundred_guesses_reveal_no_member_of_an_undisclosed_set(tmp_path: Path) -> None:
    """Every Validate and Repair answer to 400 wrong guesses, and the tool definitions, hold no member."""
    (tmp_path / "sets.yaml").write_text(
        json.dumps(
            {
                "identity.handles": {"version": 1, "members": HANDLES},
                "support.desks": {"version": 1, "members": DESKS},
            }
        )
    )
    gateway = await gateway_on(tmp_path, POLICY)
    try:
        async with grpc.aio.insecure_channel(gateway.target) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            seen: list[str] = []
            for index, guess in enumerate(_guesses(400)):
                call = pb.ValidateRequest(
                    tool="assign", arguments_json=orjson.dumps({"handle": guess}), call_id=f"g{index}"
                )
                verdict = await stub.Validate(call, timeout=5)
                assert verdict.decision == pb.DECISION_REJECT
                repair = await stub.Repair(pb.RepairRequest(call_id=verdict.call_id), timeout=5)
                assert not repair.legal_values and "are not shown" in repair.message
                seen += [json_format.MessageToJson(verdict), json_format.MessageToJson(repair)]
            definitions = await stub.GetToolDefinitions(pb.GetToolDefinitionsRequest(), timeout=5)
            seen.append(json_format.MessageToJson(definitions))
        text = "\n".join(seen)  # as sent: an upper-case guess is the attacker's own text, not a member
        revealed = [handle for handle in HANDLES if handle in text]
        assert revealed == []
        (assign,) = [tool for tool in definitions.tools if tool.name == "assign"]
        assert "enum" not in assign.definition_json
    finally:
        await gateway.stop(0)


async def test_a_nearest_set_offers_only_the_nearest_few_even_when_small(tmp_path: Path) -> None:
    """`disclose: nearest`: Repair offers `repair.nearest` values, never all ten; the definition has no enum."""
    (tmp_path / "sets.yaml").write_text(
        json.dumps(
            {
                "identity.handles": {"version": 1, "members": HANDLES[:10]},
                "support.desks": {"version": 1, "members": DESKS},
            }
        )
    )
    gateway = await gateway_on(tmp_path, POLICY)
    try:
        async with grpc.aio.insecure_channel(gateway.target) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            call = pb.ValidateRequest(tool="route", arguments_json=b'{"desk": "DESK-77"}', call_id="r1")
            verdict = await stub.Validate(call, timeout=5)
            repair = await stub.Repair(pb.RepairRequest(call_id=verdict.call_id), timeout=5)
            (legal,) = repair.legal_values
            assert len(legal.values) == 5 and legal.total == 10 and not legal.complete
            definitions = await stub.GetToolDefinitions(pb.GetToolDefinitionsRequest(tools=["route"]), timeout=5)
            assert "enum" not in definitions.tools[0].definition_json
    finally:
        await gateway.stop(0)


def test_tools_export_lists_only_sets_that_may_be_listed(tmp_path: Path) -> None:
    """What `argwatch tools export` prints goes through the same rule: no enum for `none` or `nearest` sets."""
    policy = parse_policy(POLICY.encode(), str(tmp_path / "policy.yaml"))
    readings = {
        name: SetReading(make_snapshot(name, 1, members, received_at=0.0), 0.0, False)
        for name, members in (("identity.handles", HANDLES[:10]), ("support.desks", DESKS))
    }
    exported, _ = export_tools(policy, [], readings.get, "openai")
    text = json.dumps([tool.definition for tool in exported])
    assert "enum" not in text and not any(member in text for member in HANDLES[:10] + DESKS)


async def test_an_undisclosed_set_tells_nothing_of_a_near_member_and_a_reload_to_none_hides_what_was_kept(
    tmp_path: Path,
) -> None:
    """With `none`, a case slip, a separator slip and a retired value read as a plain miss (their shapes are
    still counted); a call rejected while the set could be listed, asked about after a reload made it `none`,
    shows no member either; and `nearest` never offers every member of a set no larger than `repair.nearest`."""
    sets = {
        "identity.handles": {"version": 1, "members": ["alice_smith", "bob_jones"], "retired": ["dave"]},
        "support.desks": {"version": 1, "members": DESKS[:3]},
    }
    (tmp_path / "sets.yaml").write_text(json.dumps(sets))
    listed = POLICY.replace("identity.handles: {source: local, disclose: none}", "identity.handles: {source: local}")
    gateway = await gateway_on(tmp_path, listed)
    try:
        async with grpc.aio.insecure_channel(gateway.target) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)

            async def assign(handle: str, call_id: str) -> pb.ValidateResponse:
                call = pb.ValidateRequest(
                    tool="assign", arguments_json=orjson.dumps({"handle": handle}), call_id=call_id
                )
                verdict: pb.ValidateResponse = await stub.Validate(call, timeout=5)
                return verdict

            kept = await assign("ALICE_SMITH", "before")
            assert kept.problems[0].suggestion == "alice_smith"  # listed: the slip's member is named
            (tmp_path / "policy.yaml").write_text(POLICY)
            assert (await gateway.reload()).outcome == "reloaded"
            repair = await stub.Repair(pb.RepairRequest(call_id="before"), timeout=5)
            assert "alice_smith" not in json_format.MessageToJson(repair)

            for guess, shape in (("ALICE_SMITH", "case"), ("alice-smith", "separator"), ("dave", "retired")):
                verdict = await assign(guess, f"g-{shape}")
                (problem,) = verdict.problems
                assert (problem.shape, problem.in_set_normalised, problem.suggestion) == (
                    pb.SHAPE_UNSPECIFIED,
                    False,
                    "",
                )
                assert problem.message == f'handle: "{guess}" is not in identity.handles', problem.message
                counted = gateway.registry.get_sample_value(
                    "tool_argument_mismatch_shape_total", {"tool": "assign", "argument": "handle", "shape": shape}
                )
                assert counted == (2 if shape == "case" else 1), shape  # the case slip before the reload too

            call = pb.ValidateRequest(tool="route", arguments_json=b'{"desk": "DESK-77"}', call_id="r1")
            await stub.Validate(call, timeout=5)
            (legal,) = (await stub.Repair(pb.RepairRequest(call_id="r1"), timeout=5)).legal_values
            assert len(legal.values) == 2 and legal.total == 3  # repair.nearest is 5: never all three
    finally:
        await gateway.stop(0)
