"""Sealing a current file a stopped writer left open: cut anywhere, it reads to its end with every whole block's
lines, never as damage; a frame already ended, or not the writer's, is left as it is."""

from __future__ import annotations

from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from argwatch.server.decisions.packing import open_rotated, packer, seal

BATCHES = st.lists(
    st.lists(st.binary(min_size=0, max_size=300).map(lambda raw: raw.hex().encode() + b"\n"), min_size=1, max_size=5),
    min_size=1,
    max_size=6,
)


def _frame(batches: list[list[bytes]]) -> tuple[bytes, list[int], list[bytes]]:
    """The frame as the writer leaves it, a block flushed per batch (not ended); where each block ends; and the
    lines read up to each block's end."""
    frame = packer()
    written, ends, read = b"", [], [b""]
    for batch in batches:
        written += frame.compress(b"".join(batch)) + frame.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        ends.append(len(written))
        read.append(read[-1] + b"".join(batch))
    return written, ends, read


@settings(max_examples=60, deadline=None)
@given(batches=BATCHES, cut=st.floats(min_value=0.0, max_value=1.0))
def test_a_frame_cut_anywhere_is_sealed_to_its_whole_blocks(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[bytes]], cut: float
) -> None:
    written, ends, read = _frame(batches)
    at = int(len(written) * cut)
    path = tmp_path_factory.mktemp("seal") / "decisions-20261201T000000-000001.jsonl.zst"
    path.write_bytes(written[:at])
    seal(path)
    whole = sum(1 for end in ends if end <= at)  # blocks wholly written before the cut
    if at < 6:  # not even the frame's header: nothing to seal, nothing to read
        assert path.read_bytes() == written[:at]
        return
    unpacker = zstandard.ZstdDecompressor().decompressobj()
    assert unpacker.decompress(path.read_bytes()) == read[whole]
    assert unpacker.eof  # ended: read to its end, not cut short
    with open_rotated(path) as handle:  # the reader's own path: no CutShort
        assert b"".join(iter(lambda: handle.readline(), b"")) == read[whole]


def test_a_frame_already_ended_and_a_file_not_ours_are_left_as_they_are(tmp_path: Path) -> None:
    ended = tmp_path / "ended.zst"
    frame = packer()
    ended.write_bytes(frame.compress(b"a\n" * 100) + frame.flush())
    before = ended.read_bytes()
    seal(ended)
    assert ended.read_bytes() == before
    garbage = tmp_path / "garbage.zst"
    garbage.write_bytes(b"not zstd at all\n")
    seal(garbage)
    assert garbage.read_bytes() == b"not zstd at all\n"
    checksummed = tmp_path / "checksummed.zst"  # a checksum sealing could not write: left for the reader to report
    written = zstandard.ZstdCompressor(write_checksum=True).compress(b"a\n" * 100)
    checksummed.write_bytes(written[:-6])
    seal(checksummed)
    assert checksummed.read_bytes() == written[:-6]
