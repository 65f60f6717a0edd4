"""What every framework gate's test checks at the gateway: the refusal was recorded for the right
conversation and model, and the repair it started ended in a passing call."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import orjson
import pytest

from argwatch.server.process.app import RunningGateway
from argwatch.server.telemetry.samples import SAMPLES_LOGGER
from tests.service.helpers import value

INVENTED = "ITEM_DEFECTIVE"  # not a refund reason code: the scripted model invents it first
CORRECTED = "DAMAGED_ITEM"  # in the set: what the model sends after reading the repair message
ORDER = "ord_0012345678"
CUSTOMER = "cus_7"  # who owns ORDER in the frameworks' RecordSource (conftest.py)


def sampled(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    """The gateway's sampled offending values (the test policy samples every one)."""
    return [orjson.loads(record.getMessage()) for record in caplog.records if record.name == SAMPLES_LOGGER]


def capture_samples(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=SAMPLES_LOGGER)


def assert_refused_then_repaired(
    gateway: RunningGateway,
    caplog: pytest.LogCaptureFixture,
    *,
    conversation_id: str,
    model: str,
    runs: Iterable[dict[str, object]],
    reported: str | None = "succeeded",
) -> None:
    """The tool ran once, with the corrected code; the gateway saw the invented one from this
    conversation and model, and counts one repair started and one succeeded."""
    assert list(runs) == [{"order_id": ORDER, "reason_code": CORRECTED}]
    (offence,) = sampled(caplog)
    assert (offence["tool"], offence["argument"], offence["value"]) == ("refund_order", "reason_code", f'"{INVENTED}"')
    assert (offence["conversation_id"], offence["model"]) == (conversation_id, model)
    registry = gateway.registry
    assert value(registry, "tool_argument_repair_started_total", tool="refund_order") == 1
    assert value(registry, "tool_argument_repair_succeeded_total", tool="refund_order") == 1
    outcomes = {
        outcome: value(registry, "argwatch_outcome_reports_total", tool="refund_order", outcome=outcome)
        for outcome in ("succeeded", "failed", "unknown")
    }
    # The outcome of the call that ran (None: a gate that cannot see it, the Agents SDK's guardrail).
    assert outcomes == {o: float(o == reported) for o in outcomes}, outcomes


def assert_repair_message(text: str) -> None:
    """What the model was handed instead of the tool's result: the gateway's repair message."""
    assert INVENTED in text and "Nothing was executed" in text and CORRECTED in text
