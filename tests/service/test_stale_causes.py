"""Issue 18.2: the Admin API says why a set is not fresh, and a refresh says what it did.

Before, a set whose owner restarted showed the old transport error ("UNAVAILABLE
... Connection refused") while its source read connected, and the TUI's `r`
said "the source did not answer" when the source had answered and the gateway
had refused the answer. Each cause below is produced for real (a real
ValueSetSource on loopback, a real gateway) and read back through the Admin API.
"""

from __future__ import annotations

import logging
from pathlib import Path

import grpc
import pytest

from argwatch.server.process.app import RunningGateway
from argwatch.v1 import admin_pb2, sources_pb2
from tests.conftest import gateway_on
from tests.service.helpers import admin_status, admin_stub, eventually, value
from tests.service.scripted_source import ScriptedSource, serve

POLICY = """
sources:
  owner: {{grpc: {{target: "{target}", timeout: 1s}}}}
value_sets:
  s.codes: {{source: owner, ttl: 5m, max_staleness: 1h, max_members: 3}}
  s.missing: {{source: owner, ttl: 5m, max_staleness: 1h}}
tools:
  pick:
    mode: reject
    arguments:
      code: {{value_set: s.codes}}
      other: {{value_set: s.missing}}
"""


def codes(version: int, *members: str) -> sources_pb2.ValueSet:
    return sources_pb2.ValueSet(name="s.codes", version=version, members=members)


async def status_of(gateway: RunningGateway, name: str) -> admin_pb2.ValueSetStatus:
    status = await admin_status(gateway)
    (found,) = [s for s in status.value_sets if s.name == name]
    assert isinstance(found, admin_pb2.ValueSetStatus)
    return found


async def refresh(gateway: RunningGateway, name: str) -> admin_pb2.RefreshValueSetResponse:
    channel, admin = admin_stub(gateway)
    async with channel:
        response: admin_pb2.RefreshValueSetResponse = await admin.RefreshValueSet(
            admin_pb2.RefreshValueSetRequest(name=name), timeout=5
        )
    return response


@pytest.fixture
async def scripted(tmp_path: Path):
    source = ScriptedSource({"s.codes": codes(5, "A", "B")})
    server, target = await serve(source)
    # s.missing never arrives; waiting for it at start-up would only slow the test down.
    gateway = await gateway_on(
        tmp_path, POLICY.format(target=target), reconnect_cap_seconds=0.3, startup_timeout_seconds=0.5
    )
    try:
        yield source, gateway, server, target
    finally:
        await gateway.stop(0)
        await server.stop(0)


async def test_a_fresh_set_has_no_cause_and_a_refresh_confirms_it(scripted) -> None:
    source, gateway, _, _ = scripted
    fresh = await status_of(gateway, "s.codes")
    assert (fresh.stale, fresh.stale_cause, fresh.last_error) == (False, admin_pb2.STALE_CAUSE_UNSPECIFIED, "")
    response = await refresh(gateway, "s.codes")
    assert response.outcome == admin_pb2.REFRESH_OUTCOME_CONFIRMED
    assert response.detail == "version 5 confirmed"
    source.sets["s.codes"] = codes(6, "A", "B", "C")
    response = await refresh(gateway, "s.codes")
    assert response.outcome == admin_pb2.REFRESH_OUTCOME_NEW_VERSION
    assert response.detail == "version 5 -> version 6 (3 members)"


async def test_a_refused_update_is_the_cause_with_its_reason_and_time(scripted) -> None:
    source, gateway, _, _ = scripted
    source.send_snapshot(codes(4, "OLD"))  # a version going backwards, same incarnation

    async def refused() -> bool:
        return (await status_of(gateway, "s.codes")).stale_cause == admin_pb2.STALE_CAUSE_UPDATE_REFUSED

    await eventually(refused)
    status = await status_of(gateway, "s.codes")
    assert status.stale and status.available and status.source_connected
    assert status.last_refused_reason == "version_order"
    assert status.last_refused_at.seconds > 0
    assert "version 4 was refused" in status.last_error and "serving version 5" in status.last_error
    assert status.last_transport_error == ""  # nothing of the transport is blamed
    # A heartbeat confirming the version held clears the cause; the refusal stays on record.
    source.send_heartbeat({"s.codes": 5})

    async def fresh() -> bool:
        return not (await status_of(gateway, "s.codes")).stale

    await eventually(fresh)
    status = await status_of(gateway, "s.codes")
    assert (status.stale_cause, status.last_error, status.last_refused_reason) == (
        admin_pb2.STALE_CAUSE_UNSPECIFIED,
        "",
        "version_order",
    )


async def test_a_set_too_large_is_said_so_and_is_not_fetched_again_for_the_same_version(scripted) -> None:
    source, gateway, _, _ = scripted
    source.sets["s.codes"] = big = codes(6, "A", "B", "C", "D")  # over max_members 3
    source.send_snapshot(big)

    async def too_large() -> bool:
        return (await status_of(gateway, "s.codes")).stale_cause == admin_pb2.STALE_CAUSE_TOO_LARGE

    await eventually(too_large)
    status = await status_of(gateway, "s.codes")
    assert "version 6 is too large" in status.last_error and "4 members, over max_members 3" in status.last_error
    assert status.version == 5 and status.available
    fetches = source.fetches
    for _ in range(3):  # heartbeats naming the refused version: before, each one fetched it again
        source.send_heartbeat({"s.codes": 6})
    source.send_heartbeat({"s.codes": 6})
    await eventually(lambda: _drained(source))
    assert source.fetches == fetches
    assert (await status_of(gateway, "s.codes")).stale_cause == admin_pb2.STALE_CAUSE_TOO_LARGE
    response = await refresh(gateway, "s.codes")  # asked by a person: fetched, refused, and said so
    assert response.outcome == admin_pb2.REFRESH_OUTCOME_REFUSED
    assert response.detail == "oversized: 4 members, over max_members 3"
    assert source.fetches == fetches + 1
    # The owner publishes another version that fits: taken at its heartbeat.
    source.sets["s.codes"] = codes(7, "A", "B", "C")
    source.send_heartbeat({"s.codes": 7})

    async def fresh_again() -> bool:
        status = await status_of(gateway, "s.codes")
        return status.version == 7 and not status.stale

    await eventually(fresh_again)


async def _drained(source: ScriptedSource) -> bool:
    return source.outbox.empty()


async def test_a_set_the_source_does_not_serve_is_said_so(scripted) -> None:
    source, gateway, _, _ = scripted
    before = await status_of(gateway, "s.missing")
    assert before.stale_cause == admin_pb2.STALE_CAUSE_NOT_LOADED and not before.available
    source.send_heartbeat({"s.codes": 5})  # the heartbeat lists what the source serves

    async def not_served() -> bool:
        return (await status_of(gateway, "s.missing")).stale_cause == admin_pb2.STALE_CAUSE_NOT_SERVED

    await eventually(not_served)
    status = await status_of(gateway, "s.missing")
    assert status.source_connected and "does not serve it" in status.last_error
    response = await refresh(gateway, "s.missing")
    assert response.outcome == admin_pb2.REFRESH_OUTCOME_NOT_SERVED
    assert "NOT_FOUND" in response.detail
    assert (await status_of(gateway, "s.codes")).stale_cause == admin_pb2.STALE_CAUSE_UNSPECIFIED


async def test_a_transport_error_is_the_cause_while_it_lasts_and_on_record_after(scripted, tmp_path: Path) -> None:
    source, gateway, server, target = scripted
    await server.stop(0)  # the owner goes away

    async def unreachable() -> bool:
        return (await status_of(gateway, "s.codes")).stale_cause == admin_pb2.STALE_CAUSE_SOURCE_UNREACHABLE

    await eventually(unreachable)
    down = await status_of(gateway, "s.codes")
    assert not down.source_connected and down.last_error == down.last_transport_error
    assert down.last_transport_error_at.seconds > 0
    response = await refresh(gateway, "s.codes")
    assert response.outcome == admin_pb2.REFRESH_OUTCOME_UNREACHABLE and "UNAVAILABLE" in response.detail
    # The owner comes back on the same port: the error is over, and not shown as the cause.
    port = int(target.rsplit(":", 1)[1])
    again = grpc.aio.server()
    from argwatch.v1 import sources_pb2_grpc

    sources_pb2_grpc.add_ValueSetSourceServicer_to_server(source, again)
    again.add_insecure_port(f"127.0.0.1:{port}")
    await again.start()
    try:

        async def back() -> bool:
            status = await status_of(gateway, "s.codes")
            return status.source_connected and not status.stale

        await eventually(back)
        status = await status_of(gateway, "s.codes")
        assert (status.stale_cause, status.last_error) == (admin_pb2.STALE_CAUSE_UNSPECIFIED, "")
        assert "UNAVAILABLE" in status.last_transport_error  # on record, and over
    finally:
        await again.stop(0)


async def test_a_set_missing_from_its_file_is_not_served_and_the_file_source_stays_connected(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "sets.yaml").write_text("s.here: {version: 1, members: [A]}\n")
    policy = """
sources:
  local: {file: sets.yaml}
value_sets:
  s.here: {source: local}
  s.gone: {source: local}
tools:
  pick:
    arguments:
      a: {value_set: s.here}
      b: {value_set: s.gone}
"""
    caplog.set_level(logging.INFO, logger="argwatch.valuesets")
    gateway = await gateway_on(tmp_path, policy)
    try:

        async def not_served() -> bool:
            return (await status_of(gateway, "s.gone")).stale_cause == admin_pb2.STALE_CAUSE_NOT_SERVED

        await eventually(not_served)
        import asyncio

        await asyncio.sleep(2.5)  # two more polls of the file, a second apart
        status = await status_of(gateway, "s.gone")
        assert status.source_connected and "has no value set 's.gone'" in status.last_error
        assert value(gateway.registry, "argwatch_source_connected", source="local") == 1
        flapping = [r for r in caplog.records if "disconnected" in r.getMessage()]
        assert flapping == []  # before: "source local disconnected" every second
        said = [r for r in caplog.records if r.name == "argwatch.valuesets" and "'s.gone'" in r.getMessage()]
        assert len(said) == 1  # logged once, when it became the cause
        assert (await status_of(gateway, "s.here")).stale_cause == admin_pb2.STALE_CAUSE_UNSPECIFIED
    finally:
        await gateway.stop(0)


async def test_a_connected_source_silent_past_the_ttl_is_not_confirmed(tmp_path: Path) -> None:
    source = ScriptedSource({"s.codes": codes(5, "A", "B")})  # a snapshot, then no heartbeat at all
    server, target = await serve(source)
    policy = POLICY.format(target=target).replace("ttl: 5m, max_staleness: 1h, max_members: 3", "ttl: 1s")
    gateway = await gateway_on(tmp_path, policy, startup_timeout_seconds=0.5)
    try:

        async def unconfirmed() -> bool:
            return (await status_of(gateway, "s.codes")).stale_cause == admin_pb2.STALE_CAUSE_NOT_CONFIRMED

        await eventually(unconfirmed)
        status = await status_of(gateway, "s.codes")
        assert status.source_connected and status.stale and status.available
        assert "over its TTL 1s" in status.last_error and status.last_transport_error == ""
    finally:
        await gateway.stop(0)
        await server.stop(0)


async def test_a_refused_delta_blocks_nothing_the_owner_sends_after_it(scripted) -> None:
    source, gateway, _, _ = scripted
    # A malformed delta naming the version held: refused, and it must not make the held version's
    # heartbeats look like the refused update (which left the copy unconfirmed for good).
    source.send_delta("s.codes", 5, 5, added=["X"])

    async def refused() -> bool:
        return (await status_of(gateway, "s.codes")).stale_cause == admin_pb2.STALE_CAUSE_UPDATE_REFUSED

    await eventually(refused)
    source.send_heartbeat({"s.codes": 5})

    async def fresh() -> bool:
        return not (await status_of(gateway, "s.codes")).stale

    await eventually(fresh)
    # A delta that replaces a member of a set at its cap (3) is not growth: taken, not refused as oversized.
    source.send_delta("s.codes", 5, 6, added=["C"])
    source.send_delta("s.codes", 6, 7, added=["D"], removed=["A"])

    async def replaced() -> bool:
        status = await status_of(gateway, "s.codes")
        return status.version == 7 and status.members == 3 and not status.stale

    await eventually(replaced)
    assert value(gateway.registry, "argwatch_value_set_update_rejected_total", set="s.codes", reason="oversized") == 0


async def test_a_saved_copy_is_the_cause_until_the_source_answers(tmp_path: Path) -> None:
    source = ScriptedSource({"s.codes": codes(5, "A", "B")}, can_watch=False)  # pulled: GetValueSet only
    server, target = await serve(source)
    policy = POLICY.format(target=target).replace("timeout: 1s", "timeout: 10s")
    saved = tmp_path / "saved"
    try:
        first = await gateway_on(tmp_path, policy, snapshot_dir=str(saved), startup_timeout_seconds=0.5)

        async def saved_once() -> bool:
            return (saved / "s.codes.json").exists()

        await eventually(saved_once)  # version 5, saved
        await first.stop(0)
        source.answer_delay = 30.0  # the source is up, and slow to answer the restarted replica
        second = await gateway_on(tmp_path, policy, snapshot_dir=str(saved), startup_timeout_seconds=0.5)
        try:
            status = await status_of(second, "s.codes")
            assert (status.stale_cause, status.available, status.version) == (
                admin_pb2.STALE_CAUSE_SAVED_COPY,
                True,
                5,
            )
            assert "saved on disk" in status.last_error
            source.fast_again.set()  # it answers: the saved copy is confirmed, and the cause is over

            async def confirmed() -> bool:
                return (await status_of(second, "s.codes")).stale_cause == admin_pb2.STALE_CAUSE_UNSPECIFIED

            await eventually(confirmed)
        finally:
            await second.stop(0)
    finally:
        await server.stop(0)
