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
