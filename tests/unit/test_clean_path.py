"""A tool's clean path says "clean" exactly when the general record and rule checks find nothing, on any call."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from argwatch.server.policy.loader import parse_policy
from argwatch.server.policy.model import GrpcSourceConfig, ToolPolicy
from argwatch.server.policytest.case_sources import CaseRecords
from argwatch.server.records.checks import check_records
from argwatch.server.records.clean_path import clean_path
from argwatch.server.records.lookup_client import Lookup, RecordClient
from argwatch.server.verdict.rule_checks import check_rules

RULES = [
    "args.amount_cents <= record.order.paid_cents",
    "record.order.status != 'refunded'",
    "args.amount_cents > 0 && session.customer_id == record.order.customer_id",
    "size(args.note) < 12 || args.amount_cents < 100",
    "args.filter.since < 100 || session.tenant == 'acme'",
]


def tool_with(rules: list[str], records: dict[str, Any] | None = None, **extra: Any) -> ToolPolicy:
    policy = {
        "sources": {"orders_db": {"grpc": {"target": "127.0.0.1:1", "timeout": "1s"}}},
        "tools": {
            "refund_order": {
                "records": records
                if records is not None
                else {
                    "order": {"source": "orders_db", "kind": "order", "id_argument": "order_id", "owner": "customer_id"}
                },
                "schema": {
                    "type": "object",
                    "properties": {
                        "amount_cents": {"type": "integer"},
                        "note": {"type": "string"},
                        "filter": {"type": "object"},
                        "items": {"type": "array", "items": {"type": "integer"}},
                        "lines": {
                            "type": "array",
                            "items": {"type": "object", "properties": {"order_id": {"type": "string"}}},
                        },
                    },
                },
                "rules": [{"name": f"r{i}", "expr": rule, "argument": "amount_cents"} for i, rule in enumerate(rules)],
                **extra,
            }
        },
    }
    return parse_policy(json.dumps(policy).encode(), "/srv/policy.yaml").tools["refund_order"]


TOOL = tool_with(RULES)
RECORDS_ONLY = tool_with([])  # no rule repeats the ownership check
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=6),
    st.sampled_from(["ord_1", "ord_2", "", "x" * 300]),
    st.fixed_dictionaries({}, optional={"since": st.integers(0, 200)}),
)


def maybe(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts with any subset of `keys`, each holding any value."""
    return st.fixed_dictionaries({}, optional={key: values for key in keys})


class Unavailable(CaseRecords):
    """A source whose every answer says it could not look (a RecordClient caches no such answer; another
    RecordLookups may hand one back from `cached`)."""

    def _answer(self, kind: str, record_id: str) -> Lookup:
        return Lookup(False, {}, "the source is down")


def general_finds_nothing(tool: ToolPolicy, arguments: dict[str, Any], records: CaseRecords, customer: str) -> bool:
    session = {"customer_id": customer, "tenant": "acme" if customer == "cus_2" else ""}
    found = asyncio.run(check_records(tool, arguments, customer, {"orders_db": records}, None))
    if found.problems or found.skipped:
        return False
    rules = check_rules(tool, arguments, found.found, session)
    return not (rules.problems or rules.errors or rules.skipped)


def near(clean: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a value a clean call holds (three in four), else any JSON value: both answers come up often.
    (Not one_of(clean, clean, clean, values): Hypothesis flattens nested one_of, and `values` has seven.)"""
    return st.sampled_from([True, True, True, False]).flatmap(lambda usual: clean if usual else values)


def without_one(drawn: dict[str, Any], dropped: set[str]) -> dict[str, Any]:
    return {key: value for key, value in drawn.items() if key not in dropped}


CALL_KEYS = ["order_id", "amount_cents", "note", "filter"]
arguments_drawn = st.builds(
    without_one,
    st.fixed_dictionaries(
        {
            "order_id": near(st.sampled_from(["ord_1", "ord_1", "ord_1", "ord_2", "", "x" * 300])),
            "amount_cents": near(st.integers(1, 99)),
            "note": near(st.text(max_size=11)),
            "filter": near(st.fixed_dictionaries({"since": st.integers(0, 99)})),
        }
    ),
    st.sampled_from([set(), set(), set(), *({key} for key in CALL_KEYS)]),
)
orders_drawn = st.one_of(
    st.none(),
    st.just({"customer_id": "cus_1", "paid_cents": 500, "status": "paid"}),
    st.fixed_dictionaries(
        {
            "customer_id": near(st.sampled_from(["cus_1", "cus_1", "cus_2"])),
            "paid_cents": near(st.integers(0, 1000)),
            "status": near(st.sampled_from(["paid", "paid", "refunded"])),
        }
    ),
    st.fixed_dictionaries({"customer_id": near(st.sampled_from(["cus_1", "cus_2"]))}),
)


@settings(max_examples=600, deadline=None)
@given(
    tool=st.sampled_from([TOOL, RECORDS_ONLY]),
    arguments=arguments_drawn,
    order=orders_drawn,
    customer=st.sampled_from(["cus_1", "cus_1", "cus_1", "cus_2", ""]),
    down=st.sampled_from([False, False, False, True]),
)
def test_the_clean_path_agrees_with_the_general_checks(
    tool: ToolPolicy, arguments: dict[str, Any], order: dict[str, Any] | None, customer: str, down: bool
) -> None:
    # The source holds the order under ids no call may name too (empty, too long): a look-up must not decide.
    held = {} if order is None else {"ord_1": order, "": order, "x" * 300: order}
    records = (Unavailable if down else CaseRecords)({"order": held})
    session = {"customer_id": customer, "tenant": "acme" if customer == "cus_2" else ""}
    clean = KEPT[id(tool)]  # one per tool across examples, as a validator keeps it across calls
    # Every record is a cache hit here, so the two agree both ways (but where a rule's field is absent): the
    # fast answer is taken whenever it can be, and never passes what the general checks refuse.
    fast = clean.passes(arguments, session, {"orders_db": records})
    general = general_finds_nothing(tool, arguments, records, customer)
    assert fast == general or (not fast and absent_for_a_rule(tool, arguments, order))


KEPT = {id(tool): path for tool in (TOOL, RECORDS_ONLY) if (path := clean_path(tool)) is not None}
assert len(KEPT) == 2

# Rules whose answer turns on what a kept context could confuse: -0.0 and 0.0 (equal, but not to a division),
# True and 1 (equal in Python, not in CEL), an int and the equal string.
SAME_OR_NOT = tool_with(
    [
        "1.0 / record.order.ratio > 0.0",
        "record.order.flag == 1",
        "args.note == '1'",
        "args.amount_cents < record.order.paid_cents",
    ]
)
confusable = st.sampled_from([0.0, -0.0, 1, True, 1.0, "1", False, 0])


@settings(max_examples=300, deadline=None)
@given(
    calls=st.lists(
        st.tuples(
            st.fixed_dictionaries(
                {"order_id": st.just("ord_1"), "amount_cents": st.sampled_from([1, 2, True]), "note": confusable}
            ),
            st.fixed_dictionaries(
                {
                    "customer_id": st.just("cus_1"),
                    "paid_cents": st.sampled_from([2, 3, True]),
                    "ratio": confusable,
                    "flag": confusable,
                }
            ),
        ),
        min_size=2,
        max_size=8,
    )
)
def test_a_kept_clean_path_answers_each_call_as_a_new_one_would(
    calls: list[tuple[dict[str, Any], dict[str, Any]]],
) -> None:
    kept = clean_path(SAME_OR_NOT)
    assert kept is not None
    session = {"customer_id": "cus_1", "tenant": ""}
    for arguments, order in calls:
        # Equal values as new objects, as a call decoded again and a record fetched again hand them.
        arguments = json.loads(json.dumps(arguments))
        clients = {"orders_db": CaseRecords({"order": {"ord_1": dict(order)}})}
        fresh = clean_path(SAME_OR_NOT)
        assert fresh is not None
        assert kept.passes(arguments, session, clients) == fresh.passes(arguments, session, clients), (arguments, order)


def test_a_kept_clean_path_tells_negative_zero_and_true_apart() -> None:
    kept = clean_path(SAME_OR_NOT)
    assert kept is not None
    session = {"customer_id": "cus_1", "tenant": ""}
    arguments = {"order_id": "ord_1", "amount_cents": 1, "note": "1"}
    answers = []
    for ratio, flag in [(0.0, 1), (-0.0, 1), (0.0, 1), (0.0, True), (0.0, 1)]:
        order = {"customer_id": "cus_1", "paid_cents": 2, "ratio": ratio, "flag": flag}
        answers.append(kept.passes(arguments, session, {"orders_db": CaseRecords({"order": {"ord_1": order}})}))
    assert answers == [True, False, True, False, True]


CLEAN_CALL = {"order_id": "ord_1", "amount_cents": 50, "note": "short", "filter": {"since": 3}}
CLEAN_ORDER = {"paid_cents": 500, "status": "paid", "customer_id": "cus_1"}
ODD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1.0,
    1.5,
    10**20,
    "",
    "x" * 300,
    "ord_2",
    "cus_2",
    "refunded",
    "50",
    [],
    [1],
    {},
    {"since": 500},
]


def one_change_at_a_time() -> list[tuple[dict[str, Any], dict[str, Any] | None, str, bool]]:
    """The clean case, and each case one field (or the customer, or the source) away from it."""
    cases: list[tuple[dict[str, Any], dict[str, Any] | None, str, bool]] = [(CLEAN_CALL, CLEAN_ORDER, "cus_1", False)]
    for key in CLEAN_CALL:
        cases.append(({k: v for k, v in CLEAN_CALL.items() if k != key}, CLEAN_ORDER, "cus_1", False))
        cases += [({**CLEAN_CALL, key: odd}, CLEAN_ORDER, "cus_1", False) for odd in ODD_VALUES]
    for key in CLEAN_ORDER:
        cases.append((CLEAN_CALL, {k: v for k, v in CLEAN_ORDER.items() if k != key}, "cus_1", False))
        cases += [(CLEAN_CALL, {**CLEAN_ORDER, key: odd}, "cus_1", False) for odd in ODD_VALUES]
    cases += [(CLEAN_CALL, None, "cus_1", False), (CLEAN_CALL, CLEAN_ORDER, "", False)]
    cases += [(CLEAN_CALL, CLEAN_ORDER, "cus_2", False), (CLEAN_CALL, CLEAN_ORDER, "cus_1", True)]
    return cases


def absent_for_a_rule(tool: ToolPolicy, arguments: dict[str, Any], order: dict[str, Any] | None) -> bool:
    """Whether a field a rule reads is missing: the clean path then says "ask the general checks", which
    run that rule nested (where `false || error` is an error but `true || error` holds)."""
    roots = {"args": arguments, "record": {"order": order or {}}, "session": {"customer_id": "", "tenant": ""}}
    for rule in tool.rules:
        for _, path in rule.flat_paths:
            node: Any = roots[path[0]]
            for part in path[1:]:
                if not isinstance(node, dict) or part not in node:
                    return True
                node = node[part]
    return False


def test_each_case_one_change_from_clean_agrees_with_the_general_checks() -> None:
    """Random calls seldom land next to the boundary; these sit on it, one field over, for both tools."""
    passed = 0
    for tool in (TOOL, RECORDS_ONLY):
        clean = clean_path(tool)
        assert clean is not None
        for arguments, order, customer, down in one_change_at_a_time():
            held = {} if order is None else {"ord_1": order, "": order, "x" * 300: order}
            records = (Unavailable if down else CaseRecords)({"order": held})
            session = {"customer_id": customer, "tenant": ""}
            fast = clean.passes(arguments, session, {"orders_db": records})
            general = general_finds_nothing(tool, arguments, records, customer)
            if absent_for_a_rule(tool, arguments, order):  # the general path runs such a rule nested
                assert general or not fast, (arguments, order, customer)
            else:
                assert fast == general, (arguments, order, customer)
            passed += fast
    assert passed > 20  # both answers come up: a path that never passed would agree only by refusing


def test_a_clean_call_passes_and_one_fault_does_not() -> None:
    clean = clean_path(TOOL)
    assert clean is not None
    records = CaseRecords({"order": {"ord_1": {"paid_cents": 500, "status": "paid", "customer_id": "cus_1"}}})
    session = {"customer_id": "cus_1", "tenant": ""}
    call = {"order_id": "ord_1", "amount_cents": 50, "note": "short", "filter": {"since": 3}}
    assert clean.passes(call, session, {"orders_db": records})
    assert not clean.passes({**call, "amount_cents": 501}, session, {"orders_db": records})  # a rule fails
    assert not clean.passes({**call, "order_id": "ord_2"}, session, {"orders_db": records})  # not found
    assert not clean.passes(call, {"customer_id": "cus_2", "tenant": ""}, {"orders_db": records})  # not owned
    assert not clean.passes({**call, "amount_cents": "50"}, session, {"orders_db": records})  # mistyped


def test_a_record_not_in_the_cache_is_no_pass() -> None:
    async def run() -> bool:
        client = RecordClient(GrpcSourceConfig(target="127.0.0.1:1"), ttl=60)
        try:
            clean = clean_path(tool_with([]))
            assert clean is not None
            return clean.passes({"order_id": "ord_1"}, {"customer_id": "cus_1", "tenant": ""}, {"orders_db": client})
        finally:
            await client.close()

    assert asyncio.run(run()) is False  # the general checks look it up


def test_tools_the_clean_path_cannot_take_have_none() -> None:
    in_arrays = {"order": {"source": "orders_db", "kind": "order", "id_argument": "lines[*].order_id"}}
    assert clean_path(tool_with([], in_arrays)) is None
    assert clean_path(tool_with(["has(args.note) ? args.note != '' : true"])) is None  # not flattened
    assert clean_path(tool_with(["args.items.all(i, i > 0)"], {})) is None  # reads an array
