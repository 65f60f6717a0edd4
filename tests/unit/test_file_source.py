"""The file source: reads sets, notices edits, and reports bad files as unavailable with the reason."""

from __future__ import annotations

import os

import pytest

from argwatch.server.sets.payload import SourceUnavailable
from argwatch.server.valuesets.file_source import FileSetFetcher


async def test_reads_a_set_and_rereads_after_an_edit(tmp_path) -> None:
    path = tmp_path / "sets.yaml"
    path.write_text("a.b:\n  version: 2\n  members: [X, Y]\n  retired: [Z]\n")
    fetcher = FileSetFetcher(str(path))
    first = await fetcher.fetch("a.b")
    assert (first.version, first.members, list(first.retirements)) == (2, ("X", "Y"), ["Z"])
    path.write_text("a.b:\n  version: 3\n  members: [X, Y, W]\n")
    os.utime(path, ns=(1, os.stat(path).st_mtime_ns + 1_000_000))
    second = await fetcher.fetch("a.b")
    assert (second.version, second.members) == (3, ("X", "Y", "W"))


async def test_the_version_defaults_to_the_files_modification_time(tmp_path) -> None:
    path = tmp_path / "sets.yaml"
    path.write_text("a.b: {members: [X]}\n")
    assert (await FileSetFetcher(str(path)).fetch("a.b")).version == os.stat(path).st_mtime_ns


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("a.b: {members: [X, 3]}", "a.b.members: expected a list of strings"),
        ("a.b: {members: [X], version: -1}", "a.b.version: expected a whole number"),
        ("a.b: {members: [X], owner: me}", "unknown keys ['owner']"),
        ("[1, 2]", "expected a mapping of set names"),
        ("a.b: {members: [X", "cannot read value sets"),
        ("other: {members: [X]}", "has no value set 'a.b'"),
        # Not a date: a NaN among the dates stopped the retired history's age at it.
        ("a.b: {members: [X], retired: [{value: Y, retired_at: .nan}]}", "retired_at: expected a date"),
        ("a.b: {members: [X], retired: [{value: Y, retired_at: .inf}]}", "retired_at: expected a date"),
    ],
)
async def test_a_bad_file_is_unavailable_with_the_reason(tmp_path, content: str, reason: str) -> None:
    path = tmp_path / "sets.yaml"
    path.write_text(content)
    with pytest.raises(SourceUnavailable, match=reason.replace("[", r"\[").replace("]", r"\]")):
        await FileSetFetcher(str(path)).fetch("a.b")


async def test_a_missing_file_is_unavailable(tmp_path) -> None:
    with pytest.raises(SourceUnavailable, match="cannot read value sets"):
        await FileSetFetcher(str(tmp_path / "missing.yaml")).fetch("a.b")
