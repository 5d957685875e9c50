"""Chunks between Python and Spark (`codec`) and failures carried to the driver (`errors`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowspark.runtime.codec import decode_items, encode_items, encode_range
from flowspark.runtime.errors import (
    RemoteStepFailure,
    StepError,
    find_step_error,
    short_repr,
    step_failure,
)


@dataclass
class Point:
    x: int
    y: int


# -- codec ------------------------------------------------------------------------------


def test_mixed_items_round_trip():
    items = [
        1,
        -(2**70),
        3.5,
        float("inf"),
        "héllo ✓",
        b"\x00\xff",
        None,
        True,
        (1, "a"),
        ["nested", [1]],
        {"k": {1, 2}},
        Decimal("1.10"),
        datetime(2024, 1, 2, tzinfo=UTC),
        Point(1, 2),
    ]
    decoded = decode_items(encode_items(items))
    assert decoded == items
    assert type(decoded) is list


def test_empty_list_round_trips():
    assert decode_items(encode_items([])) == []


def test_functions_in_items_survive():
    offset = 5
    [fn] = decode_items(encode_items([lambda x: x + offset]))
    assert fn(1) == 6


def test_item_chunks_are_tagged_p():
    assert encode_items([1])[:1] == b"P"
    assert encode_range(range(3))[:1] == b"R"


def test_range_chunk_is_small():
    assert len(encode_range(range(10**12))) == 25


@pytest.mark.parametrize(
    "r", [range(0), range(5), range(2, 8, 3), range(10, -5, -4), range(-(2**63), 2**63 - 1)]
)
def test_ranges_round_trip_as_ranges(r):
    decoded = decode_items(encode_range(r))
    assert isinstance(decoded, range)
    assert (decoded.start, decoded.stop, decoded.step) == (r.start, r.stop, r.step)


@given(
    st.integers(-(2**62), 2**62),
    st.integers(-(2**62), 2**62),
    st.integers(-(2**40), 2**40).filter(bool),
)
def test_any_int64_range_round_trips(start, stop, step):
    r = range(start, stop, step)
    decoded = decode_items(encode_range(r))
    assert (decoded.start, decoded.stop, decoded.step) == (start, stop, step)


@given(st.lists(st.one_of(st.integers(), st.text(), st.floats(allow_nan=False), st.none())))
def test_any_simple_list_round_trips(items):
    assert decode_items(encode_items(items)) == items


@pytest.mark.parametrize("data", [b"", b"X123", b"p" + encode_items([1])[1:]])
def test_bad_tag_is_a_value_error(data):
    with pytest.raises(ValueError, match="not a flowspark chunk"):
        decode_items(data)


# -- errors -----------------------------------------------------------------------------


class Unpicklable(Exception):
    def __init__(self, msg):
        super().__init__(msg)
        self.lock = threading.Lock()


class NeedsTwoArgs(Exception):
    """Pickles fine but cannot be rebuilt (``args`` has one element)."""

    def __init__(self, a, b):
        super().__init__(f"{a}/{b}")


def named_fn(x):
    return x


def failure_text(exc: BaseException, item="it", fn=named_fn) -> str:
    return str(step_failure("the_step", fn, item, exc))


def test_step_failure_is_a_remote_step_failure_with_a_readable_head():
    exc = step_failure("s1", named_fn, 42, ValueError("bad"))
    assert isinstance(exc, RemoteStepFailure)
    assert str(exc).startswith("step 's1' failed on item 42: ValueError: bad ")


def test_find_step_error_in_wrapped_jvm_text():
    text = (
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        f"  ...\nflowspark.runtime.errors.RemoteStepFailure: {failure_text(KeyError('k'))}\n"
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException"
    )
    error = find_step_error(text)
    assert isinstance(error, StepError)
    assert isinstance(error, KeyError)
    assert (error.step_id, error.function, error.item) == ("the_step", "named_fn", "'it'")
    assert str(error) == "step 'the_step' (named_fn) failed on item 'it': KeyError: 'k'"


def test_find_step_error_without_marker_is_none():
    assert find_step_error("java.lang.OutOfMemoryError: Java heap space") is None


def test_cause_is_the_original_exception_with_the_worker_traceback():
    try:
        raise ValueError("original")
    except ValueError as exc:
        text = failure_text(exc)
    cause = find_step_error(text).__cause__
    assert type(cause) is ValueError
    assert cause.args == ("original",)
    [note] = cause.__notes__
    assert note.startswith("Traceback in the Spark worker:")
    assert "test_cause_is_the_original_exception" in note


def test_unpicklable_exception_is_rebuilt_from_its_class_and_args():
    error = find_step_error(failure_text(Unpicklable("locked")))
    assert isinstance(error, Unpicklable)
    assert type(error.__cause__) is Unpicklable
    assert error.__cause__.args == ("locked",)
    assert not hasattr(error.__cause__, "lock")  # the attribute that did not pickle
    assert "Unpicklable: locked" in str(error)


def test_exception_that_cannot_be_rebuilt_by_pickle_is_rebuilt_without_init():
    error = find_step_error(failure_text(NeedsTwoArgs(1, 2)))
    assert isinstance(error, NeedsTwoArgs)
    assert type(error.__cause__) is NeedsTwoArgs
    assert str(error.__cause__) == "1/2"
    assert "NeedsTwoArgs: 1/2" in str(error)


def test_exception_whose_class_does_not_travel_becomes_a_runtime_error_cause():
    class Local(Exception):
        lock = threading.Lock()  # the class (pickled by value) cannot be pickled

    try:
        raise Local("lost")
    except Local as exc:
        error = find_step_error(failure_text(exc))
    assert type(error) is StepError
    assert type(error.__cause__) is RuntimeError
    assert str(error.__cause__) == "Local: lost"
    assert "Local: lost" in str(error)
    assert error.__cause__.__notes__[0].startswith("Traceback in the Spark worker:")


def test_function_name_uses_qualname_then_type():
    class Mapper:
        def __call__(self, x):
            return x

        def method(self, x):
            return x

    assert find_step_error(failure_text(ValueError(), fn=Mapper().method)).function.endswith(
        "Mapper.method"
    )
    assert find_step_error(failure_text(ValueError(), fn=Mapper())).function == "Mapper"


def test_short_repr_keeps_short_text():
    assert short_repr("abc") == "'abc'"


def test_short_repr_truncates_to_the_limit():
    text = short_repr(list(range(1000)), limit=50)
    assert len(text) == 50
    assert text.startswith("[0, 1, 2")
    assert text.endswith("...")


def test_short_repr_survives_a_broken_repr():
    class Broken:
        def __repr__(self):
            raise KeyError("nope")

    assert short_repr(Broken()) == "<unrepresentable Broken: KeyError('nope')>"


def test_tuples_with_utc_datetimes_travel_as_columns_and_round_trip_exactly():
    from datetime import UTC, datetime, timedelta

    items = [(f"k{i}", datetime(2024, 1, 1, tzinfo=UTC) + timedelta(microseconds=7 * i + 1), i)
             for i in range(200)]  # fmt: skip
    data = encode_items(items)
    assert data[:1] == b"T"
    back = decode_items(data)
    assert back == items
    assert all(type(t) is tuple and back_dt.tzinfo is UTC for t, (_, back_dt, _) in zip(back, back))


def test_nested_tuples_with_utc_datetimes_travel_as_columns_and_round_trip_exactly():
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    # reduce_window(..., with_window=True) output: (key, ((start, end), value))
    items = [(f"k{i % 7}", ((t0 + timedelta(seconds=i), t0 + timedelta(seconds=i + 10)), [i]))
             for i in range(300)]  # fmt: skip
    data = encode_items(items)
    assert data[:1] == b"T"
    back = decode_items(data)
    assert back == items
    assert all(type(item[1][0]) is tuple and item[1][0][1].tzinfo is UTC for item in back)


def test_tuples_whose_nesting_differs_fall_back_to_pickle():
    from datetime import UTC, datetime

    t = datetime(2024, 1, 1, tzinfo=UTC)
    base = [("k", ((t, t), 1))] * 99
    for last in (("k", ((t, t, t), 1)), ("k", (t, 1)), ("k", 5), ("k", ((t, t), 1), 2)):
        items = base + [last]
        data = encode_items(items)
        assert data[:1] == b"P"
        assert decode_items(data) == items
    empty = [((), t)] * 100
    assert decode_items(encode_items(empty)) == empty


def test_tuples_without_datetimes_in_their_first_item_are_pickled_as_they_are():
    from datetime import UTC, datetime

    t = datetime(2024, 1, 1, tzinfo=UTC)
    plain = [(f"k{i % 7}", (i, float(i))) for i in range(200)]
    late_times = [("k", None)] + [("k", t)] * 199
    for items in (plain, late_times):
        data = encode_items(items)
        assert data[:1] == b"P"
        assert decode_items(data) == items


def test_mixed_or_naive_datetime_tuples_fall_back_to_pickle():
    from datetime import UTC, datetime, timedelta, timezone

    naive = [("k", datetime(2024, 1, 1)) for _ in range(100)]
    other_tz = [
        ("k", datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=2)))) for _ in range(100)
    ]
    ragged = [("k", datetime(2024, 1, 1, tzinfo=UTC))] * 99 + [("k",)]
    for items in (naive, other_tz, ragged):
        data = encode_items(items)
        assert data[:1] == b"P"
        assert decode_items(data) == items


def test_lists_of_utc_datetimes_round_trip_exactly():
    from datetime import UTC, datetime, timedelta

    items = [
        datetime(1969, 12, 31, tzinfo=UTC) + timedelta(microseconds=13 * i) for i in range(300)
    ]
    data = encode_items(items)
    assert data[:1] == b"D"
    assert decode_items(data) == items


def _utc_datetime_columns(
    min_value: datetime, max_value: datetime
) -> st.SearchStrategy[list[datetime]]:
    """Lists of 64 to 80 UTC datetimes in ``[min_value, max_value]`` (a column)."""
    return st.lists(
        st.datetimes(min_value=min_value, max_value=max_value, timezones=st.just(UTC)),
        min_size=64,
        max_size=80,
    )


@settings(max_examples=100, deadline=None)
@given(_utc_datetime_columns(datetime(1900, 1, 1), datetime(2200, 1, 1)))
def test_utc_datetime_columns_round_trip_property(values):
    assert decode_items(encode_items(values)) == values
    pairs = [(str(i), v) for i, v in enumerate(values)]
    assert decode_items(encode_items(pairs)) == pairs


def test_a_failure_without_user_frames_gets_no_traceback_note():
    """A traceback with no user frame would only repeat the error's own line."""
    error = find_step_error(failure_text(ValueError("bad byte")))
    assert "bad byte" in str(error)
    assert not getattr(error.__cause__, "__notes__", None)


@settings(max_examples=300)
@given(_utc_datetime_columns(datetime(1, 1, 2), datetime(9999, 12, 30)), st.booleans())
def test_utc_datetimes_round_trip_to_the_microsecond_in_any_year(times, as_tuples):
    # Columns of epoch microseconds: a float of seconds loses microseconds past 2106.
    items = [(i, t) for i, t in enumerate(times)] if as_tuples else times
    assert decode_items(encode_items(items)) == items
