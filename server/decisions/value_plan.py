"""How one tool's argument values and session go into the decision log: per argument, as the policy says."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from argwatch.server.policy.model import Policy, ToolPolicy, ValueLogging
from argwatch.server.verdict.per_tool import PerTool


@dataclass(frozen=True, slots=True)
class ValuePlan:
    """Each named argument's way, the way for the rest, and the session's (resolved once per policy)."""

    default: ValueLogging = ValueLogging.HASHED
    by_name: Mapping[str, ValueLogging] = field(default_factory=dict)
    session: ValueLogging = ValueLogging.HASHED
    redacted: frozenset[str] = frozenset()  # never written as sent, whatever the default says
    # Worked out once here, read per line: every value hashed (most tools), and the session's way as plain flags.
    hashes_all: bool = field(init=False, default=False)
    session_hashed: bool = field(init=False, default=False)
    session_clear: bool = field(init=False, default=False)
    plain: bool = field(init=False, default=False)  # every value hashed and the session not in clear

    def __post_init__(self) -> None:
        hashes_all = self.default is ValueLogging.HASHED and not self.by_name
        object.__setattr__(self, "hashes_all", hashes_all)
        object.__setattr__(self, "plain", hashes_all and self.session is not ValueLogging.CLEAR)
        object.__setattr__(self, "session_hashed", self.session is ValueLogging.HASHED)
        object.__setattr__(self, "session_clear", self.session is ValueLogging.CLEAR)

    def of(self, argument: str) -> ValueLogging:
        how = self.by_name.get(argument, self.default)
        if how is ValueLogging.CLEAR and argument in self.redacted:
            return ValueLogging.HASHED  # the loader refuses `clear` on one by name; this is the `clear` default
        return how


def value_plans(policy: Policy) -> tuple[Mapping[str, ValuePlan], ValuePlan]:
    """A plan per tool of the policy, and the one for calls to a tool it lacks (its defaults)."""
    config = policy.decision_log
    redacted = policy.sampling.redact

    def plan(tool: ToolPolicy | None) -> ValuePlan:
        return ValuePlan(config.values, tool.log_values if tool is not None else {}, config.session, redacted)

    return PerTool(policy.tools, plan), plan(None)
