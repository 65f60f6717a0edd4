"""Issue 17.8: a repair message names what the argument takes: the JSON type, the allowed values, the bound,
the length, the pattern, the format. Before, every schema type error said "expected a string": {"n": 1.5}
for an integer got "n: expected a string, got 1.5", which sends the model the wrong way."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from argwatch.server.process.app import RunningGateway
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import gateway_on
from tests.service.helpers import gateway_stub, request

POLICY = """
tools:
  book:
    mode: reject
    schema:
      type: object
      properties:
        n: {type: integer}
        price: {type: number, maximum: 5000}
        urgent: {type: boolean}
        tags: {type: array, maxItems: 2}
        address: {type: object}
        note: {type: [string, "null"], maxLength: 5}
        size: {enum: [S, M, L]}
        day: {type: string, format: date}
        code: {type: string, pattern: "^[A-Z]{3}$"}
"""


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    running = await gateway_on(tmp_path, POLICY)
    yield running
    await running.stop(0)


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"n": 1.5}, "n: expected an integer, got 1.5."),
        ({"price": "12"}, 'price: expected a number, got "12".'),
        ({"urgent": "yes"}, 'urgent: expected a boolean (true or false), got "yes".'),
        ({"tags": "a,b"}, 'tags: expected an array, got "a,b".'),
        ({"address": "Main St 1"}, 'address: expected an object, got "Main St 1".'),
        ({"note": 7}, "note: expected a string or null, got 7."),
        ({"size": "XL"}, 'size: "XL" is not a valid value.\n  Valid values (3): "S", "M", "L".'),  # listed as a set
        ({"price": 9000}, "price: 9000 is not accepted; expected a number of at most 5000."),
        ({"note": "far too long"}, 'note: "far too long" is not accepted; expected a string of at most 5 characters.'),
        ({"tags": [1, 2, 3]}, "tags: [1,2,3] is not accepted; expected an array of at most 2 items."),
        ({"day": "tomorrow"}, 'day: "tomorrow" is not accepted; expected a string in the format date.'),
        ({"code": "ab"}, 'code: "ab" is not accepted; expected a string matching the pattern "^[A-Z]{3}$".'),
    ],
)
async def test_the_repair_message_names_what_the_argument_takes(
    gateway: RunningGateway, arguments: dict[str, Any], said: str
) -> None:
    channel, stub = gateway_stub(gateway)
    async with channel:
        verdict = await stub.Validate(request("book", arguments), timeout=5)
        assert verdict.decision == pb.DECISION_REJECT
        assert verdict.problems[0].expected  # on the wire too, for clients in any language
        repair = await stub.Repair(pb.RepairRequest(call_id=verdict.call_id), timeout=5)
    assert f"- {said}\n" in repair.message, repair.message
    assert "expected a string, got" not in repair.message
