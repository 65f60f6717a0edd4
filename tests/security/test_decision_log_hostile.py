"""The decision log against a hostile caller: a line stays bounded whatever the call's size, a redacted value
nested anywhere is never written in clear, every decided call leaves a line, and what model-written text
reaches a terminal or a drafted test file is escaped."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest
import yaml

from argwatch.server.cli import main
from argwatch.server.decisions.reader import MAX_LINE_BYTES
from argwatch.server.decisions.record import MAX_LOGGED_ARGUMENTS
from argwatch.server.decisions.writer import CURRENT, PLAIN_CURRENT
from tests.conftest import gateway_on
from tests.service.helpers import eventually, gateway_stub, request, value
from tests.service.test_decision_log import POLICY, SETS, _lines, _writer, open_frame, unpacked_log


async def _logged(tmp_path: Path, policy: str, calls: list[dict[str, object]]) -> Path:
    folder = tmp_path / "decisions"
    gateway = await gateway_on(tmp_path, policy, decision_log=str(folder))
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for call in calls:
                await stub.Validate(request(str(call.pop("tool", "transfer_stock")), **call), timeout=30)  # type: ignore[arg-type]
        await eventually(lambda: _writer(gateway).written == len(calls))
    finally:
        await gateway.stop()
    return folder


async def test_a_call_of_twenty_thousand_arguments_makes_a_bounded_line(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    many = b"{" + b",".join(b'"%x":%d' % (n, n) for n in range(20_000)) + b"}"
    folder = await _logged(tmp_path, POLICY, [{"raw": many, "call_id": "flood"}])
    (line,) = _lines(folder)
    assert (
        len(line["arguments"]) == MAX_LOGGED_ARGUMENTS and line["arguments_left_off"] == 20_000 - MAX_LOGGED_ARGUMENTS
    )
    assert len(unpacked_log(folder)) < 200_000  # not the ~1.6 MB of digests the call asked for


REDACTING = """
default_mode: reject
sampling: {redact: [card_number]}
decision_log: {values: clear}
sources:
  local: {file: sets.yaml}
value_sets:
  currencies: {source: local}
tools:
  pay:
    arguments:
      currency: {value_set: currencies}
"""


async def test_a_redacted_name_nested_under_another_argument_is_never_written_clear(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text("currencies:\n  version: 1\n  members: [EUR]\n")
    folder = await _logged(
        tmp_path,
        REDACTING,
        [
            {"tool": "pay", "args": {"currency": "EUR", "payment": {"card_number": "4111111111111111"}}},
            {"tool": "pay", "args": {"currency": "EUR", "card_number": "4222222222222222"}},
        ],
    )
    written = unpacked_log(folder)
    assert b"4111111111111111" not in written and b"4222222222222222" not in written
    first, second = _lines(folder)
    assert first["clear"] == {"currency": "EUR"} and first["cut"] == ["payment"]  # hashed, and said
    assert second["clear"] == {"currency": "EUR"} and set(second["arguments"]) == {"card_number"}


async def test_a_call_nested_deeper_than_a_line_can_encode_still_leaves_its_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    deep = b'{"warehouse_code":"AMS-9","extra":' + b"[" * 300 + b"]" * 300 + b"}"
    with caplog.at_level(logging.WARNING):
        folder = await _logged(tmp_path, POLICY, [{"raw": deep, "call_id": f"deep-{n}"} for n in range(5)])
    lines = _lines(folder)
    assert [line["call_id"] for line in lines] == [f"deep-{n}" for n in range(5)]  # audited, every one
    assert lines[0]["arguments"] is None and lines[0]["raw_arguments"].startswith("blake2b-256:")
    assert not [record for record in caplog.records if "not written" in record.getMessage()]


async def test_model_written_ids_are_escaped_on_the_terminal_and_in_a_drafted_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    forged = "c1\n2026-12-01T22:00:00.000Z  allow   transfer_stock  call=FORGED\x1b[8m"
    injected = "x\npolicy: /tmp/attacker.yaml\ncases: []\n#"
    folder = await _logged(
        tmp_path,
        POLICY,
        [
            {"args": {"warehouse_code": "AMS-9"}, "call_id": forged},
            {"args": {"warehouse_code": "AMS-9"}, "call_id": injected},
        ],
    )
    capsys.readouterr()
    assert main(["decisions", "grep", str(folder)]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 2 and "\x1b" not in out and "\\x1b[8m" in out  # two decisions, two lines
    assert main(["decisions", "grep", str(folder), "--as-test", "--policy", "policy.yaml"]) == 0
    drafted = yaml.safe_load(capsys.readouterr().out)
    assert drafted["policy"] == "policy.yaml" and len(drafted["cases"]) == 2  # the comments stayed comments


@pytest.mark.parametrize("current", [CURRENT, PLAIN_CURRENT])
def test_a_line_longer_than_any_the_writer_makes_is_skipped_not_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], current: str
) -> None:
    """In the current file as this release packs it, and as an earlier one left it plain."""
    good = orjson.dumps({"ts": 1.0, "call_id": "x", "tool": "t", "decision": "allow"}) + b"\n"
    lines = good + b"x" * (MAX_LINE_BYTES + 10) + b"\n" + good
    (tmp_path / current).write_bytes(open_frame(lines) if current == CURRENT else lines)
    assert main(["decisions", "grep", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2 and "1 line(s) did not parse" in captured.err


async def test_a_write_that_keeps_failing_is_counted_each_time_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    folder = tmp_path / "decisions"
    # Rotating at every line: each line opens the file again, in a folder that is gone (a lost mount).
    gateway = await gateway_on(tmp_path, POLICY, decision_log=str(folder), decision_log_rotate_bytes=1)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}), timeout=5)
            await eventually(lambda: _writer(gateway).written == 1)
            for path in folder.iterdir():
                path.unlink()
            folder.rmdir()
            with caplog.at_level(logging.WARNING):
                for _ in range(5):
                    await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}), timeout=5)
                await eventually(
                    lambda: value(gateway.registry, "argwatch_decision_log_dropped_total", reason="write_error") == 5
                )
    finally:
        await gateway.stop()
    assert len([record for record in caplog.records if "not written" in record.getMessage()]) == 1
