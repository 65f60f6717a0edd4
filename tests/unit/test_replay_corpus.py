"""Reading a recorded corpus: whatever a file holds, a line at a time, bounded, and counted when it cannot be read."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from argwatch.server.replay import corpus
from argwatch.server.replay.corpus import ReadCounts, read_corpus

CALL = json.dumps({"tool": "refund_order", "arguments": {"reason_code": "DAMAGED_ITEM"}})


def read(path: Path) -> tuple[list[str], ReadCounts]:
    counts = ReadCounts()
    return [call.tool for call in read_corpus([str(path)], counts)], counts


def test_a_line_past_the_limit_is_counted_and_skipped_without_being_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(corpus, "MAX_LINE_BYTES", 100)  # the same reading, at a size a test can afford
    path = tmp_path / "long.jsonl"
    path.write_text(CALL + "\n" + '{"tool": "x", "arguments": "' + "a" * 5000 + '"}\n' + CALL + "\n")
    tools, counts = read(path)
    assert tools == ["refund_order", "refund_order"]  # the lines after the long one are still read
    assert counts.malformed == {"a line longer than 16 MiB": 1}


def test_fields_of_unexpected_types_are_a_malformed_line_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    odd = [
        {"role": "assistant", "tool_calls": 5},
        {"object": "chat.completion", "choices": 7},
        {"role": "assistant", "tool_calls": True},
        {"object": "response", "output": [{"type": "function_call"}]},
    ]
    path.write_text("\n".join(json.dumps(line) for line in odd) + "\n" + CALL + "\n")
    tools, counts = read(path)
    assert tools == ["refund_order"]
    assert counts.malformed == {
        "a known shape with fields of unexpected types": 3,
        "a tool call without a tool name": 1,
    }


def test_a_truncated_gzip_keeps_what_was_read_and_says_the_rest_was_not(tmp_path: Path) -> None:
    whole = gzip.compress(("\n".join([CALL] * 2000) + "\n").encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[: len(whole) // 2])
    tools, counts = read(path)
    assert 0 < len(tools) < 2000
    assert counts.malformed == {"a truncated or corrupt gzip stream (the rest of its file unread)": 1}


def test_gzip_is_known_by_its_bytes_and_a_bom_is_not_part_of_the_first_line(tmp_path: Path) -> None:
    plain_named_gz = tmp_path / "plain.jsonl.gz"
    plain_named_gz.write_bytes(b"\xef\xbb\xbf" + (CALL + "\r\n" + CALL + "\r\n").encode())  # a BOM, CRLF lines
    tools, counts = read(plain_named_gz)
    assert tools == ["refund_order", "refund_order"] and not counts.malformed


def test_a_call_repeated_by_a_later_transcript_is_judged_once(tmp_path: Path) -> None:
    call = {"id": "call_9", "type": "function", "function": {"name": "refund_order", "arguments": "{}"}}
    response = {"object": "chat.completion", "choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}
    transcript = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [call]}]}
    path = tmp_path / "dup.jsonl"
    path.write_text(json.dumps(response) + "\n" + json.dumps(transcript) + "\n" + json.dumps(transcript) + "\n")
    tools, counts = read(path)
    assert tools == ["refund_order"] and counts.duplicates == 2 and counts.lines_with_calls == 3


def test_a_line_may_carry_the_session_its_calls_were_made_in(tmp_path: Path) -> None:
    """Scoped sets and ownership are judged in the caller's session: a corpus keeps it per line, any shape."""
    path = tmp_path / "sessions.jsonl"
    lines = [
        {"tool": "create_order", "arguments": {}, "session": {"customer_id": "cus_1", "tenant": "acme"}},
        {
            "object": "chat.completion",
            "session": {"customer_id": "c" * 400},
            "choices": [{"message": {"tool_calls": [{"id": "t1", "function": {"name": "x", "arguments": "{}"}}]}}],
        },
        {"tool": "y", "arguments": {}, "session": "not a mapping"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    calls = list(read_corpus([str(path)], ReadCounts()))
    assert [(call.customer_id, call.tenant) for call in calls] == [("cus_1", "acme"), ("c" * 256, ""), ("", "")]
