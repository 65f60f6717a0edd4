"""Fixed Admin API answers for the TUI's snapshot tests: repeatable screens need fixed data and no clock.

Only the snapshot tests use this; every behaviour test drives the TUI against a
real gateway (test_tui_pilot.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from google.protobuf.timestamp_pb2 import Timestamp

from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb

AT = 1_796_000_000  # 2026-11-30 00:53:20 UTC


def _at(seconds: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromSeconds(AT + seconds)
    return stamp


def _windows(calls: int, checks: int, oos: int, norm: int, **extra: int) -> list[admin_pb2.WindowFigures]:
    """The same mix at three scales: 1 min, 15 min (x12), 1 h (x40)."""
    figures = []
    for seconds, scale in ((60, 1), (900, 12), (3600, 40)):
        problems = {code: count * scale for code, count in extra.items() if code.startswith("p_")}
        figures.append(
            admin_pb2.WindowFigures(
                window_seconds=seconds,
                covered_seconds=float(seconds),
                per_second=calls * scale / seconds,
                calls=calls * scale,
                rejected=extra.get("rejected", 0) * scale,
                rejected_rate=extra.get("rejected", 0) / calls if calls else 0.0,
                value_checks=checks * scale,
                out_of_set=oos * scale,
                out_of_set_rate=oos / checks if checks else 0.0,
                out_of_set_normalised=norm * scale,
                out_of_set_normalised_rate=norm / checks if checks else 0.0,
                problems={code[2:]: count for code, count in problems.items()},
                repair_started=extra.get("started", 0) * scale,
                repair_succeeded=extra.get("succeeded", 0) * scale,
                repair_abandoned=extra.get("abandoned", 0) * scale,
                failed_open=extra.get("failed_open", 0) * scale,
                repeats=extra.get("repeats", 0) * scale,
            )
        )
    return figures


def _series(base: int, rise_from: int = 60, rise: int = 0) -> list[int]:
    return [base + (i % 5) + (rise if i >= rise_from else 0) for i in range(60)]


def recorded_status() -> admin_pb2.GetStatusResponse:
    status = admin_pb2.GetStatusResponse(
        replica_id="argwatch-7c9f-0",
        policy_version="65d9eb6a490b1f2c",
        global_mode=pb.MODE_UNSPECIFIED,
        taken_at=_at(0),
    )
    refund = status.tools.add(
        tool="refund_order", mode=pb.MODE_REJECT, mode_source="policy", calls=4800, side_effect=True, repeats=160
    )
    refund.windows.extend(_windows(1200, 0, 0, 0, rejected=110, started=110, succeeded=88, abandoned=9, repeats=4))
    refund.calls_per_minute.extend(_series(1180))
    refund.checks.add(
        check="set:refunds.reason_codes", argument="reason_code", fails_closed=False, name="arg:reason_code"
    )
    refund.checks.add(check="record:order", argument="order_id", fails_closed=True, name="record:order")
    ticket = status.tools.add(tool="create_ticket", mode=pb.MODE_OBSERVE, mode_source="override", calls=2400)
    ticket.mode_expires_at.CopyFrom(_at(1800))
    ticket.windows.extend(_windows(600, 0, 0, 0, failed_open=31))
    ticket.calls_per_minute.extend(_series(590))
    ticket.checks.add(check="set:identity.handles", argument="assignee", fails_closed=True, name="arg:assignee")
    stock = status.tools.add(tool="transfer_stock", mode=pb.MODE_OBSERVE, mode_source="policy", calls=900)
    stock.windows.extend(_windows(240, 0, 0, 0))
    stock.calls_per_minute.extend(_series(230))

    def argument(tool: str, name: str, value_set: str, checks: int, oos: int, norm: int, **extra: int) -> None:
        row = status.arguments.add(tool=tool, argument=name, value_set=value_set)
        row.windows.extend(_windows(checks, checks, oos, norm, **extra))
        row.checks_per_minute.extend(_series(checks))
        row.out_of_set_per_minute.extend(_series(oos // 2, rise_from=40, rise=oos) if oos else [0] * 60)

    argument("refund_order", "reason_code", "refunds.reason_codes", 1200, 113, 80, p_out_of_set=113)
    argument("refund_order", "order_id", "", 0, 0, 0, p_not_found=14, p_not_owned=3)
    argument("create_ticket", "assignee", "identity.handles", 600, 0, 0, failed_open=31)
    argument("transfer_stock", "warehouse_code", "wms.warehouses", 240, 29, 7, p_out_of_set=29)
    status.value_sets.add(
        name="refunds.reason_codes", source="owners", available=True, version=41, members=6,
        confirmed_at=_at(-4), stale=False, age_seconds=4.0, source_connected=True,
    )  # fmt: skip
    status.value_sets.add(
        name="identity.handles", source="directory", available=False, version=7, members=5000,
        confirmed_at=_at(-5400), stale=True, age_seconds=5400.0, source_connected=False,
        last_error="UNAVAILABLE: connection refused", stale_cause=admin_pb2.STALE_CAUSE_SOURCE_UNREACHABLE,
        last_transport_error="UNAVAILABLE: connection refused", last_transport_error_at=_at(-5400),
    )  # fmt: skip
    status.value_sets.add(
        name="wms.warehouses", source="local", available=True, version=3, members=3,
        confirmed_at=_at(-700), stale=True, age_seconds=700.0, source_connected=True,
        stale_cause=admin_pb2.STALE_CAUSE_TOO_LARGE, last_refused_reason="oversized", last_refused_at=_at(-600),
        last_error="the owner's version 4 is too large (oversized: 1200 members, over max_members 1000); "
        "serving version 3 until it publishes another",
    )  # fmt: skip
    return status


REFUSED = (
    "{target} {method}: UNAVAILABLE: failed to connect to all addresses; last error: UNKNOWN: ipv4:{target}: "
    "Failed to connect to remote host: Connection refused"
)


def incident_status() -> admin_pb2.GetStatusResponse:
    """The recorded status during an incident: the orders' record owner and the directory are down; refunds
    fail closed in reject (refusing every call now) and agents retry them (a storm); create_ticket's
    requester look-up fails closed but the tool is observed; a check and a source have on-call overrides."""
    status = recorded_status()
    refund, ticket, stock = status.tools
    del refund.windows[:]
    for seconds, calls, repeats, started in ((60, 2100, 40, 2100), (900, 14400, 52, 2400), (3600, 55000, 160, 3000)):
        refund.windows.add(
            window_seconds=seconds, covered_seconds=float(seconds), per_second=calls / seconds, calls=calls,
            rejected=started, rejected_rate=started / calls, repeats=repeats, repair_started=started,
        )  # fmt: skip
    refund.recent.CopyFrom(admin_pb2.WindowFigures(window_seconds=15, covered_seconds=15.0, calls=540, rejected=540))
    refund.recent.rejected_rate = 1.0
    order = next(check for check in refund.checks if check.argument == "order_id")
    order.available_now, order.name = False, "record:order"
    reason = next(check for check in refund.checks if check.argument == "reason_code")
    reason.available_now, reason.name = True, "arg:reason_code"
    (order_row,) = [a for a in status.arguments if a.argument == "order_id"]
    for figures in order_row.windows:
        figures.problems["check_unavailable"] = figures.problems["not_found"] * 40
    ticket.checks.add(check="set:identity.handles", argument="assignee", name="arg:assignee")
    ticket.checks.add(check="record:requester", argument="requester_id", fails_closed=True, name="record:requester")
    requester = status.arguments.add(tool="create_ticket", argument="requester_id")
    requester.windows.extend(_windows(600, 0, 0, 0, p_check_unavailable=31))
    stock.checks.add(
        check="set:wms.warehouses", argument="warehouse_code", name="arg:warehouse_code", available_now=True,
        override_mode="reject", override_actor="ana@oncall", override_reason="INC-9: refuse invented warehouses",
        override_expires_at=_at(1800),
    )  # fmt: skip
    status.failure_overrides.add(
        target="source:owners", failure="open", actor="ana@oncall", reason="INC-9: owners flapping",
        set_at=_at(-120), expires_at=_at(1680),
    )  # fmt: skip
    status.sources.add(
        name="owners", kind="value_sets", connected=True, address="10.0.4.12:50061",
        value_sets=["refunds.reason_codes"], tools=["refund_order"],
    )  # fmt: skip
    status.sources.add(
        name="directory", kind="value_sets", connected=False, address="10.0.4.20:50071",
        value_sets=["identity.handles"], tools=["create_ticket"], last_transport_error_at=_at(-2),
        last_transport_error=REFUSED.format(target="10.0.4.20:50071", method="WatchValueSets"),
    )  # fmt: skip
    status.sources.add(
        name="orders_db", kind="records", connected=False, address="10.0.4.30:50081",
        record_kinds=["order", "customer"], tools=["refund_order", "create_ticket"], last_transport_error_at=_at(-1),
        last_transport_error=REFUSED.format(target="10.0.4.30:50081", method="Lookup"),
    )  # fmt: skip
    return status


def _counts(enumerated: int, checked: int, typed: int, unconstrained: int) -> admin_pb2.CoverageCounts:
    total = enumerated + checked + typed + unconstrained
    return admin_pb2.CoverageCounts(
        enumerated=enumerated, checked=checked, typed=typed, unconstrained=unconstrained,
        covered_share=(enumerated + checked) / total if total else 0.0,
    )  # fmt: skip


def recorded_shadow_report() -> admin_pb2.GetShadowReportResponse:
    """A shadow that rebinds refund_order's reason code to a newer set and rejects add_note."""
    report = admin_pb2.GetShadowReportResponse(
        loaded=True, shadow_version="1d40adf6361c", name="policy.next.yaml", since=_at(-3600), calls=48210,
        busy=0, raised=0, live_version="b5e9cae1dcae", tools_changed=["add_note", "refund_order"],
    )  # fmt: skip
    refuse = report.differences.add(tool="add_note", kind="would_refuse", count=312)
    for index in range(2):
        refuse.examples.add(
            at=_at(-10 * index), call_id=f"call-7f2a{index}", tool="add_note", live_decision="allow",
            shadow_decision="reject", live_problems=[admin_pb2.ShadowProblem(code="out_of_set", path="country")],
            shadow_problems=[admin_pb2.ShadowProblem(code="out_of_set", path="country", value='"XX"')],
        )  # fmt: skip
    allow = report.differences.add(tool="refund_order", kind="would_allow", count=41)
    allow.examples.add(
        at=_at(-5), call_id="call-0c19", tool="refund_order", live_decision="reject", shadow_decision="allow",
        live_problems=[admin_pb2.ShadowProblem(code="out_of_set", path="reason_code", value='"LOST_IN_TRANSIT"')],
    )  # fmt: skip
    ship = report.differences.add(tool="ship", kind="different_problems", count=7)
    ship.examples.add(
        at=_at(-50), call_id="call-99e1", tool="ship", live_decision="reject", shadow_decision="reject",
        live_problems=[admin_pb2.ShadowProblem(code="out_of_set", path="country", value='"XX"')],
        shadow_problems=[admin_pb2.ShadowProblem(code="out_of_set", path="country", value='"XX"'),
                         admin_pb2.ShadowProblem(code="out_of_set", path="card_country", value="REDACTED")],
    )  # fmt: skip
    return report


def recorded_coverage() -> admin_pb2.GetCoverageResponse:
    """The demo's tools as an MCP server defines them, with the demo policy's bindings layered on top."""
    found = admin_pb2.GetCoverageResponse(
        policy_version="65d9eb6a490b1f2c", counts=_counts(4, 4, 3, 1), suggestions_left_off=0,
        samples="this replica's offending values since it started",
    )  # fmt: skip
    tools = (
        ("refund_order", _counts(1, 2, 1, 0), "", (
            ("order_id", "checked", ("type:string", "pattern", "record:order", "owner")),
            ("reason_code", "enumerated", ("type:string", "value_set:refunds.reason_codes")),
            ("amount_cents", "checked", ("type:integer", "range", "rule:not_above_paid")),
            ("note", "typed", ("type:string", "length")),
        )),
        ("get_refund_status", _counts(0, 0, 0, 0), "no schema", ()),
        ("create_ticket", _counts(2, 0, 2, 1), "additionalProperties is not false", (
            ("component_id", "enumerated", ("type:string", "value_set:catalog.components")),
            ("assignee", "enumerated", ("type:string", "value_set:identity.handles")),
            ("summary", "typed", ("type:string",)),
            ("ticket_type", "typed", ("type:string",)),
            ("details", "unconstrained", ()),
        )),
        ("transfer_stock", _counts(1, 2, 0, 0), "", (
            ("warehouse_code", "enumerated", ("value_set:wms.warehouses",)),
            ("quantity", "checked", ("type:integer", "range")),
            ("priority", "checked", ("type:string", "pattern")),  # misses: "high", "urgent", "low"
        )),
    )  # fmt: skip
    for name, counts, undeclared, arguments in tools:
        tool = found.tools.add(tool=name, counts=counts, undeclared_arguments=undeclared)
        for argument, coverage, constraints in arguments:
            tool.arguments.add(argument=argument, coverage=coverage, constraints=constraints)
    found.suggestions.add(
        tool="create_ticket", argument="ticket_type", binding="value_set",
        reason="its name ends in _type: such values come from a set, and none is bound",
    )  # fmt: skip
    found.suggestions.add(
        tool="transfer_stock", argument="priority", binding="value_set",
        reason='48 values sampled, 3 distinct ("high", "urgent", "low"): the model writes it from a small vocabulary',
    )  # fmt: skip
    return found


def recorded_preview(change: admin_pb2.SetModeRequest) -> admin_pb2.PreviewChangeResponse:
    """A preview in the server's wording (server/modes/preview_text.py) of an owner down under traffic; the
    first line names the change asked for, so a snapshot shows which change the figures are of."""
    subject = f"{change.tool} {change.check}".strip() if change.tool else change.check or "global override"
    after = change.failure or {pb.MODE_OBSERVE: "observe", pb.MODE_REJECT: "reject"}.get(change.mode, "cleared")
    return admin_pb2.PreviewChangeResponse(
        change=f"change: {subject} -> {after}",
        changes_anything=True,
        lines=[
            f"change: {subject} -> {after}",
            "last 1 min: 35 calls to create_ticket on this replica, refused or not; "
            "the modes in force now would have refused 35 of them",
            "  it would let through 30 of those 35 refused calls: 30 unverifiable (source down)",
            "last 15 min: 420 calls to create_ticket on this replica, refused or not; "
            "the modes in force now would have refused 96 of them",
            "  it would let through 90 of those 96 refused calls: 84 unverifiable (source down), 6 invented values",
            "it switches off (security first):",
            "  ownership (security): create_ticket record:customer would let calls through while directory is down "
            "(fails open): whether customer ids exist and are the customer's own would go unchecked then, counted "
            "as skipped; enforced again the moment it answers",
        ],
    )


class RecordedAdmin:
    """Answers with the fixed data above; the status stream sends one snapshot, then waits."""

    target = "127.0.0.1:50052"

    def __init__(self, incident: bool = False) -> None:
        self._status = incident_status if incident else recorded_status
        self.selections: list[admin_pb2.StatusSelection | None] = []  # what each watch asked for

    async def watch(
        self, interval: float, selection: admin_pb2.StatusSelection | None = None
    ) -> AsyncIterator[admin_pb2.GetStatusResponse]:
        self.selections.append(selection)
        yield self._status()
        await asyncio.Event().wait()

    async def set_mode(self, tool: str, mode: pb.Mode, reason: str, expires_in_seconds: int) -> admin_pb2.ModeChange:
        raise AssertionError("the snapshot tests change nothing")

    async def change_override(self, request: admin_pb2.SetModeRequest) -> admin_pb2.SetModeResponse:
        raise AssertionError("the snapshot tests change nothing")

    async def preview(self, change: admin_pb2.SetModeRequest) -> admin_pb2.PreviewChangeResponse:
        return recorded_preview(change)

    async def mode_changes(self, limit: int = 100) -> list[admin_pb2.ModeChange]:
        return [
            admin_pb2.ModeChange(
                at=_at(-60), actor="ana@oncall", tool="create_ticket", old_mode="reject", new_mode="observe",
                reason="INC-7: directory down, false rejects", expires_at=_at(1800), outcome="applied",
            ),
            admin_pb2.ModeChange(
                at=_at(-300), actor="grafana", tool="?", reason="read only",
                outcome="refused: grafana may look, not change",
            ),
        ]  # fmt: skip

    async def samples(self, tool: str, argument: str, limit: int = 10) -> admin_pb2.ListSamplesResponse:
        response = admin_pb2.ListSamplesResponse(
            total=113, top_two_share=0.85, clustered=True, out_of_set=113, invented=17
        )
        for value, count, shape in (('"LOST_IN_TRANSIT"', 71, "retired"), ('"damaged item"', 25, "case"),
                                    ('"GOODWILL"', 10, "invented"), ('"OTHER"', 7, "invented")):  # fmt: skip
            response.values.add(value=value, count=count, shape=shape, last_seen=_at(-2))
        return response

    async def shape_report(self, window_seconds: int) -> admin_pb2.GetShapeReportResponse:
        response = admin_pb2.GetShapeReportResponse(window_seconds=3600, covered_seconds=3600, taken_at=_at(0))
        row = response.rows.add(
            tool="refund_order", argument="reason_code", value_set="refunds.reason_codes", checks=48000,
            out_of_set=4520, out_of_set_rate=4520 / 48000, out_of_set_normalised=3200,
            out_of_set_normalised_rate=3200 / 48000,
        )  # fmt: skip
        row.shapes.add(shape="retired", count=2840, share=2840 / 4520)
        row.shapes.add(shape="case", count=1000, share=1000 / 4520)
        row.shapes.add(shape="invented", count=680, share=680 / 4520)
        return response

    async def events(self, limit: int = 200) -> list[admin_pb2.Event]:
        return [
            admin_pb2.Event(at=_at(-30), kind="rate", subject="refund_order reason_code",
                            detail="out-of-set rate up: 2.1% over 15 min -> 9.4% in the last minute (113 of 1200)"),
            admin_pb2.Event(at=_at(-60), kind="mode", subject="create_ticket",
                            detail="reject -> observe by ana@oncall (INC-7: directory down, false rejects): applied"),
            admin_pb2.Event(at=_at(-600), kind="set", subject="wms.warehouses",
                            detail="the owner's version 4 is too large (oversized: 1200 members, over max_members "
                            "1000); serving version 3 until it publishes another"),
            admin_pb2.Event(at=_at(-5400), kind="source", subject="directory",
                            detail="disconnected: UNAVAILABLE: connection refused"),
            admin_pb2.Event(at=_at(-5400), kind="set", subject="identity.handles",
                            detail="stale: its source is unreachable: UNAVAILABLE: connection refused"),
        ]  # fmt: skip

    async def coverage(self) -> admin_pb2.GetCoverageResponse:
        return recorded_coverage()

    async def shadow_report(self) -> admin_pb2.GetShadowReportResponse:
        return recorded_shadow_report()

    async def cohorts(self, tool: str, argument: str) -> list[admin_pb2.CohortFigures]:
        return []  # the recorded policy declares no models: the detail view shows no table

    async def refresh(self, value_set: str) -> admin_pb2.RefreshValueSetResponse:
        raise AssertionError("the snapshot tests change nothing")

    async def close(self) -> None:
        return None
