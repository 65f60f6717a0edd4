"""Policy test files read strictly: every key known, every error with its file and line.

A file holds cases; each case is a call, what the checks see (value sets and
records) and the verdict expected. The file's own `sets`, `sets_from` and
`records` are given to every case, a case's own added on top (a case's set or
record of the same name wins). docs/policy.md describes the schema.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from argwatch.server.policy.strict_yaml import DuplicateKeys, Marks, load_yaml_marked
from argwatch.server.verdict.findings import ProblemCode, Shape

FILE_KEYS = {"policy", "sets", "sets_from", "records", "cases"}
CASE_KEYS = {"name", "call", "sets", "sets_from", "records", "expect"}
CALL_KEYS = {"tool", "arguments", "session", "model", "prompt_version"}
SESSION_KEYS = {"customer_id", "tenant", "conversation"}
EXPECT_KEYS = {"decision", "problems", "skipped"}
PROBLEM_KEYS = {"code", "path", "shape"}
SKIPPED_KEYS = {"path", "check"}
DECISIONS = ("allow", "reject")
CODES = {code.value for code in ProblemCode}
SHAPES = {shape.value for shape in Shape if shape.value}


class TestFileError(ValueError):
    """A test file that cannot be run as written: each entry names the file and line ("cases.yaml:12: ...")."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class ExpectedProblem:
    code: str
    path: str  # the argument's concrete path (`items[2].sku`); "" for the whole call
    shape: str | None = None  # compared only when given


@dataclass(frozen=True, slots=True)
class Given:
    """What the checks see: sets inline (name -> file-source entry) or from export files, and records by key."""

    sets: dict[str, Any] = field(default_factory=dict)
    sets_from: tuple[str, ...] = ()  # paths, resolved against the test file's folder
    records: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # key -> id -> attributes


@dataclass(frozen=True, slots=True)
class Case:
    file: str
    line: int
    name: str
    tool: str
    arguments_json: bytes
    customer_id: str
    tenant: str
    conversation: str
    model: str
    prompt_version: str
    given: Given
    decision: str
    problems: tuple[ExpectedProblem, ...]
    skipped: tuple[tuple[str, str], ...] | None  # (path, check); None: not compared

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class TestFile:
    path: str
    policy: str  # resolved against the file's folder; "" when the file names none
    cases: tuple[Case, ...]


class _Reader:
    """Walks one document, collecting every error rather than stopping at the first."""

    def __init__(self, path: str, marks: Marks) -> None:
        self.path = path
        self.marks = marks
        self.errors: list[str] = []

    def line(self, where: str) -> int:
        while where:
            if where in self.marks:
                return self.marks[where][0]
            where = where.rsplit(".", 1)[0] if "." in where else ""
        return 1

    def error(self, where: str, message: str) -> None:
        self.errors.append(f"{self.path}:{self.line(where)}: {where or 'the file'}: {message}")

    def mapping(self, value: object, where: str, allowed: set[str], required: tuple[str, ...] = ()) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.error(where, f"expected a mapping, got {_kind(value)}")
            return {}
        for key in value:
            if key not in allowed:
                self.error(
                    f"{where}.{key}" if where else str(key), f"unknown key (expected {', '.join(sorted(allowed))})"
                )
        for key in required:
            if key not in value:
                self.error(where, f"{key} is required")
        return value

    def text(self, value: object, where: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            self.error(where, f"expected text, got {_kind(value)}")
            return ""
        return value

    def given(self, document: Mapping[str, Any], where: str, folder: str) -> Given:
        prefix = f"{where}." if where else ""
        sets: dict[str, Any] = {}
        raw_sets = document.get("sets") or {}  # `sets:` with nothing under it: none
        if not isinstance(raw_sets, dict):
            self.error(f"{prefix}sets", f"expected a mapping of set names to members, got {_kind(raw_sets)}")
        else:
            for name, entry in raw_sets.items():
                # The short form is the members; the long form is the file source's entry (scopes, retired).
                sets[str(name)] = {"members": entry} if isinstance(entry, list) else entry
        sets_from = document.get("sets_from")
        files = [sets_from] if isinstance(sets_from, str) else sets_from or []
        if not isinstance(files, list) or not all(isinstance(one, str) for one in files):
            self.error(f"{prefix}sets_from", "expected a file (or a list of files) from `argwatch sets export`")
            files = []
        records: dict[str, dict[str, dict[str, Any]]] = {}
        raw_records = document.get("records") or {}
        if not isinstance(raw_records, dict):
            self.error(f"{prefix}records", f"expected a mapping of record kinds to ids, got {_kind(raw_records)}")
        else:
            for key, by_id in raw_records.items():
                at = f"{prefix}records.{key}"
                if not isinstance(by_id, dict) or not all(isinstance(one, dict) for one in by_id.values()):
                    self.error(at, "expected a mapping of record ids to their attributes")
                    continue
                records[str(key)] = {str(record_id): dict(attributes) for record_id, attributes in by_id.items()}
        return Given(sets, tuple(os.path.join(folder, one) for one in files), records)


def read_test_file(path: str) -> TestFile:
    """The file's cases; raises TestFileError with every error found, OSError if it cannot be read."""
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        document, marks = load_yaml_marked(raw)
    except DuplicateKeys as error:
        raise TestFileError([f"{path}: {found}" for found in error.found]) from None
    except Exception as error:  # yaml's own errors carry the line in their text
        raise TestFileError([f"{path}: not YAML: {error}"]) from None
    reader = _Reader(path, marks)
    folder = os.path.dirname(path)
    top = reader.mapping(document, "", FILE_KEYS, ("cases",))
    policy = reader.text(top.get("policy"), "policy")
    shared = reader.given(top, "", folder)
    cases: list[Case] = []
    raw_cases = top.get("cases", [])
    if not isinstance(raw_cases, list) or not raw_cases:
        reader.error("cases", "expected a list of at least one case")
        raw_cases = []
    names: dict[str, int] = {}
    for index, raw_case in enumerate(raw_cases):
        case = _case(reader, raw_case, f"cases[{index}]", shared, folder)
        if case is None:
            continue
        if case.name in names:
            reader.error(f"cases[{index}].name", f"{case.name!r} given again (first at line {names[case.name]})")
        names.setdefault(case.name, case.line)
        cases.append(case)
    if reader.errors:
        raise TestFileError(reader.errors)
    return TestFile(path, os.path.join(folder, policy) if policy else "", tuple(cases))


def _case(reader: _Reader, raw: object, where: str, shared: Given, folder: str) -> Case | None:
    before = len(reader.errors)
    case = reader.mapping(raw, where, CASE_KEYS, ("name", "call", "expect"))
    name = reader.text(case.get("name"), f"{where}.name")
    call = reader.mapping(case.get("call", {}), f"{where}.call", CALL_KEYS, ("tool",))
    session = reader.mapping(call.get("session") or {}, f"{where}.call.session", SESSION_KEYS)
    arguments = call.get("arguments", {})
    try:
        # Sorted keys are not wanted: the gateway receives the model's text, in the model's order.
        arguments_json = json.dumps(arguments).encode()
    except (TypeError, ValueError) as error:
        reader.error(f"{where}.call.arguments", f"not expressible as JSON: {error}")
        arguments_json = b"{}"
    own = reader.given(case, where, folder)
    given = Given(
        {**shared.sets, **own.sets},
        (*shared.sets_from, *own.sets_from),
        {key: {**shared.records.get(key, {}), **own.records.get(key, {})} for key in {**shared.records, **own.records}},
    )
    expect = reader.mapping(case.get("expect", {}), f"{where}.expect", EXPECT_KEYS, ("decision",))
    decision = expect.get("decision")
    if "decision" in expect and decision not in DECISIONS:
        reader.error(f"{where}.expect.decision", f"expected allow or reject, got {decision!r}")
    problems = _problems(reader, expect.get("problems") or [], f"{where}.expect.problems")
    skipped = None
    if "skipped" in expect:
        skipped = _skipped(reader, expect.get("skipped") or [], f"{where}.expect.skipped")
    if len(reader.errors) > before:
        return None
    return Case(
        reader.path,
        reader.line(where),
        name,
        reader.text(call.get("tool"), f"{where}.call.tool"),
        arguments_json,
        reader.text(session.get("customer_id"), f"{where}.call.session.customer_id"),
        reader.text(session.get("tenant"), f"{where}.call.session.tenant"),
        reader.text(session.get("conversation"), f"{where}.call.session.conversation"),
        reader.text(call.get("model"), f"{where}.call.model"),
        reader.text(call.get("prompt_version"), f"{where}.call.prompt_version"),
        given,
        str(decision),
        problems,
        skipped,
    )


def _problems(reader: _Reader, raw: object, where: str) -> tuple[ExpectedProblem, ...]:
    if not isinstance(raw, list):
        reader.error(where, f"expected a list of {{code, path}}, got {_kind(raw)}")
        return ()
    found = []
    for index, item in enumerate(raw):
        at = f"{where}[{index}]"
        problem = reader.mapping(item, at, PROBLEM_KEYS, ("code",))
        code, shape = problem.get("code"), problem.get("shape")
        if "code" in problem and code not in CODES:
            reader.error(f"{at}.code", f"unknown problem code {code!r} (the codes: {', '.join(sorted(CODES))})")
        if shape is not None and shape not in SHAPES:
            reader.error(f"{at}.shape", f"unknown shape {shape!r} (the shapes: {', '.join(sorted(SHAPES))})")
        found.append(ExpectedProblem(str(code), reader.text(problem.get("path"), f"{at}.path"), shape))
    return tuple(found)


def _skipped(reader: _Reader, raw: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, list):
        reader.error(where, f"expected a list of {{path, check}}, got {_kind(raw)}")
        return ()
    found = []
    for index, item in enumerate(raw):
        at = f"{where}[{index}]"
        skipped = reader.mapping(item, at, SKIPPED_KEYS, ("path", "check"))
        found.append((reader.text(skipped.get("path"), f"{at}.path"), reader.text(skipped.get("check"), f"{at}.check")))
    return tuple(found)


def _kind(value: object) -> str:
    return "nothing" if value is None else type(value).__name__
