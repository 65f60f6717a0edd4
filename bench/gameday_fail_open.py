"""The game day's incident at the grain of the fault (issue 29, item 5): the owner of a fail-closed record goes
down under load; on-call previews, then makes only that source fail open, for a while.

In the demo policy, refund_order's `record:order` (the order exists and is the customer's own) reads the
`owners` source and fails closed: with the owner down, every refund whose order is not in the look-up cache
(30 s) is refused with CHECK_UNAVAILABLE. The demo owner also streams the value sets, so its sets go stale
for the outage, and still hold (`max_staleness: 1h`): invented reason codes are refused against the last
good copy throughout. The scenario:

1. kills the owner (kill -9) under the load; refunds are refused with CHECK_UNAVAILABLE on both replicas;
2. previews `source:owners` failing open on each replica (Admin.PreviewChange) and checks its figures: the
   refused refunds it would let through are exactly those refused only because the order could not be
   looked up ("unverifiable"), none with an invented reason; it names the ownership check it switches off;
   its first lines are printed;
3. sets it, with an expiry: on-call's 10 minutes, shortened so that the game day sees it expire (60 s in
   the full form, 6 s in the short one); while it is in force and the owner down, refunds of real orders
   go through with the look-up listed as skipped (and counted), and invented reasons are still refused,
   on both replicas (the override reached the second one through Redis);
4. starts the owner again while the override is in force: a refund naming another customer's order is
   refused (NOT_FOUND, as the model is told: the demo policy does not reveal_not_owned) on both replicas
   within 2 s of the owner serving: ownership is checked again the moment the owner answers;
5. lets the override expire by itself: audited once, "expired" by "argwatch", on both replicas; and
   nothing else changed: every tool's mode and checks, and the audit apart from the two entries of this
   override, are as they were before.

It plays last: the rolling restart before it restarted both replicas' counts, so the preview's windows
hold this scenario's refusals only, and its figures are checked exactly against the load's.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from collections.abc import Iterator

from gameday_fleet import Fleet, Replica, until

from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb

SOURCE = "source:owners"  # what refund_order's record:order reads in examples/policy.yaml
ACTOR = "gameday@oncall"
OVERRIDE_SECONDS = {True: 6, False: 60}  # short form, full form: on-call's 10 minutes, shortened
DOWN_BEFORE_PREVIEW = {True: 1.0, False: 31.0}  # the full form waits out the look-up cache's 30 s TTL
FAILING_OPEN_OWNER_DOWN = {True: 0.0, False: 20.0}  # seconds failing open before the owner returns
RESUMED_WITHIN = 2.0  # seconds from the owner serving to ownership refused on both replicas


class _Orders:
    """Orders the load never names (it refunds ord_n with (n - 1) % 4 in {0, 1}), so the first look-up of
    each asks the owner: not cached, it is refused while the owner is down unless the override lets it by."""

    def __init__(self) -> None:
        self._unused: Iterator[int] = (n for n in itertools.count(4) if (n - 1) % 4 in (2, 3))
        # Each refund its own (a repeat would be refused as one), below the 500 cents each demo order was paid.
        self._own_amounts, self._not_owned_amounts = itertools.count(100), itertools.count(1)

    def own(self, reason: str = "DAMAGED_ITEM") -> tuple[dict[str, object], str]:
        """A refund of an order the customer owns (ord_000001.. belong to cus_000..cus_019 in turn)."""
        n = next(self._unused)
        return self._refund(n, reason, self._own_amounts), f"cus_{(n - 1) % 20:03d}"

    def not_owned(self) -> tuple[dict[str, object], str]:
        """A refund of ord_000003 (cus_002's) asked by cus_000."""
        return self._refund(3, "DAMAGED_ITEM", self._not_owned_amounts), "cus_000"

    def _refund(self, n: int, reason: str, amounts: Iterator[int]) -> dict[str, object]:
        amount = next(amounts)
        if amount >= 500:
            raise RuntimeError("out of refund amounts below what was paid")
        return {"order_id": f"ord_{n:06d}", "amount_cents": amount, "reason_code": reason}


def _skipped(verdict: pb.ValidateResponse) -> list[tuple[str, str]]:
    return [(check.argument, check.value_set) for check in verdict.skipped]


def _codes(verdict: pb.ValidateResponse) -> dict[str, set[str]]:
    codes: dict[str, set[str]] = {}
    for problem in verdict.problems:
        codes.setdefault(problem.argument, set()).add(pb.ProblemCode.Name(problem.code).removeprefix("PROBLEM_CODE_"))
    return codes


def _expect(found: list[str], replica: Replica, what: str, verdict: pb.ValidateResponse, ok: bool) -> None:
    if not ok:
        decision = pb.Decision.Name(verdict.decision)
        found.append(f"{replica.name}: {what}: got {decision} {_codes(verdict)} skipped {_skipped(verdict)}")


async def _state(fleet: Fleet) -> dict[str, tuple[object, ...]]:
    """What must not change, per replica: the global mode, every tool's mode and where it comes from, its
    checks' overrides and how they fail, and the failure and foreign overrides in force."""
    statuses = await fleet.statuses()
    if len(statuses) != len(fleet.replicas):
        raise RuntimeError(f"only {sorted(statuses)} answer GetStatus")
    return {
        name: (
            status.global_mode,
            tuple(_tool_state(tool) for tool in status.tools),
            tuple((f.target, f.failure, f.actor, f.reason) for f in status.failure_overrides),
            tuple((f.tool, f.mode, f.actor, f.reason) for f in status.foreign_overrides),
        )
        for name, status in statuses.items()
    }


def _tool_state(tool: admin_pb2.ToolStatus) -> tuple[object, ...]:
    checks = tuple((c.name, c.fails_closed, c.override_mode, c.override_actor, c.override_reason) for c in tool.checks)
    return (tool.tool, tool.mode, tool.mode_source, tool.mode_expires_at.ToSeconds(), tool.policy_mode, checks)


async def _trail(fleet: Fleet, replica: Replica) -> set[tuple[object, ...]]:
    changes = await fleet.admin(replica).ListModeChanges(admin_pb2.ListModeChangesRequest(limit=1000), timeout=5)
    return {
        (c.at.ToNanoseconds(), c.actor, c.tool, c.check, c.old_mode, c.new_mode, c.outcome, c.reason)
        for c in changes.changes
    }


async def _listed_on(fleet: Fleet) -> dict[str, bool]:
    """Whether each replica lists the failure override of SOURCE as in force."""
    return {
        name: any(f.target == SOURCE and f.failure == "open" for f in status.failure_overrides)
        for name, status in (await fleet.statuses()).items()
    }


def _causes(window: admin_pb2.PreviewWindow) -> dict[str, int]:
    return {cause.cause: cause.calls for cause in window.newly_allowed_by_cause}


async def _preview(fleet: Fleet, seconds: int) -> tuple[list[str], int, int, str]:
    """Previews SOURCE failing open on each replica and checks its figures against the load's; returns
    gw-a's lines, the calls it would let through and keep refused over the last minute, fleet-wide, and
    the security checks it names as switched off."""
    found = fleet.findings
    change = admin_pb2.SetModeRequest(check=SOURCE, failure="open", expires_in_seconds=seconds)
    lines: list[str] = []
    allowed = kept = 0
    security: set[str] = set()
    for replica in fleet.replicas:
        # Each replica previews the calls it answered: those refused only because the order could not be
        # looked up, as the load tallied them before and after asking (calls in flight may land between).
        low = fleet.tally.refused_unverifiable.get(replica.name, 0)
        preview = await fleet.admin(replica).PreviewChange(admin_pb2.PreviewChangeRequest(change=change), timeout=5)
        high = fleet.tally.refused_unverifiable.get(replica.name, 0)
        lines = lines or list(preview.lines)
        for window in preview.windows:
            where = f"preview on {replica.name}, last {window.window_seconds // 60} min"
            if not low <= window.newly_allowed <= high:
                found.append(f"{where}: lets through {window.newly_allowed}, the load saw {low}..{high} refused")
            if set(_causes(window)) - {"unverifiable"} or window.newly_refused or window.not_previewed:
                found.append(
                    f"{where}: causes {_causes(window)}, newly refused {window.newly_refused}, "
                    f"not previewed {window.not_previewed}"
                )
        minute = preview.windows[0]
        allowed += minute.newly_allowed
        kept += minute.refused_now - minute.newly_allowed
        named = {(p.kind, p.tool, p.check) for p in preview.switched_off if p.security}
        security |= {" ".join(name) for name in named}
        if not named & {("ownership", "refund_order", "record:order"), ("fail_closed", "refund_order", "record:order")}:
            found.append(f"preview on {replica.name} names no ownership check switched off: {named}")
    if not allowed:
        found.append("the preview would let no refused refund through")
    return lines, allowed, kept, ", ".join(sorted(security))


async def owner_down_fail_open(fleet: Fleet) -> float | None:
    """The owner killed under load; on-call previews, then fails open on its source alone until it expires."""
    found, orders = fleet.findings, _Orders()
    seconds = OVERRIDE_SECONDS[fleet.short]
    before = await _state(fleet)
    trails = {replica.name: await _trail(fleet, replica) for replica in fleet.replicas}

    # 1. The owner dies: refunds it cannot vouch for are refused, on both replicas.
    fleet.owner_down = True
    await fleet.owner.stop(signal.SIGKILL)
    for replica in fleet.replicas:
        arguments, customer = orders.own()
        verdict = await fleet.probe(replica, "refund_order", arguments, customer)
        refused = verdict.decision == pb.DECISION_REJECT and _codes(verdict) == {"order_id": {"CHECK_UNAVAILABLE"}}
        _expect(found, replica, "a refund, owner down", verdict, refused)
        arguments, customer = orders.own("GOODWILL")
        verdict = await fleet.probe(replica, "refund_order", arguments, customer, refused_on="reason_code")
        both = {"reason_code": {"OUT_OF_SET"}, "order_id": {"CHECK_UNAVAILABLE"}}
        _expect(found, replica, "an invented reason, owner down", verdict, _codes(verdict) == both)
    await asyncio.sleep(DOWN_BEFORE_PREVIEW[fleet.short])
    refused_down = sum(fleet.tally.refused_unverifiable.values())

    # 2. The preview, on each replica.
    lines, would_allow, would_keep, switched_off = await _preview(fleet, seconds)
    for line in lines:
        print(f"    preview (gw-a): {line}", flush=True)

    # 3. Fail open on that source alone, with an expiry; in force on both replicas within a second.
    fleet.fail_open = "uncertain"
    await fleet.admin(fleet.replicas[0]).SetMode(
        admin_pb2.SetModeRequest(
            check=SOURCE,
            failure="open",
            reason=f"gameday: the orders' owner is down (10 min, shortened to {seconds} s)",
            expires_in_seconds=seconds,
        ),
        metadata=(("x-argwatch-actor", ACTOR),),
        timeout=5,
    )
    set_at = time.monotonic()

    async def listed_everywhere() -> bool:
        listed = await _listed_on(fleet)
        return len(listed) == len(fleet.replicas) and all(listed.values())

    propagated = await until(listed_everywhere, 2, step=0.01)
    fleet.fail_open = "on"
    for replica in fleet.replicas:
        arguments, customer = orders.own()
        verdict = await fleet.probe(replica, "refund_order", arguments, customer)
        through = verdict.decision == pb.DECISION_ALLOW and _skipped(verdict) == [("order_id", "record.order")]
        _expect(found, replica, "a refund, failing open", verdict, through)
        arguments, customer = orders.own("GOODWILL")
        verdict = await fleet.probe(replica, "refund_order", arguments, customer, refused_on="reason_code")
        refused = verdict.decision == pb.DECISION_REJECT and _codes(verdict) == {"reason_code": {"OUT_OF_SET"}}
        _expect(found, replica, "an invented reason, failing open", verdict, refused)
        arguments, customer = orders.not_owned()  # what on-call accepts: unchecked while the owner is down
        verdict = await fleet.probe(replica, "refund_order", arguments, customer, refused_on="order_id")
        _expect(found, replica, "another's order, failing open", verdict, verdict.decision == pb.DECISION_ALLOW)
    await asyncio.sleep(FAILING_OPEN_OWNER_DOWN[fleet.short])

    # 4. The owner returns while the override is in force: ownership is checked again at once.
    await fleet.owner.start("demo owning service on")
    served = time.monotonic()

    async def ownership_checked(replica: Replica) -> float:
        while True:
            arguments, customer = orders.not_owned()
            verdict = await fleet.probe(replica, "refund_order", arguments, customer, refused_on="order_id")
            if verdict.decision == pb.DECISION_REJECT:
                not_found = _codes(verdict) == {"order_id": {"NOT_FOUND"}}  # as the model is told
                _expect(found, replica, "another's order, owner back", verdict, not_found)
                return time.monotonic() - served
            if time.monotonic() - served > 5:
                raise RuntimeError(f"{replica.name}: another customer's order still let through 5 s after")
            await asyncio.sleep(0.02)

    async def fresh() -> float:
        await until(fleet.all_fresh, 20)
        return time.monotonic() - served

    *resumed, fresh_after = await asyncio.gather(*(ownership_checked(r) for r in fleet.replicas), fresh())
    if max(resumed) > RESUMED_WITHIN:
        found.append(f"ownership checked again {max(resumed):.2f} s after the owner served (at most {RESUMED_WITHIN})")
    if not all((await _listed_on(fleet)).values()):
        found.append(f"the override ended before the owner was back ({time.monotonic() - set_at:.1f} s)")
    await asyncio.sleep(1.5)  # look-ups sent while it was down (1 s timeout) are answered
    fleet.owner_down = False

    # 5. It expires by itself, audited once, on the fleet; nothing else changed.
    fleet.fail_open = "uncertain"

    async def expired_everywhere() -> bool:
        return not any((await _listed_on(fleet)).values())

    await until(expired_everywhere, seconds + 5 - (time.monotonic() - set_at), step=0.1)
    expired_after = time.monotonic() - set_at
    fleet.fail_open = "off"
    for replica in fleet.replicas:
        added = sorted(await _trail(fleet, replica) - trails[replica.name])
        if trails[replica.name] - await _trail(fleet, replica):
            found.append(f"{replica.name}: audit entries lost")
        shapes = [(actor, tool, check, old, new, outcome) for _, actor, tool, check, old, new, outcome, _ in added]
        if shapes != [(ACTOR, "", SOURCE, "", "open", "applied"), ("argwatch", "", SOURCE, "open", "", "expired")]:
            found.append(f"{replica.name}: audit added {shapes}")
    if await _state(fleet) != before:
        found.append("modes or overrides differ from before")
    tally = fleet.tally
    invented = "/".join(str(tally.invented_refused_failing_open.get(r.name, 0)) for r in fleet.replicas)
    if not all(tally.invented_refused_failing_open.get(r.name) for r in fleet.replicas):
        found.append(f"invented reasons refused while failing open, gw-a/gw-b: {invented}")
    fleet.notes = [
        f"down: {refused_down} refunds refused, order unverifiable",
        f"preview (1 min): lets through {would_allow} (unverifiable), {would_keep} other refusals stay; "
        f"switches off {switched_off}",
        f"override {seconds} s (on-call's 10 min, shortened), on both in {propagated * 1000:.0f} ms",
        f"let through unverified {tally.let_through_unverified}",
        f"invented refused with the look-up skipped, gw-a/gw-b {invented}",
        f"ownership refused again {max(resumed) * 1000:.0f} ms after the owner served",
        f"expired at {expired_after:.1f} s, audited once by argwatch",
        "nothing else changed" if await _state(fleet) == before else "modes changed",
    ]
    await asyncio.sleep(1 if fleet.short else 5)
    return fresh_after
