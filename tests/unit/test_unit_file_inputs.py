"""File inputs: byte offsets, line-aligned splits and batches, CSV records."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowspark.connectors import files
from flowspark.connectors.files import CSVInput, DirInput, FileInput


def read(inp, part, start, end, pieces=1):
    """Every item of ``[start, end)`` of ``part``, read through ``pieces`` splits."""
    return [x for split in inp.splits(part, start, end, pieces) for b in split.read() for x in b]


def read_all(inp, part, pieces=1):
    return read(inp, part, 0, inp.end_offset(part), pieces)


def expected_lines(content: str) -> list[str]:
    """What bytewax's FileInput yields for ``content`` (with ``\\n`` newlines)."""
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "lines.txt"
    path.write_text("alpha\nbeta\n\ngamma\ndelta\n", encoding="utf-8")
    return path


# -- FileInput --------------------------------------------------------------------------


def test_file_input_has_one_part_named_by_its_path(text_file):
    assert FileInput(text_file).list_parts() == [str(text_file)]


def test_file_input_missing_file_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        FileInput(tmp_path / "missing.txt").list_parts()


def test_end_offset_is_the_file_size(text_file):
    part = str(text_file)
    assert FileInput(text_file).end_offset(part) == text_file.stat().st_size


def test_reads_lines_without_newlines_including_empty_ones(text_file):
    inp = FileInput(text_file)
    assert read_all(inp, str(text_file)) == ["alpha", "beta", "", "gamma", "delta"]


def test_last_line_without_newline_is_read(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"one\ntwo")
    assert read_all(FileInput(path), str(path)) == ["one", "two"]


def test_empty_file_has_no_lines(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"")
    inp = FileInput(path)
    assert inp.end_offset(str(path)) == 0
    assert read_all(inp, str(path), pieces=4) == []


def test_offset_after_counts_batches_of_lines(text_file):
    inp = FileInput(text_file, batch_size=2)
    part, end = str(text_file), text_file.stat().st_size
    assert inp.offset_after(part, 0, end, 1) == len(b"alpha\nbeta\n")
    assert inp.offset_after(part, 0, end, 2) == len(b"alpha\nbeta\n\ngamma\n")
    assert inp.offset_after(part, 0, end, 3) == end
    assert inp.offset_after(part, 0, end, 99) == end


def test_offset_after_from_a_middle_offset(text_file):
    inp = FileInput(text_file, batch_size=1)
    part, end = str(text_file), text_file.stat().st_size
    start = len(b"alpha\n")
    after = inp.offset_after(part, start, end, 2)
    assert after == len(b"alpha\nbeta\n\n")
    assert read(inp, part, start, after) == ["beta", ""]


def test_offset_after_never_passes_end(text_file):
    inp = FileInput(text_file, batch_size=1000)
    part = str(text_file)
    assert inp.offset_after(part, 0, len(b"alpha\nbeta\n"), 1) == len(b"alpha\nbeta\n")


def test_batches_read_back_to_back_give_every_line_once(text_file):
    inp = FileInput(text_file, batch_size=2)
    part, end = str(text_file), text_file.stat().st_size
    start, batches = 0, []
    while start < end:
        stop = inp.offset_after(part, start, end, 1)
        batches.append(read(inp, part, start, stop))
        start = stop
    assert batches == [["alpha", "beta"], ["", "gamma"], ["delta"]]


def test_batch_limit_is_end_for_small_ranges(text_file):
    inp = FileInput(text_file)
    part, end = str(text_file), text_file.stat().st_size
    assert inp.batch_limit(part, 0, end) == end


def batch_limits(inp, path, max_bytes, count):
    """The first ``count`` batch limits of ``path`` from its start, ``max_bytes`` a batch."""
    part, end, limits = str(path), path.stat().st_size, [0]
    with mock.patch.object(files, "MAX_BYTES_PER_BATCH", max_bytes):
        for _ in range(count):
            limits.append(inp.batch_limit(part, limits[-1], end))
    return limits[1:]


def test_batch_limit_cuts_big_ranges_at_a_line_start(text_file):
    limits = batch_limits(FileInput(text_file), text_file, 3, 2)
    assert limits == [len(b"alpha\n"), len(b"alpha\nbeta\n")]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10"])
def test_batch_size_must_be_a_positive_int(text_file, bad):
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        FileInput(text_file, batch_size=bad)


def test_splits_are_at_most_pieces_and_cover_everything(text_file):
    inp = FileInput(text_file)
    part, end = str(text_file), text_file.stat().st_size
    for pieces in range(1, 40):
        splits = inp.splits(part, 0, end, pieces)
        assert 1 <= len(splits) <= pieces
        assert read(inp, part, 0, end, pieces) == ["alpha", "beta", "", "gamma", "delta"]


def test_multibyte_characters_are_never_cut(tmp_path):
    path = tmp_path / "u.txt"
    lines = ["żółć", "日本語テキスト", "emoji 🎉🎉", "", "ascii"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    inp = FileInput(path)
    with mock.patch.object(files, "_BLOCK", 5):
        for pieces in range(1, 12):
            assert read_all(inp, str(path), pieces) == lines


def test_crlf_lines_lose_their_carriage_return(tmp_path):
    path = tmp_path / "dos.txt"
    path.write_bytes(b"one\r\ntwo\r\n")
    assert read_all(FileInput(path), str(path)) == ["one", "two"]


line_text = st.text(
    alphabet=st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)),
    max_size=12,
)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(line_text, max_size=25),
    trailing_newline=st.booleans(),
    pieces=st.integers(1, 12),
    skip=st.integers(0, 5),
    block=st.sampled_from([1, 2, 7, 4 << 20]),
)
def test_splits_cover_every_line_exactly_once_in_order(
    tmp_path, lines, trailing_newline, pieces, skip, block
):
    content = "\n".join(lines) + ("\n" if trailing_newline and lines else "")
    path = tmp_path / "prop.txt"
    path.write_text(content, encoding="utf-8", newline="")
    inp = FileInput(path, batch_size=1)
    part, end = str(path), inp.end_offset(str(path))
    start = inp.offset_after(part, 0, end, skip)  # resume in the middle, as after a restart
    with mock.patch.object(files, "_BLOCK", block):
        splits = inp.splits(part, start, end, pieces)
        got = [x for split in splits for b in split.read() for x in b]
    assert len(splits) <= pieces
    assert got == expected_lines(content)[skip:]


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(line_text, min_size=1, max_size=25),
    batch_size=st.integers(1, 5),
    batches=st.integers(0, 8),
)
def test_offset_after_lands_on_line_boundaries(tmp_path, lines, batch_size, batches):
    content = "".join(line + "\n" for line in lines)
    path = tmp_path / "prop.txt"
    path.write_text(content, encoding="utf-8", newline="")
    inp = FileInput(path, batch_size=batch_size)
    part, end = str(path), inp.end_offset(str(path))
    offset = inp.offset_after(part, 0, end, batches)
    n = min(len(lines), batches * batch_size)
    assert offset == len("".join(line + "\n" for line in lines[:n]).encode("utf-8"))
    assert read(inp, part, 0, offset) == lines[:n]
    assert read(inp, part, offset, end) == lines[n:]


# -- DirInput ---------------------------------------------------------------------------


@pytest.fixture
def input_dir(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    (d / "b.txt").write_text("b1\nb2\n")
    (d / "a.txt").write_text("a1\n")
    (d / "c.log").write_text("c1\n")
    (d / "sub").mkdir()
    (d / "sub" / "d.txt").write_text("d1\n")
    return d


def test_dir_input_lists_matching_files_sorted(input_dir):
    assert DirInput(input_dir, "*.txt").list_parts() == ["a.txt", "b.txt"]


def test_dir_input_default_glob_skips_directories(input_dir):
    assert DirInput(input_dir).list_parts() == ["a.txt", "b.txt", "c.log"]


def test_dir_input_recursive_glob_names_parts_relative(input_dir):
    assert "sub/d.txt" in DirInput(input_dir, "**/*.txt").list_parts()


def test_dir_input_reads_each_part_by_relative_name(input_dir):
    inp = DirInput(input_dir, batch_size=1)
    assert inp.end_offset("b.txt") == len(b"b1\nb2\n")
    assert inp.offset_after("b.txt", 0, 6, 1) == 3
    assert read_all(inp, "b.txt", pieces=3) == ["b1", "b2"]


def test_dir_input_missing_directory_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        DirInput(tmp_path / "nope")


def test_dir_input_on_a_file_is_a_value_error(tmp_path):
    path = tmp_path / "file.txt"
    path.write_text("x\n")
    with pytest.raises(ValueError, match="is not a directory"):
        DirInput(path)


# -- CSVInput ---------------------------------------------------------------------------

CSV = 'name,note\na,"line1\nline2"\nb,plain\nc,"x,y"\n'
ROWS = [
    {"name": "a", "note": "line1\nline2"},
    {"name": "b", "note": "plain"},
    {"name": "c", "note": "x,y"},
]


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.csv"
    path.write_text(CSV, encoding="utf-8", newline="")
    return path


def test_csv_rows_are_dicts_keyed_by_header(csv_file):
    assert read_all(CSVInput(csv_file), str(csv_file)) == ROWS


def test_csv_offset_after_counts_records_not_lines(csv_file):
    inp = CSVInput(csv_file, batch_size=1)
    part, end = str(csv_file), csv_file.stat().st_size
    first = inp.offset_after(part, 0, end, 1)
    assert first == len(b'name,note\na,"line1\nline2"\n')
    second = inp.offset_after(part, first, end, 1)
    assert second == first + len(b"b,plain\n")
    assert inp.offset_after(part, 0, end, 3) == end
    assert read(inp, part, 0, first) == ROWS[:1]
    assert read(inp, part, first, second) == ROWS[1:2]
    assert read(inp, part, second, end) == ROWS[2:]


def test_csv_offset_after_with_bigger_batches(csv_file):
    inp = CSVInput(csv_file, batch_size=2)
    part, end = str(csv_file), csv_file.stat().st_size
    mid = inp.offset_after(part, 0, end, 1)
    assert read(inp, part, 0, mid) == ROWS[:2]
    assert read(inp, part, mid, end) == ROWS[2:]


def test_csv_batch_limit_lands_on_a_record_boundary(csv_file):
    inp = CSVInput(csv_file)
    part, end = str(csv_file), csv_file.stat().st_size
    [limit] = batch_limits(inp, csv_file, 5, 1)
    assert limit == len(b'name,note\na,"line1\nline2"\n')
    assert read(inp, part, 0, limit) + read(inp, part, limit, end) == ROWS


def test_csv_fmtparams_are_passed_to_the_reader(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_text("a;b\n1;2,5\n", encoding="utf-8")
    assert read_all(CSVInput(path, delimiter=";"), str(path)) == [{"a": "1", "b": "2,5"}]


def test_csv_with_crlf_line_endings(tmp_path):
    path = tmp_path / "dos.csv"
    path.write_bytes(b"a,b\r\n1,2\r\n3,4\r\n")
    assert read_all(CSVInput(path), str(path)) == [{"a": "1", "b": "2"}, {"a": "3", "b": "4"}]


def test_csv_header_only_has_no_rows(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("a,b\n")
    inp = CSVInput(path, batch_size=1)
    assert read_all(inp, str(path)) == []
    assert inp.offset_after(str(path), 0, path.stat().st_size, 1) == path.stat().st_size


def test_csv_offset_after_ignores_blank_lines(tmp_path):
    path = tmp_path / "blank.csv"
    path.write_text("a\n\n1\n2\n")
    inp = CSVInput(path, batch_size=1)
    part, end = str(path), path.stat().st_size
    assert read(inp, part, 0, inp.offset_after(part, 0, end, 1)) == [{"a": "1"}]


@pytest.mark.parametrize("pieces", [1, 3])
def test_a_bad_byte_names_the_file_and_its_line(tmp_path, pieces):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"a 1\nb 2\nc \xff3\nd 4\n")
    inp = FileInput(path)
    with pytest.raises(ValueError) as caught:
        read_all(inp, str(path), pieces)
    assert str(caught.value) == (
        f"{path}, line 3: not UTF-8 text (byte b'\\xff' at offset 10: invalid start byte)"
    )


def test_a_bad_byte_in_the_last_line_without_newline_is_named(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"one\ntwo\nthr\xe9e")
    with pytest.raises(ValueError, match=r"bad\.txt, line 3: not UTF-8 text .* offset 11"):
        read_all(FileInput(path), str(path))


def test_a_bad_byte_in_a_csv_file_is_named(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(b"name,n\nx,1\ny\xff,2\n")
    with pytest.raises(ValueError, match=r"bad\.csv, line 3: not UTF-8 text"):
        read_all(CSVInput(path), str(path))
