"""The pynumaflow-compatible SDK types (`flowspark.api.udf`, `flowspark.<sdk module>`).

Pure Python, no Spark: times, datums, messages, windows, the output iterator,
the handler ABCs and the server classes' validation.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import importlib
import inspect
import operator
import pickle
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowspark.accumulator as accumulator
import flowspark.mapper as mapper
import flowspark.mapstreamer as mapstreamer
import flowspark.reducer as reducer
import flowspark.reducestreamer as reducestreamer
import flowspark.serve as serve_module
from flowspark.api.udf.handlers import Accumulator, Mapper, MapStreamer, Reducer, ReduceStreamer
from flowspark.api.udf.servers import handler_factory
from flowspark.api.udf.times import UTCDateTime, as_utc, utc_from_ms
from flowspark.api.udf.types import (
    DROP,
    AccumulatorDatum,
    AccumulatorMessage,
    Datum,
    IntervalWindow,
    KeyedWindow,
    MapStreamDatum,
    Messages,
    Metadata,
    ReduceStreamDatum,
    ReduceWindow,
    StreamMessage,
)
from flowspark.serve import (
    AccumulatorAsyncServer,
    MapAsyncServer,
    MapServer,
    MapStreamAsyncServer,
    ReduceAsyncServer,
    ReduceStreamAsyncServer,
)
from flowspark.shared.asynciter import STREAM_EOF, NonBlockingIterator
from flowspark.shared.times import naive_as_utc_to_ms
from tests.pynumaflow_pages import FlatMapStream, ReduceCounter, StreamSorter
from tests.pynumaflow_servers import parameter_names, server_settings

PLUS2 = timezone(timedelta(hours=2))
ET = datetime.fromtimestamp(1662998400, UTC)  # 2022-09-12 16:00:00 UTC
WM = datetime.fromtimestamp(1662998460, UTC)  # one minute later
ET_MS = 1_662_998_400_000
WM_MS = 1_662_998_460_000


def _naive(ms: int) -> datetime:
    return datetime(1970, 1, 1) + timedelta(milliseconds=ms)


class _DuckDatum:
    """A datum-like object that is not a flowspark Datum (naive times, no id)."""

    def __init__(self) -> None:
        self.keys = ["dk"]
        self.value = b"duck"
        self.event_time = _naive(ET_MS)
        self.watermark = _naive(WM_MS)
        self.headers = {"h": "1"}


# ----------------------------------------------------------------------------- UTCDateTime


def test_utc_from_ms_builds_aware_utc_datetimes() -> None:
    dt = utc_from_ms(ET_MS + 5)
    assert type(dt) is UTCDateTime
    assert dt.tzinfo is UTC
    assert dt == ET + timedelta(milliseconds=5)
    assert utc_from_ms(-1) == datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
    assert utc_from_ms(0).isoformat() == "1970-01-01T00:00:00+00:00"


def test_as_utc_keeps_a_utc_datetime_as_is() -> None:
    dt = utc_from_ms(ET_MS)
    assert as_utc(dt, "x") is dt


def test_as_utc_takes_naive_as_utc_and_converts_aware() -> None:
    from_naive = as_utc(datetime(2022, 9, 12, 16, 0), "x")
    from_plus2 = as_utc(datetime(2022, 9, 12, 18, 0, tzinfo=PLUS2), "x")
    from_plain_utc = as_utc(ET, "x")
    for dt in (from_naive, from_plus2, from_plain_utc):
        assert type(dt) is UTCDateTime
        assert dt.tzinfo is UTC
        assert (dt.year, dt.month, dt.day, dt.hour, dt.minute) == (2022, 9, 12, 16, 0)
    assert as_utc(datetime(2022, 1, 1, 0, 0, 0, 7), "x").microsecond == 7


@pytest.mark.parametrize("bad", [1, 1.5, "2022-09-12", date(2022, 9, 12), None])
def test_as_utc_rejects_non_datetimes_with_pynumaflow_text(bad: Any) -> None:
    with pytest.raises(TypeError) as info:
        as_utc(bad, "Datum.event_time")
    assert str(info.value) == f"Wrong data type: {type(bad)} for Datum.event_time"


ORDERINGS = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


@pytest.mark.parametrize("op", ORDERINGS, ids=lambda op: op.__name__)
def test_utc_datetime_compares_with_naive_both_ways(op: Any) -> None:
    utc = utc_from_ms(ET_MS)
    for naive_ms in (ET_MS - 1, ET_MS, ET_MS + 1):
        naive = _naive(naive_ms)
        assert op(utc, naive) == op(ET_MS, naive_ms)
        assert op(naive, utc) == op(naive_ms, ET_MS)


@pytest.mark.parametrize("op", ORDERINGS, ids=lambda op: op.__name__)
def test_utc_datetime_compares_with_aware_in_any_zone(op: Any) -> None:
    utc = utc_from_ms(ET_MS)
    for other_ms in (ET_MS - 1, ET_MS, ET_MS + 1):
        other = (ET + timedelta(milliseconds=other_ms - ET_MS)).astimezone(PLUS2)
        assert op(utc, other) == op(ET_MS, other_ms)
        assert op(other, utc) == op(other_ms, ET_MS)


def test_fromtimestamp_minus_one_style_watermark_tracking_works() -> None:
    # The accumulator page's StreamSorter: a naive local "minus infinity" start value.
    latest_wm = datetime.fromtimestamp(-1)
    watermark = utc_from_ms(WM_MS)
    assert watermark > latest_wm
    assert latest_wm < watermark
    assert not watermark <= latest_wm
    latest_wm = watermark
    assert not utc_from_ms(WM_MS) > latest_wm


def test_naive_and_utc_datetimes_sort_and_max_together() -> None:
    a, b, c = _naive(1), utc_from_ms(2), _naive(3)
    assert sorted([c, b, a]) == [a, b, c]
    assert max(a, b) is b
    assert min(b, c) is b


def test_utc_datetime_against_non_datetimes() -> None:
    utc = utc_from_ms(0)
    assert utc != 0
    assert not utc == "1970-01-01"  # noqa: SIM201 - exercising __eq__
    with pytest.raises(TypeError):
        _ = utc < 0
    with pytest.raises(TypeError):
        _ = 0 >= utc  # noqa: SIM300 - the reflected comparison


def test_utc_datetime_hash_matches_equal_aware_datetimes() -> None:
    utc = utc_from_ms(ET_MS)
    assert hash(utc) == hash(ET) == hash(ET.astimezone(PLUS2))
    assert {ET: "plain"}[utc] == "plain"
    assert {utc: "ours"}[ET.astimezone(PLUS2)] == "ours"
    assert len({utc, ET, utc_from_ms(ET_MS)}) == 1


def test_utc_datetime_arithmetic_keeps_the_type() -> None:
    utc = utc_from_ms(ET_MS)
    step = timedelta(seconds=1)
    for result in (utc + step, step + utc, utc - step):
        assert type(result) is UTCDateTime
        assert result.tzinfo is UTC
    assert utc + step == utc_from_ms(ET_MS + 1000)
    assert utc - step == utc_from_ms(ET_MS - 1000)


def test_utc_datetime_subtracts_naive_and_aware() -> None:
    utc = utc_from_ms(WM_MS)
    assert utc - _naive(ET_MS) == timedelta(minutes=1)
    assert _naive(ET_MS) - utc == timedelta(minutes=-1)
    assert utc - ET.astimezone(PLUS2) == timedelta(minutes=1)
    assert ET - utc == timedelta(minutes=-1)
    assert utc - utc_from_ms(ET_MS) == timedelta(minutes=1)
    with pytest.raises(TypeError):
        _ = utc - 5


def test_a_naive_utc_datetime_still_acts_as_utc() -> None:
    naive_ours = utc_from_ms(ET_MS).replace(tzinfo=None)
    assert type(naive_ours) is UTCDateTime and naive_ours.tzinfo is None
    assert naive_ours == ET
    assert naive_ours < WM
    assert WM - naive_ours == timedelta(minutes=1)
    assert hash(naive_ours) == hash(ET)


def test_utc_datetime_pickles_and_copies() -> None:
    utc = utc_from_ms(ET_MS + 123)
    for clone in (pickle.loads(pickle.dumps(utc)), copy.copy(utc), copy.deepcopy(utc)):
        assert type(clone) is UTCDateTime
        assert clone == utc and clone.tzinfo is UTC
    assert not hasattr(utc, "__dict__")


MS = st.integers(min_value=-(10**12), max_value=10**13)


@settings(max_examples=200)
@given(MS, MS)
def test_naive_vs_utc_ordering_equals_ms_ordering(naive_ms: int, utc_ms: int) -> None:
    naive, utc = _naive(naive_ms), utc_from_ms(utc_ms)
    for op in ORDERINGS:
        assert op(naive, utc) == op(naive_ms, utc_ms)
        assert op(utc, naive) == op(utc_ms, naive_ms)
    assert utc - naive == timedelta(milliseconds=utc_ms - naive_ms)


@settings(max_examples=100)
@given(MS, MS, st.integers(min_value=-14 * 60, max_value=14 * 60))
def test_aware_vs_utc_ordering_equals_ms_ordering(a_ms: int, b_ms: int, offset_min: int) -> None:
    zone = timezone(timedelta(minutes=offset_min))
    aware = utc_from_ms(a_ms).astimezone(zone)
    utc = utc_from_ms(b_ms)
    for op in ORDERINGS:
        assert op(aware, utc) == op(a_ms, b_ms)
        assert op(utc, aware) == op(b_ms, a_ms)
    if a_ms == b_ms:
        assert hash(aware) == hash(utc)


# ----------------------------------------------------------------------------------- Datum


def test_map_stream_datum_page_example() -> None:
    d = mapstreamer.Datum(
        keys=["test_key"],
        value=b"test_mock_message",
        event_time=ET,
        watermark=WM,
        headers={"key1": "value1", "key2": "value2"},
    )
    assert d.keys == ["test_key"]
    assert d.value == b"test_mock_message"
    assert d.event_time == ET and d.watermark == WM
    assert type(d.event_time) is UTCDateTime and type(d.watermark) is UTCDateTime
    assert d.headers == {"key1": "value1", "key2": "value2"}
    assert d.id == "" and d.tags == []


@pytest.mark.parametrize("cls", [MapStreamDatum, ReduceStreamDatum])
def test_datum_defaults_for_empty_fields(cls: type[Datum]) -> None:
    d = cls(None, None, ET, WM)  # type: ignore[arg-type]
    assert d.keys == [] and d.value == b"" and d.headers == {}


def test_datum_takes_naive_times_as_utc_and_converts_aware_ones() -> None:
    d = MapStreamDatum(["k"], b"v", _naive(ET_MS), WM.astimezone(PLUS2))
    assert d.event_time.tzinfo is UTC and d.watermark.tzinfo is UTC
    assert naive_as_utc_to_ms(d.event_time) == ET_MS and naive_as_utc_to_ms(d.watermark) == WM_MS
    assert d.watermark.hour == 16


@pytest.mark.parametrize(
    "build",
    [
        lambda et, wm: MapStreamDatum(["k"], b"v", et, wm),
        lambda et, wm: ReduceStreamDatum(["k"], b"v", et, wm),
        lambda et, wm: AccumulatorDatum(["k"], b"v", et, wm, "id"),
        lambda et, wm: Datum(["k"], b"v", et, wm),
    ],
    ids=["mapstream", "reducestream", "accumulator", "base"],
)
def test_datum_rejects_non_datetime_times_with_pynumaflow_text(build: Any) -> None:
    with pytest.raises(TypeError) as info:
        build(1662998400, "later")
    assert str(info.value) == "Wrong data type: <class 'int'> for Datum.event_time"
    with pytest.raises(TypeError) as info:
        build(ET, "later")
    assert str(info.value) == "Wrong data type: <class 'str'> for Datum.watermark"


@pytest.mark.parametrize("cls", [MapStreamDatum, AccumulatorDatum, Datum])
def test_datum_headers_returns_a_copy(cls: type[Datum]) -> None:
    headers = {"a": "1"}
    args: tuple[Any, ...] = (["k"], b"v", ET, WM)
    d = cls(*args, "id", headers) if cls is AccumulatorDatum else cls(*args, headers)
    d.headers["b"] = "2"
    assert d.headers == {"a": "1"}
    assert d.headers is not d.headers


def test_reduce_stream_datum_headers_is_the_internal_dict() -> None:
    d = reducestreamer.Datum(["k"], b"v", ET, WM, {"a": "1"})
    d.headers["b"] = "2"
    assert d.headers == {"a": "1", "b": "2"}
    assert d.headers is d.headers


def test_accumulator_datum_takes_the_id_positionally() -> None:
    d = accumulator.Datum(["k"], b"v", ET, WM, "msg-1", {"h": "1"})
    assert d.id == "msg-1" and d.headers == {"h": "1"}
    d2 = accumulator.Datum(keys=["k"], value=b"v", event_time=ET, watermark=WM, id_="x")
    assert d2.id == "x"
    with pytest.raises(TypeError):
        accumulator.Datum(["k"], b"v", ET, WM)  # type: ignore[call-arg]


def test_map_stream_datum_has_pynumaflows_signature() -> None:
    with pytest.raises(TypeError):
        MapStreamDatum(["k"], b"v", ET, WM, {}, "id")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        MapStreamDatum(["k"], b"v", ET, WM, id="x")  # type: ignore[call-arg]


def test_base_datum_takes_id_and_tags_as_keywords_only() -> None:
    d = Datum(["k"], b"v", ET, WM, {"h": "1"}, id="i", tags=["t"])
    assert (d.id, d.tags, d.headers) == ("i", ["t"], {"h": "1"})
    with pytest.raises(TypeError):
        Datum(["k"], b"v", ET, WM, {}, "i")  # type: ignore[misc]


def test_datum_make_skips_checks_and_copies() -> None:
    keys, headers, tags = ["k"], {"h": "1"}, ["t"]
    et, wm = utc_from_ms(ET_MS), utc_from_ms(WM_MS)
    d = AccumulatorDatum._make(keys, b"v", et, wm, headers, "i", tags)
    assert type(d) is AccumulatorDatum
    assert d.keys is keys and d.tags is tags and d.event_time is et and d.watermark is wm
    assert d.headers == headers and d._headers is headers
    assert d.id == "i"
    assert ReduceStreamDatum._make(keys, b"v", et, wm, headers, "", []).headers is headers


def test_datum_equality_spans_subclasses_and_all_fields() -> None:
    a = MapStreamDatum(["k"], b"v", ET, WM, {"h": "1"})
    assert a == ReduceStreamDatum(["k"], b"v", _naive(ET_MS), WM, {"h": "1"})
    assert a == Datum(["k"], b"v", ET, WM, {"h": "1"})
    assert a != MapStreamDatum(["k"], b"v", ET, WM, {"h": "2"})
    assert a != MapStreamDatum(["k"], b"w", ET, WM, {"h": "1"})
    assert a != Datum(["k"], b"v", ET, WM, {"h": "1"}, id="x")
    assert a != Datum(["k"], b"v", ET, WM, {"h": "1"}, tags=["t"])
    assert AccumulatorDatum(["k"], b"v", ET, WM, "i") != AccumulatorDatum(["k"], b"v", ET, WM, "j")
    assert a != "datum"
    with pytest.raises(TypeError):
        hash(a)


def test_datum_repr_shows_every_field() -> None:
    d = AccumulatorDatum(["k"], b"v", ET, WM, "i", {"h": "1"})
    text = repr(d)
    assert text.startswith("Datum(keys=['k'], value=b'v', event_time=")
    assert text.endswith("headers={'h': '1'}, id='i', tags=[])")
    assert "watermark=" in text and repr(d.watermark) in text


@pytest.mark.parametrize(
    "datum",
    [
        MapStreamDatum(["k"], b"v", ET, WM, {"h": "1"}),
        ReduceStreamDatum(["k"], b"v", ET, WM),
        AccumulatorDatum(["k"], b"v", ET, WM, "i", {"h": "1"}),
        Datum(["k"], b"v", ET, WM, id="i", tags=["t"]),
    ],
    ids=lambda d: type(d).__name__,
)
def test_datum_pickles_to_the_same_subclass(datum: Datum) -> None:
    for clone in (pickle.loads(pickle.dumps(datum)), copy.deepcopy(datum)):
        assert type(clone) is type(datum)
        assert clone == datum
        assert type(clone.event_time) is UTCDateTime


def test_datum_has_slots_only() -> None:
    d = MapStreamDatum(["k"], b"v", ET, WM)
    assert not hasattr(d, "__dict__")
    with pytest.raises(AttributeError):
        d.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        d.value = b"x"  # type: ignore[misc]


# -------------------------------------------------------------------------------- messages


def test_stream_message_defaults_and_properties() -> None:
    m = StreamMessage(b"v")
    assert (m.value, m.keys, m.tags) == (b"v", [], [])
    assert StreamMessage(None).value == b""  # type: ignore[arg-type]
    m = StreamMessage(b"v", keys=["k"], tags=["t"])
    assert (m.keys, m.tags) == (["k"], ["t"])


@pytest.mark.parametrize("cls", [StreamMessage, AccumulatorMessage])
@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"value": "text"}, "Message 'value' must be bytes, got str"),
        ({"value": bytearray(b"x")}, "Message 'value' must be bytes, got bytearray"),
        ({"value": b"", "keys": ("a",)}, "Message 'keys' must be a list of strings, got ('a',)"),
        (
            {"value": b"", "keys": ["a", 1]},
            "Message 'keys' must be a list of strings, got ['a', 1]",
        ),
        ({"value": b"", "tags": "t"}, "Message 'tags' must be a list of strings, got 't'"),
        ({"value": b"", "tags": [None]}, "Message 'tags' must be a list of strings, got [None]"),
    ],
)
def test_message_validation_texts(cls: type, kwargs: dict[str, Any], text: str) -> None:
    with pytest.raises(TypeError) as info:
        cls(**kwargs)
    assert str(info.value) == text


def test_stream_message_equality_like_a_dataclass() -> None:
    assert StreamMessage(b"v", ["k"]) == StreamMessage(b"v", ["k"], [])
    assert StreamMessage(b"v", ["k"]) != StreamMessage(b"v", ["k"], ["t"])
    assert StreamMessage(b"v") != AccumulatorMessage(b"v")
    assert mapstreamer.Message is reducestreamer.Message is mapper.Message is reducer.Message
    with pytest.raises(TypeError):
        hash(StreamMessage(b"v"))
    assert repr(StreamMessage(b"v", ["k"])) == "Message(value=b'v', keys=['k'], tags=[])"


def test_stream_message_to_drop_without_datum_is_pynumaflows() -> None:
    drop = StreamMessage.to_drop()
    assert (drop.value, drop.keys, drop.tags) == (b"", [], [DROP])
    assert DROP == "U+005C__DROP__"
    assert drop._times is None


def test_stream_message_to_drop_remembers_the_datums_times() -> None:
    datum = MapStreamDatum(["k"], b"v", ET, WM)
    drop = mapstreamer.Message.to_drop(datum)
    assert drop == StreamMessage.to_drop()
    assert drop._times == (datum.event_time, datum.watermark)
    duck = StreamMessage.to_drop(_DuckDatum())
    assert duck._times is not None
    assert all(type(t) is UTCDateTime for t in duck._times)
    assert [naive_as_utc_to_ms(t) for t in duck._times] == [ET_MS, WM_MS]


def test_to_drop_of_a_subclass_is_the_subclass() -> None:
    class Tagged(StreamMessage):
        __slots__ = ()

    assert type(Tagged.to_drop()) is Tagged


def test_message_pickles() -> None:
    m = StreamMessage(b"v", ["k"], ["t"])
    assert pickle.loads(pickle.dumps(m)) == m
    a = AccumulatorMessage(b"v", ["k"], ["t"], WM, ET, {"h": "1"}, "i")
    clone = pickle.loads(pickle.dumps(a))
    assert clone == a and type(clone.watermark) is UTCDateTime


def test_accumulator_message_defaults() -> None:
    m = accumulator.Message(b"v")
    assert (m.value, m.keys, m.tags) == (b"v", [], [])
    assert m.watermark is None and m.event_time is None
    assert m.headers == {} and m.id == ""
    assert m._times is None


def test_accumulator_message_normalises_times_and_copies_headers() -> None:
    headers = {"h": "1"}
    m = AccumulatorMessage(b"v", watermark=_naive(WM_MS), event_time=ET.astimezone(PLUS2))
    assert type(m.watermark) is UTCDateTime and m.watermark.tzinfo is UTC
    assert (
        naive_as_utc_to_ms(m.watermark) == WM_MS
        and m.event_time == ET
        and m.event_time.tzinfo is UTC
    )
    m = AccumulatorMessage(b"v", headers=headers, id="x")
    m.headers["more"] = "2"
    assert m.headers == {"h": "1"} and m.id == "x"


def test_accumulator_message_rejects_non_datetime_times() -> None:
    with pytest.raises(TypeError) as info:
        AccumulatorMessage(b"v", watermark=5)  # type: ignore[arg-type]
    assert str(info.value) == "Wrong data type: <class 'int'> for Message.watermark"
    with pytest.raises(TypeError) as info:
        AccumulatorMessage(b"v", event_time="now")  # type: ignore[arg-type]
    assert str(info.value) == "Wrong data type: <class 'str'> for Message.event_time"


def test_from_datum_copies_everything_but_tags() -> None:
    datum = Datum(["k"], b"v", ET, WM, {"h": "1"}, id="msg-1", tags=["t"])
    m = accumulator.Message.from_datum(datum)
    assert (m.value, m.keys, m.tags, m.id) == (b"v", ["k"], [], "msg-1")
    assert m.event_time == ET and m.watermark == WM and m.headers == {"h": "1"}
    assert m._times is None


def test_from_datum_accepts_any_datum_like_object() -> None:
    m = AccumulatorMessage.from_datum(_DuckDatum())
    assert (m.value, m.keys, m.id, m.headers) == (b"duck", ["dk"], "", {"h": "1"})
    assert type(m.event_time) is UTCDateTime and naive_as_utc_to_ms(m.event_time) == ET_MS
    assert AccumulatorMessage.from_datum(MapStreamDatum(["k"], b"v", ET, WM)).id == ""


def test_accumulator_to_drop_with_and_without_datum() -> None:
    plain = AccumulatorMessage.to_drop()
    assert (plain.value, plain.keys, plain.tags) == (b"", [], [DROP])
    assert plain.watermark is None and plain.event_time is None and plain.id == ""
    datum = AccumulatorDatum(["k"], b"v", ET, WM, "i")
    drop = AccumulatorMessage.to_drop(datum)
    assert (drop.value, drop.keys, drop.tags) == (b"", [], [DROP])
    assert drop.event_time == ET and drop.watermark == WM
    assert drop._times == (drop.event_time, drop.watermark)


def test_accumulator_message_equality_and_repr() -> None:
    a = AccumulatorMessage(b"v", ["k"], None, WM, ET, {"h": "1"}, "i")
    assert a == AccumulatorMessage(b"v", ["k"], [], _naive(WM_MS), ET, {"h": "1"}, "i")
    assert a != AccumulatorMessage(b"v", ["k"], None, WM, ET, {"h": "1"}, "j")
    assert a != AccumulatorMessage(b"v", ["k"], None, None, ET, {"h": "1"}, "i")
    assert repr(AccumulatorMessage(b"v")) == (
        "Message(value=b'v', keys=[], tags=[], watermark=None, event_time=None, headers={}, id='')"
    )


def test_messages_sequence_behaviour() -> None:
    a, b = StreamMessage(b"a"), StreamMessage(b"b")
    msgs = Messages(a)
    msgs.append(b)
    assert isinstance(msgs, Sequence)
    assert len(msgs) == 2 and list(msgs) == [a, b]
    assert msgs[0] is a and msgs[-1] is b
    assert b in msgs
    with pytest.raises(IndexError):
        msgs[2]
    assert str(msgs) == repr(msgs) == "[" + repr(a) + ", " + repr(b) + "]"
    assert len(Messages()) == 0 and str(Messages()) == "[]"


def test_messages_refuses_slicing() -> None:
    with pytest.raises(TypeError) as info:
        Messages(StreamMessage(b"a"))[0:1]
    assert str(info.value) == "Slicing is not supported for Messages"


def test_messages_items_is_deprecated() -> None:
    msgs = Messages(StreamMessage(b"a"))
    with pytest.warns(DeprecationWarning, match="Using items is deprecated"):
        items = msgs.items()
    assert items == [StreamMessage(b"a")]


# --------------------------------------------------------------------------------- windows


def test_interval_window_and_metadata() -> None:
    window = IntervalWindow(_naive(0), datetime(1970, 1, 1, 2, 1, tzinfo=PLUS2))
    assert type(window.start) is UTCDateTime and window.start.tzinfo is UTC
    assert (naive_as_utc_to_ms(window.start), naive_as_utc_to_ms(window.end)) == (0, 60_000)
    assert window == IntervalWindow(utc_from_ms(0), utc_from_ms(60_000))
    assert hash(window) == hash(IntervalWindow(utc_from_ms(0), utc_from_ms(60_000)))
    assert window != IntervalWindow(utc_from_ms(0), utc_from_ms(1))
    md = Metadata(window)
    assert md.interval_window is window
    assert md == Metadata(IntervalWindow(utc_from_ms(0), utc_from_ms(60_000)))
    assert "IntervalWindow(start=" in repr(md)
    with pytest.raises(TypeError, match="for IntervalWindow.start"):
        IntervalWindow(0, ET)  # type: ignore[arg-type]


def test_reduce_window() -> None:
    w = reducestreamer.ReduceWindow(ET, WM)
    assert (w.start, w.end, w.slot) == (ET, WM, "")
    assert w.window == IntervalWindow(ET, WM)
    assert ReduceWindow(ET, WM, "slot-0").slot == "slot-0"
    assert w == ReduceWindow(_naive(ET_MS), WM) and w != ReduceWindow(ET, WM, "x")
    assert hash(w) == hash(ReduceWindow(ET, WM))


def test_keyed_window_default_keys_are_not_shared() -> None:
    first = accumulator.KeyedWindow(ET, WM)
    first.keys.append("leak")
    assert accumulator.KeyedWindow(ET, WM).keys == []
    keys = ["k1", "k2"]
    w = KeyedWindow(ET, WM, "slot-0", keys)
    assert w.keys is keys
    assert (w.start, w.end, w.slot, w.window) == (ET, WM, "slot-0", IntervalWindow(ET, WM))
    assert w == KeyedWindow(ET, WM, "slot-0", ["k1", "k2"]) != KeyedWindow(ET, WM, "slot-0")
    assert "keys=['k1', 'k2']" in repr(w)


# ---------------------------------------------------------------------- NonBlockingIterator


def test_non_blocking_iterator_reads_until_eof() -> None:
    async def roundtrip() -> list[Any]:
        output: NonBlockingIterator[Any] = NonBlockingIterator()
        for item in ("a", StreamMessage(b"b"), 3):
            await output.put(item)
        await output.put(STREAM_EOF)
        await output.put("after eof")
        return [item async for item in output.read_iterator()]

    assert STREAM_EOF == "EOF"
    assert asyncio.run(roundtrip()) == ["a", StreamMessage(b"b"), 3]


def test_non_blocking_iterator_put_lets_the_consumer_run() -> None:
    seen: list[tuple[str, int]] = []

    async def consume(output: NonBlockingIterator[int]) -> None:
        async for item in output.read_iterator():
            seen.append(("got", item))

    async def produce() -> None:
        output: NonBlockingIterator[int] = NonBlockingIterator()
        consumer = asyncio.create_task(consume(output))
        await asyncio.sleep(0)
        for i in range(3):  # no awaits besides put: put itself must yield
            seen.append(("put", i))
            await output.put(i)
        await output.put(STREAM_EOF)  # type: ignore[arg-type]
        await consumer

    asyncio.run(produce())
    assert seen == [("put", 0), ("got", 0), ("put", 1), ("got", 1), ("put", 2), ("got", 2)]


# -------------------------------------------------------------------------------- handlers


@pytest.mark.parametrize("abc", [MapStreamer, ReduceStreamer, Accumulator, Mapper, Reducer])
def test_handler_abcs_need_a_handler(abc: type) -> None:
    with pytest.raises(TypeError):
        abc()
    incomplete = type("Incomplete", (abc,), {})
    with pytest.raises(TypeError):
        incomplete()


class Doubler(mapper.Mapper):
    def handler(self, keys: list[str], datum: mapper.Datum) -> mapper.Messages:
        return mapper.Messages(mapper.Message(datum.value * 2, keys=keys))


class CountReducer(reducer.Reducer):
    async def handler(
        self, keys: list[str], datums: AsyncIterable[reducer.Datum], md: reducer.Metadata
    ) -> reducer.Messages:
        count = 0
        async for _ in datums:
            count += 1
        return reducer.Messages(reducer.Message(str(count).encode(), keys=keys))


async def _aiter(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def _drain(output: NonBlockingIterator[Any]) -> list[Any]:
    await output.put(STREAM_EOF)
    return [item async for item in output.read_iterator()]


def test_page_map_stream_example_runs() -> None:
    handler = FlatMapStream()
    datum = mapstreamer.Datum(["k"], b"a,b,c", ET, WM)

    async def run() -> list[mapstreamer.Message]:
        return [m async for m in handler(["k"], datum)]

    assert [m.value for m in asyncio.run(run())] == [b"a", b"b", b"c"]


def test_page_reduce_stream_example_runs() -> None:
    handler = ReduceCounter(0)
    md = reducestreamer.Metadata(reducestreamer.IntervalWindow(ET, WM))
    datums = [reducestreamer.Datum(["k"], b"x", ET, WM) for _ in range(25)]

    async def run() -> list[reducestreamer.Message]:
        output: NonBlockingIterator[reducestreamer.Message] = NonBlockingIterator()
        await handler(["k"], _aiter(datums), output, md)
        return await _drain(output)

    assert [m.value for m in asyncio.run(run())] == [b"counter:21", b"counter:4"]


def test_page_accumulator_example_sorts_with_naive_start_watermark() -> None:
    handler = StreamSorter(0)

    def datum(event_s: int, wm_s: int) -> accumulator.Datum:
        # naive event times, aware watermarks: both compare as UTC
        event_time = _naive(ET_MS + event_s * 1000)
        return accumulator.Datum(["k"], b"", event_time, ET + timedelta(seconds=wm_s), str(event_s))

    # 5 arrives after the watermark passed it: the example emits it late, out of order
    inputs = [datum(30, 0), datum(10, 0), datum(20, 15), datum(5, 25), datum(40, 35)]

    async def run() -> list[accumulator.Message]:
        output: NonBlockingIterator[accumulator.Message] = NonBlockingIterator()
        await handler(_aiter(inputs), output)
        return await _drain(output)

    outputs = asyncio.run(run())
    assert [m.id for m in outputs] == ["10", "20", "5", "30"]
    assert all(type(m.event_time) is UTCDateTime for m in outputs)
    assert [d.id for d in handler.sorted_buffer] == ["40"]
    assert handler.latest_wm == ET + timedelta(seconds=35)


def test_mapper_and_reducer_handlers_run() -> None:
    assert [m.value for m in Doubler()(["k"], mapper.Datum(["k"], b"ab", ET, WM))] == [b"abab"]
    md = reducer.Metadata(reducer.IntervalWindow(ET, WM))
    datums = [reducer.Datum(["k"], b"x", ET, WM)] * 3
    result = asyncio.run(CountReducer()(["k"], _aiter(datums), md))
    assert [m.value for m in result] == [b"3"]


# --------------------------------------------------------------------------------- servers


async def map_stream_handler(_: list[str], datum: mapstreamer.Datum) -> AsyncIterator[Any]:
    yield mapstreamer.Message(datum.value)


async def reduce_handler(keys: list[str], datums: Any, output: Any, md: Any) -> None:
    await output.put(reducestreamer.Message(b"x", keys=keys))


async def accumulator_handler(datums: Any, output: Any) -> None:
    async for datum in datums:
        await output.put(accumulator.Message.from_datum(datum))


def test_map_stream_server_settings() -> None:
    def shutdown(loop: Any) -> None:
        return None

    server = MapStreamAsyncServer(map_stream_handler, shutdown_callback=shutdown)
    assert server.kind == "map_stream"
    assert server.map_stream_instance is map_stream_handler
    assert server.sock_path == "unix:///var/run/numaflow/mapstream.sock"
    assert server.server_info_file == "/var/run/numaflow/mapper-server-info"
    assert server.max_message_size == 64 * 1024 * 1024
    assert server.max_threads == 4
    assert server.shutdown_callback is shutdown
    assert server.make_handler() is map_stream_handler
    custom = MapStreamAsyncServer(
        map_stream_handler, sock_path="/tmp/x.sock", max_message_size=10, max_threads=99
    )
    assert (custom.sock_path, custom.max_message_size, custom.max_threads) == (
        "unix:///tmp/x.sock",
        10,
        16,
    )


def test_map_stream_server_takes_an_instance() -> None:
    instance = FlatMapStream()
    server = MapStreamAsyncServer(instance)
    assert server.make_handler() == instance.handler
    assert server.make_handler() is server.make_handler()


def test_map_stream_server_rejects_classes_and_non_callables() -> None:
    with pytest.raises(TypeError, match="pass an instance of the MapStreamer subclass"):
        MapStreamAsyncServer(FlatMapStream)
    with pytest.raises(TypeError, match="expected a function or a MapStreamer instance"):
        MapStreamAsyncServer("not callable")


class PerKeyCase(NamedTuple):
    """A server whose handler is a function or a class instantiated per key."""

    server_cls: type
    kind: str
    handler_cls: type
    init_args: tuple[Any, ...]
    function: Any
    attribute: str
    base_name: str
    sock_file: str
    info_file: str


PER_KEY_CASES = [
    PerKeyCase(
        ReduceStreamAsyncServer,
        "reduce_stream",
        ReduceCounter,
        (7,),
        reduce_handler,
        "reduce_stream_handler",
        "ReduceStreamer",
        "reducestream.sock",
        "reducestreamer-server-info",
    ),
    PerKeyCase(
        AccumulatorAsyncServer,
        "accumulate",
        StreamSorter,
        (0,),
        accumulator_handler,
        "accumulator_handler",
        "Accumulator",
        "accumulator.sock",
        "accumulator-server-info",
    ),
    PerKeyCase(
        ReduceAsyncServer,
        "reduce",
        CountReducer,
        (),
        reduce_handler,
        "reducer_handler",
        "Reducer",
        "reduce.sock",
        "reducer-server-info",
    ),
]


@pytest.fixture(params=PER_KEY_CASES, ids=lambda case: case.kind)
def per_key(request: pytest.FixtureRequest) -> PerKeyCase:
    return request.param


def test_per_key_server_shares_a_function(per_key: PerKeyCase) -> None:
    server = per_key.server_cls(per_key.function)
    assert server.kind == per_key.kind
    assert getattr(server, per_key.attribute) is per_key.function
    assert server.init_args == () and server.init_kwargs == {}
    assert server.sock_path == f"unix:///var/run/numaflow/{per_key.sock_file}"
    assert server.server_info_file == f"/var/run/numaflow/{per_key.info_file}"
    assert server.max_threads == 4 and server.shutdown_callback is None
    assert server.make_handler() is per_key.function


def test_per_key_server_rejects_a_function_with_init_args(per_key: PerKeyCase) -> None:
    for kwargs in ({"init_args": (1,)}, {"init_kwargs": {"a": 1}}):
        with pytest.raises(TypeError) as info:
            per_key.server_cls(per_key.function, **kwargs)
        assert str(info.value) == "Cannot pass function handler with init args or kwargs"


def test_per_key_server_builds_a_new_instance_per_key(per_key: PerKeyCase) -> None:
    server = per_key.server_cls(per_key.handler_cls, init_args=per_key.init_args)
    assert getattr(server, per_key.attribute) is per_key.handler_cls
    assert server.init_args == per_key.init_args
    first, second = server.make_handler(), server.make_handler()
    assert type(first.__self__) is per_key.handler_cls
    assert first.__func__ is per_key.handler_cls.handler
    assert first.__self__ is not second.__self__
    if per_key.handler_cls is ReduceCounter:
        assert first.__self__.counter == 7


def test_per_key_server_rejects_an_instance(per_key: PerKeyCase) -> None:
    instance = per_key.handler_cls(*per_key.init_args)
    with pytest.raises(TypeError) as info:
        per_key.server_cls(instance)
    assert str(info.value) == (
        f"Invalid Class Type {instance}: "
        f"Please make sure the class type is passed, and it is a subclass of {per_key.base_name}"
    )


def test_per_key_server_rejects_other_classes_and_callables(per_key: PerKeyCase) -> None:
    for wrong in (FlatMapStream, int, Doubler, functools.partial(per_key.function)):
        with pytest.raises(TypeError, match=f"it is a subclass of {per_key.base_name}$"):
            per_key.server_cls(wrong)


def test_handler_factory_takes_bare_per_key_handlers(per_key: PerKeyCase) -> None:
    assert handler_factory(per_key.function, per_key.kind)() is per_key.function
    made = handler_factory(per_key.handler_cls, per_key.kind, per_key.init_args)()
    assert type(made.__self__) is per_key.handler_cls


def test_init_kwargs_are_passed_to_the_class() -> None:
    server = ReduceStreamAsyncServer(ReduceCounter, init_kwargs={"counter": 5})
    assert server.init_kwargs == {"counter": 5}
    assert server.make_handler().__self__.counter == 5


def _fake_pynumaflow_abc(name: str, module: str) -> type:
    fake_abc = type(name, (), {"handler": lambda self, *args: None})
    fake_abc.__module__ = module
    return fake_abc


def test_pynumaflow_abcs_are_recognised_by_name_and_module() -> None:
    fake = _fake_pynumaflow_abc("Accumulator", "pynumaflow.accumulator._dtypes")
    user_class = type("UserAccumulator", (fake,), {})
    server = AccumulatorAsyncServer(user_class)
    assert type(server.make_handler().__self__) is user_class

    impostor = type("UserAccumulator", (_fake_pynumaflow_abc("Accumulator", "mylib.abc"),), {})
    with pytest.raises(TypeError, match="subclass of Accumulator"):
        AccumulatorAsyncServer(impostor)
    wrong_name = _fake_pynumaflow_abc("Reducer", "pynumaflow.reducer._dtypes")
    with pytest.raises(TypeError, match="subclass of Accumulator"):
        AccumulatorAsyncServer(type("UserReducer", (wrong_name,), {}))

    fake_streamer = _fake_pynumaflow_abc("MapStreamer", "pynumaflow.mapstreamer._dtypes")
    instance = type("UserStreamer", (fake_streamer,), {})()
    assert MapStreamAsyncServer(instance).make_handler() == instance.handler


def test_map_servers() -> None:
    doubler = Doubler()
    sync_server = MapServer(doubler, max_threads=8)
    assert (sync_server.kind, sync_server.mapper_instance, sync_server.max_threads) == (
        "map",
        doubler,
        8,
    )
    assert sync_server.sock_path == "unix:///var/run/numaflow/map.sock"
    assert sync_server.make_handler() == doubler.handler
    assert not hasattr(sync_server, "shutdown_callback")

    async def async_map(keys: list[str], datum: Any) -> mapper.Messages:
        return mapper.Messages()

    async_server = MapAsyncServer(async_map)
    assert async_server.kind == "map" and async_server.shutdown_callback is None
    assert async_server.make_handler() is async_map
    with pytest.raises(TypeError, match="pass an instance of the Mapper subclass"):
        MapServer(Doubler)


def test_handler_factory_checks_the_kind() -> None:
    server = AccumulatorAsyncServer(accumulator_handler)
    assert handler_factory(server, "accumulate") is server.make_handler
    with pytest.raises(TypeError, match="expected a 'reduce_stream' server"):
        handler_factory(server, "reduce_stream")
    with pytest.raises(TypeError, match="given to the server"):
        handler_factory(server, "accumulate", (1,))
    with pytest.raises(ValueError, match="unknown UDF kind 'session'"):
        handler_factory(accumulator_handler, "session")


def test_handler_factories_pickle() -> None:
    for server in (
        ReduceStreamAsyncServer(ReduceCounter, init_args=(2,)),
        MapStreamAsyncServer(map_stream_handler),
        MapServer(Doubler()),
    ):
        factory = pickle.loads(pickle.dumps(server.make_handler))
        assert callable(factory())
    clone = pickle.loads(pickle.dumps(ReduceStreamAsyncServer(ReduceCounter, init_args=(2,))))
    assert clone.make_handler().__self__.counter == 2


def test_start_hands_the_server_to_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[Any] = []
    monkeypatch.setattr(serve_module, "serve", served.append)
    server = AccumulatorAsyncServer(StreamSorter, init_args=(0,))
    server.start()
    assert served == [server]


# What pynumaflow's servers take after the handler, flowspark's as keyword-only options.
SERVERS = [
    ("mapstreamer", "MapStreamAsyncServer"),
    ("batchmapper", "BatchMapAsyncServer"),
    ("reducestreamer", "ReduceStreamAsyncServer"),
    ("accumulator", "AccumulatorAsyncServer"),
    ("mapper", "MapServer"),
    ("mapper", "MapAsyncServer"),
    ("reducer", "ReduceAsyncServer"),
    ("sinker", "SinkServer"),
    ("sinker", "SinkAsyncServer"),
    ("sourcetransformer", "SourceTransformServer"),
    ("sourcetransformer", "SourceTransformAsyncServer"),
    ("sourcetransformer", "SourceTransformMultiProcServer"),
    ("sideinput", "SideInputServer"),
]


def any_handler(*args: Any) -> None:
    """A function: what every server takes as its handler."""


@pytest.mark.parametrize(("module", "name"), SERVERS)
def test_servers_take_pynumaflows_keywords_with_its_defaults(module: str, name: str) -> None:
    theirs = getattr(importlib.import_module(f"pynumaflow.{module}"), name)
    mine = getattr(importlib.import_module(f"flowspark.{module}"), name)
    assert sorted(parameter_names(mine)) == sorted(inspect.signature(theirs).parameters)
    assert server_settings(mine(any_handler)) == server_settings(theirs(any_handler))
    given = {"sock_path": "/tmp/u.sock", "max_message_size": 5, "max_threads": 99}
    given["server_info_file"] = "/tmp/u-info"
    assert server_settings(mine(any_handler, **given)) == server_settings(
        theirs(any_handler, **given)
    )
    unexpected = f"^{name}.__init__\\(\\) got an unexpected keyword argument 'sock'$"
    with pytest.raises(TypeError, match=unexpected):
        mine(any_handler, sock="/tmp/u.sock")
    if "shutdown_callback" not in inspect.signature(theirs).parameters:
        with pytest.raises(TypeError, match="unexpected keyword argument 'shutdown_callback'"):
            mine(any_handler, shutdown_callback=print)


# -------------------------------------------------------------------------- public modules

# What pynumaflow 0.14 exports and flowspark does not (see each module's docstring).
NOT_ON_FLOWSPARK = {
    "mapper": {"MapMultiprocServer", "UserMetadata", "SystemMetadata"},
    "sinker": {"UserMetadata", "SystemMetadata"},
    "sourcetransformer": {"UserMetadata", "SystemMetadata"},
}
SDK_MODULES = [
    "mapstreamer",
    "batchmapper",
    "reducestreamer",
    "accumulator",
    "mapper",
    "reducer",
    "sinker",
    "sourcetransformer",
]


@pytest.mark.parametrize("name", SDK_MODULES)
def test_public_modules_export_pynumaflows_names(name: str) -> None:
    theirs = importlib.import_module(f"pynumaflow.{name}").__all__
    module = importlib.import_module(f"flowspark.{name}")
    assert sorted(module.__all__) == sorted(set(theirs) - NOT_ON_FLOWSPARK.get(name, set()))
    assert all(getattr(module, n) is not None for n in module.__all__)
    if "DROP" in module.__all__:
        assert module.DROP == "U+005C__DROP__"


def test_public_module_types_are_the_shared_ones() -> None:
    assert mapstreamer.Datum is MapStreamDatum and reducestreamer.Datum is ReduceStreamDatum
    assert accumulator.Datum is AccumulatorDatum and accumulator.Message is AccumulatorMessage
    assert mapper.Datum is reducer.Datum is MapStreamDatum
    assert accumulator.IntervalWindow is reducestreamer.IntervalWindow is reducer.IntervalWindow


def test_reducestreamer_has_no_messages_like_pynumaflow() -> None:
    with pytest.raises(ImportError):
        from flowspark.reducestreamer import Messages  # noqa: F401
