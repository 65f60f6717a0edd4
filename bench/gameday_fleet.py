"""The game day's fleet on loopback and its steady load, with the views of them every scenario uses.

The fleet: a redis-server, the demo owning service (examples/demo_source.py: value sets streamed, and the
orders' system of record), two `argwatch serve` replicas sharing Redis, on the demo policy. The load sends
each call to one replica and, when that one does not answer (UNAVAILABLE: it is restarting), to the other,
as a load balancer would, and tallies each verdict against what the policy says. bench/gameday.py plays
the scenarios on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import sys
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

EXAMPLES = os.path.join(ROOT, "examples")
ARGWATCH = os.path.join(os.path.dirname(sys.executable), "argwatch")
OWNER_SETS = ("refunds.reason_codes", "identity.active_handles")


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
    let_through_unverified: int = 0  # refunds allowed with their order look-up skipped (a failure override)
    # Per replica: refunds refused only because the order could not be looked up, and invented reasons
    # refused while a failure override made that look-up fail open.
    refused_unverifiable: dict[str, int] = field(default_factory=dict)
    invented_refused_failing_open: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)


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
        self.owner_down = False  # set by the scenarios that stop the owner: its look-ups may fail
        # Whether on-call's failure override makes the order look-up fail open: "off", "on" (in force on
        # every replica), or "uncertain" (set or expiring, not yet seen everywhere): either is expected then.
        self.fail_open = "off"
        # What a scenario adds to its row: figures worth printing, and what it found wrong (the row fails).
        self.notes: list[str] = []
        self.findings: list[str] = []
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
        owner_down, fail_open = self.owner_down, self.fail_open
        tool, arguments, customer, refused_on = _call_for(index)
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
        self._judge(tally, replica.name, tool, arguments, refused_on, (owner_down, fail_open), verdict)

    async def probe(
        self, replica: Replica, tool: str, arguments: dict[str, object], customer: str, refused_on: str = ""
    ) -> pb.ValidateResponse:
        """One call of a scenario's own to `replica`, tallied and judged as the load's are."""
        self.tally.sent += 1
        before = (self.owner_down, self.fail_open)
        request = pb.ValidateRequest(
            tool=tool, arguments_json=orjson.dumps(arguments), session=pb.Session(customer_id=customer)
        )
        verdict: pb.ValidateResponse = await gateway_pb2_grpc.GatewayStub(self._channels[replica.target]).Validate(
            request, timeout=5
        )
        self._judge(self.tally, replica.name, tool, arguments, refused_on, before, verdict)
        return verdict

    def _judge(
        self,
        tally: Tally,
        replica: str,
        tool: str,
        arguments: dict[str, object],
        refused_on: str,
        sent: tuple[bool, str],
        verdict: pb.ValidateResponse,
    ) -> None:
        """Tallies a verdict against what the policy says. `refused_on`: the argument whose check refuses the
        call ("" if the policy allows it); `sent`: whether the owner was down, and the failure override's
        state, when it was sent."""
        tally.verdicts += 1
        tally.failed_open += len(verdict.skipped)
        codes = {problem.code for problem in verdict.problems}
        tally.failed_closed += sum(1 for p in verdict.problems if p.code == pb.PROBLEM_CODE_CHECK_UNAVAILABLE)
        # A refund's order look-up may fail only while the owner (the system of record) is down: when the
        # call was sent, or when it was answered. It then fails closed (the policy's `failure: closed`)
        # unless on-call's failure override makes it fail open: sure only when it was in force on every
        # replica both when the call was sent and when it was answered.
        unverifiable = tool == "refund_order" and (sent[0] or self.owner_down)
        states = {sent[1], self.fail_open}
        may_close = unverifiable and states != {"on"}
        may_open = unverifiable and states != {"off"}
        skipped = {check.argument for check in verdict.skipped}
        if verdict.decision == pb.DECISION_REJECT:
            closed = may_close and codes == {pb.PROBLEM_CODE_CHECK_UNAVAILABLE}
            if refused_on or closed:
                tally.refused_by_policy += 1
                if closed:
                    tally.refused_unverifiable[replica] = tally.refused_unverifiable.get(replica, 0) + 1
                if refused_on == "reason_code" and may_open and "order_id" in skipped:
                    counts = tally.invented_refused_failing_open
                    counts[replica] = counts.get(replica, 0) + 1
            else:
                tally.unexpected_refusals += 1
                if len(tally.examples) < 5:
                    tally.examples.append(f"refused {tool} {arguments}: {[p.message for p in verdict.problems]}")
            return
        # Let through. A check the policy refuses the call on may have been skipped, never ignored: the
        # reason code's set fails open when it is unavailable; the order's look-up only under the override.
        if tool == "refund_order" and "order_id" in skipped:
            tally.let_through_unverified += 1
        wrong = ("order_id" in skipped and not may_open) or (refused_on != "" and refused_on not in skipped)
        if wrong:
            tally.unexpected_allows += 1
            if len(tally.examples) < 5:
                tally.examples.append(f"allowed {tool} {arguments}, skipped {sorted(skipped)}")

    # ---- what the replicas say

    def admin(self, replica: Replica) -> admin_pb2_grpc.AdminStub:
        return admin_pb2_grpc.AdminStub(self._channels[replica.admin_target])

    async def statuses(self) -> dict[str, admin_pb2.GetStatusResponse]:
        found = {}
        for replica in self.replicas:
            stub = self.admin(replica)
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


def _call_for(index: int) -> tuple[str, dict[str, object], str, str]:
    """Call `index` of the load: (tool, arguments, customer, the argument whose check refuses it: "" if none)."""
    kind = index % 4
    order = index % 200  # ord_000001.. belong to cus_000..cus_019 in turn (examples/demo_data.py)
    customer = f"cus_{order % 20:03d}"
    refund = {"order_id": f"ord_{order + 1:06d}", "amount_cents": 1 + index // 200}  # each refund its own
    if kind == 0:
        return "refund_order", {**refund, "reason_code": "DAMAGED_ITEM"}, customer, ""
    if kind == 1:
        return "refund_order", {**refund, "reason_code": "GOODWILL"}, customer, "reason_code"  # invented
    if kind == 2:
        return "create_ticket", {"component_id": "billing-api"}, customer, ""
    return "transfer_stock", {"warehouse_code": "AMS-9"}, customer, ""  # invented, but the tool observes


async def until(condition: Callable[[], Awaitable[bool]], seconds: float, step: float = 0.05) -> float:
    """Seconds until `condition` held; raises after `seconds`."""
    started = time.monotonic()
    while not await condition():
        if time.monotonic() - started > seconds:
            raise RuntimeError(f"not within {seconds:g}s")
        await asyncio.sleep(step)
    return time.monotonic() - started
