"""What an array argument costs per call, in-process: a path binding per element, an `each` rule, a whole-list rule.

The demo policy's `create_order` (examples/policy.yaml): `items[*].sku` bound to
the catalogue's set, and `sum(args.items.map(i, i.price_cents * i.quantity)) <= 50000`
over the whole list. Each row is the Validator on a clean call of n line items
(best of 5); the first row, the same tool with no rule, is the baseline measured
in the same run. A rule over the whole list grows faster than the list: CEL
converts each element (a map) on every call, and its `map` grows with the
square of the list in the library version argwatch pins (docs/performance.md).

    python bench/arrays.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import best_micros

from argwatch.server.policy.loader import load_policy
from argwatch.server.policy.model import Rule
from argwatch.server.sets.snapshot import SetReading
from argwatch.server.verdict.rule_checks import check_rules
from argwatch.server.verdict.set_checks import check_arguments
from tests.snapshots import make_snapshot  # a snapshot built whole, as the provider holds one

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "policy.yaml")
SIZES = (1, 4, 16, 64, 256)


def _line(index: int) -> dict[str, object]:
    return {"sku": f"SKU-{index % 7}", "quantity": 1, "price_cents": 100}


async def main() -> None:
    policy = load_policy(EXAMPLE)
    # The order's SKUs alone: its other bindings (a scoped set, an optional country) are not what is measured.
    tool = dataclasses.replace(
        policy.tools["create_order"],
        arguments=tuple(b for b in policy.tools["create_order"].arguments if b.name == "items[*].sku"),
    )
    skus = make_snapshot("catalog.skus", 1, [f"SKU-{n}" for n in range(7)], received_at=0.0)
    readings = {"catalog.skus": SetReading(skus, 0.0, False)}
    print(f"{'array argument, per call (in-process; best of 5)':<52}" + "".join(f"{n:>10}" for n in SIZES))
    print(f"{'(elements)':<52}" + "".join(f"{'us':>10}" for _ in SIZES))
    rows: list[tuple[str, list[float]]] = []
    each_tool = dataclasses.replace(tool, rules=(_each(),))
    for label, run in (
        ("binding items[*].sku, each element in the set", lambda args: check_arguments(tool, args, readings, {})),
        ("each rule (item.quantity <= 100), per element", lambda args: _rules(each_tool, args)),
        ("whole-list rule sum(map(...)) <= 50000", lambda args: _rules(tool, args)),
    ):
        figures = []
        for size in SIZES:
            arguments = {"items": [_line(n) for n in range(size)], "payment_method_id": "pm"}
            calls = max(20, 20_000 // (size * size if "whole" in label else size))
            gc.collect()
            figures.append(await best_micros(_awaitable(run, arguments), calls))
        rows.append((label, figures))
    for label, figures in rows:
        print(f"{label:<52}" + "".join(f"{micros:>10.1f}" for micros in figures))
    base = rows[0][1]
    for label, figures in rows[1:]:
        ratios = "".join(f"{micros / b:>10.1f}" for micros, b in zip(figures, base, strict=True))
        print(f"{label[:38] + ' / binding':<52}" + ratios)


def _each() -> Rule:
    """`item.quantity <= 100` per line item, loaded as the policy loader would (compiled, typed)."""
    from argwatch.server.policy.loader import parse_policy

    with open(EXAMPLE) as file:
        text = file.read()
    text = text.replace(
        "      - name: total_within_limit",
        "      - name: each_quantity\n        each: items[*]\n        expr: item.quantity <= 100\n"
        "        argument: items[*].quantity\n        code: out_of_range\n      - name: total_within_limit",
    )
    loaded = parse_policy(text.encode(), EXAMPLE)
    return next(rule for rule in loaded.tools["create_order"].rules if rule.name == "each_quantity")


def _rules(tool, arguments):  # type: ignore[no-untyped-def]
    outcome = check_rules(tool, arguments, {}, {"customer_id": "c", "tenant": ""}, 10_000)
    assert not outcome.problems, outcome.problems
    return outcome


def _awaitable(run, arguments):  # type: ignore[no-untyped-def]
    async def once() -> object:
        return run(arguments)

    return once


if __name__ == "__main__":
    asyncio.run(main())
