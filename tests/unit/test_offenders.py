"""Offending values: counted, bounded whatever the model writes, and clustered (drift) or scattered (invention)."""

from __future__ import annotations

from argwatch.server.telemetry.offenders import MAX_VALUES, OTHER, OffenderTable


def test_a_bounded_table_however_many_values_a_model_invents() -> None:
    table = OffenderTable(lambda: 0.0)
    for i in range(10 * MAX_VALUES):
        table.add("t", "a", f'"v{i}"', "invented")
    found = table.offenders("t", "a", limit=MAX_VALUES + 10)
    assert len(found.rows) == MAX_VALUES + 1 and found.total == 10 * MAX_VALUES
    assert found.rows[0].value == OTHER and found.rows[0].count == 9 * MAX_VALUES
    assert not found.clustered


def test_only_set_misses_of_shape_invented_count_as_inventions() -> None:
    table = OffenderTable(lambda: 0.0)
    for i in range(30):  # real ids whose record was not found, or another customer's: no shape
        table.add("refund_order", "order_id", f'"ord_{i}"', "")
    found = table.offenders("refund_order", "order_id")
    assert (found.total, found.out_of_set, found.invented, found.clustered) == (30, 0, 0, False)
    for i in range(2 * MAX_VALUES):  # past the bound: the "(other values)" row keeps no shape, the counts do
        table.add("refund_order", "reason_code", f'"R{i}"', "invented" if i % 2 else "other_scope")
    found = table.offenders("refund_order", "reason_code")
    assert (found.out_of_set, found.invented) == (2 * MAX_VALUES, MAX_VALUES)  # other_scope is a real member
