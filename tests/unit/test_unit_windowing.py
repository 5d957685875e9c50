"""Clock and window logic (`flowspark.runtime.windowing`) and the window configs.

Pure Python, no Spark. Times are milliseconds since the epoch; ``now`` is the
micro-batch's system time.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowspark.api.window import (
    EventClockConfig,
    SessionWindow,
    SlidingWindow,
    SystemClockConfig,
    TumblingWindow,
    WindowConfig,
)
from flowspark.runtime.windowing import (
    EOF_MS,
    MAX_MS,
    MIN_MS,
    NUMAFLOW,
    ClockLogic,
    GlobalWindower,
    NumaflowFixedWindower,
    NumaflowSlidingWindower,
    RegisteredWindower,
    SessionWindower,
    SlidingWindower,
    TumblingWindower,
    Windower,
    build_clock,
    build_windower,
    windower_types,
)
from flowspark.shared.times import datetime_from_ms
from tests.event_times import ALIGN, ALIGN_MS


def event_clock(wait_s: float = 0) -> ClockLogic:
    """An event clock whose values are their own time in ms."""
    return ClockLogic(EventClockConfig(datetime_from_ms, timedelta(seconds=wait_s)))


# -- SlidingWindower --------------------------------------------------------------------


def test_tumbling_windows_are_back_to_back_start_inclusive_end_exclusive():
    w = build_windower(TumblingWindow(length=timedelta(seconds=10), align_to=ALIGN))
    assert w == TumblingWindower(10_000, ALIGN_MS)
    assert w.assign(ALIGN_MS) == [(ALIGN_MS, ALIGN_MS + 10_000)]
    assert w.assign(ALIGN_MS + 9_999) == [(ALIGN_MS, ALIGN_MS + 10_000)]
    assert w.assign(ALIGN_MS + 10_000) == [(ALIGN_MS + 10_000, ALIGN_MS + 20_000)]


def test_tumbling_window_defaults_to_epoch_alignment():
    w = build_windower(TumblingWindow(length=timedelta(minutes=1)))
    assert w.assign(90_000) == [(60_000, 120_000)]


def test_overlapping_sliding_windows_give_each_item_length_over_offset_windows():
    w = SlidingWindower(length=10, offset=5, align=0)
    assert w.assign(0) == [(-5, 5), (0, 10)]
    assert w.assign(4) == [(-5, 5), (0, 10)]
    assert w.assign(5) == [(0, 10), (5, 15)]
    assert w.assign(12) == [(5, 15), (10, 20)]


def test_uneven_overlap_gives_a_varying_number_of_windows():
    w = SlidingWindower(length=10, offset=3, align=0)
    assert w.assign(0) == [(-9, 1), (-6, 4), (-3, 7), (0, 10)]
    assert w.assign(1) == [(-6, 4), (-3, 7), (0, 10)]


def test_gapped_sliding_windows_leave_items_in_the_gaps_without_a_window():
    w = SlidingWindower(length=5, offset=10, align=0)
    assert w.assign(0) == [(0, 5)]
    assert w.assign(4) == [(0, 5)]
    assert w.assign(5) == []
    assert w.assign(9) == []
    assert w.assign(10) == [(10, 15)]
    assert w.assign(-3) == []
    assert w.assign(-10) == [(-10, -5)]


def test_items_before_align_to_and_negative_times_get_windows_too():
    w = SlidingWindower(length=10, offset=10, align=100)
    assert w.assign(99) == [(90, 100)]
    assert w.assign(-1) == [(-10, 0)]
    assert w.assign(-10) == [(-10, 0)]
    assert w.assign(-11) == [(-20, -10)]


def test_sliding_window_config_builds_its_windower():
    cfg = SlidingWindow(length=timedelta(seconds=10), offset=timedelta(seconds=5), align_to=ALIGN)
    assert build_windower(cfg) == SlidingWindower(10_000, 5_000, ALIGN_MS)


def test_session_window_config_builds_its_windower():
    assert build_windower(SessionWindow(gap=timedelta(seconds=3))) == SessionWindower(3_000)


def test_build_windower_rejects_other_objects():
    with pytest.raises(TypeError, match="window_config must be"):
        build_windower(timedelta(seconds=1))


@given(
    length=st.integers(1, 50),
    offset=st.integers(1, 50),
    align=st.integers(-200, 200),
    t=st.integers(-500, 500),
)
def test_assign_returns_exactly_the_windows_containing_t(length, offset, align, t):
    w = SlidingWindower(length, offset, align)
    got = w.assign(t)
    # Every returned window is a real window of the grid and contains t.
    for start, end in got:
        assert (start - align) % offset == 0
        assert end - start == length
        assert start <= t < end
    # Every window of the grid that contains t is returned, in start order.
    expected = [
        (align + k * offset, align + k * offset + length)
        for k in range(-1000, 1000)
        if align + k * offset <= t < align + k * offset + length
    ]
    assert got == expected


# -- ClockLogic: event clock -------------------------------------------------------------


def test_event_clock_watermark_is_min_before_any_item():
    clock = event_clock()
    assert clock.watermark(None, now=0) == MIN_MS
    assert clock.watermark(None, now=123_456) == MIN_MS


def test_event_clock_item_time_comes_from_the_getter():
    clock = ClockLogic(EventClockConfig(lambda v: v["time"], timedelta(0)))
    t, state = clock.time_for(None, {"time": ALIGN}, now=7)
    assert t == ALIGN_MS
    assert state == (ALIGN_MS, 7)


def test_event_clock_getter_returning_a_naive_datetime_is_rejected():
    clock = ClockLogic(EventClockConfig(lambda v: datetime(2022, 1, 1), timedelta(0)))
    with pytest.raises(ValueError, match="timezone"):
        clock.time_for(None, "x", now=0)


def test_event_clock_watermark_is_the_max_item_time_at_first():
    clock = event_clock()
    _, state = clock.time_for(None, 5_000, now=100)
    assert clock.watermark(state, now=100) == 5_000


def test_event_clock_wait_is_subtracted():
    clock = event_clock(wait_s=5)
    _, state = clock.time_for(None, 12_000, now=100)
    assert clock.watermark(state, now=100) == 7_000


def test_event_clock_advances_with_system_time_since_the_max_item():
    clock = event_clock(wait_s=5)
    _, state = clock.time_for(None, 12_000, now=100)
    assert clock.watermark(state, now=1_100) == 8_000
    assert clock.watermark(state, now=5_100) == 12_000


def test_event_clock_never_goes_back_for_older_items():
    clock = event_clock(wait_s=1)
    _, state = clock.time_for(None, 10_000, now=0)
    before = clock.watermark(state, now=500)
    t, after_state = clock.time_for(state, 2_000, now=500)
    assert t == 2_000
    assert after_state == state  # the max item and when it was seen are kept
    assert clock.watermark(after_state, now=500) == before == 9_500


def test_event_clock_newer_item_moves_the_max_and_restarts_the_system_offset():
    clock = event_clock()
    _, state = clock.time_for(None, 1_000, now=0)
    _, state = clock.time_for(state, 3_000, now=1_000)
    assert state == (3_000, 1_000)
    assert clock.watermark(state, now=1_000) == 3_000
    assert clock.watermark(state, now=1_500) == 3_500


def test_event_clock_equal_item_time_does_not_reset_seen_at():
    clock = event_clock()
    _, state = clock.time_for(None, 1_000, now=0)
    _, state2 = clock.time_for(state, 1_000, now=400)
    assert state2 == (1_000, 0)


def test_eof_makes_the_watermark_max():
    clock = event_clock(wait_s=60)
    assert clock.watermark(None, now=EOF_MS) == MAX_MS
    _, state = clock.time_for(None, 5_000, now=0)
    assert clock.watermark(state, now=EOF_MS) == MAX_MS
    assert clock.watermark(state, now=EOF_MS + 1) == MAX_MS


def test_eof_is_far_in_the_future_but_representable():
    assert datetime_from_ms(EOF_MS).year == 9000
    assert EOF_MS < MAX_MS


@pytest.mark.parametrize("wait_s", [0, 5])
@pytest.mark.parametrize("close_offset", [-20_000, 0, 1, 3_000, 60_000])
def test_wake_for_is_the_first_system_time_the_watermark_passes_close(wait_s, close_offset):
    clock = event_clock(wait_s=wait_s)
    seen_at = 1_000_000
    _, state = clock.time_for(None, 50_000, now=seen_at)
    close = 50_000 + close_offset
    wake = clock.wake_for(state, close)
    assert clock.watermark(state, wake) > close
    if clock.watermark(state, seen_at) > close:
        assert wake == seen_at + 1  # already passed when the item arrived: wake at once
    else:
        assert clock.watermark(state, wake - 1) <= close


# -- ClockLogic: system clock ---------------------------------------------------------


def test_system_clock_item_time_and_watermark_are_now():
    clock = build_clock(SystemClockConfig())
    assert clock.system
    t, state = clock.time_for(None, "anything", now=4_242)
    assert (t, state) == (4_242, None)
    assert clock.watermark(None, now=4_242) == 4_242
    assert clock.watermark(None, now=EOF_MS) == MAX_MS


def test_system_clock_wakes_just_after_close():
    clock = build_clock(SystemClockConfig())
    assert clock.wake_for(None, 10_000) == 10_001
    assert clock.watermark(None, 10_001) > 10_000
    assert not clock.watermark(None, 10_000) > 10_000


def test_build_clock_rejects_other_objects():
    with pytest.raises(TypeError, match="clock_config must be"):
        build_clock(lambda v: v)


# -- Configs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda v: TumblingWindow(length=v, align_to=ALIGN),
        lambda v: SlidingWindow(length=v, offset=timedelta(seconds=1), align_to=ALIGN),
        lambda v: SlidingWindow(length=timedelta(seconds=1), offset=v, align_to=ALIGN),
        lambda v: SessionWindow(gap=v),
    ],
    ids=["tumbling.length", "sliding.length", "sliding.offset", "session.gap"],
)
class TestDurations:
    @pytest.mark.parametrize("bad", [10, 1.5, "10s", None])
    def test_non_timedelta_is_a_type_error(self, make, bad):
        with pytest.raises(TypeError, match="must be a datetime.timedelta"):
            make(bad)

    @pytest.mark.parametrize("bad", [timedelta(0), timedelta(seconds=-1)])
    def test_non_positive_is_a_value_error(self, make, bad):
        with pytest.raises(ValueError, match="must be positive"):
            make(bad)

    def test_positive_is_accepted(self, make):
        make(timedelta(milliseconds=1))


@pytest.mark.parametrize(
    "make",
    [
        lambda a: TumblingWindow(length=timedelta(seconds=1), align_to=a),
        lambda a: SlidingWindow(timedelta(seconds=1), timedelta(seconds=1), a),
    ],
    ids=["tumbling", "sliding"],
)
def test_align_to_must_be_an_aware_datetime(make):
    with pytest.raises(ValueError, match="timezone-aware"):
        make(datetime(2022, 1, 1))
    with pytest.raises(TypeError, match="must be a datetime"):
        make("2022-01-01")


def test_event_clock_config_needs_a_callable_getter():
    with pytest.raises(TypeError, match="callable"):
        EventClockConfig("time", timedelta(0))


def test_event_clock_config_rejects_a_negative_wait():
    with pytest.raises(ValueError, match="must not be negative"):
        EventClockConfig(lambda v: v, timedelta(seconds=-1))


def test_event_clock_config_wait_must_be_a_timedelta():
    with pytest.raises(TypeError, match="timedelta"):
        EventClockConfig(lambda v: v, 5)


def test_event_clock_config_wait_defaults_to_zero_and_zero_is_allowed():
    assert EventClockConfig(lambda v: v).wait_for_system_duration == timedelta(0)
    assert EventClockConfig(lambda v: v, timedelta(0)).wait_for_system_duration == timedelta(0)


def test_configs_are_frozen():
    cfg = TumblingWindow(length=timedelta(seconds=1))
    with pytest.raises(AttributeError):
        cfg.length = timedelta(seconds=2)


# -- The windower protocol ----------------------------------------------------------------


def _satisfies_protocol(w: Windower) -> None:
    """Every windower answers the whole protocol (a structural check)."""
    assert isinstance(type(w).merges, bool)
    for name in ("assign", "merge", "close_at", "late"):
        assert callable(getattr(w, name)), name
    assert w.fast_grid is None or len(w.fast_grid) == 3


def test_tumbling_windower_protocol():
    w = TumblingWindower(length=10, align=3)
    _satisfies_protocol(w)
    assert not w.merges and w.fast_grid == (10, 10, 3)
    assert w.assign(3) == [(3, 13)] and w.assign(12) == [(3, 13)] and w.assign(2) == [(-7, 3)]
    assert w.merge((3, 13), [(3, 13), (13, 23)]) == ((3, 13), [])
    assert w.close_at((3, 13)) == 13
    assert not w.late((3, 13), 13)  # the watermark at the end: still on time
    assert w.late((3, 13), 14)


def test_sliding_windower_protocol():
    w = SlidingWindower(length=10, offset=5, align=0)
    _satisfies_protocol(w)
    assert not w.merges and w.fast_grid == (10, 5, 0)
    assert w.assign(7) == [(0, 10), (5, 15)]
    assert w.merge((0, 10), [(5, 15)]) == ((0, 10), [])
    assert w.close_at((5, 15)) == 15
    assert [w.late(x, 12) for x in w.assign(7)] == [True, False]


def test_session_windower_protocol():
    w = SessionWindower(gap=5)
    _satisfies_protocol(w)
    assert w.merges and w.fast_grid is None
    assert w.assign(42) == [(42, 42)]
    # An item joins every open session it is less than ``gap`` away from.
    assert w.merge((10, 10), [(0, 6), (14, 20), (30, 30)]) == ((0, 20), [(0, 6), (14, 20)])
    assert w.merge((10, 10), [(0, 5), (15, 20)]) == ((10, 10), [])  # exactly gap away: apart
    assert w.close_at((0, 20)) == 25
    assert not w.late((10, 10), 10) and w.late((10, 10), 11)


def test_numaflow_windowers_close_when_the_watermark_reaches_the_end():
    fixed, sliding = NumaflowFixedWindower(60, 0), NumaflowSlidingWindower(10, 5, 0)
    for w in (fixed, sliding):
        _satisfies_protocol(w)
        assert not w.merges and w.fast_grid is None
    assert fixed.assign(61) == [(60, 120)]
    assert sliding.assign(7) == [(0, 10), (5, 15)]
    assert fixed.merge((60, 120), [(60, 120)]) == ((60, 120), [])
    # Closed once the watermark (minus allowed lateness) reaches the end, unlike bytewax's.
    assert fixed.close_at((60, 120)) == 119
    assert not fixed.late((60, 120), 119) and fixed.late((60, 120), 120)
    assert not TumblingWindower(60, 0).late((60, 120), 120)


def test_global_windower_is_the_accumulators_window_with_a_timeout():
    w = GlobalWindower(timeout=100)
    _satisfies_protocol(w)
    assert w.merges and w.fast_grid is None
    assert w.assign(5) == [(MIN_MS, 5)]
    assert w.merge((MIN_MS, 5), [(MIN_MS, 40)]) == ((MIN_MS, 40), [(MIN_MS, 40)])
    assert w.merge((MIN_MS, 50), [(MIN_MS, 40)]) == ((MIN_MS, 50), [(MIN_MS, 40)])
    assert w.close_at((MIN_MS, 40)) == 140
    assert not w.late((MIN_MS, 5), MAX_MS)  # nothing is late for it


# -- The windower registry ----------------------------------------------------------------


def test_the_registry_picks_each_windower_by_config_type():
    td = timedelta(seconds=10)
    assert type(build_windower(TumblingWindow(td))) is TumblingWindower
    assert type(build_windower(SlidingWindow(td, td / 2))) is SlidingWindower
    assert type(build_windower(SessionWindow(td))) is SessionWindower
    assert build_windower(TumblingWindow(td, ALIGN), NUMAFLOW) == NumaflowFixedWindower(
        10_000, ALIGN_MS
    )
    assert build_windower(SlidingWindow(td, td / 2), NUMAFLOW) == NumaflowSlidingWindower(
        10_000, 5_000, 0
    )
    assert set(windower_types()) == {TumblingWindow, SlidingWindow, SessionWindow}
    assert set(windower_types(NUMAFLOW)) == {TumblingWindow, SlidingWindow}


def test_unknown_window_configs_raise_a_clear_type_error():
    class Unknown(WindowConfig):
        pass

    with pytest.raises(TypeError, match="window_config must be .*SessionWindow.*; got"):
        build_windower(Unknown())
    # Numaflow's reduce_stream has no session windows.
    with pytest.raises(TypeError, match="window_config must be .*TumblingWindow.*; got"):
        build_windower(SessionWindow(timedelta(seconds=1)), NUMAFLOW)


def test_a_new_window_kind_is_its_config_and_its_windower(monkeypatch):
    import dataclasses

    from flowspark.runtime import windowing

    monkeypatch.setattr(windowing, "_WINDOWERS", dict(windowing._WINDOWERS))

    @dataclasses.dataclass(frozen=True)
    class EveryOther(WindowConfig):
        length: timedelta

    @dataclasses.dataclass(frozen=True)
    class EveryOtherWindower(SlidingWindower, serves=EveryOther):
        @classmethod
        def from_config(cls, config: EveryOther) -> EveryOtherWindower:
            length = config.length // timedelta(milliseconds=1)
            return cls(length, 2 * length, 0)

    w = build_windower(EveryOther(timedelta(seconds=1)))
    assert w == EveryOtherWindower(1_000, 2_000, 0)
    assert w.assign(500) == [(0, 1_000)] and w.assign(1_500) == []
    with pytest.raises(TypeError, match="already has a bytewax windower"):

        class Again(RegisteredWindower, serves=EveryOther):
            pass


def test_a_subclass_of_a_config_gets_its_bases_windower():
    class MyTumbling(TumblingWindow):
        pass

    w = build_windower(MyTumbling(timedelta(seconds=1)))
    assert w == TumblingWindower(1_000, 0)
