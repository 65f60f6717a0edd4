"""The decision log as the policy writes it and as people read it back: values none, hashed or clear per
argument, `argwatch decisions tail|grep` over rotated packed files, a test case drafted from a line, and
files that rotate by age and survive a restart."""

from __future__ import annotations

import asyncio
import gzip
import textwrap
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard

from argwatch.server.cli import main
from argwatch.server.decisions.packing import packer, rotated_files
from argwatch.server.decisions.reader import LineFilter, ReadCounts, follow, read_lines
from argwatch.server.decisions.record import MAX_CLEAR_BYTES
from argwatch.server.decisions.writer import CURRENT, PLAIN_CURRENT, DecisionLogWriter
from tests.conftest import gateway_on
from tests.service.helpers import eventually, gateway_stub, request
from tests.service.test_decision_log import open_frame, unpacked_log

POLICY = textwrap.dedent(
    """
    default_mode: reject
    sources:
      local: {file: sets.yaml}
    value_sets:
      wms.warehouses: {source: local}
    decision_log: {session: clear}
    tools:
      transfer_stock:
        schema:
          type: object
          properties: {warehouse_code: {type: string}, quantity: {type: integer}, note: {type: string}}
        arguments:
          warehouse_code: {value_set: wms.warehouses}
        log_values: {warehouse_code: clear, note: none}
    """
)
SETS = "wms.warehouses:\n  version: 3\n  members: [AMS-1, FRA-2]\n"


def _writer(gateway: object) -> DecisionLogWriter:
    writer = gateway.decisions  # type: ignore[attr-defined]
    assert isinstance(writer, DecisionLogWriter)
    return writer


def _all(folder: Path) -> list[dict[str, Any]]:
    return list(read_lines(folder, LineFilter(), ReadCounts()))


async def _decide(tmp_path: Path, calls: list[dict[str, Any]], **settings: Any) -> Path:
    """A gateway with the decision log on, sent `calls` (request() keywords), stopped once all are written."""
    (tmp_path / "sets.yaml").write_text(SETS)
    folder = tmp_path / "decisions"
    gateway = await gateway_on(tmp_path, POLICY, decision_log=str(folder), **settings)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for call in calls:
                customer = call.pop("customer_id", "")
                message = request("transfer_stock", **call)
                message.session.customer_id = customer
                await stub.Validate(message, timeout=5)
        await eventually(lambda: _writer(gateway).written == len(calls))
    finally:
        await gateway.stop()
    return folder


async def test_each_argument_is_written_as_the_policy_says_none_hashed_or_clear(tmp_path: Path) -> None:
    long_code = "X" * (MAX_CLEAR_BYTES + 10)
    folder = await _decide(
        tmp_path,
        [
            {
                "args": {"warehouse_code": "AMS-9", "quantity": 3, "note": "call me at 555-0100"},
                "call_id": "a",
                "customer_id": "cus_7",
            },
            {"args": {"warehouse_code": long_code}, "call_id": "b"},
        ],
    )
    first, second = _all(folder)
    assert first["clear"] == {"warehouse_code": "AMS-9"}  # clear: as sent
    assert first["unlogged"] == ["note"]  # none: named, its value nowhere
    assert set(first["arguments"]) == {"quantity"} and first["arguments"]["quantity"].startswith("blake2b-256:")
    assert first["session"] == {"customer_id": "cus_7"}  # decision_log.session: clear
    # Longer than the line's bound for a clear value: hashed instead, and said.
    assert second["cut"] == ["warehouse_code"] and "clear" not in second
    assert second["arguments"]["warehouse_code"].startswith("blake2b-256:")
    written = unpacked_log(folder)
    assert b"555-0100" not in written and long_code.encode() not in written


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["decisions", *args])
    out, err = capsys.readouterr()
    return code, out, err


async def test_grep_finds_a_call_by_id_conversation_tool_and_decision_across_packed_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = [
        {
            "args": {"warehouse_code": "AMS-1" if n % 3 else "AMS-9"},
            "call_id": f"c-{n}",
            "conversation": f"conv-{n % 4}",
        }
        for n in range(60)
    ]
    # Packed, 60 such lines take ~1.6 KB: rotating at 400 bytes spreads them over files.
    folder = await _decide(tmp_path, calls, decision_log_rotate_bytes=400, decision_log_max_bytes=1_000_000)
    assert len(list(rotated_files(folder))) >= 2  # the lines are spread over rotated, packed files
    code, out, _ = _run(capsys, "grep", str(folder), "--call-id", "c-3", "--json")
    (line,) = [orjson.loads(row) for row in out.splitlines()]
    assert code == 0 and line["call_id"] == "c-3" and line["decision"] == "reject"
    code, out, _ = _run(capsys, "grep", str(folder), "--conversation", "conv-1", "--decision", "reject", "--json")
    expected = [f"c-{n}" for n in range(60) if n % 4 == 1 and n % 3 == 0]
    assert code == 0 and [orjson.loads(row)["call_id"] for row in out.splitlines()] == expected  # in order
    code, out, _ = _run(capsys, "grep", str(folder), "--tool", "transfer_stock", "--decision", "allow")
    assert code == 0 and len(out.splitlines()) == 40
    assert "allow " in out.splitlines()[0] and "call=c-1" in out.splitlines()[0]  # the one-line summary
    code, out, _ = _run(capsys, "grep", str(folder), "--call-id", "never-sent")
    assert code == 1 and out == ""
    code, out, _ = _run(capsys, "tail", str(folder), "-n", "3", "--decision", "reject", "--json")
    assert [orjson.loads(row)["call_id"] for row in out.splitlines()] == ["c-51", "c-54", "c-57"]
    code, _, err = _run(capsys, "grep", str(tmp_path / "nowhere"))
    assert code == 2 and "no such folder" in err


def test_a_torn_line_is_skipped_and_counted_and_a_damaged_packed_file_keeps_what_came_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = orjson.dumps({"ts": 1.0, "call_id": "x", "tool": "t", "decision": "allow"}) + b"\n"
    packed = zstandard.ZstdCompressor(level=1).compress(good * 3 + good.replace(b'"x"', b'"y"') * 20_000)
    (tmp_path / "decisions-20261201T000000-000001.jsonl.zst").write_bytes(packed[: len(packed) // 2])  # cut short
    # A plain current file an earlier release left torn by a crash (this release writes whole blocks).
    (tmp_path / PLAIN_CURRENT).write_bytes(good + b'{"ts": 2.0, "call_id": "x", "tor\n' + good + b'{"ts": 3')
    code, out, err = _run(capsys, "grep", str(tmp_path), "--call-id", "x", "--json")
    assert code == 0
    assert len(out.splitlines()) == 5  # 3 before the damage, 2 whole lines of the current file; the last unfinished
    assert "1 line(s) did not parse" in err and "not read to the end: decisions-20261201T000000" in err
    assert "cut short" in err


def test_an_earlier_release_gzip_is_still_read_and_a_damaged_one_keeps_what_came_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = orjson.dumps({"ts": 1.0, "call_id": "x", "tool": "t", "decision": "allow"}) + b"\n"
    packed = gzip.compress(good * 3)
    (tmp_path / "decisions-20261130T000000-000001.jsonl.gz").write_bytes(gzip.compress(good * 2))
    (tmp_path / "decisions-20261201T000000-000001.jsonl.gz").write_bytes(packed[: len(packed) - 6])  # cut short
    code, out, err = _run(capsys, "grep", str(tmp_path), "--call-id", "x", "--json")
    assert code == 0
    assert len(out.splitlines()) == 5
    assert "not read to the end: decisions-20261201T000000" in err


def test_garbage_under_a_packed_name_is_said_and_the_other_files_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = orjson.dumps({"ts": 1.0, "call_id": "x", "tool": "t", "decision": "allow"}) + b"\n"
    (tmp_path / "decisions-20261201T000000-000001.jsonl.zst").write_bytes(b"not zstd at all\n" * 10)
    (tmp_path / CURRENT).write_bytes(open_frame(good))
    code, out, err = _run(capsys, "grep", str(tmp_path), "--call-id", "x", "--json")
    assert code == 0 and len(out.splitlines()) == 1
    assert "not read to the end: decisions-20261201T000000-000001.jsonl.zst" in err


def test_a_packed_file_that_expands_hugely_is_read_in_bounded_steps(tmp_path: Path) -> None:
    """A few KiB of zstd can stand for hundreds of MiB (a planted file): the reader unpacks a small piece at a
    time and skips the over-long line, never holding it whole."""
    from argwatch.server.decisions.packing import open_rotated

    bomb = zstandard.ZstdCompressor(level=19).compress(b"a" * (256 << 20) + b"\n")
    assert len(bomb) < 64 << 10
    path = tmp_path / "decisions-20261201T000000-000001.jsonl.zst"
    path.write_bytes(bomb)
    with open_rotated(path) as handle:
        first = handle.readline(1 << 20)
        assert len(first) == 1 << 20  # the limit, not the line
        reader = handle._buffer  # type: ignore[attr-defined]
        assert len(reader) < 4 << 20  # what one step unpacked beyond the limit stays small


async def test_a_line_drafts_a_policy_test_that_passes_once_its_sets_are_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = await _decide(
        tmp_path,
        [{"args": {"warehouse_code": "ams-1", "quantity": 2}, "call_id": "slip", "conversation": "conv-9"}],
    )
    code, drafted, _ = _run(capsys, "grep", str(folder), "--call-id", "slip", "--as-test", "--policy", "policy.yaml")
    assert code == 0
    assert "# logged hashed, fill in: quantity" in drafted and "sets then: wms.warehouses v3" in drafted
    test_file = tmp_path / "from_log.yaml"
    # What the author adds: the set as the checks saw it, and the hashed value.
    test_file.write_text(
        drafted.replace("cases:\n", "sets:\n  wms.warehouses: [AMS-1, FRA-2]\ncases:\n", 1).replace(
            "warehouse_code: ams-1", "warehouse_code: ams-1\n        quantity: 2"
        )
    )
    # `policy test` runs its own event loop: off this one.
    assert await asyncio.to_thread(main, ["policy", "test", str(test_file)]) == 0, capsys.readouterr()
    assert "1 passed" in capsys.readouterr().out
    # A draft is a real test: expecting what the policy does not do fails, with its diff.
    test_file.write_text(test_file.read_text().replace("decision: reject", "decision: allow"))
    assert await asyncio.to_thread(main, ["policy", "test", str(test_file)]) == 1
    assert "decision" in capsys.readouterr().out


async def test_files_rotate_by_age_and_a_restart_rotates_the_current_file(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    folder = tmp_path / "decisions"
    for run in range(2):  # the same folder across a restart: one key, nothing replaced
        gateway = await gateway_on(tmp_path, POLICY, decision_log=str(folder))
        try:
            channel, stub = gateway_stub(gateway)
            async with channel:
                await stub.Validate(
                    request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id=f"r{run}"), timeout=5
                )
            await eventually(lambda: _writer(gateway).written == 1)  # noqa: B023 (awaited inside the loop)
        finally:
            await gateway.stop()
    assert [line["call_id"] for line in _all(folder)] == ["r0", "r1"]
    # A stop ends the frame, fsyncs and closes; the next start rotates it (a frame cannot be appended to).
    assert len(list(rotated_files(folder))) == 1 and (folder / CURRENT).exists()
    gateway = await gateway_on(tmp_path, POLICY, decision_log=str(folder), decision_log_rotate_seconds=1.0)
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id="r2"), timeout=5)
            # A second old, the writer rotates the file on its own (no line needs to arrive).
            await eventually(lambda: len(list(rotated_files(folder))) == 3)
            await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id="r3"), timeout=5)
            await eventually(lambda: len(list(rotated_files(folder))) == 4)
    finally:
        await gateway.stop()
    assert [line["call_id"] for line in _all(folder)] == ["r0", "r1", "r2", "r3"]


async def test_follow_prints_new_lines_across_a_rotation(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    folder = tmp_path / "decisions"
    gateway = await gateway_on(tmp_path, POLICY, decision_log=str(folder), decision_log_rotate_bytes=300)
    seen: list[str] = []
    stop = threading.Event()
    thread = None
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id="before"), timeout=5)
            await eventually(lambda: _writer(gateway).written == 1)
            lines = follow(folder, LineFilter(), ReadCounts(), poll_seconds=0.02, keep_going=lambda: not stop.is_set())
            thread = threading.Thread(target=lambda: seen.extend(line["call_id"] for line in lines), daemon=True)
            thread.start()
            for n in range(20):
                await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id=f"f{n}"), timeout=5)
                # One at a time: a file that rotates away before the follower's next poll is for grep, not tail.
                await eventually(lambda: len(seen) == n + 1)  # noqa: B023 (awaited inside the loop)
    finally:
        stop.set()
        if thread is not None:
            thread.join(5)
        await gateway.stop()
    assert seen == [f"f{n}" for n in range(20)]  # from now on, none twice, none lost at the rotations
    assert list(rotated_files(folder))


async def test_a_line_names_the_overrides_in_force_below_the_tools_mode(tmp_path: Path) -> None:
    from argwatch.v1 import admin_pb2
    from argwatch.v1 import gateway_pb2 as pb
    from tests.service.helpers import admin_stub

    (tmp_path / "sets.yaml").write_text(SETS)
    folder = tmp_path / "decisions"
    gateway = await gateway_on(tmp_path, POLICY, decision_log=str(folder))
    try:
        channel, admin = admin_stub(gateway)
        async with channel:
            for change in (
                admin_pb2.SetModeRequest(tool="transfer_stock", check="arg:warehouse_code", mode=pb.MODE_OBSERVE),
                admin_pb2.SetModeRequest(check="source:local", failure="open"),
            ):
                change.reason = "INC-7"
                answer = await admin.SetMode(change, metadata=(("x-argwatch-actor", "ana@oncall"),), timeout=5)
                assert answer.change.outcome == "applied", answer
        channel, stub = gateway_stub(gateway)
        async with channel:
            await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-9"}, call_id="o"), timeout=5)
        await eventually(lambda: _writer(gateway).written == 1)
    finally:
        await gateway.stop()
    (line,) = _all(folder)
    assert line["decision"] == "allow" and line["mode"] == "reject" and line["mode_source"] == "policy"
    assert sorted(line["overrides"], key=str) == sorted(
        [
            {"check": "arg:warehouse_code", "mode": "observe", "actor": "ana@oncall"},
            {"failure": "source:local", "mode": "open", "actor": "ana@oncall"},
        ],
        key=str,
    )


async def test_a_restart_after_a_crash_mid_block_keeps_every_whole_block_and_reads_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crash can cut the current file inside a block: the next start seals it where its whole blocks end and
    rotates it, so it reads to its end, not as damage, and the new lines follow it."""
    folder = tmp_path / "decisions"
    folder.mkdir()
    first = b"".join(
        orjson.dumps({"ts": 1.0, "call_id": f"old-{n}", "tool": "t", "decision": "allow"}) + b"\n" for n in range(3)
    )
    second = orjson.dumps({"ts": 2.0, "call_id": "torn", "tool": "t", "decision": "allow"}) + b"\n"
    frame = packer()
    whole = frame.compress(first) + frame.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    torn = frame.compress(second) + frame.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    (folder / CURRENT).write_bytes(whole + torn[: len(torn) // 2])
    await _decide(tmp_path, [{"args": {"warehouse_code": "AMS-1"}, "call_id": "new"}])
    code, out, err = _run(capsys, "grep", str(folder), "--json")
    assert code == 0 and err == ""
    assert [orjson.loads(row)["call_id"] for row in out.splitlines()] == ["old-0", "old-1", "old-2", "new"]


async def test_an_earlier_release_plain_current_file_is_read_then_packed_at_the_next_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "decisions"
    folder.mkdir()
    plain = b"".join(
        orjson.dumps({"ts": 1.0, "call_id": f"old-{n}", "tool": "t", "decision": "allow"}) + b"\n" for n in range(3)
    )
    (folder / PLAIN_CURRENT).write_bytes(plain)
    code, out, _ = _run(capsys, "grep", str(folder), "--json")  # read as it is (a gateway of that release runs)
    assert code == 0 and len(out.splitlines()) == 3
    await _decide(tmp_path, [{"args": {"warehouse_code": "AMS-1"}, "call_id": "new"}])
    assert not (folder / PLAIN_CURRENT).exists() and len(list(rotated_files(folder))) == 1  # packed, rotated
    code, out, err = _run(capsys, "grep", str(folder), "--json")
    assert code == 0 and err == ""
    assert [orjson.loads(row)["call_id"] for row in out.splitlines()] == ["old-0", "old-1", "old-2", "new"]


def test_grep_and_follow_read_the_workers_folders_merged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`serve --workers` gives each worker its own folder (w0, w1): grep merges them by time, and follow reads
    both current files as they grow."""
    frames, files = [], []
    for index in range(2):
        (tmp_path / f"w{index}").mkdir()
        files.append(tmp_path / f"w{index}" / CURRENT)
        frames.append(packer())

    def write(index: int, when: float, call_id: str) -> None:
        line = orjson.dumps({"ts": when, "call_id": call_id, "tool": "t", "decision": "allow"}) + b"\n"
        with open(files[index], "ab") as handle:
            handle.write(frames[index].compress(line) + frames[index].flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))

    for index, when, call_id in ((0, 1.0, "a"), (1, 2.0, "b"), (0, 3.0, "c")):
        write(index, when, call_id)
    code, out, _ = _run(capsys, "grep", str(tmp_path), "--json")
    assert code == 0 and [orjson.loads(row)["call_id"] for row in out.splitlines()] == ["a", "b", "c"]
    polls = iter(range(3))
    seen = follow(
        tmp_path, LineFilter(), ReadCounts(), keep_going=lambda: next(polls, None) is not None, sleep=lambda _: None
    )
    for index, when, call_id in ((1, 4.0, "d"), (0, 5.0, "e")):
        write(index, when, call_id)
    assert sorted(line["call_id"] for line in seen) == ["d", "e"]  # from now on, from both
