"""The decision log on a real gateway: every verdict one line in real files, values hashed, rotation within a
budget, drops counted when the writer stalls, and a folder it cannot write refused at start."""

from __future__ import annotations

import hashlib
import io
import textwrap
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard

from argwatch.server.decisions import writer as writer_module
from argwatch.server.decisions.packing import PACKED_SUFFIX, packer, rotated_files
from argwatch.server.decisions.writer import CURRENT, KEY_FILE, DecisionLogWriter
from tests.conftest import gateway_on
from tests.service.helpers import eventually, gateway_stub, request, value

POLICY = textwrap.dedent(
    """
    default_mode: reject
    sources:
      local: {file: sets.yaml}
    value_sets:
      wms.warehouses: {source: local}
    tools:
      transfer_stock:
        arguments:
          warehouse_code: {value_set: wms.warehouses}
    """
)
SETS = "wms.warehouses:\n  version: 3\n  members: [AMS-1, FRA-2]\n"


def unpacked_log(folder: Path) -> bytes:
    """Every line in the folder, unpacked by zstandard itself: the rotated files, then the current one (its frame
    may still be open: the writer ends it at rotation)."""
    paths = [*sorted(rotated_files(folder)), folder / CURRENT]
    return b"".join(
        zstandard.ZstdDecompressor().decompressobj().decompress(path.read_bytes()) for path in paths if path.exists()
    )


def open_frame(lines: bytes) -> bytes:
    """`lines` as the writer leaves them in its current file between two batches: a frame, its blocks flushed,
    not yet ended."""
    frame = packer()
    return frame.compress(lines) + frame.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)


def _lines(folder: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in unpacked_log(folder).splitlines()]


def _writer(gateway: object) -> DecisionLogWriter:
    writer = gateway.decisions  # type: ignore[attr-defined]
    assert isinstance(writer, DecisionLogWriter)
    return writer


async def test_every_verdict_is_one_line_with_its_values_hashed_under_the_deployments_key(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    folder = tmp_path / "decisions"
    gateway = await gateway_on(tmp_path, POLICY, decision_log=str(folder))
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for n in range(5):
                await stub.Validate(
                    request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id=f"ok-{n}"), timeout=5
                )
            await stub.Validate(
                request("transfer_stock", {"warehouse_code": "AMS-9"}, conversation="c-1", call_id="bad"), timeout=5
            )
        await eventually(lambda: _writer(gateway).written == 6)
    finally:
        await gateway.stop()
    lines = _lines(folder)
    assert [line["call_id"] for line in lines] == [*(f"ok-{n}" for n in range(5)), "bad"]  # every call, in order
    bad = lines[-1]
    assert bad["decision"] == "reject" and bad["mode"] == "reject" and bad["mode_source"] == "policy"
    assert bad["conversation_id"] == "c-1" and bad["tool"] == "transfer_stock"
    assert bad["problems"] == [
        {"code": "out_of_set", "path": "warehouse_code", "set": "wms.warehouses", "shape": bad["problems"][0]["shape"]}
    ]
    assert bad["sets"] == {"wms.warehouses": 3} and bad["policy_version"] == gateway.policy.version
    assert isinstance(bad["latency_seconds"], float) and bad["skipped"] == []
    key = (folder / KEY_FILE).read_bytes().strip()
    assert (folder / KEY_FILE).stat().st_mode & 0o077 == 0
    expected = hashlib.blake2b(orjson.dumps("AMS-9"), key=key, digest_size=32).hexdigest()
    assert bad["arguments"] == {"warehouse_code": f"blake2b-256:{expected}"}
    written = unpacked_log(folder)
    assert b"AMS-9" not in written and b'"call_id":"bad"' in written  # read as written: the bad call, its value not
    assert expected != hashlib.sha256(orjson.dumps("AMS-9")).hexdigest()  # keyed, not a bare hash


async def test_files_rotate_packed_and_the_folder_stays_within_its_budget(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    folder = tmp_path / "decisions"
    gateway = await gateway_on(
        tmp_path, POLICY, decision_log=str(folder), decision_log_rotate_bytes=2_000, decision_log_max_bytes=6_000
    )
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            for n in range(200):
                await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id=f"c-{n}"), timeout=5)
        await eventually(lambda: _writer(gateway).written == 200)
    finally:
        await gateway.stop()
    rotated = sorted(rotated_files(folder))
    assert len(rotated) >= 2 and all(path.name.endswith(PACKED_SUFFIX) for path in rotated)  # read in _lines
    total = sum(path.stat().st_size for path in [*rotated, folder / CURRENT] if path.exists())
    assert total <= 6_000
    ids = [line["call_id"] for line in _lines(folder)]
    assert ids and ids == [f"c-{n}" for n in range(200 - len(ids), 200)]  # the oldest went first, the newest kept


async def test_a_stalled_writer_drops_lines_and_counts_them_and_validate_keeps_answering(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    folder = tmp_path / "decisions"
    gateway = await gateway_on(tmp_path, POLICY, decision_log=str(folder), decision_log_queue=3)
    dropped = "argwatch_decision_log_dropped_total"
    try:
        assert value(gateway.registry, dropped, reason="queue_full") == 0  # the series exists from start
        channel, stub = gateway_stub(gateway)
        async with channel:
            with _writer(gateway).held():
                for _ in range(10):
                    answer = await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}), timeout=5)
                    assert answer.decision is not None
            assert value(gateway.registry, dropped, reason="queue_full") == 7
        await eventually(lambda: _writer(gateway).written == 3)
    finally:
        await gateway.stop()
    assert len(_lines(folder)) == 3


async def test_the_queue_is_bounded_in_bytes_too_whatever_the_callers_send(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue holds finished lines, never the calls: a stalled disk keeps at most QUEUE_BYTES of them, however
    big the arguments the callers send (each line keeps a digest, not the value)."""
    (tmp_path / "sets.yaml").write_text(SETS)
    monkeypatch.setattr(writer_module, "QUEUE_BYTES", 3_000)
    folder = tmp_path / "decisions"
    gateway = await gateway_on(tmp_path, POLICY, decision_log=str(folder), decision_log_queue=1_000)
    dropped = "argwatch_decision_log_dropped_total"
    big = "x" * 200_000
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            with _writer(gateway).held():
                for n in range(10):
                    arguments = {"warehouse_code": "AMS-1", "note": big}
                    await stub.Validate(request("transfer_stock", arguments, call_id=f"c-{n}"), timeout=5)
                kept = 10 - int(value(gateway.registry, dropped, reason="queue_full"))
                assert 2 <= kept < 10  # ~700 bytes a line: the lines within 3,000 bytes, and one past it
        await eventually(lambda: _writer(gateway).written == kept)
    finally:
        await gateway.stop()
    assert [line["call_id"] for line in _lines(folder)] == [f"c-{n}" for n in range(kept)]


class _HungFile(io.RawIOBase):
    """A file whose write blocks until released: a disk or network mount that hangs inside write()."""

    def __init__(self, released: threading.Event) -> None:
        self.released = released
        self.entered = threading.Event()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.entered.set()
        self.released.wait(10)
        return len(data)

    def tell(self) -> int:
        return 0


async def test_a_write_that_hangs_still_counts_its_lines_against_the_queues_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines the writer has taken but not yet written still count: the loop cannot queue another QUEUE_BYTES
    beside a batch stuck in write(), so what a hung disk makes the gateway keep stays near QUEUE_BYTES."""
    (tmp_path / "sets.yaml").write_text(SETS)
    monkeypatch.setattr(writer_module, "QUEUE_BYTES", 3_000)
    gateway = await gateway_on(tmp_path, POLICY, decision_log=str(tmp_path / "decisions"), decision_log_queue=1_000)
    writer = _writer(gateway)
    released = threading.Event()
    hung = _HungFile(released)

    def hung_open() -> None:
        writer._file, writer._size, writer._packer = hung, 0, packer()  # type: ignore[assignment]

    dropped = "argwatch_decision_log_dropped_total"
    try:
        with monkeypatch.context() as patch:
            patch.setattr(writer, "_open", hung_open)
            writer._abandon_file()  # the next batch opens the hung file
            channel, stub = gateway_stub(gateway)
            async with channel:
                for n in range(20):
                    await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id=f"a-{n}"))
                first = 20 - int(value(gateway.registry, dropped, reason="queue_full"))
                writer.write_now()
                await eventually(hung.entered.is_set)  # the writer holds that batch, stuck in write()
                for n in range(20):
                    await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}, call_id=f"b-{n}"))
                assert 0 < first < 20
                assert value(gateway.registry, dropped, reason="queue_full") == 40 - first  # none queued beside it
    finally:
        released.set()
        await gateway.stop()


@pytest.mark.parametrize("where", ["a-file", "a-file/below"])
async def test_a_folder_that_cannot_be_written_refuses_to_start(tmp_path: Path, where: str) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(ValueError, match=r"--decision-log .*cannot be written"):
        await gateway_on(tmp_path, POLICY, decision_log=str(tmp_path / where))


async def test_a_later_write_failure_is_counted_and_validate_keeps_answering(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    folder = tmp_path / "decisions"
    gateway = await gateway_on(tmp_path, POLICY, decision_log=str(folder), decision_log_rotate_bytes=1)
    failed = "argwatch_decision_log_dropped_total"
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}), timeout=5)
            await eventually(lambda: _writer(gateway).written == 1)
            for path in folder.iterdir():  # the folder goes away under the gateway (a lost mount, say)
                path.unlink()
            folder.rmdir()
            for _ in range(3):
                answer = await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-9"}), timeout=5)
                assert answer.problems  # still judged
        await eventually(lambda: value(gateway.registry, failed, reason="write_error") == 3)
    finally:
        await gateway.stop()


async def test_a_key_file_is_used_as_given_and_a_short_key_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(SETS)
    short, key = tmp_path / "short.key", tmp_path / "deploy.key"
    short.write_text("too-short\n")
    with pytest.raises(ValueError, match="at least 32 bytes"):
        await gateway_on(tmp_path, POLICY, decision_log=str(tmp_path / "d1"), decision_log_key=str(short))
    key.write_text("k" * 40 + "\n")
    folder = tmp_path / "d2"
    gateway = await gateway_on(tmp_path, POLICY, decision_log=str(folder), decision_log_key=str(key))
    try:
        channel, stub = gateway_stub(gateway)
        async with channel:
            await stub.Validate(request("transfer_stock", {"warehouse_code": "AMS-1"}), timeout=5)
        await eventually(lambda: _writer(gateway).written == 1)
    finally:
        await gateway.stop()
    expected = hashlib.blake2b(orjson.dumps("AMS-1"), key=b"k" * 40, digest_size=32).hexdigest()
    assert _lines(folder)[0]["arguments"] == {"warehouse_code": f"blake2b-256:{expected}"}
    assert not (folder / KEY_FILE).exists()  # none made when one is given
