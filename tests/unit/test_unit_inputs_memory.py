"""`flowspark.inputs.batch`, `TestingInput` and `TestingOutput`."""

from __future__ import annotations

import itertools
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowspark.connectors import memory
from flowspark.inputs import batch
from flowspark.testing import TestingInput, TestingOutput


def read(inp, start, end, pieces):
    return [x for s in inp.splits("iterable", start, end, pieces) for b in s.read() for x in b]


# -- batch ------------------------------------------------------------------------------


def test_batch_groups_items():
    assert list(batch(range(5), 2)) == [[0, 1], [2, 3], [4]]


def test_batch_exact_multiple_has_no_empty_tail():
    assert list(batch("abcd", 2)) == [["a", "b"], ["c", "d"]]


def test_batch_of_nothing_is_nothing():
    assert list(batch([], 3)) == []


def test_batch_is_lazy_over_infinite_iterators():
    assert list(itertools.islice(batch(itertools.count(), 3), 2)) == [[0, 1, 2], [3, 4, 5]]


def test_batch_accepts_a_generator():
    assert list(batch((x * x for x in range(4)), 3)) == [[0, 1, 4], [9]]


@given(st.lists(st.integers()), st.integers(1, 10))
def test_batch_preserves_items_and_sizes(items, size):
    chunks = list(batch(items, size))
    assert [x for c in chunks for x in c] == items
    assert all(len(c) == size for c in chunks[:-1])
    assert all(1 <= len(c) <= size for c in chunks)


# -- TestingInput -----------------------------------------------------------------------


def test_testing_input_materialises_a_generator_once():
    gen = (x for x in range(3))
    inp = TestingInput(gen)
    assert inp.items == [0, 1, 2]
    assert inp.end_offset("iterable") == 3
    assert read(inp, 0, 3, 1) == [0, 1, 2]
    assert read(inp, 0, 3, 1) == [0, 1, 2]  # readable again: the generator was copied


@pytest.mark.parametrize("items", [[1, 2], (1, 2), range(2)])
def test_testing_input_keeps_sequences_as_they_are(items):
    assert TestingInput(items).items is items


def test_testing_input_has_one_part_named_iterable():
    assert TestingInput([1]).list_parts() == ["iterable"]


@pytest.mark.parametrize("bad", [0, -1, 2.0, "1", None])
def test_testing_input_batch_size_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        TestingInput([1], batch_size=bad)


def test_testing_input_offset_after_counts_batches():
    inp = TestingInput(range(10), batch_size=3)
    assert inp.offset_after("iterable", 0, 10, 1) == 3
    assert inp.offset_after("iterable", 3, 10, 2) == 9
    assert inp.offset_after("iterable", 9, 10, 1) == 10


def test_testing_input_range_splits_stay_ranges():
    inp = TestingInput(range(100))
    for split in inp.splits("iterable", 10, 90, 4):
        for chunk in split.read():
            assert isinstance(chunk, range)


def test_testing_input_travels_in_bounded_chunks(monkeypatch):
    monkeypatch.setattr(memory, "CHUNK_ITEMS", 4)
    shipped = pickle.loads(pickle.dumps(TestingInput(list(range(10)))))
    [split] = shipped.splits("iterable", 0, 10, 1)
    assert [list(c) for c in split.read()] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    # A split that starts and ends inside chunks reads only its slice of them.
    [split] = shipped.splits("iterable", 3, 9, 1)
    assert [list(c) for c in split.read()] == [[3], [4, 5, 6, 7], [8]]


def _read(split):
    return [x for chunk in split.read() for x in chunk]


def test_testing_input_splits_stop_at_end():
    for inp in (
        TestingInput(list(range(10))),
        pickle.loads(pickle.dumps(TestingInput(list(range(10))))),
    ):
        assert [_read(s) for s in inp.splits("iterable", 0, 5, 2)] == [[0, 1, 2], [3, 4]]
        assert [_read(s) for s in inp.splits("iterable", 4, 10, 4)] == [[4, 5], [6, 7], [8, 9]]


@given(
    items=st.lists(st.integers(), max_size=40),
    pieces=st.integers(1, 10),
    data=st.data(),
)
def test_testing_input_splits_cover_the_range_in_order(items, pieces, data):
    start = data.draw(st.integers(0, len(items)))
    end = data.draw(st.integers(start, len(items)))
    inp = TestingInput(items)
    splits = inp.splits("iterable", start, end, pieces)
    assert len(splits) <= pieces
    assert read(inp, start, end, pieces) == items[start:end]


# -- TestingOutput ----------------------------------------------------------------------


def test_testing_output_appends_to_the_callers_list():
    out: list = ["existing"]
    sink = TestingOutput(out).build(0, 1)
    sink.write_batch([1, 2])
    sink.write_batch([3])
    assert out == ["existing", 1, 2, 3]


def test_testing_output_needs_a_list():
    with pytest.raises(TypeError, match="needs a list to append to; got str"):
        TestingOutput("nope")


def test_testing_input_spills_chunks_to_a_file_for_local_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "CHUNK_ITEMS", 4)
    original = TestingInput([("k", i) for i in range(10)])
    assert original.for_run(None) is original  # executors share no disk: ship the data
    shipped = pickle.loads(pickle.dumps(original.for_run(str(tmp_path))))
    assert len(list(tmp_path.iterdir())) == 1
    pickle.dumps(original)  # the original itself still ships its data
    assert len(list(tmp_path.iterdir())) == 1
    assert shipped.end_offset("iterable") == 10
    splits = shipped.splits("iterable", 3, 10, 2)
    assert [_read(s) for s in splits] == [
        [("k", i) for i in range(3, 7)],
        [("k", i) for i in range(7, 10)],
    ]
