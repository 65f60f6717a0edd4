"""The TUI against a real gateway on loopback, driven with Pilot: mode flips, filter, detail, reconnection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry
from textual.widgets import Input, Static

from argwatch.server.policy.loader import load_policy
from argwatch.server.policy.model import Mode
from argwatch.server.process.app import RunningGateway, build_gateway
from argwatch.tui.admin_client import AdminClient, Connection
from argwatch.tui.app import ArgwatchApp
from argwatch.tui.detail_screen import DetailScreen
from argwatch.tui.mode_dialog import ModeDialog
from argwatch.tui.preview_panel import PreviewPanel
from argwatch.tui.status_view import COLUMNS
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import GatewayFactory, SourceServer, loopback_settings, make_policy
from tests.service.helpers import gateway_stub, request
from tests.tui.pilot_helpers import banner, table_rows, until

SIZE = (200, 40)


@pytest.fixture
async def client_for() -> AsyncIterator[object]:
    clients: list[AdminClient] = []

    def make(target: str) -> AdminClient:
        client = AdminClient(Connection(target, actor="pilot@oncall"))
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def test_a_mode_flip_through_the_dialog_reaches_the_gateway_and_its_audit(
    gateway_factory: GatewayFactory, client_for
) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    app = ArgwatchApp(client_for(gateway.admin_target), interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status is not None)
        assert app.selected_row() is not None and app.selected_row().tool == "refund_order"  # type: ignore[union-attr]
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, ModeDialog))
        # Focus starts on Cancel: a stray Enter changes nothing.
        await until(pilot, lambda: app.focused is not None and app.focused.id == "cancel")
        await pilot.click("#reason")
        await pilot.press(*"INC-9 false rejects")
        await pilot.press("tab")  # to the expiry field
        await pilot.press(*"15m")
        assert app.screen.query_one("#expiry", Input).value == "15m"
        await pilot.click("#apply")
        await until(pilot, lambda: gateway.modes.mode_for("refund_order") is Mode.OBSERVE)
        await until(
            pilot,
            lambda: (
                ("refund_order", "reason_code") in table_rows(app)
                and "observe (override)"
                in str(
                    app.query_one("#table").get_row_at(0)[3]  # type: ignore[attr-defined]
                )
            ),
        )
    (change, *_) = gateway.modes.changes()
    assert (change.actor, change.old, change.new, change.reason, change.outcome) == (
        "pilot@oncall",
        "reject",
        "observe",
        "INC-9 false rejects",
        "applied",
    )
    assert change.expires_at is not None and 890 <= change.expires_at - change.at <= 900
    channel, stub = gateway_stub(gateway)
    async with channel:
        after = await stub.Validate(request("refund_order", {"reason_code": "MADE_UP"}), timeout=5)
    assert after.decision == pb.DECISION_ALLOW


async def test_cancelling_the_dialog_changes_nothing(gateway_factory: GatewayFactory, client_for) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    app = ArgwatchApp(client_for(gateway.admin_target), interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status is not None)
        await pilot.press("m")
        await until(pilot, lambda: app.focused is not None and app.focused.id == "cancel")
        await pilot.press("enter")  # on Cancel
        await until(pilot, lambda: not isinstance(app.screen, ModeDialog))
        await pilot.press("g")  # the global dialog, dismissed with Esc
        await until(pilot, lambda: app.focused is not None and app.focused.id == "cancel")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ModeDialog))
    assert gateway.modes.changes() == []
    assert gateway.modes.mode_for("refund_order") is Mode.REJECT


async def test_applying_without_a_reason_is_refused_in_the_dialog(gateway_factory: GatewayFactory, client_for) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    app = ArgwatchApp(client_for(gateway.admin_target), interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status is not None)
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, ModeDialog))
        dialog = app.screen
        await until(pilot, lambda: app.focused is not None and app.focused.id == "cancel")  # mounted
        await pilot.click("#apply")
        await until(pilot, lambda: app.focused is not None and app.focused.id == "reason")  # sent back to it
        assert app.screen is dialog
        assert "a reason is required" in str(dialog.query_one("#problem", Static).render())
    assert gateway.modes.changes() == []


async def test_the_filter_keeps_matching_rows_and_escape_clears_it(gateway_factory: GatewayFactory, client_for) -> None:
    gateway = await gateway_factory()
    app = ArgwatchApp(client_for(gateway.admin_target), interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(table_rows(app)) >= 3)
        everything = table_rows(app)
        await pilot.press("slash", *"stock")
        # The filter applies once typing pauses; wait for the whole word.
        await until(
            pilot,
            lambda: "filter 'stock'" in banner(app) and table_rows(app) == [("transfer_stock", "warehouse_code")],
        )
        await pilot.press("enter")  # keeps the filter, back to the table
        for _ in range(2):  # new snapshots keep coming; the filter holds through them
            seen = app.status
            await until(pilot, lambda: app.status is not seen)  # noqa: B023 (checked before the next loop)
            await pilot.pause()
            assert table_rows(app) == [("transfer_stock", "warehouse_code")]
        await pilot.press("escape")
        await until(pilot, lambda: table_rows(app) == everything)


async def test_the_detail_view_shows_the_offending_values_and_the_sets_state(
    gateway_factory: GatewayFactory, client_for
) -> None:
    gateway = await gateway_factory(refund_mode="observe")
    channel, stub = gateway_stub(gateway)
    async with channel:
        for code in ["GOODWILL"] * 8 + ["BROKEN"] * 3 + ["DAMAGED_ITEM"] * 5:
            await stub.Validate(request("refund_order", {"reason_code": code}), timeout=5)
    app = ArgwatchApp(client_for(gateway.admin_target), interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status is not None)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        screen = app.screen

        def text(selector: str) -> str:
            return str(screen.query_one(selector, Static).render())

        await until(pilot, lambda: "GOODWILL" in text("#offenders"))
        assert "CLUSTERED" in text("#offenders")  # two values hold all 11 misses
        assert '8  "GOODWILL"  invented' in text("#offenders")
        assert "retired" in text("#shapes") and "invented" in text("#shapes")
        assert "refunds.reason_codes from owners: version 1, 4 members" in text("#value-set")
        assert "fails open" in text("#value-set")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, DetailScreen))


async def test_it_says_when_the_gateway_is_lost_and_reconnects_by_itself(
    gateway_factory: GatewayFactory, source: SourceServer, tmp_path, client_for
) -> None:
    first = await gateway_factory()
    admin_port = first.admin_port
    app = ArgwatchApp(client_for(first.admin_target), interval=0.2)
    second: RunningGateway | None = None
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: banner(app).startswith("LIVE"))
            await first.stop(0)
            await until(pilot, lambda: banner(app).startswith("NOT LIVE"))
            assert "unreachable" in banner(app) and "figures below are" in banner(app)
            assert app.query_one("#table").has_class("stale")
            policy = make_policy(str(tmp_path), source.target)
            settings = replace(loopback_settings(policy.path), admin_listen=f"127.0.0.1:{admin_port}")
            second = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
            await until(pilot, lambda: banner(app).startswith("LIVE"), seconds=15)
            assert not app.query_one("#table").has_class("stale")
    finally:
        if second is not None:
            await second.stop(0)


async def test_readonly_hides_every_action_that_changes_something(gateway_factory: GatewayFactory, client_for) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    app = ArgwatchApp(client_for(gateway.admin_target), interval=0.2, readonly=True)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status is not None)
        await pilot.press("m", "g", "r")
        await pilot.pause()  # every key handled (no wait on a clock: the message queue drains)
        assert not isinstance(app.screen, ModeDialog)
        assert [app.check_action(action, ()) for action in ("mode", "global_mode", "refresh_set")] == [False] * 3
        assert app.check_action("audit", ()) is True  # looking stays allowed
    assert gateway.modes.changes() == []


async def test_many_rows_scroll_and_filter_from_the_bottom(tmp_path, client_for) -> None:
    """More rows than fit: rows are drawn as they scroll into view, and filtering from the bottom works."""
    (tmp_path / "sets.yaml").write_text("codes:\n  version: 1\n  members: [A, B, C]\n")
    tools = "".join(
        f"  tool{t:02d}:\n    arguments:\n" + "".join(f"      arg{a}: {{value_set: codes}}\n" for a in range(3))
        for t in range(40)
    )
    (tmp_path / "policy.yaml").write_text(
        "sources: {local: {file: sets.yaml}}\nvalue_sets: {codes: {source: local}}\ntools:\n" + tools
    )
    policy = load_policy(str(tmp_path / "policy.yaml"))
    gateway = await build_gateway(loopback_settings(policy.path), policy=policy, registry=CollectorRegistry())
    try:
        app = ArgwatchApp(client_for(gateway.admin_target), interval=0.2)
        async with app.run_test(size=(200, 30)) as pilot:
            await until(pilot, lambda: len(app._keys) == 120)
            await pilot.press("ctrl+end")
            await until(pilot, lambda: table_rows(app)[-1] == ("tool39", "arg2"))  # drawn once in view
            await pilot.press("slash", *"tool03")
            await until(pilot, lambda: [tool for tool, _ in table_rows(app)] == ["tool03"] * 3)
    finally:
        await gateway.stop(0)


async def test_repeats_of_a_side_effect_show_per_tool(tmp_path, client_for) -> None:
    from tests.conftest import gateway_on
    from tests.service.test_side_effects import POLICY, REFUND

    gateway = await gateway_on(tmp_path, POLICY)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for _ in range(3):  # the first, then two repeats (refused: reject mode)
                await stub.Validate(request("refund_order", REFUND, conversation="c"), timeout=5)
        app = ArgwatchApp(client_for(gateway.admin_target), interval=0.2)
        column = [key for _label, key, _width in COLUMNS].index("repeats")

        def repeats_of(tool: str) -> str:
            table = app.query_one("#table")
            for index in range(table.row_count):  # type: ignore[attr-defined]
                row = table.get_row_at(index)  # type: ignore[attr-defined]
                if str(row[1]) == tool:
                    return str(row[column])
            return ""

        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: repeats_of("refund_order") == "2")
            assert repeats_of("get_refund_status") == "-"  # no side effects: nothing to repeat
    finally:
        await gateway.stop(0)


class _ToastRecorder(ArgwatchApp):
    """The real app, keeping every toast it shows so a test can read what `r` said."""

    toasts: list[tuple[str, str, str]]

    def notify(self, message: str, *, title: str = "", severity="information", timeout=None, markup=True) -> None:
        self.toasts = [*getattr(self, "toasts", []), (title, message, severity)]
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)


async def test_r_says_what_the_refresh_did_and_the_detail_says_why_a_set_is_stale(tmp_path, client_for) -> None:
    from argwatch.v1 import sources_pb2
    from tests.conftest import gateway_on
    from tests.service.scripted_source import ScriptedSource, serve

    owner = ScriptedSource({"s.codes": sources_pb2.ValueSet(name="s.codes", version=5, members=["A", "B"])})
    server, target = await serve(owner)
    policy = f"""
sources:
  owner: {{grpc: {{target: "{target}", timeout: 1s}}}}
value_sets:
  s.codes: {{source: owner, max_members: 3}}
tools:
  pick:
    mode: reject
    arguments:
      code: {{value_set: s.codes}}
"""
    gateway = await gateway_on(tmp_path, policy)
    try:
        # The owner publishes a set over max_members: the gateway refuses it and keeps version 5.
        owner.sets["s.codes"] = sources_pb2.ValueSet(name="s.codes", version=6, members=["A", "B", "C", "D"])
        app = _ToastRecorder(client_for(gateway.admin_target), interval=0.2)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.status is not None)
            await pilot.press("r")
            await until(pilot, lambda: bool(getattr(app, "toasts", [])))
            title, message, severity = app.toasts[-1]
            # Before: "version 5, 2 members; the source did not answer: ..." for a source that answered.
            assert title == "refused: the last good copy stays" and severity == "warning"
            assert message == "s.codes: oversized: 4 members, over max_members 3"
            await until(pilot, lambda: "TOO-LARGE" in str(app.query_one("#table").get_row_at(0)[-1]))  # type: ignore[attr-defined]
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailScreen))
            shown = str(app.screen.query_one("#value-set", Static).render())
            assert "why not fresh (too large): the owner's version 6 is too large" in shown
            assert "last refused update: oversized at " in shown
    finally:
        await gateway.stop(0)
        await server.stop(0)


async def test_the_dialog_names_what_a_clear_goes_back_to_and_the_global_one_preselects_nothing(
    gateway_factory: GatewayFactory, client_for
) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    await gateway.control.set_mode("refund_order", Mode.OBSERVE, actor="ana@oncall", reason="INC-3")
    app = ArgwatchApp(client_for(gateway.admin_target), interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status is not None)
        while (row := app.selected_row()) is None or row.tool != "refund_order":
            await pilot.press("down")
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, ModeDialog))
        dialog = app.screen
        await until(pilot, lambda: app.focused is not None and app.focused.id == "cancel")
        preview = dialog.query_one("#preview", PreviewPanel)
        await until(pilot, lambda: bool(preview.lines))
        # Under an override, a clear is preselected: the gateway's preview names the mode it goes back to, and
        # the dialog asks no expiry.
        assert preview.lines[0] == (
            "change: refund_order, the whole tool: observe -> reject (override cleared: the policy's mode)"
        )
        assert not dialog.query_one("#expiry", Input).display
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ModeDialog))
        await pilot.press("g")  # the global override: reject is the riskier direction, so nothing is chosen
        await until(pilot, lambda: isinstance(app.screen, ModeDialog))
        dialog = app.screen
        await until(pilot, lambda: app.focused is not None and app.focused.id == "cancel")
        await pilot.click("#reason")
        await pilot.press(*"INC-4")
        await pilot.click("#apply")
        await until(pilot, lambda: app.focused is not None and app.focused.id == "mode")  # sent to what is missing
        assert "choose a mode" in str(dialog.query_one("#problem", Static).render())
    assert [c.target for c in gateway.modes.changes()] == ["refund_order"]  # only the set-up change


async def test_the_unknown_rows_detail_names_the_invented_tools(gateway_factory: GatewayFactory, client_for) -> None:
    gateway = await gateway_factory(refund_mode="reject")
    channel, stub = gateway_stub(gateway)
    async with channel:
        for name in ["refund_everything"] * 3 + ["cancel_order"]:
            await stub.Validate(request(name, {}), timeout=5)
    app = ArgwatchApp(client_for(gateway.admin_target), interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status is not None)
        while (row := app.selected_row()) is None or row.tool != "_unknown":
            await pilot.press("down")
        await pilot.press("m")  # no mode of its own: said so, not "select a tool's row first"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        offenders = app.screen.query_one("#offenders", Static)
        await until(pilot, lambda: "refund_everything" in str(offenders.render()))
        assert "cancel_order" in str(offenders.render())
