"""bytewax 0.21's windowing (``flowspark.operators.windowing``) in plain Python: the
operators' signatures and steps, and the ``window`` kind's logic (`WindowRun`) fed
one key's values call by call, as one bytewax batch each.

Expected results follow bytewax 0.21.1's tests (pytests/operators/windowing/) and
its ``_WindowLogic``, ``_SlidingWindowerLogic``, ``_SessionWindowerLogic`` and
``_EventClockLogic``, checked against real bytewax 0.21.1 (bench/.venv-bytewax).
"""

from __future__ import annotations

import inspect
import pickle
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.operators.windowing import (
    LATE_SESSION_ID,
    ZERO_TD,
    EventClock,
    FoldWindowBuilder,
    JoinWindowBuilder,
    SessionWindower,
    SlidingWindower,
    SystemClock,
    TumblingWindower,
    WindowMetadata,
)
from flowspark.plan.graph import build_plan
from flowspark.runtime.compile import compile_flow
from flowspark.runtime.errors import RemoteStepFailure, find_step_error
from flowspark.runtime.keyed import KeyedCall
from flowspark.runtime.logics import logic_for
from flowspark.runtime.window_run import WindowRun
from flowspark.runtime.windowing import EOF_MS
from flowspark.shared.times import aware_to_ms
from flowspark.testing import TestingSink, TestingSource
from tests.event_times import ALIGN, at

NOW = aware_to_ms(datetime(2024, 6, 1, tzinfo=UTC))


def meta(open_s: float, close_s: float, merged: set[int] | None = None) -> WindowMetadata:
    return WindowMetadata(at(open_s), at(close_s), merged or set())


# -- signatures and steps ----------------------------------------------------------------

# Parameter names and defaults of bytewax 0.21.1's pysrc/bytewax/operators/windowing.py.
_SIGNATURES: dict[str, list[tuple[str, Any]]] = {
    "window": [
        ("step_id", None),
        ("up", None),
        ("clock", None),
        ("windower", None),
        ("builder", None),
        ("ordered", True),
    ],
    "collect_window": [
        ("step_id", None),
        ("up", None),
        ("clock", None),
        ("windower", None),
        ("into", list),
        ("ordered", True),
    ],
    "count_window": [
        ("step_id", None),
        ("up", None),
        ("clock", None),
        ("windower", None),
        ("key", None),
    ],
    "fold_window": [
        ("step_id", None),
        ("up", None),
        ("clock", None),
        ("windower", None),
        ("builder", None),
        ("folder", None),
        ("merger", None),
        ("ordered", True),
    ],
    "reduce_window": [
        ("step_id", None),
        ("up", None),
        ("clock", None),
        ("windower", None),
        ("reducer", None),
    ],
    "join_window": [
        ("step_id", None),
        ("clock", None),
        ("windower", None),
        ("sides", None),
        ("insert_mode", "last"),
        ("emit_mode", "final"),
        ("ordered", True),
    ],
}


@pytest.mark.parametrize("name", sorted(_SIGNATURES))
def test_the_operators_take_bytewax_021_parameters(name: str) -> None:
    params = inspect.signature(getattr(win, name)).parameters.values()
    got = [(p.name, None if p.default is p.empty else p.default) for p in params]
    assert got == _SIGNATURES[name]


def test_max_and_min_window_compare_by_identity_by_default() -> None:
    for fn in (win.max_window, win.min_window):
        params = inspect.signature(fn).parameters
        assert list(params) == ["step_id", "up", "clock", "windower", "by"]
        assert params["by"].default(7) == 7


def test_the_configs_take_bytewax_021_fields() -> None:
    clock = EventClock(lambda v: v, timedelta(seconds=1))
    assert clock.now_getter().tzinfo is not None
    assert clock.to_system_utc(at(1)) == at(1)
    assert SlidingWindower(timedelta(10), timedelta(5), ALIGN).offset == timedelta(5)
    assert TumblingWindower(length=timedelta(10), align_to=ALIGN).length == timedelta(10)
    assert SessionWindower(gap=ZERO_TD).gap == ZERO_TD
    assert SystemClock() == SystemClock()
    assert LATE_SESSION_ID == -1
    assert WindowMetadata(at(0), at(1)).merged_ids == set()


def test_the_configs_refuse_what_bytewax_refuses() -> None:
    with pytest.raises(ValueError, match="offset` can't be longer than `length"):
        SlidingWindower(timedelta(seconds=5), timedelta(seconds=10), ALIGN)
    with pytest.raises(ValueError, match="session window `gap` must not be negative"):
        SessionWindower(timedelta(seconds=-1))
    with pytest.raises(ValueError, match="`length` must be positive"):
        TumblingWindower(ZERO_TD, ALIGN)


def test_the_step_ids_are_bytewax_s() -> None:
    flow = Dataflow("f")
    s = op.key_on("k", op.input("inp", flow, TestingSource([at(0)])), lambda _: "ALL")
    clock = EventClock(lambda v: v, ZERO_TD)
    out = win.collect_window("c", s, clock, TumblingWindower(timedelta(seconds=10), ALIGN))
    assert [(step.kind, step.step_id) for step in flow.steps[2:]] == [
        ("window", "f.c.fold_window.window.stateful_batch"),
    ]
    assert (out.down.stream_id, out.late.stream_id, out.meta.stream_id) == (
        "f.c.down",
        "f.c.late",
        "f.c.meta",
    )
    with pytest.raises(TypeError, match="doesn't support"):
        win.collect_window("c2", s, clock, TumblingWindower(timedelta(seconds=10), ALIGN), tuple)
    with pytest.raises(ValueError, match="unknown join emit mode 'never'"):
        win.join_window("j", clock, SessionWindower(ZERO_TD), s, s, emit_mode="never")
    with pytest.raises(TypeError, match="clock must be one of SystemClock, EventClock, or a Clock"):
        win.count_window("n", s, object(), SessionWindower(ZERO_TD), str)

    class NoBuild(win.Windower):  # a windower of one's own must build its logic
        pass

    with pytest.raises(TypeError, match="NoBuild must implement build"):
        win.count_window("n2", s, SystemClock(), NoBuild(), str)


def test_a_window_step_builds_its_logic() -> None:
    flow = Dataflow("f")
    s = op.key_on("k", op.input("inp", flow, TestingSource([at(0)])), lambda _: "ALL")
    win.max_window("m", s, SystemClock(), SessionWindower(timedelta(seconds=1)))
    (step,) = [step for step in flow.steps if step.kind == "window"]
    logic = logic_for(step)
    assert isinstance(logic, WindowRun) and not logic.ordered and logic.clock.system


# -- the logic, call by call -------------------------------------------------------------


class Feed:
    """One key through a `WindowRun`: its emitted events split as bytewax's streams."""

    def __init__(self, run: WindowRun) -> None:
        self.run, self.state = run, None
        self.down: list[Any] = []
        self.late: list[Any] = []
        self.meta: list[Any] = []
        self.wake: int | None = None

    def _take(self, outcome: Any) -> None:
        self.state, self.wake = outcome.state, outcome.wake
        assert pickle.loads(pickle.dumps(self.state)) == self.state
        for key, (wid, obj) in outcome.emitted:
            assert key == "ALL"
            self.down.append((wid, obj))
        for key, (wid, obj) in outcome.meta:
            assert key == "ALL"
            self.meta.append((wid, obj))
        self.late += [value for _key, value in outcome.late]

    def values(self, values: list[Any], now: int = NOW) -> Feed:
        self._take(self.run.on_values(KeyedCall("ALL", self.state, now, values)))
        return self

    def each(self, values: list[Any], now: int = NOW) -> Feed:
        for value in values:
            self.values([value], now)
        return self

    def timer(self, now: int) -> Feed:
        self._take(self.run.on_timer(KeyedCall("ALL", self.state, now)))
        return self

    def end(self) -> Feed:
        return self.timer(EOF_MS)


def event_clock(wait: timedelta = ZERO_TD, getter: Callable[[Any], datetime] | None = None) -> Any:
    return EventClock(getter or (lambda v: v[0]), wait_for_system_duration=wait)


def fold_run(clock: Any, windower: Any, ordered: bool = True) -> WindowRun:
    builder = FoldWindowBuilder(list, lambda acc, v: [*acc, v[1]], list.__add__)
    return WindowRun("f.w", clock, windower, builder, ordered)


TEN = TumblingWindower(length=timedelta(seconds=10), align_to=ALIGN)


def test_tumbling_windows_take_ids_from_the_alignment_and_close_with_metadata() -> None:
    # bytewax's test_fold_window_tumbling: the first window closes as 16 s comes.
    feed = Feed(fold_run(event_clock(), TEN))
    feed.each([(at(0), "login"), (at(4), "post"), (at(8), "post"), (at(16), "post")])
    assert feed.down == [(0, ["login", "post", "post"])]
    assert feed.meta == [(0, meta(0, 10))]
    feed.end()
    assert feed.down == [(0, ["login", "post", "post"]), (1, ["post"])]
    assert feed.meta == [(0, meta(0, 10)), (1, meta(10, 20))]
    assert feed.state is None  # no window open: the key is forgotten
    before = Feed(fold_run(event_clock(), TEN)).each([(at(-3), "x")]).end()
    assert before.down == [(-1, ["x"])] and before.meta == [(-1, meta(-10, 0))]


def test_sliding_windows_and_late_items_with_every_window_they_missed() -> None:
    # bytewax's test_fold_window_sliding.
    windower = SlidingWindower(timedelta(seconds=10), timedelta(seconds=5), ALIGN)
    feed = Feed(fold_run(event_clock(), windower))
    seconds = [(1, "a"), (4, "b"), (8, "c"), (12, "d"), (13, "e"), (14, "f"), (16, "g"), (1, "h")]
    feed.each([(at(s), v) for s, v in seconds]).end()
    assert feed.down == [
        (-1, ["a", "b"]),
        (0, ["a", "b", "c"]),
        (1, ["c", "d", "e", "f"]),
        (2, ["d", "e", "f", "g"]),
        (3, ["g"]),
    ]
    assert feed.late == [(-1, (at(1), "h")), (0, (at(1), "h"))]
    assert [wid for wid, _ in feed.meta] == [-1, 0, 1, 2, 3]
    assert feed.meta[1] == (0, meta(0, 10))


def test_an_item_is_late_when_its_time_is_before_the_watermark_not_its_window_s_end() -> None:
    feed = Feed(fold_run(event_clock(timedelta(seconds=5)), TEN))
    feed.values([(at(17), "a"), (at(13), "b"), (at(11), "c")])  # watermark 12: 11 is late
    assert feed.late == [(1, (at(11), "c"))]
    feed.values([(at(12), "d")])  # exactly the watermark: on time
    assert feed.late == [(1, (at(11), "c"))]
    feed.end()
    assert feed.down == [(1, ["d", "b", "a"])]  # ordered: by time


def test_the_watermark_moves_on_with_the_system_time_since_the_latest_item() -> None:
    feed = Feed(fold_run(event_clock(timedelta(seconds=5)), TEN))
    feed.values([(at(7), "a")], now=NOW)  # watermark 2 s
    assert feed.wake == NOW + 5_000  # ordered: when the watermark reaches the queued 7 s
    feed.values([(at(3), "b")], now=NOW + 2_000)  # watermark 2 + 2 = 4 s: late
    feed.values([(at(8), "c")], now=NOW + 2_000)  # 8 - 5 = 3 < 4: the watermark stays
    assert feed.late == [(0, (at(3), "b"))]
    assert feed.down == []
    feed.timer(NOW + 8_000)  # watermark 10 s: the window closes
    assert feed.down == [(0, ["a", "c"])] and feed.meta == [(0, meta(0, 10))]


def test_a_user_now_getter_is_the_system_time() -> None:
    clock_now = [datetime(2024, 1, 1, tzinfo=UTC)]
    clock = EventClock(lambda v: v[0], timedelta(seconds=5), now_getter=lambda: clock_now[0])
    feed = Feed(fold_run(clock, TEN))
    feed.values([(at(7), "a")])
    clock_now[0] += timedelta(seconds=2)
    feed.values([(at(3), "b")])  # watermark 4 s by the user's clock
    assert feed.late == [(0, (at(3), "b"))]
    # to_system_utc (the identity): the queued 7 s as a system time, as bytewax wakes.
    assert feed.wake == aware_to_ms(at(7))


def test_sessions_merge_keep_their_first_id_and_report_the_merged_ids() -> None:
    windower = SessionWindower(gap=timedelta(seconds=10))
    feed = Feed(fold_run(event_clock(timedelta(seconds=100)), windower, ordered=False))
    feed.each([(at(0), "a"), (at(20), "b"), (at(10), "c"), (at(50), "d")]).end()
    # c lands in session 0 (now 0-10 s), which then absorbs session 1 (b at 20 s).
    assert feed.down == [(0, ["a", "c", "b"]), (2, ["d"])]
    assert feed.meta == [(0, meta(0, 20, {1})), (2, meta(50, 50))]
    assert feed.state is not None  # sessions never forget a key: ids keep counting
    feed.values([(at(200), "e")]).end()
    assert feed.down[-1] == (3, ["e"])


def test_sessions_from_bytewax_s_test_and_a_late_item_gets_the_late_session_id() -> None:
    # bytewax's test_fold_window_session.
    feed = Feed(fold_run(event_clock(), SessionWindower(gap=timedelta(seconds=5))))
    seconds = [(1, "a"), (5, "b"), (11, "c"), (12, "d"), (13, "e"), (14, "f"), (20, "g"), (1, "h")]
    feed.each([(at(s), v) for s, v in seconds]).end()
    assert feed.down == [(0, ["a", "b"]), (1, ["c", "d", "e", "f"]), (2, ["g"])]
    assert feed.late == [(LATE_SESSION_ID, (at(1), "h"))]
    assert feed.meta[0] == (0, meta(1, 5))


def test_a_session_closes_once_the_watermark_is_more_than_the_gap_past_it() -> None:
    feed = Feed(fold_run(SystemClock(), SessionWindower(gap=timedelta(seconds=5))))
    feed.values([(None, "a")], now=NOW)
    assert feed.wake == NOW + 5_001
    feed.timer(NOW + 5_000)
    assert feed.down == []
    feed.timer(NOW + 5_001)
    assert feed.down == [(0, ["a"])]
    opened = datetime(2024, 6, 1, tzinfo=UTC)
    assert feed.meta == [(0, WindowMetadata(opened, opened, set()))]


def test_ordered_values_wait_for_the_watermark_and_come_in_time_order() -> None:
    # bytewax's test_collect_window: wait_for_system_duration=timedelta.max.
    feed = Feed(fold_run(event_clock(timedelta.max), TEN))
    feed.each([(at(0), 1), (at(8), 3), (at(4), 2), (at(13), 5), (at(12), 4)])
    assert feed.down == [] and len(feed.state[3]) == 5  # all queued
    assert feed.wake == EOF_MS
    feed.end()
    assert feed.down == [(0, [1, 2, 3]), (1, [4, 5])]
    unordered = Feed(fold_run(event_clock(timedelta.max), TEN, ordered=False))
    unordered.each([(at(0), 1), (at(8), 3), (at(4), 2), (at(13), 5), (at(12), 4)]).end()
    assert unordered.down == [(0, [1, 3, 2]), (1, [5, 4])]


def test_the_queue_wakes_the_key_when_its_first_value_comes_due() -> None:
    feed = Feed(fold_run(event_clock(timedelta(seconds=5)), TEN))
    feed.values([(at(3), "a"), (at(1), "b")], now=NOW)  # watermark -2 s
    assert feed.wake == NOW + 3_000  # the watermark reaches 1 s
    feed.timer(NOW + 3_000)
    assert len(feed.state[3]) == 1 and 0 in feed.state[2]
    feed.end()
    assert feed.down == [(0, ["b", "a"])]


def test_the_system_clock_places_a_call_s_values_at_its_read_time() -> None:
    feed = Feed(fold_run(SystemClock(), TEN))
    base = aware_to_ms(ALIGN)
    feed.values([(None, "a"), (None, "b")], now=base + 3_000)
    feed.values([(None, "c")], now=base + 12_000)
    assert feed.down == [(0, ["a", "b"])] and feed.late == []
    feed.end()
    assert feed.down == [(0, ["a", "b"]), (1, ["c"])]


def test_values_flushed_at_the_end_of_the_input_close_at_once() -> None:
    feed = Feed(fold_run(event_clock(), TEN))
    feed.values([(at(1), "a")], now=EOF_MS)
    assert feed.down == [(0, ["a"])]
    assert feed.meta == [(0, meta(0, 10))]


def _join(
    insert_mode: str, emit_mode: str, sides: list[tuple[int, int, int]], ordered: bool = True
) -> list[Any]:
    """bytewax's _build_join_window_dataflow: sessions of 10 s, a clock that waits
    forever; ``sides`` are ``(side, second, value)`` in arrival order."""
    clock = EventClock(lambda sv: at(sv[1][0]), timedelta.max)
    builder = JoinWindowBuilder(2, insert_mode, emit_mode)
    run = WindowRun("f.j", clock, SessionWindower(timedelta(seconds=10)), builder, ordered)
    feed = Feed(run).each([(side, (s, v)) for side, s, v in sides]).end()
    return [tuple(None if x is None else x[1] for x in row) for _wid, row in feed.down]


def test_join_window_modes_as_bytewax_s_tests() -> None:
    assert _join("first", "complete", [(0, 0, 1), (1, 2, 3), (1, 1, 2)]) == [(1, 2)]
    assert _join("last", "complete", [(0, 0, 1), (1, 1, 2)]) == [(1, 2)]
    assert _join("last", "final", [(0, 0, 1), (1, 1, 2), (1, 2, 3)]) == [(1, 3)]
    assert _join("last", "running", [(0, 0, 1), (1, 1, 2), (1, 2, 3)]) == [
        (1, None),
        (1, 2),
        (1, 3),
    ]
    product = _join("product", "final", [(0, 0, 1), (0, 1, 2), (1, 1, 3), (1, 2, 4)])
    assert product == [(1, 3), (1, 4), (2, 3), (2, 4)]


def test_join_window_merges_sessions_as_bytewax_0_21_1_does() -> None:
    # Two sessions (0: left 1 at 0 s; 1: right 2 at 20 s) bridged by right 3 at 10 s,
    # which lands in session 0 before session 1 merges into it.
    rows = [(0, 0, 1), (1, 20, 2), (1, 10, 3)]
    assert _join("last", "final", rows, ordered=False) == [(1, 3)]
    assert _join("first", "final", rows, ordered=False) == [(1, 2)]
    assert _join("product", "final", rows, ordered=False) == [(1, 3), (1, 2)]


def test_a_failing_user_function_names_the_step_and_keeps_its_type() -> None:
    def bad_folder(acc: Any, v: Any) -> Any:
        raise KeyError("boom")

    run = WindowRun(
        "f.w", event_clock(), TEN, FoldWindowBuilder(list, bad_folder, list.__add__), False
    )
    with pytest.raises(RemoteStepFailure, match="step 'f.w' failed") as caught:
        Feed(run).values([(at(1), "a")])
    error = find_step_error(str(caught.value))
    assert isinstance(error, KeyError) and error.function.endswith("bad_folder")
    naive = Feed(fold_run(EventClock(lambda v: datetime(2024, 1, 1), ZERO_TD), TEN))
    with pytest.raises(RemoteStepFailure, match="timezone-aware"):
        naive.values([(None, "a")])


def _built(make: Callable[[Any], Any]) -> WindowRun:
    """The `WindowRun` of the one window step ``make(keyed stream)`` adds."""
    flow = Dataflow("f")
    s = op.key_on("k", op.input("inp", flow, TestingSource([at(0)])), lambda _: "ALL")
    make(s)
    (step,) = [step for step in flow.steps if step.kind == "window"]
    logic = logic_for(step)
    assert isinstance(logic, WindowRun)
    return logic


def test_collect_window_into_a_set_or_a_dict_and_which_operators_are_ordered() -> None:
    clock = event_clock()
    as_set = _built(lambda s: win.collect_window("c", s, clock, TEN, into=set))
    feed = Feed(as_set).each([(at(1), "a"), (at(2), "a"), (at(3), "b")]).end()
    assert feed.down == [(0, {(at(1), "a"), (at(2), "a"), (at(3), "b")})]
    pairs = EventClock(lambda kv: at(kv[1]), ZERO_TD)
    as_dict = _built(lambda s: win.collect_window("c", s, pairs, TEN, into=dict))
    assert Feed(as_dict).each([("x", 1), ("y", 2), ("x", 3)]).end().down == [(0, {"x": 3, "y": 2})]
    same_time = EventClock(lambda v: at(1), ZERO_TD)
    bad = _built(lambda s: win.collect_window("c", s, same_time, TEN, into=dict))
    with pytest.raises(RemoteStepFailure, match="requires `\\(key, value\\)` 2-tuple"):
        Feed(bad).values([5])
    assert as_set.ordered and as_dict.ordered
    assert not _built(lambda s: win.reduce_window("r", s, clock, TEN, max)).ordered
    assert not _built(lambda s: win.count_window("n", s, clock, TEN, str)).ordered
    assert not _built(lambda s: win.collect_window("c", s, clock, TEN, ordered=False)).ordered


def _compiled_window_logic(with_meta_output: bool) -> WindowRun:
    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource([("a", at(0))]))
    clock = EventClock(lambda e: e[1], wait_for_system_duration=ZERO_TD)
    wo = win.count_window("n", s, clock, TumblingWindower(timedelta(seconds=10), ALIGN), _first)
    op.output("down", wo.down, TestingSink([]))
    if with_meta_output:
        op.output("meta", wo.meta, TestingSink([]))
    compiled = compile_flow(build_plan(flow), key_partitions=2)
    (logic,) = pickle.loads(compiled.levels[0].logics or b"").values()
    return logic


def _first(item: Any) -> str:
    return item[0]


def test_window_metadata_is_made_only_when_meta_leads_to_an_output() -> None:
    unused, used = _compiled_window_logic(False), _compiled_window_logic(True)
    assert (unused.with_meta, used.with_meta) == (False, True)
    events = [("a", at(1)), ("a", at(12))]
    quiet = unused.on_values(KeyedCall("a", None, NOW, events))
    told = used.on_values(KeyedCall("a", None, NOW, events))
    assert quiet.emitted == told.emitted == [("a", (0, 1))]
    assert quiet.meta == []
    assert [(key, wid, m.open_time, m.close_time) for key, (wid, m) in told.meta] == [
        ("a", 0, ALIGN, ALIGN + timedelta(seconds=10))
    ]
