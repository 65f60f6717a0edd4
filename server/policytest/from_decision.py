"""A policy test file drafted from decision-log lines: the call as logged, the verdict it got as expected.

What the log does not hold is left to the author and said in comments: values
logged hashed or not at all, and the sets and records the checks saw (the line
names the sets' versions, not their members).
"""

from __future__ import annotations

import time
from typing import Any

import yaml

from argwatch.common.printable import printable
from argwatch.server.decisions.reader import Line
from argwatch.server.decisions.record import DIGEST_PREFIX

REPEATED_CALL = "repeated_call"


def draft_test_file(lines: list[Line], policy: str) -> str:
    """A test file (YAML text) with one case per line; `policy` is the path it names."""
    header = [
        "# Drafted by `argwatch decisions grep --as-test` from the decision log.",
        "# Before running it: give the sets as the checks saw them (`sets:`, or `sets_from:` an export made with",
        "# `argwatch sets export`), and `records:` for a tool with records (a record not given is not found).",
    ]
    cases = []
    for line in lines:
        case, notes = _case(line)
        cases.append((case, notes))
    body = yaml.safe_dump({"policy": policy or "PATH/TO/policy.yaml"}, sort_keys=False)
    text = "\n".join(header) + "\n" + body + "\ncases:\n"
    for case, notes in cases:
        dumped = yaml.safe_dump([case], sort_keys=False, allow_unicode=True, width=120)
        text += "".join(f"  # {printable(note)}\n" for note in notes)  # a call id with a newline stays a comment
        text += "".join(f"  {row}\n" for row in dumped.splitlines()) + "\n"
    return text


def _case(line: Line) -> tuple[dict[str, Any], list[str]]:
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(line.get("ts", 0.0))))
    notes = [f"call {line.get('call_id', '')!s} at {at}, policy version {line.get('policy_version', '')!s}"]
    if line.get("sets"):
        notes.append("sets then: " + ", ".join(f"{name} v{version}" for name, version in line["sets"].items()))
    arguments = dict(line.get("clear") or {})
    hashed = sorted(line.get("arguments") or {})
    if hashed:
        notes.append(f"logged hashed, fill in: {', '.join(hashed)}")
    if line.get("unlogged"):
        notes.append(f"not logged, fill in: {', '.join(line['unlogged'])}")
    if line.get("arguments") is None:
        notes.append("the arguments were not JSON (logged as raw_arguments' digest)")
    call: dict[str, Any] = {"tool": line.get("tool", ""), "arguments": arguments}
    session = {name: value for name, value in (line.get("session") or {}).items() if not _digest(value)}
    if any(_digest(value) for value in (line.get("session") or {}).values()):
        notes.append("the session was logged hashed: fill in customer_id / tenant if the checks read them")
    if line.get("conversation_id"):
        session["conversation"] = line["conversation_id"]
    if session:
        call["session"] = session
    if line.get("model"):
        call["model"] = line["model"]
    decision = line.get("decision", "")
    logged = line.get("problems") or []
    repeats = [problem for problem in logged if problem.get("code") == REPEATED_CALL]
    if repeats:
        # Offline, every call is an operation's first (no memory of earlier calls): the repeat is not judged.
        logged = [problem for problem in logged if problem.get("code") != REPEATED_CALL]
        notes.append("refused then as a repeat of an earlier call: a test judges each call as its first, so the")
        notes.append("repeat is left out of `expect` (and the decision is the one the call gets on its own)")
        if not logged and line.get("mode") == "reject":
            decision = "allow"
    expect: dict[str, Any] = {"decision": decision}
    problems = []
    for problem in logged:
        expected = {"code": problem.get("code", ""), "path": problem.get("path", "")}
        if problem.get("shape"):
            expected["shape"] = problem["shape"]
        problems.append(expected)
    if problems:
        expect["problems"] = problems
    if line.get("skipped"):
        expect["skipped"] = [{"path": s.get("path", ""), "check": s.get("set", "")} for s in line["skipped"]]
    name = f"{line.get('tool', '')} call {line.get('call_id', '')} at {at}: {line.get('decision', '')}"
    return {"name": name, "call": call, "expect": expect}, notes


def _digest(value: object) -> bool:
    return isinstance(value, str) and value.startswith(DIGEST_PREFIX)
