"""A rule's expression is read for the element paths it reads through arrays and the lists it walks."""

from __future__ import annotations

import pytest

from argwatch.server.policy.rule_reads import rule_reads


@pytest.mark.parametrize(
    ("expression", "elements", "walked"),
    [
        ("args.items.all(i, i.quantity > 0)", {"items[*].quantity"}, {"items"}),
        (
            "sum(args.items.map(i, i.price_cents * i.quantity)) <= record.order.paid_cents",
            {"items[*].price_cents", "items[*].quantity"},
            {"items"},
        ),
        ("args.item_ids.exists_one(x, x.startsWith('A'))", {"item_ids[*]"}, {"item_ids"}),
        # filter keeps the list's own elements, so j is an element of items too.
        (
            "args.items.filter(i, i.gift).all(j, j.price_cents == 0)",
            {"items[*].gift", "items[*].price_cents"},
            {"items"},
        ),
        (
            "args.orders.all(o, o.lines.exists(l, l.sku == 'x') || o['kind'] == 'y')",
            {"orders[*].kind", "orders[*].lines[*].sku"},
            {"orders", "orders[*].lines"},
        ),
        ("args.items[0].quantity > 1", {"items[*].quantity"}, {"items"}),
        # has() asks only whether a field is there: no value is read.
        ("args.items.all(i, !has(i.note) || i.note != '')", {"items[*].note"}, {"items"}),
        ("args.amount_cents <= record.order.paid_cents", set(), set()),
        # A map's results are new values, not elements of the argument.
        ("args.items.map(i, i.sku).all(s, s != '')", {"items[*].sku"}, {"items"}),
        # Strings are not read as paths.
        ("'args.items.all(i, i.x)' != args.note", set(), set()),
    ],
)
def test_element_reads_are_found(expression: str, elements: set[str], walked: set[str]) -> None:
    reads = rule_reads(expression)
    assert reads.followed
    assert (reads.elements, reads.walked) == (elements, walked)


def test_an_each_rule_reads_its_element_as_item() -> None:
    reads = rule_reads("item.quantity > 0 && item.price_cents <= args.max_cents", ("item", ("items", None)))
    assert reads.elements == {"items[*].quantity", "items[*].price_cents"}


def test_record_lists_and_sums_are_found() -> None:
    reads = rule_reads("record.order.items.all(i, i.price > 0) && args.lines.map(l, l.n).sum() < 5")
    assert reads.record_lists == {("order", "items")}
    assert reads.sums
