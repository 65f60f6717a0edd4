"""The one duration grammar: what policy files, flags and the TUI's expiry all accept, and how it reads back."""

from __future__ import annotations

import pytest

from argwatch.common.durations import parse_duration, spoken
from argwatch.tui.expiry import parse_expiry


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (300, 300.0),
        (1.5, 1.5),
        ("300", 300.0),
        ("30s", 30.0),
        ("250ms", 0.25),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("1h 30m", 5400.0),
        ("2d", 172800.0),
        ("1.5s", 1.5),
        (" 5M ", 300.0),
    ],
)
def test_every_form_in_use_parses_to_seconds(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["never", "", "5x", "-5m", "m", "5m-", "1h30", "0", 0, "0s", True, None, [5]])
def test_anything_else_is_refused_with_the_forms_named(bad: object) -> None:
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration(bad)


@pytest.mark.parametrize("seconds", [0.25, 1, 59, 90, 3600, 5400, 86400 + 61])
def test_spoken_durations_parse_back_to_the_same_seconds(seconds: float) -> None:
    assert parse_duration(spoken(seconds)) == pytest.approx(seconds)


def test_the_tuis_expiry_is_the_same_grammar_in_whole_seconds_up_to_a_week() -> None:
    assert [parse_expiry(t) for t in ("", "90", "90s", "30m", "1h30m", "2h", "7d")] == [
        0,
        90,
        90,
        1800,
        5400,
        7200,
        604800,
    ]
    for bad in ("soon", "30x", "-5m", "8d"):
        with pytest.raises(ValueError, match="expiry"):
            parse_expiry(bad)
