"""flowspark's one time module (``flowspark.shared.times``): the epoch, and datetimes
and durations in milliseconds, under its two contracts for naive datetimes."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone, tzinfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowspark.api.udf.times import UTC_EPOCH, UTCDateTime, utc_from_ms, utc_from_us
from flowspark.shared.times import (
    EPOCH,
    ONE_MS,
    ONE_US,
    assume_utc,
    aware_to_ms,
    datetime_from_ms,
    duration_ms,
    naive_as_utc_to_ms,
)

ALIGN = datetime(2022, 1, 1, tzinfo=UTC)
ALIGN_MS = 1_640_995_200_000
PLUS_TWO = timezone(timedelta(hours=2))
MINUS_FIVE = timezone(timedelta(hours=-5))


class _NoOffset(tzinfo):
    """A zone that gives no UTC offset: a datetime in it counts as naive."""

    def utcoffset(self, dt: datetime | None) -> None:
        return None


# -- the epoch ----------------------------------------------------------------------------


def test_the_epoch_is_aware_utc_1970_in_both_types():
    assert datetime(1970, 1, 1, tzinfo=UTC) == EPOCH and EPOCH.tzinfo is UTC
    assert type(EPOCH) is datetime
    assert type(UTC_EPOCH) is UTCDateTime and UTC_EPOCH == EPOCH and UTC_EPOCH.tzinfo is UTC
    assert (timedelta(milliseconds=1), timedelta(microseconds=1)) == (ONE_MS, ONE_US)


# -- aware_to_ms: the clocks' contract ----------------------------------------------------


def test_aware_to_ms_of_the_epoch_and_a_known_date():
    assert aware_to_ms(EPOCH) == 0
    assert aware_to_ms(ALIGN) == ALIGN_MS


def test_aware_to_ms_honours_the_utc_offset_of_aware_datetimes():
    assert aware_to_ms(datetime(2022, 1, 1, 2, tzinfo=PLUS_TWO)) == ALIGN_MS
    assert aware_to_ms(datetime(2021, 12, 31, 19, tzinfo=MINUS_FIVE)) == ALIGN_MS


@pytest.mark.parametrize("naive", [datetime(2022, 1, 1), datetime(2022, 1, 1, tzinfo=_NoOffset())])
def test_aware_to_ms_rejects_naive_datetimes_with_a_hint_about_timezones(naive):
    with pytest.raises(ValueError, match="timezone"):
        aware_to_ms(naive)


@pytest.mark.parametrize("bad", [0, 1.5, "2022-01-01", None, ALIGN.date()])
def test_aware_to_ms_rejects_non_datetimes_with_a_type_error(bad):
    with pytest.raises(TypeError, match="the clock needs a datetime"):
        aware_to_ms(bad)


def test_aware_to_ms_floors_sub_millisecond_times_also_before_the_epoch():
    assert aware_to_ms(ALIGN + timedelta(microseconds=999)) == ALIGN_MS
    assert aware_to_ms(ALIGN - timedelta(microseconds=1)) == ALIGN_MS - 1
    assert aware_to_ms(EPOCH - timedelta(microseconds=1)) == -1
    assert aware_to_ms(EPOCH - timedelta(microseconds=1_001)) == -2
    assert aware_to_ms(datetime(1, 1, 1, tzinfo=UTC)) == -62_135_596_800_000


def test_aware_to_ms_takes_utc_datetimes():
    assert aware_to_ms(utc_from_ms(ALIGN_MS + 7)) == ALIGN_MS + 7


# -- naive_as_utc_to_ms: Numaflow's contract ----------------------------------------------


def test_naive_as_utc_to_ms_takes_naive_as_utc_and_converts_aware():
    assert naive_as_utc_to_ms(ALIGN) == ALIGN_MS
    assert naive_as_utc_to_ms(datetime(2022, 1, 1)) == ALIGN_MS
    assert naive_as_utc_to_ms(datetime(2022, 1, 1, tzinfo=_NoOffset())) == ALIGN_MS
    assert naive_as_utc_to_ms(datetime(2022, 1, 1, 2, tzinfo=PLUS_TWO)) == ALIGN_MS
    assert naive_as_utc_to_ms(datetime(2021, 12, 31, 19, tzinfo=MINUS_FIVE)) == ALIGN_MS
    assert naive_as_utc_to_ms(utc_from_ms(-5)) == -5


def test_naive_as_utc_to_ms_floors_also_before_the_epoch():
    assert naive_as_utc_to_ms(datetime(1970, 1, 1, 0, 0, 0, 999, tzinfo=UTC)) == 0
    assert naive_as_utc_to_ms(datetime(1970, 1, 1, 0, 0, 0, 1_999)) == 1
    assert naive_as_utc_to_ms(datetime(1969, 12, 31, 23, 59, 59, 999999)) == -1
    assert naive_as_utc_to_ms(datetime(1969, 12, 31, 23, 59, 59, 998_001)) == -2
    assert naive_as_utc_to_ms(datetime(1, 1, 1)) == -62_135_596_800_000


@pytest.mark.parametrize("bad", [ALIGN_MS, "2022-09-12", date(2022, 9, 12), None])
def test_naive_as_utc_to_ms_rejects_non_datetimes(bad):
    with pytest.raises(TypeError, match="to_ms needs a datetime"):
        naive_as_utc_to_ms(bad)


def test_the_two_contracts_agree_on_aware_datetimes_and_part_on_naive_ones():
    aware = datetime(2022, 1, 1, 2, 0, 0, 1_500, tzinfo=PLUS_TWO)
    assert aware_to_ms(aware) == naive_as_utc_to_ms(aware) == ALIGN_MS + 1
    naive = aware.replace(tzinfo=None)
    assert naive_as_utc_to_ms(naive) == ALIGN_MS + 2 * 3_600_000 + 1
    with pytest.raises(ValueError):
        aware_to_ms(naive)


def test_assume_utc_attaches_utc_only_to_naive_datetimes():
    assert assume_utc(datetime(2022, 1, 1)) == ALIGN
    assert assume_utc(datetime(2022, 1, 1, tzinfo=_NoOffset())).tzinfo is UTC
    plus_two = datetime(2022, 1, 1, tzinfo=PLUS_TWO)
    assert assume_utc(plus_two) is plus_two
    assert assume_utc(ALIGN) is ALIGN
    assert assume_utc(5) == 5 and assume_utc(None) is None


# -- from milliseconds / microseconds ---------------------------------------------------


def test_datetime_from_ms_is_plain_aware_utc():
    dt = datetime_from_ms(ALIGN_MS + 1_500)
    assert dt == ALIGN + timedelta(seconds=1.5)
    assert type(dt) is datetime and dt.tzinfo is UTC
    assert datetime_from_ms(-1) == datetime(1969, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)


def test_utc_from_ms_and_us_are_utc_datetimes():
    assert type(utc_from_ms(0)) is UTCDateTime and utc_from_ms(0) == EPOCH
    assert utc_from_us(-1) == datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
    assert type(utc_from_us(1)) is UTCDateTime and utc_from_us(1).tzinfo is UTC
    assert utc_from_us(1_500) == utc_from_ms(1) + timedelta(microseconds=500)


@given(st.integers(min_value=-62_000_000_000_000, max_value=250_000_000_000_000))
def test_ms_round_trip(ms):
    assert aware_to_ms(datetime_from_ms(ms)) == ms
    assert naive_as_utc_to_ms(utc_from_ms(ms)) == ms


@given(
    st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
    )
)
def test_datetime_round_trip_up_to_the_millisecond(dt):
    back = datetime_from_ms(aware_to_ms(dt))
    assert back == dt.replace(microsecond=dt.microsecond // 1000 * 1000)


# -- durations ----------------------------------------------------------------------------


def test_duration_ms_floors_whole_milliseconds():
    assert duration_ms(timedelta(seconds=2)) == 2_000
    assert duration_ms(timedelta(microseconds=999)) == 0
    assert duration_ms(timedelta(milliseconds=1, microseconds=999)) == 1
    assert duration_ms(timedelta(microseconds=-1)) == -1
    assert duration_ms(timedelta(0)) == 0
    assert duration_ms(timedelta(days=1)) == 86_400_000
