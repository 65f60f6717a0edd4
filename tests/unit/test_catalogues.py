"""Real tool catalogues are judged exactly as JSON Schema judges them (issue 28, part 5).

Calls are drawn from the corpus of catalogue_corpus.py (the project's own tools, the reference MCP
servers', a few hundred schemas generated from Python by agent frameworks): valid ones by
hypothesis-jsonschema, invalid ones by one fault each (schema_draws.py). Each goes through the
gateway's own Validator, on a policy that imports the whole corpus, and its verdict is compared with
the `jsonschema` library's, which is the reference:

1. a call the reference accepts is ALLOWED, with no problem;
2. a call it refuses gets a problem at each path it faults, and at no other;
3. one fault, one problem: never two problems with the same code and path, nor more problems at a
   path than the reference has faults (keywords) there.

The budget is fixed and the run derandomised, so CI sees the same calls every time.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import Iterator
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema._utils import find_additional_properties
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator as JsonValidator
from jsonschema.validators import validator_for
from prometheus_client import CollectorRegistry

from argwatch.server.modes.store import ModeStore
from argwatch.server.policy.arg_paths import format_path
from argwatch.server.policy.model import Policy
from argwatch.server.repair.rejections import RejectionLog
from argwatch.server.state.shared_cache import SharedCache
from argwatch.server.telemetry.metrics import GatewayMetrics
from argwatch.server.telemetry.offenders import OffenderTable
from argwatch.server.telemetry.samples import SampledValueLog
from argwatch.server.validator import Validator
from argwatch.server.valuesets.provider import ValueSetProvider
from argwatch.server.verdict.decision import Decision
from argwatch.server.verdict.findings import Problem
from argwatch.server.verdict.tool_call import ToolCall
from tests.unit.catalogue_corpus import CatalogueTool, corpus, corpus_policy
from tests.unit.schema_draws import mutated_calls, valid_calls

pytestmark = [
    pytest.mark.slow,
    # hypothesis-jsonschema 0.23.1 resolves $refs with jsonschema's deprecated RefResolver.
    pytest.mark.filterwarnings("ignore:jsonschema.RefResolver is deprecated:DeprecationWarning"),
]
OWN_AND_MCP = [tool for tool in corpus() if not tool.origin.startswith(("openai-agents", "pydantic model"))]
FRAMEWORKS = [tool for tool in corpus() if tool not in OWN_AND_MCP]
MUTATIONS_PER_CALL = 6  # each valid call is cheap to mutate, and expensive to draw
# The fixed budget: the project's own and the MCP servers' tools each get EACH examples; the
# framework-generated ones share SHARED (about one valid call each). About 20 s in all here.
EACH, SHARED = 8, 400
PROFILE = settings(
    deadline=None,
    derandomize=True,  # the same calls on every run: CI is stable
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


class Gateway:
    """The gateway's Validator on the corpus policy, and the reference validator of each tool."""

    def __init__(self, policy: Policy) -> None:
        metrics = GatewayMetrics(CollectorRegistry())
        cache = SharedCache(None, metrics)
        self.loop = asyncio.new_event_loop()
        self.validator = Validator(
            policy,
            ValueSetProvider(policy, {}, cache, metrics),
            ModeStore(policy),
            metrics,
            SampledValueLog(0.0, 1),
            RejectionLog(cache, policy.repair),
            {},
            OffenderTable(),
        )
        self.references: dict[str, JsonValidator] = {}
        self.calls = itertools.count()

    def problems(self, tool: CatalogueTool, arguments: dict[str, Any]) -> list[Problem]:
        call = ToolCall(tool.name, arguments, f"call-{next(self.calls)}")
        verdict = self.loop.run_until_complete(self.validator.validate(call))
        assert (verdict.decision is Decision.REJECT) == bool(verdict.problems), "reject mode rejects what it faults"
        return list(verdict.problems)

    def reference(self, tool: CatalogueTool) -> JsonValidator:
        """jsonschema as it judges the schema on its own: its declared dialect ($schema), formats asserted
        (the policy's default, `formats: assert`)."""
        if tool.name not in self.references:
            cls = validator_for(tool.schema, default=Draft202012Validator)
            self.references[tool.name] = cls(tool.schema, format_checker=cls.FORMAT_CHECKER)
        return self.references[tool.name]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    gateway = Gateway(corpus_policy(tmp_path_factory.mktemp("catalogue")))
    yield gateway
    gateway.loop.close()


def faults(errors: list[ValidationError]) -> collections.Counter[str]:
    """The reference's faults per path: one per keyword that failed there, one per missing or unexpected key."""
    found: set[tuple[str, str]] = set()
    for error in errors:
        keyword, path = str(error.validator), list(error.absolute_path)
        instance = error.instance if isinstance(error.instance, dict) else {}
        if keyword == "required":
            names = [name for name in cast("list[str]", error.validator_value) if name not in instance]
        elif keyword == "additionalProperties":
            names = list(find_additional_properties(instance, cast("dict[str, Any]", error.schema)))
        elif keyword == "unevaluatedProperties":  # named in its message, each as repr() writes it
            names = [name for name in instance if repr(name) in error.message]
        else:
            found.add((format_path(path), keyword))
            continue
        found.update((format_path([*path, name]), keyword) for name in names)
    return collections.Counter(path for path, _ in found)


def check(gateway: Gateway, tool: CatalogueTool, arguments: dict[str, Any]) -> None:
    errors = list(gateway.reference(tool).iter_errors(arguments))
    problems = gateway.problems(tool, arguments)
    # How many calls each way: pytest --hypothesis-show-statistics shows it.
    event("the reference refuses the call" if errors else "the reference accepts the call")
    shown = f"{tool.origin}: {arguments!r}\nreference: {[(list(e.absolute_path), e.message) for e in errors]}\n"
    shown += f"argwatch: {[(p.code.value, p.argument, p.message) for p in problems]}"
    if all(error.validator == "multipleOf" for error in errors) and not problems:
        return  # deliberate: the fast check computes multipleOf exactly (schema_checks.py's docstring)
    # 1 and 2: a problem exactly where the reference finds a fault.
    expected = faults(errors)
    assert {p.argument for p in problems} == set(expected), shown
    # 3: one fault, one problem.
    by_code_and_path = collections.Counter((p.code, p.argument) for p in problems)
    assert max(by_code_and_path.values(), default=1) == 1, shown
    per_path = collections.Counter(p.argument for p in problems)
    assert all(per_path[path] <= count for path, count in expected.items()), shown


def valid_then_mutated(gateway: Gateway, tool: CatalogueTool, data: st.DataObject) -> None:
    arguments = data.draw(valid_calls(tool.schema), label="valid call")
    check(gateway, tool, arguments)
    for _ in range(MUTATIONS_PER_CALL):
        check(gateway, tool, data.draw(mutated_calls(arguments), label="one fault"))


@pytest.mark.parametrize("tool", OWN_AND_MCP, ids=lambda tool: tool.name)
@settings(PROFILE, max_examples=EACH)
@given(data=st.data())
def test_the_projects_and_mcp_servers_tools_are_judged_as_json_schema_judges_them(
    gateway: Gateway, tool: CatalogueTool, data: st.DataObject
) -> None:
    valid_then_mutated(gateway, tool, data)


@settings(PROFILE, max_examples=SHARED)
@given(data=st.data())
def test_framework_generated_tools_are_judged_as_json_schema_judges_them(gateway: Gateway, data: st.DataObject) -> None:
    tool = data.draw(st.sampled_from(FRAMEWORKS), label="tool")
    valid_then_mutated(gateway, tool, data)


def test_the_corpus_holds_a_few_hundred_real_tools() -> None:
    origins = collections.Counter(tool.origin.split(" ")[0] for tool in corpus())
    assert len(OWN_AND_MCP) >= 40 and len(FRAMEWORKS) >= 300, origins
