"""What to do about each HEALTH flag (and a refusing MODE): docs/operating.md's runbook table, word for word.

On-call reads it where the flag is, with `?` on the row (help_screen.py); a
test (tests/docs/test_runbook.py) holds these words and the docs table
together, so neither can drift from the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple


class Entry(NamedTuple):
    """One row of the runbook table: the flag as the docs write it, what it means, what to do."""

    flag: str  # the docs' "you see", without its markup: "FAIL-OPEN n", "OOS>3%"
    starts: str  # how the flag starts as the table writes it ("FAIL-OPEN 31", "OOS>5%")
    means: str
    todo: str


RUNBOOK = (
    Entry(
        "SRC-DOWN",
        "SRC-DOWN",
        "the set's source is unreachable from this replica",
        (
            "Check the owning service's health and the network path from the gateway. Its sets go stale after"
            " their ttl and unavailable after max_staleness. ArgwatchSourceDisconnected fires after 5 min."
        ),
    ),
    Entry(
        "FAIL-CLOSED n",
        "FAIL-CLOSED",
        (
            "n checks that could not run on a check with failure: closed: the calls got CHECK_UNAVAILABLE, "
            "and in reject mode were refused"
        ),
        (
            "The same as FAIL-OPEN: restore the source. If the refusals are hurting more than an unchecked "
            "call would, on-call can move the tool to observe (m) with a reason and an expiry; the audit "
            "keeps the decision."
        ),
    ),
    Entry(
        "CLOSED·OBSERVED n",
        "CLOSED·OBSERVED",
        (
            "n checks that could not run on a check with failure: closed, on a tool or check in observe: the "
            "calls got CHECK_UNAVAILABLE and went through, unchecked (not refused, as FAIL-CLOSED would be)"
        ),
        (
            "Restore the source (the SOURCE DOWN line above the table names it). Meanwhile what the check "
            "guards (an id exists, the customer owns it) goes unchecked; if that is worse than refusing the "
            "calls, put the check back in reject (m) and accept the refusals."
        ),
    ),
    Entry(
        "FAIL-OPEN n",
        "FAIL-OPEN",
        (
            "n checks skipped in the window: the set was unavailable (source down past max_staleness, or "
            "never loaded), and the calls went through unchecked"
        ),
        (
            "Find the set's source (SRC-DOWN on the same row, argwatch_source_connected, the gateway log) and"
            " restore the owning service or its network path. Until then calls pass unchecked. "
            "ArgwatchChecksNotRunning pages on it."
        ),
    ),
    Entry(
        "STORM 2.4x",
        "STORM",
        (
            "the tool's calls per second over the last minute are 2.4 times those of the 14 minutes before "
            "(over at least 60 calls), while repeats or repairs started come faster than before: agents call "
            "again, not more agents"
        ),
        (
            "Find what makes them retry, on the tool's rows: a tool refusing calls (refusing N%, FAIL-CLOSED) "
            "sends agents into repairs and retries; REPEATS climbing means calls with side effects sent again "
            "after timeouts. Fix that cause (restore the source, or relax the one check that refuses); a storm "
            "on an owner that is down also slows its recovery."
        ),
    ),
    Entry(
        "NO-SET",
        "NO-SET",
        (
            "no usable copy of the set (never loaded, or older than max_staleness): its checks are skipped "
            "(or fail closed)"
        ),
        (
            "Restore the source; r fetches it once it answers. With --snapshot-dir, a restarted replica "
            "serves its last saved copy as stale instead. ArgwatchValueSetUnavailable fires after 5 min."
        ),
    ),
    Entry(
        "REFUSED",
        "REFUSED",
        (
            "the source answered and the gateway refused its update (a version going backwards, an over-long "
            "value); the last good copy is in use"
        ),
        (
            "Enter on the row: the detail gives the refused version, the reason and when. The owning service "
            "is at fault: fix it and publish a new version. argwatch_value_set_update_rejected_total counts "
            "each refusal by reason."
        ),
    ),
    Entry(
        "TOO-LARGE",
        "TOO-LARGE",
        (
            "the owner's set has more members than the policy's max_members; the last good copy is in use, "
            "and the same version is not fetched again"
        ),
        (
            "Either the owner published far more than it should (fix it there), or the set grew: raise "
            "max_members in the policy and reload it."
        ),
    ),
    Entry(
        "NOT-SERVED",
        "NOT-SERVED",
        "the source answers but does not serve this set (a renamed set, a policy naming the wrong source)",
        "Compare the set's name in the policy with what the owning service publishes.",
    ),
    Entry(
        "UNCONFIRMED",
        "UNCONFIRMED",
        "the source is connected but has not confirmed the set within its ttl",
        "The owning service is up and silent about this set: check its heartbeats. r fetches it.",
    ),
    Entry(
        "SAVED-COPY",
        "SAVED-COPY",
        "a restarted replica serves the copy saved on disk until its source confirms it",
        "Nothing, if the source is up: it goes once the source answers.",
    ),
    Entry(
        "STALE",
        "STALE",
        (
            "the source has not confirmed the set within its ttl; checks still run on the last good copy "
            "(counted in tool_argument_check_stale_total)"
        ),
        (
            "Find why the owning service stopped confirming it (argwatch_source_connected, the gateway log); "
            "press r to fetch the set from its source at once. Past max_staleness it becomes NO-SET. "
            "ArgwatchValueSetStale fires after 15 min."
        ),
    ),
    Entry(
        "OOS>3%",
        "OOS>",
        "the model emits values that are not in the set",
        (
            "Press Enter on the row: a clustered offender list of set misses means enum drift (a renamed or "
            "retired value): fix the tool description or add the alias; scattered, with most of them counted "
            "invented, means inventions: tighten the description, or move the tool to reject mode so the "
            "model repairs. If NORM% is much lower than OOS%, most misses are formatting slips (case, "
            "separators). ArgwatchInventionRateHigh fires above 3 % for 2 h."
        ),
    ),
    Entry(
        "ABANDONED n",
        "ABANDONED",
        "rejected calls that no passing call of the tool followed within repair.remember",
        (
            "The model does not recover from the repair message. Look at what it wrote (the detail's "
            "offending values) and at the message it gets (Repair); a hint on the argument, or a better tool "
            "description, gives it a way out."
        ),
    ),
    Entry(
        "EXPIRES 4m",
        "EXPIRES",
        (
            "an on-call override of the tool's mode lapses within the policy's "
            "attention.override_expiring_seconds; the tool then goes back to the policy's mode"
        ),
        (
            "If the incident is over, nothing. If not, set the override again with m (a reason, a new expiry)"
            " before it lapses; the audit (a) says who set it and why."
        ),
    ),
    Entry(
        "refusing 100%",
        "refusing",
        (
            "the share of the tool's calls refused now: over the last 15 seconds (the last minute for a tool "
            "with fewer than 5 calls in them); all of them at 100%"
        ),
        (
            "Find why on the tool's rows: FAIL-CLOSED or SRC-DOWN means a check that cannot run refuses every"
            " call (restore the source); a high OOS% means the model's values are refused (see OOS>3%). If "
            "the refusals hurt more than an unchecked call would, move the tool to observe (m) with a reason "
            "and an expiry."
        ),
    ),
)
REFUSING = RUNBOOK[-1]  # not a HEALTH flag: the MODE cell's "refusing N%"


def entries_for(flags: Iterable[str], refusing: bool = False) -> list[Entry]:
    """The runbook's rows for a table row's HEALTH flags, in the flags' order (what to do first), and the
    refusing row's when its tool refuses calls now."""
    found = [entry for flag in flags for entry in RUNBOOK[:-1] if flag.startswith(entry.starts)]
    return [*found, REFUSING] if refusing else found
