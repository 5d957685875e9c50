"""A damaged recovery directory is named: which file, the batch, what is wrong."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from flowspark.engine.recovery_damage import (
    block_stream_problem,
    log_file_problem,
    name_damage,
    state_file_problem,
)
from flowspark.runtime.storage import Location

STATE_FAILURE = "[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during loading state."


def _block(payload: bytes) -> bytes:
    """One raw (uncompressed) block of Spark's LZ4 block stream."""
    size = len(payload).to_bytes(4, "little")
    return b"LZ4Block" + bytes([0x15]) + size + size + bytes(4) + payload


END = _block(b"")


def _directory(root: Path) -> Path:
    """A recovery directory after batch 3: logs, and state version 4 in two partitions."""
    for kind in ("offsets", "commits"):
        (root / kind).mkdir(parents=True)
        for batch in range(4):
            (root / kind / str(batch)).write_text(f'v1\n{{"batch": {batch}}}\n-\n')
    for part in ("0", "1"):
        store = root / "state" / "0" / part
        store.mkdir(parents=True)
        for version in range(1, 5):
            (store / f"{version}.changelog").write_bytes(_block(b"key,value" * 10) + END)
        with zipfile.ZipFile(store / "2.zip", "w") as archive:
            archive.writestr("000001.sst", b"x" * 100)
        (store / "_metadata").mkdir()
        (store / "_metadata" / "0").write_text("schema")
    return root


def test_a_whole_block_stream_passes_and_a_cut_one_is_named():
    whole = _block(b"abc") + _block(b"defg") + END
    assert block_stream_problem(whole) is None
    assert block_stream_problem(whole[:-1]) == "it is cut short (no end block)"
    assert block_stream_problem(whole[:12]) == "it is cut short (no end block)"
    assert "runs past the end" in block_stream_problem(_block(b"abcdef")[:-2])
    assert block_stream_problem(b"") == "it is empty"
    assert block_stream_problem(b"garbage" * 5) == "it has no block header at byte 0"
    assert block_stream_problem(whole + b"x") == "it has 1 bytes after its end"


def test_a_truncated_changelog_is_named_with_its_batch(tmp_path):
    root = _directory(tmp_path / "rec")
    target = root / "state" / "0" / "1" / "4.changelog"
    target.write_bytes(target.read_bytes()[:20])
    error = name_damage(STATE_FAILURE, Location.parse(root))
    assert error is not None
    text = str(error)
    assert str(target) in text and "(batch 3)" in text and "cut short" in text
    assert "restore the recovery directory from a copy, or start over" in text
    assert "\n" not in text


def test_a_damaged_zip_snapshot_is_named(tmp_path):
    root = _directory(tmp_path / "rec")
    target = root / "state" / "0" / "0" / "2.zip"
    target.write_bytes(target.read_bytes()[:30])
    assert "not a whole zip file" in state_file_problem(Location.parse(target))
    assert str(target) in str(name_damage(STATE_FAILURE, Location.parse(root)))


def test_a_state_failure_with_whole_files_still_says_the_state_cannot_be_loaded(tmp_path):
    root = _directory(tmp_path / "rec")
    text = str(name_damage(STATE_FAILURE, Location.parse(root)))
    assert f"cannot load the keyed state in {root / 'state'}" in text
    assert "CANNOT_LOAD_STATE_STORE" in text


@pytest.mark.parametrize(
    ("kind", "content", "problem"),
    [
        ("offsets", "v1\n", "it is incomplete (a version line and nothing after it)"),
        ("offsets", "", "it is empty"),
        ("commits", 'v1\n{"nextBatchWatermarkMs":0', "line 2 is not whole JSON"),
        ("commits", "{}\n", "its first line is not a version (v1)"),
    ],
)
def test_a_damaged_log_file_is_named_whatever_spark_said(tmp_path, kind, content, problem):
    root = _directory(tmp_path / "rec")
    (root / kind / "3").write_text(content)
    log = "the offsets log" if kind == "offsets" else "the commit log"
    text = str(name_damage("[STREAM_FAILED] next on empty iterator", Location.parse(root)))
    assert f"{log} file {root / kind / '3'} (batch 3): {problem}" in text


def test_a_whole_directory_is_not_blamed_for_another_failure(tmp_path):
    root = _directory(tmp_path / "rec")
    assert name_damage("[STREAM_FAILED] the Python worker crashed", Location.parse(root)) is None
    for kind in ("offsets", "commits"):
        assert log_file_problem(Location.parse(root / kind / "0")) is None


def test_sparks_incomplete_log_message_is_kept_when_the_file_looks_whole(tmp_path):
    root = _directory(tmp_path / "rec")
    text = f"Failed to read log file {root}/offsets/3. Incomplete log file"
    assert f"cannot read its log file {root}/offsets/3" in str(
        name_damage(text, Location.parse(root))
    )
