"""Game days, scripted: a small fleet on loopback, the ordinary faults of a production week one after another,
and a table of what held.

    make gameday                      # the full run (~2.5 minutes), its table printed
    python bench/gameday.py --short   # under a minute; `make test` runs it (tests/e2e/test_gameday.py)

The fleet: a redis-server, the demo owning service (examples/demo_source.py: value sets streamed, and the
orders' system of record), two `argwatch serve` replicas sharing Redis, on the demo policy, and steady load
from a client that sends each call to one replica and, when that one does not answer (UNAVAILABLE: it is
restarting), to the other, as a load balancer would.

Each scenario plays one fault under load, then checks and prints one row:
- every call sent got a verdict (sent = verdicts);
- calls refused only where the policy says so: a refund whose order cannot be looked up while the owner is
  down is refused (its record check fails closed), an invented reason code is refused; anything else
  refused, or an invented code let through, is counted as unexpected and fails the row;
- the longest time each owner's set was stale on any replica, and after an owner restart, how long after
  the new process served both replicas had every set fresh again (at most 2 s);
- overrides and audit entries before and after: none lost;
- checks that could not run (failed open: let through, listed as skipped; or closed: refused with
  CHECK_UNAVAILABLE): as many in the verdicts as the gateways counted (tool_argument_check_unavailable_total).
Every process is on 127.0.0.1, and everything stops by itself (and is killed at exit).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import grpc
import orjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from argwatch.common.channels import QUICK_RECONNECT_OPTIONS  # noqa: E402
from argwatch.v1 import (  # noqa: E402
    admin_pb2,
    admin_pb2_grpc,
    gateway_pb2_grpc,
)
from argwatch.v1 import gateway_pb2 as pb  # noqa: E402
from tests.redis_server import RedisProcess, start_redis  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "examples"))
from demo_data import active_handles  # noqa: E402

EXAMPLES = os.path.join(ROOT, "examples")
ARGWATCH = os.path.join(os.path.dirname(sys.executable), "argwatch")
OWNER_SETS = ("refunds.reason_codes", "identity.active_handles")
FRESH_AFTER_OWNER_RESTART = 2.0  # seconds from the new owner serving to every set fresh on every replica


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Process:
    """A child process whose stderr is read line by line, so a scenario can wait for what it logs."""

    def __init__(self, name: str, command: list[str]) -> None:
        self.name, self.command = name, command
        self.process: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []
        self._reader: asyncio.Task[None] | None = None

    async def start(self, ready: str, seconds: float = 30.0) -> re.Match[str]:
        self.lines = []
        self.process = await asyncio.create_subprocess_exec(
            *self.command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        self._reader = asyncio.create_task(self._read())
        return await self.wait_for(ready, seconds)

    async def _read(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        async for raw in self.process.stderr:
            self.lines.append(raw.decode(errors="replace").rstrip())
            del self.lines[:-5000]  # bounded: a long run keeps the last lines only

    async def wait_for(self, pattern: str, seconds: float = 30.0, after: int = 0) -> re.Match[str]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for line in self.lines[after:]:
                if found := re.search(pattern, line):
                    return found
            if self.process is not None and self.process.returncode is not None:
                break
            await asyncio.sleep(0.02)
        tail = "\n".join(self.lines[-30:])
        raise RuntimeError(f"{self.name}: {pattern!r} not seen within {seconds:g}s; last lines:\n{tail}")

    def send(self, number: int) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(number)

    async def stop(self, number: int = signal.SIGTERM, seconds: float = 20.0) -> int:
        if self.process is None:
            return 0
        self.send(number)
        try:
            async with asyncio.timeout(seconds):
                code = await self.process.wait()
        except TimeoutError:
            self.process.kill()
            code = await self.process.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        return code


@dataclass
class Replica:
    name: str
    port: int
    admin_port: int
    metrics_port: int
    process: Process

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def admin_target(self) -> str:
        return f"127.0.0.1:{self.admin_port}"


@dataclass
class Tally:
    """What the load saw over one scenario."""

    sent: int = 0
    verdicts: int = 0
    retried: int = 0
    refused_by_policy: int = 0  # invented codes, and refunds whose record check failed closed
    unexpected_refusals: int = 0
    unexpected_allows: int = 0
    failed_open: int = 0  # skipped checks listed in verdicts
    failed_closed: int = 0  # checks that could not run and refused the call (CHECK_UNAVAILABLE)
    lost: int = 0  # calls no replica answered
    examples: list[str] = field(default_factory=list)


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

    @property
    def ok(self) -> bool:
        return not self.checks


class Fleet:
    """The processes of the game day, and the views of them every scenario uses."""

    def __init__(self, folder: str, short: bool) -> None:
        self.folder, self.short = folder, short
        self.owner_port = free_port()
        self.owner = Process(
            "owner",
            [sys.executable, os.path.join(EXAMPLES, "demo_source.py"), "--listen", f"127.0.0.1:{self.owner_port}",
             "--churn-every", "2"],
        )  # fmt: skip
        self.redis: RedisProcess | None = None
        self.redis_port = free_port()
        self.policy = os.path.join(folder, "policy.yaml")
        self.replicas: list[Replica] = []
        self.tally = Tally()
        self.load_on = asyncio.Event()
        self.owner_down = False  # set by the scenarios that stop the owner: its look-ups may fail closed
        self._next = 0
        self._stale_since: dict[tuple[str, str], float] = {}
        self.longest_stale: dict[str, float] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._calls: set[asyncio.Task[None]] = set()
        self._channels: dict[str, grpc.aio.Channel] = {}

    # ---- setting up

    def write_policy(self, extra_tool: bool = False) -> None:
        with open(os.path.join(EXAMPLES, "policy.yaml")) as handle:
            text = handle.read().replace("127.0.0.1:50061", f"127.0.0.1:{self.owner_port}")
        if extra_tool:  # the policy change a rolling deploy brings
            text = text.replace("\ntools:\n", "\ntools:\n  gameday_probe:\n    mode: observe\n", 1)
        with open(self.policy, "w") as handle:
            handle.write(text)

    async def start(self) -> None:
        shutil.copy(os.path.join(EXAMPLES, "value_sets.yaml"), os.path.join(self.folder, "value_sets.yaml"))
        self.write_policy()
        self.redis = start_redis(self.folder, self.redis_port)
        await self.owner.start("demo owning service on")
        for name in ("gw-a", "gw-b"):
            port, admin, metrics = free_port(), free_port(), free_port()
            command = [
                ARGWATCH, "serve", "--policy", self.policy, "--listen", f"127.0.0.1:{port}",
                "--admin-listen", f"127.0.0.1:{admin}", "--metrics-listen", f"127.0.0.1:{metrics}",
                "--redis", f"redis://127.0.0.1:{self.redis_port}/0", "--replica-id", name,
                "--grace-seconds", "2",
            ]  # fmt: skip
            self.replicas.append(Replica(name, port, admin, metrics, Process(name, command)))
        await asyncio.gather(*(replica.process.start("serving policy") for replica in self.replicas))
        for replica in self.replicas:
            for target in (replica.target, replica.admin_target):  # quick to notice a restarted replica is back
                self._channels[target] = grpc.aio.insecure_channel(target, options=QUICK_RECONNECT_OPTIONS)
        self._tasks = [asyncio.create_task(self._load()), asyncio.create_task(self._watch_staleness())]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for channel in self._channels.values():
            await channel.close()
        await asyncio.gather(*(replica.process.stop() for replica in self.replicas), self.owner.stop())
        if self.redis is not None:
            self.redis.kill()

    # ---- the load

    async def _load(self) -> None:
        """Calls of known composition at a steady rate, each to one replica, then the other if it is down."""
        rate = 40 if self.short else 80
        index = 0
        while True:
            await self.load_on.wait()
            started = time.monotonic()
            index += 1
            task = asyncio.create_task(self._call(index))
            self._calls.add(task)  # held until done: a task only the loop references may be collected
            task.add_done_callback(self._calls.discard)
            await asyncio.sleep(max(0.0, 1 / rate - (time.monotonic() - started)))

    async def _call(self, index: int) -> None:
        tally = self.tally
        tally.sent += 1
        owner_down = self.owner_down
        tool, arguments, customer, expect_allow = _call_for(index)
        request = pb.ValidateRequest(
            tool=tool, arguments_json=orjson.dumps(arguments), session=pb.Session(customer_id=customer)
        )
        # One replica, then the other while the first does not answer, for up to 10 s: what a client
        # behind a load balancer sees. UNAVAILABLE means the call never ran, so sending it again is safe;
        # so does CANCELLED from a replica shutting down (gRPC core cancels calls that reached the
        # transport but no handler yet; the 2 s grace lets every call a handler took finish). Had one
        # run, its retry would trip the repeat check of refund_order and count as an unexpected refusal.
        first = index % len(self.replicas)
        order = [self.replicas[first], *self.replicas[:first], *self.replicas[first + 1 :]]
        verdict = None
        deadline = time.monotonic() + 10
        attempt = 0
        while verdict is None and time.monotonic() < deadline:
            replica = order[attempt % len(order)]
            stub = gateway_pb2_grpc.GatewayStub(self._channels[replica.target])
            try:
                verdict = await stub.Validate(request, timeout=5)
            except grpc.aio.AioRpcError as error:
                if error.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                    tally.examples.append(f"{replica.name}: {error.code().name}: {error.details()}")
                    break
                if attempt == 0:
                    tally.retried += 1
                attempt += 1
                if attempt % len(order) == 0:
                    await asyncio.sleep(0.05)
        if verdict is None:
            tally.lost += 1
            return
        tally.verdicts += 1
        tally.failed_open += len(verdict.skipped)
        codes = {problem.code for problem in verdict.problems}
        tally.failed_closed += sum(1 for p in verdict.problems if p.code == pb.PROBLEM_CODE_CHECK_UNAVAILABLE)
        owner_down = owner_down or self.owner_down  # down when it was sent, or when it was answered
        if verdict.decision == pb.DECISION_REJECT:
            # The policy refuses a refund whose order cannot be looked up (failure: closed), which happens
            # only while the owner (the system of record) is down. Anywhere else it is unexpected.
            closed = tool == "refund_order" and owner_down and codes == {pb.PROBLEM_CODE_CHECK_UNAVAILABLE}
            if not expect_allow or closed:
                tally.refused_by_policy += 1
            else:
                tally.unexpected_refusals += 1
                if len(tally.examples) < 5:
                    tally.examples.append(f"refused {tool} {arguments}: {[p.message for p in verdict.problems]}")
        elif not expect_allow and not verdict.skipped:
            tally.unexpected_allows += 1
            if len(tally.examples) < 5:
                tally.examples.append(f"allowed {tool} {arguments}")

    # ---- what the replicas say

    async def statuses(self) -> dict[str, admin_pb2.GetStatusResponse]:
        found = {}
        for replica in self.replicas:
            stub = admin_pb2_grpc.AdminStub(self._channels[replica.admin_target])
            with contextlib.suppress(grpc.aio.AioRpcError):
                found[replica.name] = await stub.GetStatus(admin_pb2.GetStatusRequest(), timeout=2)
        return found

    async def handles_versions(self) -> dict[str, int]:
        """identity.active_handles' version on each replica that answers."""
        return {
            replica: value_set.version
            for replica, status in (await self.statuses()).items()
            for value_set in status.value_sets
            if value_set.name == "identity.active_handles"
        }

    async def _watch_staleness(self) -> None:
        """Every 100 ms: how long each owner set has been stale (or missing) on each replica."""
        while True:
            now = time.monotonic()
            for replica, status in (await self.statuses()).items():
                for value_set in status.value_sets:
                    if value_set.name not in OWNER_SETS:
                        continue
                    key = (replica, value_set.name)
                    if value_set.stale or not value_set.available:
                        since = self._stale_since.setdefault(key, now)
                        longest = self.longest_stale.get(value_set.name, 0.0)
                        self.longest_stale[value_set.name] = max(longest, now - since)
                    else:
                        self._stale_since.pop(key, None)
            await asyncio.sleep(0.1)

    async def all_fresh(self) -> bool:
        statuses = await self.statuses()
        return len(statuses) == len(self.replicas) and all(
            not s.stale and s.available and s.source_connected
            for status in statuses.values()
            for s in status.value_sets
            if s.name in OWNER_SETS
        )

    async def audit(self) -> tuple[set[tuple[str, ...]], int]:
        """Every audit entry (from a replica that answers), and the overrides in force."""
        for replica in self.replicas:
            stub = admin_pb2_grpc.AdminStub(self._channels[replica.admin_target])
            try:
                changes = await stub.ListModeChanges(admin_pb2.ListModeChangesRequest(limit=1000), timeout=2)
                status = await stub.GetStatus(admin_pb2.GetStatusRequest(), timeout=2)
            except grpc.aio.AioRpcError:
                continue
            entries = {(str(c.at.ToNanoseconds()), c.actor, c.tool, c.outcome, c.reason) for c in changes.changes}
            return entries, sum(1 for tool in status.tools if tool.mode_source == "override")
        raise RuntimeError("no replica answers the Admin API")

    def unavailable_counted(self) -> int:
        total = 0
        for replica in self.replicas:
            url = f"http://127.0.0.1:{replica.metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as response:
                for line in response.read().decode().splitlines():
                    if line.startswith("tool_argument_check_unavailable_total{"):
                        total += int(float(line.rsplit(" ", 1)[1]))
        return total

    async def load_drained(self) -> bool:
        return not self._calls

    async def handle_in_set(self, handle: str) -> bool:
        """Whether every replica finds `handle` in identity.active_handles (create_ticket observes: no refusal)."""
        arguments = {"component_id": "billing-api", "assignee": handle}
        request = pb.ValidateRequest(tool="create_ticket", arguments_json=orjson.dumps(arguments))
        found = []
        for replica in self.replicas:
            verdict = await gateway_pb2_grpc.GatewayStub(self._channels[replica.target]).Validate(request, timeout=5)
            found.append(not [problem for problem in verdict.problems if problem.argument == "assignee"])
        return all(found)

    async def set_override(self, tool: str, mode: pb.Mode, reason: str) -> None:
        stub = admin_pb2_grpc.AdminStub(self._channels[self.replicas[0].admin_target])
        await stub.SetMode(
            admin_pb2.SetModeRequest(tool=tool, mode=mode, reason=reason),
            metadata=(("x-argwatch-actor", "gameday@oncall"),),
            timeout=5,
        )


def _call_for(index: int) -> tuple[str, dict[str, object], str, bool]:
    """Call `index` of the load: (tool, arguments, customer, whether the policy allows it)."""
    kind = index % 4
    order = index % 200  # ord_000001.. belong to cus_000..cus_019 in turn (examples/demo_data.py)
    customer = f"cus_{order % 20:03d}"
    refund = {"order_id": f"ord_{order + 1:06d}", "amount_cents": 1 + index // 200}  # each refund its own
    if kind == 0:
        return "refund_order", {**refund, "reason_code": "DAMAGED_ITEM"}, customer, True
    if kind == 1:
        return "refund_order", {**refund, "reason_code": "GOODWILL"}, customer, False  # invented: reject mode
    if kind == 2:
        return "create_ticket", {"component_id": "billing-api"}, customer, True
    return "transfer_stock", {"warehouse_code": "AMS-9"}, customer, True  # invented, but the tool observes


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


async def until(condition: Callable[[], Awaitable[bool]], seconds: float, step: float = 0.05) -> float:
    """Seconds until `condition` held; raises after `seconds`."""
    started = time.monotonic()
    while not await condition():
        if time.monotonic() - started > seconds:
            raise RuntimeError(f"not within {seconds:g}s")
        await asyncio.sleep(step)
    return time.monotonic() - started


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
    statuses = await fleet.statuses()
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
]


async def play(fleet: Fleet, name: str, scenario: Scenario) -> Row:
    entries_before, overrides_before = await fleet.audit()
    counted_before = fleet.unavailable_counted()
    fleet.tally, fleet.longest_stale = Tally(), {}
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
    checks = []
    if tally.verdicts != tally.sent:
        checks.append(f"{tally.sent - tally.verdicts} calls without a verdict: {tally.examples[:3]}")
    if tally.unexpected_refusals or tally.unexpected_allows:
        checks.append(f"unexpected: {tally.examples[:3]}")
    lost = len(entries_before - entries_after)
    if lost or overrides_after < overrides_before:
        checks.append(f"{lost} audit entries lost, overrides {overrides_before} -> {overrides_after}")
    if fresh_after is not None and fresh_after > FRESH_AFTER_OWNER_RESTART:
        checks.append(f"sets fresh {fresh_after:.2f}s after the owner served (at most {FRESH_AFTER_OWNER_RESTART}s)")
    if scenario not in (owner_restart, owner_hang) and max(fleet.longest_stale.values(), default=0.0) > 0.5:
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
    )


def table(rows: list[Row]) -> str:
    head = (
        "| scenario | s | calls sent | verdicts | retried on the other replica | refused by policy | unexpected "
        "refused / allowed | longest stale: refunds / identity (s) | fresh after the owner served (s) | "
        "overrides before -> after | audit entries before -> after (lost) | "
        "checks not run, open + closed: verdicts / counted | result |\n" + "| --- " * 13 + "|"
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
            f"({row.audit_lost}) | {tally.failed_open} + {tally.failed_closed} / {counted} | {verdict} |"
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
                    rows.append(Row(name, 0, fleet.tally, {}, None, (0, 0), (0, 0), 0, None, [str(error)]))
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
