"""The flip dialog's preview against a real gateway: the server's PreviewChange lines as they are, for the
target chosen (the tool, one check, a source), and why there are none when the gateway cannot answer."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence

import pytest
from textual.widgets import Select, Static

from argwatch.tui.admin_client import AdminClient, Connection
from argwatch.tui.app import ArgwatchApp
from argwatch.tui.mode_dialog import ModeDialog
from argwatch.tui.preview_panel import LOADING, PreviewPanel
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import GatewayFactory
from tests.service import test_records_rules as records
from tests.service.helpers import admin_status, gateway_stub, request
from tests.tui.pilot_helpers import pick, until

records_start = records.start  # a real RecordSource, up or down, and a gateway on it

SIZE = (120, 40)
FIRST = "change: refund_order arg:reason_code: "
MIX = ["DAMAGED_ITEM"] * 4 + ["GOODWILL", "BECAUSE", "OTHER"]  # 3 invented reason codes among 7 calls


@pytest.fixture
async def client() -> AsyncIterator[list[AdminClient]]:
    made: list[AdminClient] = []
    yield made
    for each in made:
        await each.close()


def preview_of(app: ArgwatchApp) -> PreviewPanel:
    return app.screen.query_one("#preview", PreviewPanel)


def steady(lines: Sequence[str]) -> list[str]:
    """The lines without how much of a window is counted so far: it grows between two asks just after a start."""
    return [re.sub(r" \(only [^)]* counted so far\)", "", line) for line in lines]


async def test_the_dialog_shows_the_gateway_s_lines_for_the_check_picked_and_applies_that_check(
    gateway_factory: GatewayFactory, client: list[AdminClient]
) -> None:
    """Picking one check of the tool previews that check's change, in the gateway's own words, and Apply sends
    that change: the check's override, not the tool's."""
    gateway = await gateway_factory(refund_mode="reject")
    channel, stub = gateway_stub(gateway)
    async with channel:
        for index, code in enumerate(MIX):
            await stub.Validate(request("refund_order", {"reason_code": code}, conversation=f"c{index}"), timeout=5)
    client.append(AdminClient(Connection(gateway.admin_target, actor="pilot@oncall")))
    app = ArgwatchApp(client[0], interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status is not None)
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, ModeDialog) and bool(preview_of(app).lines))
        whole = admin_pb2.SetModeRequest(tool="refund_order", mode=pb.MODE_OBSERVE)
        assert steady(preview_of(app).lines) == steady((await client[0].preview(whole)).lines)
        assert "3 invented values" in "\n".join(preview_of(app).lines)

        await pick(pilot, "#target", 1)  # the first check: arg:reason_code
        await until(pilot, lambda: app.screen.query_one("#target", Select).value == "arg:reason_code")
        await until(pilot, lambda: any(line.startswith(FIRST) for line in preview_of(app).lines[:1]))
        one_check = admin_pb2.SetModeRequest(tool="refund_order", check="arg:reason_code", mode=pb.MODE_OBSERVE)
        assert steady(preview_of(app).lines) == steady((await client[0].preview(one_check)).lines)
        assert "now: arg:reason_code: follows the tool's mode" in str(app.screen.query_one("#now", Static).render())

        await pilot.click("#reason")
        await pilot.press(*"INC-9 codes drifted")
        await pilot.click("#apply")
        await until(pilot, lambda: not isinstance(app.screen, ModeDialog))

    status = await admin_status(gateway)
    (tool,) = [t for t in status.tools if t.tool == "refund_order"]
    (check,) = [c for c in tool.checks if c.name == "arg:reason_code"]
    assert (check.override_mode, check.override_actor, tool.mode_source) == ("observe", "pilot@oncall", "policy")


async def test_a_source_s_failure_is_offered_with_open_closed_and_clear(
    gateway_factory: GatewayFactory, client: list[AdminClient]
) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    client.append(AdminClient(Connection(gateway.admin_target, actor="pilot@oncall")))
    app = ArgwatchApp(client[0], interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status is not None)
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, ModeDialog) and bool(preview_of(app).lines))
        await pick(pilot, "#target", 3)  # the check, its set, then its source: owners
        await until(pilot, lambda: app.screen.query_one("#target", Select).value == "source:owners")
        assert app.screen.query_one("#mode", Select).value == "open"
        opening = "change: source:owners failure override: no override -> fails open while it cannot be read"
        await until(pilot, lambda: preview_of(app).lines[:1] == (opening,))


async def test_when_the_gateway_cannot_answer_the_dialog_says_why_and_shows_no_figure(
    gateway_factory: GatewayFactory, client: list[AdminClient]
) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    client.append(AdminClient(Connection(gateway.admin_target, actor="pilot@oncall")))
    app = ArgwatchApp(client[0], interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status is not None)
        await gateway.stop(0)
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, ModeDialog))
        shown = preview_of(app)
        await until(pilot, lambda: "no preview: UNAVAILABLE" in str(shown.render()))
        assert shown.lines == () and LOADING not in str(shown.render())


async def test_a_record_kind_s_failure_is_offered_for_a_record_check(
    records_start: records.Start, client: list[AdminClient]
) -> None:
    """The issue's lever from the dialog: fail open on the order look-up (record_kind:order) while its owner is
    down, previewed before it is applied."""
    gateway = await records_start(failure="closed", source_up=False)
    client.append(AdminClient(Connection(gateway.admin_target, actor="pilot@oncall")))
    app = ArgwatchApp(client[0], interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status is not None)
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, ModeDialog) and bool(preview_of(app).lines))
        # The whole tool, its checks (arg:reason_code, record:order, rule:not_above_paid), then what they read:
        # set:refunds.reason_codes, source:local, record_kind:order, source:orders_db.
        await pick(pilot, "#target", 6)
        await until(pilot, lambda: app.screen.query_one("#target", Select).value == "record_kind:order")
        opening = "change: record_kind:order failure override: no override -> fails open while it cannot be read"
        await until(pilot, lambda: preview_of(app).lines[:1] == (opening,))
