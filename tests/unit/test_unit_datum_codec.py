"""Chunks of Numaflow datums travel as columns (tag ``N``) and come back equal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from flowspark.accumulator import Datum as AccumulatorDatum
from flowspark.api.udf.times import UTCDateTime
from flowspark.api.udf.types import Datum
from flowspark.runtime.codec import decode_items, encode_items

T0 = datetime(2024, 1, 1, tzinfo=UTC)

datums = st.builds(
    lambda keys, value, us, wm_us, headers, id_, tags: Datum(
        keys,
        value,
        T0 + timedelta(microseconds=us),
        T0 + timedelta(microseconds=wm_us),
        headers,
        id=id_,
        tags=tags,
    ),
    st.lists(st.text(max_size=5), max_size=3),
    st.binary(max_size=20),
    st.integers(-(10**12), 10**13),
    st.integers(-(10**12), 10**13),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
    st.text(max_size=6),
    st.lists(st.text(max_size=4), max_size=2),
)


@given(st.lists(datums, min_size=1, max_size=80))
def test_datum_chunks_round_trip_exactly(items):
    data = encode_items(items)
    back = list(decode_items(data))
    assert back == items
    assert all(type(d.event_time) is UTCDateTime for d in back)
    if len(items) >= 1:
        assert data[:1] == b"N"


def test_a_chunk_keeps_its_datum_class_and_falls_back_when_mixed():
    acc = [AccumulatorDatum(["k"], b"v", T0, T0, "id1")]
    back = decode_items(encode_items(acc))
    assert type(back[0]) is AccumulatorDatum and back[0].id == "id1"
    mixed = [acc[0], Datum(["k"], b"v", T0, T0)]
    assert encode_items(mixed)[:1] == b"P"
    assert decode_items(encode_items(mixed)) == mixed
