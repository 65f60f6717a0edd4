"""Game days, scripted: a small fleet on loopback, the ordinary faults of a production week one after another,
and a table of what held.

    make gameday                      # the full run (~4 minutes), its table printed
    python bench/gameday.py --short   # under a minute; `make test` runs it (tests/e2e/test_gameday.py)

The fleet: a redis-server, the demo owning service (examples/demo_source.py: value sets streamed, and the
orders' system of record), two `argwatch serve` replicas sharing Redis, on the demo policy, and steady load
from a client that sends each call to one replica and, when that one does not answer (UNAVAILABLE: it is
restarting), to the other, as a load balancer would (bench/gameday_fleet.py).

Each scenario plays one fault under load, then checks and prints one row:
- every call sent got a verdict (sent = verdicts);
- calls refused only where the policy says so: a refund whose order cannot be looked up while the owner is
  down is refused (its record check fails closed), unless on-call's failure override makes that look-up
  fail open, when it is let through with the look-up listed as skipped (and only then); an invented reason
  code is refused; anything else refused, or an invented code let through, is counted as unexpected and
  fails the row;
- the longest time each owner's set was stale on any replica, and after an owner restart, how long after
  the new process served both replicas had every set fresh again (at most 2 s);
- overrides and audit entries before and after: none lost;
- checks that could not run (failed open: let through, listed as skipped; or closed: refused with
  CHECK_UNAVAILABLE): as many in the verdicts as the gateways counted (tool_argument_check_unavailable_total);
- and what a scenario checks of its own, with its figures (the failure override's, bench/gameday_fail_open.py).
Every process is on 127.0.0.1, and everything stops by itself (and is killed at exit).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gameday_fail_open import owner_down_fail_open
from gameday_fleet import EXAMPLES, OWNER_SETS, Fleet, Tally, until

from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.redis_server import start_redis

sys.path.insert(0, EXAMPLES)
from demo_data import active_handles

FRESH_AFTER_OWNER_RESTART = 2.0  # seconds from the new owner serving to every set fresh on every replica


@dataclass
class Row:
    scenario: str
    seconds: float
    tally: Tally
    stale: dict[str, float]
    fresh_after: float | None
    overrides: tuple[int, int]
    audit: tuple[int, int]
    audit_lost: int
    unavailable_counted: int | None
    checks: list[str]
    notes: list[str] = field(default_factory=list)  # a scenario's own figures

    @property
    def ok(self) -> bool:
        return not self.checks


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


# ---- the scenarios: each plays one fault while the load runs; returns how long the new owner took to be fresh

Scenario = Callable[[Fleet], Awaitable[float | None]]


async def steady(fleet: Fleet) -> float | None:
    await asyncio.sleep(3 if fleet.short else 20)
    return None


async def owner_restart(fleet: Fleet) -> float | None:
    """kill -9 of the owning service, started again at once (a deploy): versions count from 1 again.

    The probe: the demo owner's churn removed the first handle of its initial set by now; the new process
    serves it again. Each replica must say so, which it does only if it took the new process's set.
    """
    probe = active_handles()[0]
    if await fleet.handle_in_set(probe):
        raise RuntimeError(f"{probe} should have left the owner's set before the restart")
    before = await fleet.handles_versions()
    fleet.owner_down = True
    await fleet.owner.stop(signal.SIGKILL)
    await fleet.owner.start("demo owning service on")
    fresh = await until(fleet.all_fresh, 20)
    # Taken from the new process: the probe is back (its initial set), or the version counts from 1 again
    # below the old process's (its churn, every 2 s, may already have removed the probe once more).
    took_new = await fleet.handle_in_set(probe) or all(
        version < before.get(replica, 0) for replica, version in (await fleet.handles_versions()).items()
    )
    await asyncio.sleep(1.5)  # look-ups sent while it was down (1 s timeout) are answered
    fleet.owner_down = False
    if not took_new:
        raise RuntimeError(f"a replica still checks against the old process's set ({probe} not in it)")
    await asyncio.sleep(2 if fleet.short else 15)
    return fresh


async def owner_hang(fleet: Fleet) -> float | None:
    """The owner stops answering (SIGSTOP), then returns (SIGCONT): past 30 s the watch is presumed dead."""
    fleet.owner_down = True
    fleet.owner.send(signal.SIGSTOP)
    await asyncio.sleep(3 if fleet.short else 35)
    fleet.owner.send(signal.SIGCONT)
    fresh = await until(fleet.all_fresh, 40)
    await asyncio.sleep(1.5)
    fleet.owner_down = False
    await asyncio.sleep(1 if fleet.short else 10)
    return fresh


async def gateway_rolling_restart(fleet: Fleet) -> float | None:
    """A rolling deploy with a policy change: one replica at a time stopped (SIGTERM) and started on the new
    policy, while the load goes to the other."""
    before = {status.policy_version for status in (await fleet.statuses()).values()}
    fleet.write_policy(extra_tool=True)
    for replica in fleet.replicas:
        code = await replica.process.stop()
        if code != 0:
            raise RuntimeError(f"{replica.name} exited {code} on SIGTERM")
        await replica.process.start("serving policy")
        await asyncio.sleep(1 if fleet.short else 10)
    statuses: dict[str, admin_pb2.GetStatusResponse] = {}

    async def all_answer() -> bool:
        # An Admin channel to a replica just restarted may still be in its reconnect backoff: asked again,
        # within a bound, rather than once (a cold first run once missed one replica this way).
        statuses.update(await fleet.statuses())
        return len(statuses) == len(fleet.replicas)

    with contextlib.suppress(RuntimeError):
        await until(all_answer, 15)
    versions = {status.policy_version for status in statuses.values()}
    if len(statuses) != len(fleet.replicas) or len(versions) != 1 or versions & before:
        raise RuntimeError(f"after the deploy: {len(statuses)} replicas answer, serving {versions} (before {before})")
    return None


async def redis_restart(fleet: Fleet) -> float | None:
    """Redis killed and started again empty (no persistence): the replicas write the fleet's modes back."""
    assert fleet.redis is not None
    fleet.redis.kill()
    await asyncio.sleep(1 if fleet.short else 10)
    fleet.redis = start_redis(fleet.folder, fleet.redis_port)

    async def reconnected() -> bool:
        statuses = await fleet.statuses()
        return len(statuses) == len(fleet.replicas) and all(s.mode_store_connected for s in statuses.values())

    await until(reconnected, 20)
    await asyncio.sleep(2 if fleet.short else 10)
    return None


async def broken_reload(fleet: Fleet) -> float | None:
    """A broken policy, reloaded with SIGHUP on every replica: refused, the last good one keeps serving."""
    good = _read(fleet.policy)
    before = {name: status.policy_version for name, status in (await fleet.statuses()).items()}
    _write(fleet.policy, good.replace("value_set: wms.warehouses", "value_set: wms.warehouse"))  # an undefined set
    marks = [len(replica.process.lines) for replica in fleet.replicas]
    for replica in fleet.replicas:
        replica.process.send(signal.SIGHUP)
    for replica, mark in zip(fleet.replicas, marks, strict=True):
        await replica.process.wait_for("policy reload refused; still serving", 10, after=mark)
    after = await fleet.statuses()
    if {name: status.policy_version for name, status in after.items()} != before:
        raise RuntimeError("a replica changed policy on a broken reload")
    if not all("wms.warehouse" in status.policy_reload_error for status in after.values()):
        raise RuntimeError("a replica does not show why the reload was refused")
    await asyncio.sleep(1 if fleet.short else 5)
    _write(fleet.policy, good)
    for replica in fleet.replicas:
        replica.process.send(signal.SIGHUP)
    await asyncio.sleep(1)
    return None


SCENARIOS: list[tuple[str, Scenario]] = [
    ("steady load", steady),
    ("owner restart (kill -9)", owner_restart),
    ("owner hang (SIGSTOP)", owner_hang),
    ("gateway rolling restart + policy change", gateway_rolling_restart),
    ("redis restart (empty)", redis_restart),
    ("reload of a broken policy", broken_reload),
    # Last: its preview is checked against this scenario's calls alone (the rolling restart reset the counts).
    ("owner down, fail open one source", owner_down_fail_open),
]
OWNER_DOWN = (owner_restart, owner_hang, owner_down_fail_open)  # its sets go stale


async def play(fleet: Fleet, name: str, scenario: Scenario) -> Row:
    entries_before, overrides_before = await fleet.audit()
    counted_before = fleet.unavailable_counted()
    fleet.tally, fleet.longest_stale, fleet.notes, fleet.findings = Tally(), {}, [], []
    started = time.monotonic()
    fleet.load_on.set()
    fresh_after = await scenario(fleet)
    fleet.load_on.clear()
    await until(fleet.load_drained, 15)  # every call sent has its answer (or gave up)
    seconds = time.monotonic() - started
    entries_after, overrides_after = await fleet.audit()
    restarted = scenario is gateway_rolling_restart  # its counters restarted from 0
    counted = None if restarted else fleet.unavailable_counted() - counted_before
    tally = fleet.tally
    checks = list(fleet.findings)
    if tally.verdicts != tally.sent:
        checks.append(f"{tally.sent - tally.verdicts} calls without a verdict: {tally.examples[:3]}")
    if tally.unexpected_refusals or tally.unexpected_allows:
        checks.append(f"unexpected: {tally.examples[:3]}")
    lost = len(entries_before - entries_after)
    if lost or overrides_after < overrides_before:
        checks.append(f"{lost} audit entries lost, overrides {overrides_before} -> {overrides_after}")
    if fresh_after is not None and fresh_after > FRESH_AFTER_OWNER_RESTART:
        checks.append(f"sets fresh {fresh_after:.2f}s after the owner served (at most {FRESH_AFTER_OWNER_RESTART}s)")
    if scenario not in OWNER_DOWN and max(fleet.longest_stale.values(), default=0.0) > 0.5:
        checks.append(f"a set went stale with its owner up: {fleet.longest_stale}")
    in_verdicts = tally.failed_open + tally.failed_closed
    if counted is not None and counted != in_verdicts:
        checks.append(f"checks not run: {in_verdicts} in verdicts, {counted} counted")
    return Row(
        name,
        seconds,
        tally,
        dict(fleet.longest_stale),
        fresh_after,
        (overrides_before, overrides_after),
        (len(entries_before), len(entries_after)),
        lost,
        counted,
        checks,
        list(fleet.notes),
    )


def table(rows: list[Row]) -> str:
    head = (
        "| scenario | s | calls sent | verdicts | retried on the other replica | refused by policy | unexpected "
        "refused / allowed | longest stale: refunds / identity (s) | fresh after the owner served (s) | "
        "overrides before -> after | audit entries before -> after (lost) | "
        "checks not run, open + closed: verdicts / counted | figures of its own | result |\n" + "| --- " * 14 + "|"
    )
    lines = [head]
    for row in rows:
        tally = row.tally
        stale = " / ".join(f"{row.stale.get(name, 0.0):.1f}" for name in OWNER_SETS)
        fresh = f"{row.fresh_after:.2f}" if row.fresh_after is not None else "-"
        counted = "-" if row.unavailable_counted is None else str(row.unavailable_counted)
        verdict = "ok" if row.ok else "FAIL: " + "; ".join(row.checks)
        lines.append(
            f"| {row.scenario} | {row.seconds:.0f} | {tally.sent} | {tally.verdicts} | {tally.retried} | "
            f"{tally.refused_by_policy} | {tally.unexpected_refusals} / {tally.unexpected_allows} | {stale} | "
            f"{fresh} | {row.overrides[0]} -> {row.overrides[1]} | {row.audit[0]} -> {row.audit[1]} "
            f"({row.audit_lost}) | {tally.failed_open} + {tally.failed_closed} / {counted} | "
            f"{'; '.join(row.notes) or '-'} | {verdict} |"
        )
    return "\n".join(lines)


async def main(short: bool) -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="argwatch-gameday-") as folder:
        fleet = Fleet(folder, short)
        rows: list[Row] = []
        try:
            await fleet.start()
            await fleet.set_override("create_ticket", pb.MODE_OBSERVE, "gameday: keep create_ticket observing")
            await fleet.set_override("transfer_stock", pb.MODE_OBSERVE, "gameday: WMS migration")
            for name, scenario in SCENARIOS:
                try:
                    rows.append(await play(fleet, name, scenario))
                except RuntimeError as error:
                    fleet.load_on.clear()
                    checks = [str(error), *fleet.findings]
                    rows.append(Row(name, 0, fleet.tally, {}, None, (0, 0), (0, 0), 0, None, checks, fleet.notes))
                print(table(rows).splitlines()[-1], flush=True)
        finally:
            await fleet.close()
    print(f"\ngame day ({'short' if short else 'full'}), {time.monotonic() - started:.0f} s in all:\n")
    print(table(rows))
    return 0 if rows and all(row.ok for row in rows) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="the short form (under a minute), as make test runs it")
    arguments = parser.parse_args()
    sys.exit(asyncio.run(main(arguments.short)))
