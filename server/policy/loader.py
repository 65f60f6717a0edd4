"""Reads a policy YAML file into a Policy, listing every error with its file, line, key path and expectation.

The gateway refuses to start on any error: a half-configured gateway would
check some tools and silently not others.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

import cel
import yaml
from jsonschema.exceptions import SchemaError

from argwatch.common.durations import parse_duration
from argwatch.common.files import DEFINITIONS_BYTES, POLICY_BYTES, read_file
from argwatch.server.policy.arg_paths import ArgPath, parse_path, top_of
from argwatch.server.policy.cel_flatten import flatten
from argwatch.server.policy.check_ids import tool_checks
from argwatch.server.policy.collector_pause import paused_collector
from argwatch.server.policy.linear_regex import cannot_run, pattern_texts, patterns_in
from argwatch.server.policy.model import (
    DEFAULT_MAX_ELEMENTS,
    MAX_COHORT_NAMES,
    SCOPE_FIELDS,
    ArgumentBinding,
    ArrayReads,
    AttentionConfig,
    CaseRule,
    CohortConfig,
    DecisionLogConfig,
    Disclosure,
    Failure,
    FileSourceConfig,
    GrpcSourceConfig,
    LimitsConfig,
    Mode,
    Normalisation,
    OnStale,
    Policy,
    RecordBinding,
    RepairConfig,
    Rule,
    SamplingConfig,
    SideEffect,
    SourceConfig,
    Steps,
    ToolPolicy,
    ValueLogging,
    ValueSetConfig,
)
from argwatch.server.policy.path_schema import check_path
from argwatch.server.policy.rule_arrays import EACH_VARIABLE, array_reads, each_reads_whole, read_each, split_types
from argwatch.server.policy.schema_compile import CompiledSchema, compile_schema, schema_error_location
from argwatch.server.policy.strict_yaml import DuplicateKeys, Marks, load_yaml_marked
from argwatch.server.policy.tool_import import DefinitionError, ToolDefinition, read_definitions

T = TypeVar("T")

DEFAULT_TTL_SECONDS = 300.0
DEFAULT_MAX_STALENESS_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class PolicyIssue:
    """One thing wrong with a policy file."""

    path: str  # the key path, such as "tools.refund_order.arguments.reason_code.value_set"
    message: str
    line: int = 0  # where the path (or its nearest written parent) starts, from 1; 0: nowhere in the file
    column: int = 0

    def render(self, file: str) -> str:
        """`file:line:column: path: message`, the shape editors and terminals turn into a link."""
        where = f"{file}:{self.line}:{self.column}" if self.line else file
        return ": ".join(part for part in (where, self.path, self.message) if part)


class PolicyError(Exception):
    """The policy file cannot be used; `issues` lists every reason."""

    def __init__(self, file: str, issues: list[PolicyIssue]) -> None:
        self.file = file
        self.issues = issues
        super().__init__("\n".join(issue.render(file) for issue in issues))


@dataclass
class _Reader:
    """Walks the parsed YAML, recording issues instead of stopping at the first."""

    marks: Marks = field(default_factory=dict)
    issues: list[PolicyIssue] = field(default_factory=list)

    def fail(self, path: str, message: str) -> None:
        line, column = _place(self.marks, path)
        self.issues.append(PolicyIssue(path, message, line, column))

    def mapping(self, node: object, path: str, allowed: set[str]) -> Mapping[str, Any]:
        """The node as a mapping with string keys, with unknown keys reported."""
        if node is None:
            return {}
        if not isinstance(node, dict):
            self.fail(path, f"expected a mapping, got {_kind(node)}")
            return {}
        for key in node:
            if not isinstance(key, str):
                self.fail(path, f"expected string keys, got {key!r}")
            elif allowed and key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                guess = f"did you mean {close[0]!r}? " if close else ""
                self.fail(_join(path, key), f"unknown key; {guess}expected one of {', '.join(sorted(allowed))}")
        return node

    def named_entries(self, node: object, path: str) -> Mapping[str, Any]:
        """A mapping whose keys are names chosen by the author (tools, sets, sources)."""
        if node is None:
            return {}
        if not isinstance(node, dict):
            self.fail(path, f"expected a mapping of names to entries, got {_kind(node)}")
            return {}
        good: dict[str, Any] = {}
        for key, value in node.items():
            if not isinstance(key, str) or not key.strip():
                self.fail(path, f"expected a non-empty name, got {key!r}")
            else:
                good[key] = value
        return good

    def value(self, node: Mapping[str, Any], key: str, path: str, convert: Callable[[object], T], default: T) -> T:
        """node[key] converted, or the default when absent or wrong (wrong is recorded)."""
        if key not in node:
            return default
        try:
            return convert(node[key])
        except ValueError as error:
            self.fail(_join(path, key), str(error))
            return default

    def required_str(self, node: Mapping[str, Any], key: str, path: str) -> str:
        if key not in node:
            self.fail(_join(path, key), "required; expected a string")
            return ""
        return self.value(node, key, path, _string, "")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _place(marks: Marks, path: str) -> tuple[int, int]:
    """Where `path` is written, else its nearest parent that is (a required key that is missing: its
    mapping's line); (0, 0) when none is."""
    while path:
        if path in marks:
            return marks[path]
        cut = max(path.rfind("."), path.rfind("["))
        path = path[:cut] if cut > 0 else ""
    return 0, 0


def _kind(node: object) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing"}.get(
        type(node), f"{type(node).__name__} {node!r}"
    )


def _string(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {_kind(value)}")
    return value


def _enum(kind: type[T]) -> Callable[[object], T]:
    def convert(value: object) -> T:
        choices = [member.value for member in kind]  # type: ignore[attr-defined]
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return kind(value)  # type: ignore[call-arg]

    return convert


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _formats(value: object) -> bool:
    """`formats: assert` checks a schema's `format` keywords (a malformed email is a problem); `annotate`
    reads them as 2020-12 does by default, as notes that constrain nothing."""
    if value not in ("assert", "annotate"):
        raise ValueError(f"expected assert or annotate, got {value!r}")
    return value == "assert"


def _positive_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"expected a whole number of at least 1, got {value!r}")
    return value


def _rate(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"expected a fraction from 0 to 1 (0.02 is 1 in 50), got {value!r}")
    return float(value)


def _separators(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string of separator characters such as '-_ .', got {value!r}")
    return value


def load_policy(path: str, *, serving: Policy | None = None) -> Policy:
    """Reads and validates the policy at `path`; raises PolicyError listing every problem. With `serving`
    (the policy a running gateway serves), see parse_policy."""
    try:
        raw = read_file(path, POLICY_BYTES)
    except OSError as error:
        raise PolicyError(path, [PolicyIssue("", f"cannot read the file: {error.strerror}")]) from None
    return parse_policy(raw, path, serving=serving)


def parse_policy(raw: bytes, path: str, *, serving: Policy | None = None) -> Policy:
    """Validates policy text; `path` names it in errors and anchors relative file sources.

    With `serving`, the policy is read for a running gateway: a tool whose schema `serving` has already
    compiled takes it as it is, and what the read made is kept out of the cycle collector's scans
    (collector_pause.py says why and what it costs).
    """
    reuse = (
        {
            tool.schema_validator.digest: tool.schema_validator
            for tool in serving.tools.values()
            if tool.schema_validator
        }
        if serving is not None
        else None
    )
    with paused_collector(keep_what_is_made=serving is not None):  # millions of new objects, none in a cycle
        return _parse_policy(raw, path, reuse)


def _parse_policy(raw: bytes, path: str, reuse: Mapping[bytes, CompiledSchema] | None) -> Policy:
    try:
        document, marks = load_yaml_marked(raw)
    except yaml.YAMLError as error:
        problem, line, column = _yaml_error(error)
        raise PolicyError(path, [PolicyIssue("", f"not valid YAML: {problem}", line, column)]) from None
    except DuplicateKeys as error:  # YAML would keep the last silently: a tool or a binding lost
        issues = [
            PolicyIssue(
                found.path,
                f"{found.key!r} given again at line {found.line} (first at line {found.first_line}); "
                "YAML would keep only the last",
                found.line,
                found.column,
            )
            for found in error.duplicates
        ]
        raise PolicyError(path, issues) from None
    reader = _Reader(marks)
    top = reader.mapping(
        document,
        "",
        {
            "default_mode",
            "sources",
            "value_sets",
            "tools",
            "tool_definitions",
            "repair",
            "sampling",
            "attention",
            "formats",
            "models",
            "limits",
            "decision_log",
        },
    )
    if not isinstance(document, dict):
        reader.fail("", "expected a mapping with sources, value_sets and tools")
    base = os.path.dirname(os.path.abspath(path))
    sources = _read_sources(reader, top.get("sources"), base)
    value_sets = _read_value_sets(reader, top.get("value_sets"), sources)
    default_mode = reader.value(top, "default_mode", "", _enum(Mode), Mode.OBSERVE)
    definitions = _read_definitions(reader, top.get("tool_definitions"), base)
    assert_formats = reader.value(top, "formats", "", _formats, True)
    tools = _read_tools(reader, top.get("tools"), value_sets, default_mode, definitions, sources, assert_formats, reuse)
    repair = _read_repair(reader, top.get("repair"))
    sampling = _read_sampling(reader, top.get("sampling"))
    attention = _read_attention(reader, top.get("attention"))
    cohorts = _read_cohorts(reader, top.get("models"))
    limits = _read_limits(reader, top.get("limits"))
    decision_log = _read_decision_log(reader, top.get("decision_log"))
    _check_logged_in_clear(reader, tools, sampling.redact)
    if reader.issues:
        raise PolicyError(path, reader.issues)
    return Policy(
        path=os.path.abspath(path),
        version=_version(raw, top.get("tool_definitions"), base),
        default_mode=default_mode,
        tools=MappingProxyType(tools),
        sources=MappingProxyType(sources),
        value_sets=MappingProxyType(value_sets),
        repair=repair,
        sampling=sampling,
        attention=attention,
        assert_formats=assert_formats,
        cohorts=cohorts,
        limits=limits,
        decision_log=decision_log,
    )


def _version(raw: bytes, definitions: object, base: str) -> str:
    """A hash of what the policy is: its text and the tool definition files it imports (an edited
    definitions file is another policy: a reload must not call it unchanged)."""
    digest = hashlib.sha256(raw)
    for file in definitions if isinstance(definitions, list) else ():
        digest.update(b"\0" + read_file(os.path.join(base, file), DEFINITIONS_BYTES))  # read a moment ago
    return digest.hexdigest()[:12]


def _yaml_error(error: yaml.YAMLError) -> tuple[str, int, int]:
    """The parser's complaint on one line, and its line and column (0, 0 when it has none)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return str(problem), (mark.line + 1 if mark else 0), (mark.column + 1 if mark else 0)


def _read_sources(reader: _Reader, node: object, base: str) -> dict[str, SourceConfig]:
    sources: dict[str, SourceConfig] = {}
    for name, entry in reader.named_entries(node, "sources").items():
        path = f"sources.{name}"
        fields = reader.mapping(entry, path, {"grpc", "file"})
        kinds = [kind for kind in ("grpc", "file") if kind in fields]
        if len(kinds) != 1:
            reader.fail(path, "expected exactly one of grpc or file")
            continue
        if kinds == ["file"]:
            file = reader.value(fields, "file", path, _string, "")
            if file:
                sources[name] = FileSourceConfig(path=os.path.join(base, file))
            continue
        grpc_path = f"{path}.grpc"
        grpc = reader.mapping(fields["grpc"], grpc_path, {"target", "timeout", "tls", "watch"})
        target = reader.required_str(grpc, "target", grpc_path)
        timeout = reader.value(grpc, "timeout", grpc_path, parse_duration, 1.0)
        tls = reader.value(grpc, "tls", grpc_path, _boolean, False)
        watch = reader.value(grpc, "watch", grpc_path, _boolean, True)
        if target:
            sources[name] = GrpcSourceConfig(target=target, timeout_seconds=timeout, tls=tls, watch=watch)
    return sources


def _read_value_sets(reader: _Reader, node: object, sources: Mapping[str, SourceConfig]) -> dict[str, ValueSetConfig]:
    value_sets: dict[str, ValueSetConfig] = {}
    for name, entry in reader.named_entries(node, "value_sets").items():
        path = f"value_sets.{name}"
        fields = reader.mapping(
            entry,
            path,
            {
                "source",
                "ttl",
                "failure",
                "max_staleness",
                "on_stale",
                "max_members",
                "disclose",
                "retired_keep",
                "scope",
            },
        )
        source = reader.required_str(fields, "source", path)
        if source and source not in sources:
            known = ", ".join(sources) or "none are defined"
            reader.fail(f"{path}.source", f"undefined source {source!r}; sources: {known}")
        ttl = reader.value(fields, "ttl", path, parse_duration, DEFAULT_TTL_SECONDS)
        max_staleness = reader.value(fields, "max_staleness", path, parse_duration, DEFAULT_MAX_STALENESS_SECONDS)
        if max_staleness < ttl:
            reader.fail(
                f"{path}.max_staleness",
                f"expected at least the ttl ({ttl:g}s): a copy cannot be unusable before it is stale",
            )
        no_age: float | None = None
        keep_count, keep_seconds = reader.value(fields, "retired_keep", path, _retired_keep, (10_000, no_age))
        value_sets[name] = ValueSetConfig(
            name=name,
            source=source,
            ttl_seconds=ttl,
            failure=reader.value(fields, "failure", path, _enum(Failure), Failure.OPEN),
            max_staleness_seconds=max_staleness,
            on_stale=reader.value(fields, "on_stale", path, _enum(OnStale), OnStale.ENFORCE),
            max_members=reader.value(fields, "max_members", path, _positive_int, 5_000_000),
            disclose=reader.value(fields, "disclose", path, _enum(Disclosure), Disclosure.LIST),
            retired_keep=keep_count,
            retired_keep_seconds=keep_seconds,
            scope=reader.value(fields, "scope", path, _scope_field, ""),
        )
    return value_sets


def _scope_field(value: object) -> str:
    """`scope`: the session field a call carries whose value the set's members are published under."""
    if value not in SCOPE_FIELDS:
        raise ValueError(
            f"{value!r} is not a session field a tool call carries; expected one of {', '.join(SCOPE_FIELDS)}"
        )
    return str(value)


def _retired_keep(value: object) -> tuple[int, float | None]:
    """`retired_keep`: a count (10000), an age (30d), or both ({count: 10000, age: 30d})."""
    count, age = 10_000, None
    if isinstance(value, dict):
        unknown = set(value) - {"count", "age"}
        if unknown or not value:
            raise ValueError("expected {count: N, age: DURATION}, either or both")
        if "count" in value:
            count = _keep_count(value["count"])
        if "age" in value:
            age = parse_duration(value["age"])
    elif isinstance(value, int) and not isinstance(value, bool):
        count = _keep_count(value)
    elif isinstance(value, str):
        age = parse_duration(value)
    else:
        raise ValueError(f"expected a count (10000), an age (30d) or {{count, age}}, got {value!r}")
    return count, age


def _keep_count(value: object) -> int:
    # At most 100,000: every delta copies the history kept (in C, docs/performance.md), and a larger one would
    # make each delta a long pass on the event loop.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100_000:
        raise ValueError(f"expected a count of retired values from 0 to 100000, got {value!r}")
    return value


def _read_definitions(reader: _Reader, node: object, base: str) -> dict[str, ToolDefinition]:
    """Tool definitions imported as-is from the files listed under tool_definitions."""
    if node is None:
        return {}
    if not isinstance(node, list) or not all(isinstance(item, str) for item in node):
        reader.fail("tool_definitions", "expected a list of files (MCP tools/list, OpenAI or Anthropic definitions)")
        return {}
    found: dict[str, ToolDefinition] = {}
    defined_in: dict[str, str] = {}
    for index, file in enumerate(node):
        try:
            for definition in read_definitions(os.path.join(base, file)):
                if definition.name in found:  # one would silently replace the other
                    reader.fail(
                        f"tool_definitions[{index}]",
                        f"{file} defines the tool {definition.name!r} again (first in {defined_in[definition.name]})",
                    )
                    continue
                found[definition.name] = definition
                defined_in[definition.name] = file
        except DefinitionError as error:
            reader.fail(f"tool_definitions[{index}]", str(error))
    return found


def _read_tools(
    reader: _Reader,
    node: object,
    value_sets: Mapping[str, ValueSetConfig],
    default_mode: Mode,
    definitions: Mapping[str, ToolDefinition],
    sources: Mapping[str, SourceConfig],
    assert_formats: bool,
    reuse: Mapping[bytes, CompiledSchema] | None,
) -> dict[str, ToolPolicy]:
    tools: dict[str, ToolPolicy] = {}
    entries = reader.named_entries(node, "tools")
    if not entries and not definitions:
        reader.fail("tools", "expected at least one tool")
    # Imported tools come first, then policy-only ones; a policy entry layers over its definition.
    for name in [*definitions, *(name for name in entries if name not in definitions)]:
        path = f"tools.{name}"
        fields = reader.mapping(
            entries.get(name),
            path,
            {"mode", "description", "arguments", "schema", "formats", "records", "rules", "side_effect", "log_values"},
        )
        definition = definitions.get(name)
        mode = reader.value(fields, "mode", path, _enum(Mode), default_mode)
        description = reader.value(fields, "description", path, _string, definition.description if definition else "")
        schema = fields.get("schema", definition.schema if definition else None)
        tool_formats = reader.value(fields, "formats", path, _formats, assert_formats)
        validator = None
        if schema is not None:
            if not isinstance(schema, dict | bool):
                reader.fail(f"{path}.schema", "expected a JSON Schema (a mapping, true or false)")
                schema = None
            elif any(cannot_run(pattern) for pattern in pattern_texts(schema)) and (
                slow := [(where, why) for where, pattern in patterns_in(schema) if (why := cannot_run(pattern))]
            ):
                for where, why in slow:  # it would backtrack on text the model wrote, stalling every call
                    reader.fail(f"{path}.schema.{where}", why)
                schema = None
            else:
                try:
                    validator = compile_schema(schema, assert_formats=tool_formats, reuse=reuse)
                except SchemaError as error:
                    reader.fail(f"{path}.schema", f"not a valid JSON Schema: {schema_error_location(error)}")
                    schema = None
        properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
        arguments = tuple(
            _read_argument(reader, argument, spec, f"{path}.arguments.{argument}", value_sets, schema)
            for argument, spec in reader.named_entries(fields.get("arguments"), f"{path}.arguments").items()
        )
        records = tuple(
            _read_record(reader, record, spec, f"{path}.records.{record}", sources, schema)
            for record, spec in reader.named_entries(fields.get("records"), f"{path}.records").items()
        )
        rules = _read_rules(reader, fields.get("rules"), f"{path}.rules", {r.name for r in records})
        # Strings by construction: a value-set binding's argument, and a record's id (the record check
        # reports any other type before a rule runs).
        strings = {b.name for b in arguments} | {r.id_argument for r in records}
        rules = _typed_rules(reader, rules, f"{path}.rules", schema, strings)
        known = (
            frozenset(b.name for b in arguments)
            | frozenset(b.path.top for b in arguments)
            | frozenset(r.id_path.top for r in records if r.id_argument)
            | frozenset(key for key in properties if isinstance(key, str))
            | frozenset(r.id_argument for r in records if r.id_argument)
            | frozenset(rule.argument for rule in rules if rule.argument)
        )
        side_effect = _read_side_effect(reader, fields.get("side_effect"), f"{path}.side_effect", known)
        log_values = _read_log_values(reader, fields.get("log_values"), f"{path}.log_values", known)
        tools[name] = ToolPolicy(
            name=name,
            mode=mode,
            arguments=arguments,
            description=description,
            schema=schema,
            assert_formats=tool_formats,
            schema_validator=validator,
            records=records,
            rules=rules,
            known_arguments=known,
            side_effect=side_effect,
            log_values=log_values,
        )
        tools[name] = replace(tools[name], check_names=tool_checks(tools[name]))
    for name, tool in tools.items():
        status_tool = tool.side_effect.status_tool if tool.side_effect else ""
        if status_tool and status_tool not in tools:
            reader.fail(
                f"tools.{name}.side_effect.status_tool",
                f"{status_tool!r} is not a tool of this policy: list it under tools (its calls must pass the "
                "gateway, which lets a repeat through once the model has checked)",
            )
    return tools


def _read_log_values(reader: _Reader, node: object, path: str, known: frozenset[str]) -> Mapping[str, ValueLogging]:
    """`log_values: {note: none, reason_code: clear}`: top-level argument names, each none, hashed or clear."""
    if node is None:
        return MappingProxyType({})
    chosen: dict[str, ValueLogging] = {}
    for argument, how in reader.named_entries(node, path).items():
        if argument != top_of(argument):  # a value is written whole, under its top-level name
            reader.fail(f"{path}.{argument}", "name a top-level argument (its whole value is written as said)")
        elif known and argument not in known:
            reader.fail(f"{path}.{argument}", f"not an argument of this tool (known: {', '.join(sorted(known))})")
        else:
            chosen[argument] = reader.value({argument: how}, argument, path, _enum(ValueLogging), ValueLogging.HASHED)
    return MappingProxyType(chosen)


def _read_decision_log(reader: _Reader, node: object) -> DecisionLogConfig:
    fields = reader.mapping(node, "decision_log", {"values", "session"})
    defaults = DecisionLogConfig()
    return DecisionLogConfig(
        values=reader.value(fields, "values", "decision_log", _enum(ValueLogging), defaults.values),
        session=reader.value(fields, "session", "decision_log", _enum(ValueLogging), defaults.session),
    )


def _check_logged_in_clear(reader: _Reader, tools: Mapping[str, ToolPolicy], redact: frozenset[str]) -> None:
    """An argument the policy redacts is never written as sent: `clear` for one is a contradiction to fix, not
    a choice to guess between (a `clear` default leaves redacted arguments hashed)."""
    for name, tool in tools.items():
        for argument, how in tool.log_values.items():
            if how is ValueLogging.CLEAR and argument in redact:
                reader.fail(
                    f"tools.{name}.log_values.{argument}",
                    "sampling.redact names this argument: it is never written as sent (say hashed or none)",
                )


def _read_side_effect(reader: _Reader, node: object, path: str, known: frozenset[str]) -> SideEffect | None:
    """`side_effect: true` (every argument identifies the operation), or a mapping naming them."""
    if node is None or node is False:
        return None
    if node is True:
        return SideEffect()
    fields = reader.mapping(node, path, {"same_operation", "window", "status_tool"})
    defaults = SideEffect()
    same_operation: tuple[str, ...] = reader.value(fields, "same_operation", path, _argument_list, ())
    for argument in same_operation:
        if argument != top_of(argument):  # the operation's key reads top-level arguments, whole
            reader.fail(f"{path}.same_operation", f"{argument!r}: name a top-level argument (its whole value counts)")
        elif known and argument not in known:
            reader.fail(
                f"{path}.same_operation",
                f"{argument!r} is not an argument of this tool (known: {', '.join(sorted(known))})",
            )
    return SideEffect(
        same_operation=same_operation,
        window_seconds=reader.value(fields, "window", path, parse_duration, defaults.window_seconds),
        status_tool=reader.value(fields, "status_tool", path, _string, ""),
    )


def _read_record(
    reader: _Reader, name: str, node: object, path: str, sources: Mapping[str, SourceConfig], schema: object
) -> RecordBinding:
    fields = reader.mapping(
        node, path, {"source", "kind", "id_argument", "owner", "failure", "lookup_tool", "ttl", "reveal_not_owned"}
    )
    source = reader.required_str(fields, "source", path)
    if source and not isinstance(sources.get(source), GrpcSourceConfig):
        grpc_sources = ", ".join(n for n, c in sources.items() if isinstance(c, GrpcSourceConfig)) or "none"
        reader.fail(
            f"{path}.source", f"expected a gRPC source (a RecordSource), got {source!r}; gRPC sources: {grpc_sources}"
        )
    id_argument = reader.required_str(fields, "id_argument", path)
    id_path = bound_path(reader, id_argument, f"{path}.id_argument", schema) if id_argument else None
    owner = reader.value(fields, "owner", path, _string, "")
    reveal = reader.value(fields, "reveal_not_owned", path, _boolean, False)
    if reveal and not owner:
        reader.fail(f"{path}.reveal_not_owned", "the record has no owner to check: set owner, or leave this out")
    return RecordBinding(
        name=name,
        source=source,
        kind=reader.required_str(fields, "kind", path),
        id_argument=id_argument if id_path is not None else "",
        id_path=id_path.path if id_path is not None else None,  # type: ignore[arg-type]
        required=id_path.required if id_path is not None else True,
        owner_attribute=owner,
        failure=reader.value(fields, "failure", path, _enum(Failure), Failure.OPEN),
        lookup_tool=reader.value(fields, "lookup_tool", path, _string, ""),
        ttl_seconds=reader.value(fields, "ttl", path, parse_duration, 30.0),
        reveal_not_owned=reveal,
    )


_RULE_CODES = ("rule_failed", "out_of_range", "not_owned")
_RECORD_REFERENCE = re.compile(r"\brecord\.([A-Za-z_][A-Za-z0-9_]*)")
_ARGUMENT_REFERENCE = re.compile(r"\bargs\.([A-Za-z_][A-Za-z0-9_]*)")


def _read_rules(reader: _Reader, node: object, path: str, records: set[str]) -> tuple[Rule, ...]:
    if node is None:
        return ()
    if not isinstance(node, list):
        reader.fail(path, "expected a list of rules ({name, expr, message, argument, code})")
        return ()
    rules = []
    for index, entry in enumerate(node):
        where = f"{path}[{index}]"
        fields = reader.mapping(
            entry, where, {"name", "expr", "message", "argument", "code", "on_error", "types", "each"}
        )
        expression = reader.required_str(fields, "expr", where)
        each: Steps = reader.value(fields, "each", where, read_each, ())
        code = reader.value(fields, "code", where, _choice(_RULE_CODES), "rule_failed")
        program = flat_program = None
        flat = flatten(expression, EACH_VARIABLE if each else "")
        if expression:
            try:
                program = cel.compile(expression)
            except ValueError as error:
                reader.fail(f"{where}.expr", f"not a valid CEL expression: {error}")
        if program is not None and flat is not None:
            try:
                flat_program = cel.compile(flat.expression)
            except ValueError:  # the rewrite is an optimisation: the nested program stands alone
                flat = None
        referenced = frozenset(_RECORD_REFERENCE.findall(expression))
        for unknown in sorted(referenced - records):
            reader.fail(f"{where}.expr", f"refers to record.{unknown}, which this tool's records do not define")
        rules.append(
            Rule(
                name=reader.value(fields, "name", where, _string, f"rule{index + 1}"),
                expression=expression,
                message=reader.value(fields, "message", where, _string, f"rule failed: {expression}"),
                argument=reader.value(fields, "argument", where, _string, str(fields["each"]) if each else ""),
                code=code,
                program=program,
                flat_program=flat_program,
                flat_paths=flat.paths if flat is not None and flat_program is not None else (),
                records=referenced,
                on_error=Failure(reader.value(fields, "on_error", where, _choice(("closed", "open")), "closed")),
                argument_types=_declared_types(reader, fields.get("types"), f"{where}.types"),
                arguments=frozenset(_ARGUMENT_REFERENCE.findall(expression))
                | frozenset(_ARGUMENT_REFERENCE.findall(reader.value(fields, "message", where, _string, ""))),
                arrays=ArrayReads(each=each) if each else None,  # read whole by _typed_rules
            )
        )
    return tuple(rules)


_JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")


def _declared_types(reader: _Reader, node: object, path: str) -> dict[str, tuple[str, ...]]:
    """A rule's own `types: {argument: integer}` (or a list of types), for arguments no schema types."""
    if node is None:
        return {}
    if not isinstance(node, dict):
        reader.fail(path, "expected a mapping of argument name to JSON type")
        return {}
    declared: dict[str, tuple[str, ...]] = {}
    for name, kinds in node.items():
        found = tuple(kinds) if isinstance(kinds, list) else (kinds,)
        if not found or not all(kind in _JSON_TYPES for kind in found):
            reader.fail(f"{path}.{name}", f"expected a JSON type ({', '.join(_JSON_TYPES)}), got {kinds!r}")
            continue
        declared[str(name)] = found
    return declared


def _typed_rules(
    reader: _Reader, rules: tuple[Rule, ...], path: str, schema: Mapping[str, Any] | bool | None, strings: set[str]
) -> tuple[Rule, ...]:
    """Each rule with the JSON types of every argument its expression reads (its message may quote others),
    and of every element path it reads through an array (rule_arrays.py); one whose type nothing declares
    is an error."""
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    typed = []
    for index, rule in enumerate(rules):
        # `types:` keys that are paths (items[*].quantity) type elements; the others, top-level arguments.
        types, nested, malformed = split_types(rule.argument_types)
        for why in malformed:
            reader.fail(f"{path}[{index}].types", why)
        each = rule.arrays.each if rule.arrays is not None else ()
        arrays, untyped = array_reads(rule.expression, each, nested, schema, strings)
        for why in untyped:
            reader.fail(f"{path}[{index}].expr", why)
        for name in sorted(set(_ARGUMENT_REFERENCE.findall(rule.expression))):
            if name in types:
                continue
            spec = properties.get(name)
            kinds = spec.get("type") if isinstance(spec, dict) else None
            if isinstance(kinds, str | list) and kinds:
                types[name] = tuple(kinds) if isinstance(kinds, list) else (kinds,)
            elif name in strings:
                types[name] = ("string",)
            else:
                reader.fail(
                    f"{path}[{index}].expr",
                    f"reads args.{name}, whose JSON type nothing declares: type it in the tool's schema, or "
                    f"add types: {{{name}: integer}} (say) to the rule; CEL compares values of different types "
                    f'as unequal, so args.{name} != 5 would pass the string "5"',
                )
        if each:
            for why in each_reads_whole(rule.expression, each, types):
                reader.fail(f"{path}[{index}].expr", why)
        typed.append(replace(rule, argument_types=types, arrays=arrays))
    return tuple(typed)


def _choice(choices: tuple[str, ...]) -> Callable[[object], str]:
    def convert(value: object) -> str:
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return str(value)

    return convert


def _read_argument(
    reader: _Reader, name: str, node: object, path: str, value_sets: Mapping[str, ValueSetConfig], schema: object
) -> ArgumentBinding:
    fields = reader.mapping(node, path, {"value_set", "normalise", "required", "hint", "reveal_other_scopes"})
    value_set = reader.required_str(fields, "value_set", path)
    if value_set and value_set not in value_sets:
        known = ", ".join(value_sets) or "none are defined"
        reader.fail(f"{path}.value_set", f"undefined value set {value_set!r}; value sets: {known}")
    scope = value_sets[value_set].scope if value_set in value_sets else ""
    reveal = reader.value(fields, "reveal_other_scopes", path, _boolean, False)
    if reveal and not scope:
        reader.fail(f"{path}.reveal_other_scopes", f"{value_set} is not scoped (it has no scope: customer_id/tenant)")
    norm_path = f"{path}.normalise"
    norm = reader.mapping(fields.get("normalise"), norm_path, {"case", "separators", "trim"})
    defaults = Normalisation()
    normalisation = Normalisation(
        case=reader.value(norm, "case", norm_path, _enum(CaseRule), defaults.case),
        separators=reader.value(norm, "separators", norm_path, _separators, defaults.separators),
        trim=reader.value(norm, "trim", norm_path, _boolean, defaults.trim),
    )
    bound = bound_path(reader, name, path, schema)
    return ArgumentBinding(
        name=name,
        value_set=value_set,
        normalisation=normalisation,
        required=reader.value(fields, "required", path, _boolean, bound.required if bound else True),
        hint=reader.value(fields, "hint", path, _string, ""),
        path=bound.path if bound is not None else parse_path("_"),
        scope=scope,
        reveal_other_scopes=reveal,
    )


class _Bound(NamedTuple):
    path: ArgPath
    required: bool  # the default of `required`: the schema's say for a nested path, true for a top-level one


def bound_path(reader: _Reader, text: str, where: str, schema: object) -> _Bound | None:
    """A binding's path, parsed and walked through the tool's schema; None (and a load error) when it is
    malformed or names nothing the schema allows, so a binding never silently checks nothing."""
    try:
        path = parse_path(text)
    except ValueError as error:
        reader.fail(where, str(error))
        return None
    found = check_path(path, schema if isinstance(schema, dict | bool) else None)
    if found.error:
        reader.fail(where, found.error)
        return None
    return _Bound(path, found.required if path.nested else True)


def _read_repair(reader: _Reader, node: object) -> RepairConfig:
    fields = reader.mapping(node, "repair", {"list_limit", "nearest", "max_attempts", "remember"})
    defaults = RepairConfig()
    return RepairConfig(
        list_limit=reader.value(fields, "list_limit", "repair", _positive_int, defaults.list_limit),
        nearest=reader.value(fields, "nearest", "repair", _positive_int, defaults.nearest),
        max_attempts=reader.value(fields, "max_attempts", "repair", _positive_int, defaults.max_attempts),
        remember_seconds=reader.value(fields, "remember", "repair", parse_duration, defaults.remember_seconds),
    )


def _read_limits(reader: _Reader, node: object) -> LimitsConfig:
    fields = reader.mapping(node, "limits", {"max_elements"})
    return LimitsConfig(
        max_elements=reader.value(fields, "max_elements", "limits", _max_elements, DEFAULT_MAX_ELEMENTS),
    )


def _max_elements(value: object) -> int:
    count = _positive_int(value)
    if count > MAX_ELEMENTS_CEILING:  # each element checked is time on the event loop, per call
        raise ValueError(f"at most {MAX_ELEMENTS_CEILING}, got {count}")
    return count


MAX_ELEMENTS_CEILING = 10_000


def _read_cohorts(reader: _Reader, node: object) -> CohortConfig:
    """`models: {names: [...], prompt_versions: [...]}`: the label values the split series may take."""
    fields = reader.mapping(node, "models", {"names", "prompt_versions"})
    none: tuple[str, ...] = ()
    return CohortConfig(
        models=frozenset(reader.value(fields, "names", "models", _cohort_names, none)),
        prompt_versions=frozenset(reader.value(fields, "prompt_versions", "models", _cohort_names, none)),
    )


def _cohort_names(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(name, str) and name for name in value):
        raise ValueError(f"expected a list of names, got {value!r}")
    if len(value) > MAX_COHORT_NAMES:
        raise ValueError(f"at most {MAX_COHORT_NAMES} names (each is a label value of every split series)")
    for name in value:
        if name.startswith("_") or len(name) > 128:
            raise ValueError(f"{name!r}: a name is 1 to 128 characters and does not start with _ (_other, _none)")
        if not name.isprintable():  # a label value; control characters also separate the windows' keys
            raise ValueError(f"{name!r}: a name has no control characters")
    return tuple(value)


def _read_attention(reader: _Reader, node: object) -> AttentionConfig:
    fields = reader.mapping(node, "attention", {"out_of_set_rate", "min_checks", "override_expiring"})
    defaults = AttentionConfig()
    return AttentionConfig(
        out_of_set_rate=reader.value(fields, "out_of_set_rate", "attention", _rate, defaults.out_of_set_rate),
        min_checks=reader.value(fields, "min_checks", "attention", _positive_int, defaults.min_checks),
        override_expiring_seconds=reader.value(
            fields, "override_expiring", "attention", parse_duration, defaults.override_expiring_seconds
        ),
    )


def _read_sampling(reader: _Reader, node: object) -> SamplingConfig:
    fields = reader.mapping(node, "sampling", {"rate", "max_value_chars", "redact"})
    defaults = SamplingConfig()
    return SamplingConfig(
        rate=reader.value(fields, "rate", "sampling", _rate, defaults.rate),
        max_value_chars=reader.value(fields, "max_value_chars", "sampling", _positive_int, defaults.max_value_chars),
        redact=reader.value(fields, "redact", "sampling", _names, defaults.redact),
    )


def _argument_list(value: object) -> tuple[str, ...]:
    """Argument names in the order written, each once; at least one."""
    if value == []:
        raise ValueError("expected at least one argument name (or leave it out: every argument)")
    _names(value)  # raises unless a list of non-empty names
    assert isinstance(value, list)
    return tuple(dict.fromkeys(value))


def _names(value: object) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ValueError("expected a list of argument names")
    return frozenset(value)
