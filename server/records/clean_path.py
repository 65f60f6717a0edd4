"""A tool's records and rules, precompiled for the call that passes them: says "clean" or says nothing.

Most calls pass. The general checks (records/checks.py, rule_checks.py) build
per-call objects for every id and rule so that a failure can be described; a
call that fails nothing needs none of them. A CleanPath answers True only when
every record the tool names is a cache hit, found and owned by the session's
customer, and every rule holds in its flat form: exactly when the general
checks would find no problem, no error and skip nothing. Any other answer is
False, and the validator then runs the general checks, which say what is wrong
(or look the records up). The fast answer never decides a failure, so it can
only be wrong by passing a call the general path refuses: tests/unit/
test_clean_path.py holds the two paths to the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cel

from argwatch.server.policy.model import ToolPolicy
from argwatch.server.records.checks import MAX_ID_CHARS, owned_by
from argwatch.server.records.lookup_client import RecordLookups
from argwatch.server.verdict.rule_checks import bind_paths, mistyped

_UNBOUND = object()
_EQUAL_IS_SAME = (str, int)  # types whose equal values CEL cannot tell apart (bool is not int here: the class is)


class CleanPath:
    """One tool's records (each bound by a top-level argument) and rules (each flat, over scalars)."""

    __slots__ = ("_bound", "_context", "_paths", "_programs", "_records", "_types")

    def __init__(self, tool: ToolPolicy) -> None:
        # (binding name, id argument, source, kind, owner attribute or "")
        self._records = tuple(
            (binding.name, binding.id_path.top, binding.source, binding.kind, binding.owner_attribute)
            for binding in tool.records
        )
        self._programs = tuple(rule.flat_program for rule in tool.rules)
        self._types = tuple((name, kinds) for rule in tool.rules for name, kinds in rule.argument_types.items())
        # Each variable once: a name is its path's encoding (cel_flatten.variable_name), so one name, one path.
        self._paths = tuple({variable: path for rule in tool.rules for variable, path in rule.flat_paths}.items())
        # One context kept across calls, each variable converted again only when its value changed: the
        # library converts a string after trying eight other types, each failing with an exception (its
        # dearest conversion: docs/performance.md), and most of a tool's record fields repeat call to call.
        # Every variable is set before any program runs (bind_paths binds all or none), so no call reads
        # another's value. Owned by the validator that made it, on its event loop (or its replay's thread).
        self._context = cel.Context()
        self._bound: dict[str, object] = {}  # each variable's value as the context holds it now

    def passes(
        self,
        arguments: Mapping[str, object],
        session: Mapping[str, str],
        clients: Mapping[str, RecordLookups],
    ) -> bool:
        """True only if the general checks would find nothing; False says only "ask them"."""
        customer_id = session["customer_id"]
        found: dict[str, Any] = {}
        for name, argument, source, kind, owner in self._records:
            record_id = arguments.get(argument)
            if record_id.__class__ is not str or not record_id or len(record_id) > MAX_ID_CHARS:
                return False
            hit = clients[source].cached(kind, record_id)
            if hit is None or not hit.found:  # an unavailable answer is never found (Lookup(False, {}, error))
                return False
            if owner and (not customer_id or not owned_by(hit.attributes.get(owner), customer_id)):
                return False
            found[name] = hit.attributes
        if not self._programs:
            return True
        if mistyped(self._types, arguments):
            return False
        variables: dict[str, object] = {}
        if not bind_paths(self._paths, {"args": arguments, "record": found, "session": session}, variables):
            return False
        context = self._context
        bound = self._bound
        for name, value in variables.items():
            before: object = bound.get(name, _UNBOUND)
            value_type: type = value.__class__
            # Unchanged: the same object (a record field from the cache, a small int, a bool), or an equal
            # str or int (an argument decoded again). Not a float by equality (-0.0 == 0.0), nor a container.
            if before is value or (before.__class__ is value_type and value_type in _EQUAL_IS_SAME and before == value):
                continue
            try:
                context.add_variable(name, value)
            except Exception:  # a value CEL cannot take: the general path says why
                return False
            bound[name] = value
        for program in self._programs:
            try:
                if program.execute(context) is not True:
                    return False
            except Exception:  # the general path reports why it could not be evaluated
                return False
        return True


def clean_path(tool: ToolPolicy) -> CleanPath | None:
    """The tool's clean path; None where it has none: an id inside arrays or nested objects, or a rule that
    reads arrays or could not be flattened (the general checks then run for every call)."""
    if any(binding.id_path.nested for binding in tool.records):
        return None
    if any(rule.flat_program is None or rule.arrays is not None for rule in tool.rules):
        return None
    names = {binding.name for binding in tool.records}
    if any(not rule.records <= names for rule in tool.rules):  # the loader refuses these; a built policy may not
        return None
    return CleanPath(tool)
