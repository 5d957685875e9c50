"""Keyed stateful logic (`flowspark.runtime.stateful`) in plain Python, no Spark.

Each logic gets one key's state, that key's values of a micro-batch and ``now``
(the batch's system time in ms) and returns an ``Outcome``; ``on_timer`` at
``EOF_MS`` is the end of a bounded input. Expected results follow bytewax 0.17
(the ``Dataflow`` page's examples and the behaviour reference §2.1–2.2).
"""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowspark.dataflow import Dataflow
from flowspark.runtime.errors import RemoteStepFailure, StepError, find_step_error
from flowspark.runtime.keyed import KeyedCall
from flowspark.runtime.logics import logic_for
from flowspark.runtime.stateful import (
    BatchLogic,
    ReduceLogic,
    StatefulMapLogic,
    WindowLogic,
)
from flowspark.runtime.windowing import EOF_MS
from flowspark.shared.times import datetime_from_ms
from flowspark.testing import TestingInput, TestingOutput
from flowspark.window import (
    EventClockConfig,
    SessionWindow,
    SlidingWindow,
    SystemClockConfig,
    TumblingWindow,
)
from tests.bytewax_pages import SESSION_EVENTS, remove_duplicates_example, sessionizer_example
from tests.event_times import ALIGN, ALIGN_MS, at

A = ALIGN_MS  # ms of align_to
SEC = 1_000
NOW = 1_700_000_000_000  # an arbitrary system time for the batches


def ev(seconds: float, label: str = "") -> tuple[float, str]:
    """An event value: (seconds after ALIGN, label)."""
    return (seconds, label)


def ev_time(value: tuple[float, str]) -> datetime:
    return at(value[0])


def event_clock(wait_s: float = 0) -> EventClockConfig:
    return EventClockConfig(ev_time, wait_for_system_duration=timedelta(seconds=wait_s))


def tumbling(seconds: float = 10) -> TumblingWindow:
    return TumblingWindow(length=timedelta(seconds=seconds), align_to=ALIGN)


def step_of(build) -> object:
    """The step that ``build(stream)`` adds to a fresh flow."""
    flow = Dataflow()
    build(flow.input("inp", TestingInput([])))
    return flow.steps[-1]


def page_step(flow: Dataflow, step_id: str) -> object:
    """Step ``step_id`` of one of the pages' flows (``tests/bytewax_pages.py``)."""
    [step] = [step for step in flow.steps if step.step_id == step_id]
    return step


def window_logic(kind: str, clock, window, *fns, with_window: bool = False) -> WindowLogic:
    step = step_of(lambda s: getattr(s, kind)("win", clock, window, *fns, with_window=with_window))
    logic = logic_for(step)
    assert isinstance(logic, WindowLogic)
    return logic


def collect(clock, window, **kw) -> WindowLogic:
    return window_logic("collect_window", clock, window, **kw)


def labels(emitted):
    """``[(key, [values])]`` -> ``[(key, [labels])]`` for readable asserts."""
    return [(k, [v[1] for v in vs]) for k, vs in emitted]


def run_to_eof(logic, key, values, now=NOW):
    """One ``on_values`` call, then the end of input: (emitted in call, at EOF, late)."""
    first = logic.on_values(KeyedCall(key, None, now, values))
    last = logic.on_timer(KeyedCall(key, first.state, EOF_MS))
    assert last.wake is None
    assert last.late == []
    return first.emitted, last.emitted, first.late


def decode(exc: BaseException) -> StepError:
    error = find_step_error(str(exc))
    assert error is not None, f"no step failure encoded in {exc}"
    return error


# -- reduce ----------------------------------------------------------------------------


def test_reduce_sessionizer_example_from_the_page():
    inp = SESSION_EVENTS
    logic = logic_for(page_step(sessionizer_example(inp, TestingOutput([])), "sessionizer"))
    assert isinstance(logic, ReduceLogic)
    states: dict[str, object] = {}
    out = []
    for event in inp:  # one value per call, as a stream would deliver them
        key = event["user"]
        r = logic.on_values(KeyedCall(key, states.get(key), NOW, [[event]]))
        states[key] = r.state
        out.extend(r.emitted)
    assert out == [("b", inp[2:4]), ("a", [inp[0], inp[1], inp[4]])]
    assert states == {"a": None, "b": None}  # forgotten after completing


def test_reduce_first_value_is_the_initial_accumulator_and_reducer_skipped_for_one_value():
    calls = []

    def reducer(acc, v):
        calls.append((acc, v))
        return acc + v

    seen = []

    def complete(acc):
        seen.append(acc)
        return True

    logic = ReduceLogic("r", reducer, complete)
    r = logic.on_values(KeyedCall("k", None, NOW, [7, 8]))
    assert r.emitted == [("k", 7), ("k", 8)]
    assert calls == []  # every key completed after one value
    assert seen == [7, 8]  # is_complete got the single value as the accumulator
    assert r.state is None


def test_reduce_accumulates_across_calls_then_forgets():
    logic = ReduceLogic("r", lambda acc, v: acc + v, lambda acc: acc >= 4)
    r = logic.on_values(KeyedCall("a", None, NOW, [1]))
    assert (r.state, r.emitted) == ((1,), [])
    r = logic.on_values(KeyedCall("a", r.state, NOW, [1, 2]))
    assert (r.state, r.emitted) == (None, [("a", 4)])
    r = logic.on_values(KeyedCall("a", r.state, NOW, [3]))  # starts afresh
    assert (r.state, r.emitted) == ((3,), [])


def test_reduce_keeps_a_none_accumulator_as_state():
    logic = ReduceLogic("r", lambda acc, v: None, lambda acc: False)
    r = logic.on_values(KeyedCall("a", None, NOW, [1, 2]))
    assert r.state == (None,)


def test_reduce_incomplete_keys_emit_nothing_on_timers_or_eof():
    logic = ReduceLogic("r", lambda acc, v: acc + v, lambda acc: acc >= 100)
    assert not logic.uses_timers
    r = logic.on_values(KeyedCall("b", None, NOW, [1, 2]))
    assert r.emitted == [] and r.wake is None
    for now in (NOW + 10 * SEC, EOF_MS):
        t = logic.on_timer(KeyedCall("b", r.state, now))
        assert t.emitted == [] and t.wake is None


def test_reduce_failure_names_the_step_and_the_item():
    logic = ReduceLogic("summing", lambda acc, v: acc + v, lambda acc: False)
    with pytest.raises(RemoteStepFailure) as info:
        logic.on_values(KeyedCall("k", None, NOW, [1, "two"]))
    error = decode(info.value)
    assert error.step_id == "summing"
    assert "'two'" in error.item
    assert isinstance(error.__cause__, TypeError)


# -- stateful_map ------------------------------------------------------------------------


def test_stateful_map_remove_duplicates_example_from_the_page():
    flow = remove_duplicates_example([], TestingOutput([]))
    logic = logic_for(page_step(flow, "remove_duplicates"))
    assert isinstance(logic, StatefulMapLogic)
    first = logic.on_values(KeyedCall("a", None, NOW, ["a", "a"]))
    second = logic.on_values(KeyedCall("a", first.state, NOW, ["a", "a"]))
    b = logic.on_values(KeyedCall("b", None, NOW, ["b"]))
    assert first.emitted == [("a", "a"), ("a", None)]
    assert second.emitted == [("a", None), ("a", None)]  # the state carried over
    assert second.state == (4,)
    assert b.emitted == [("b", "b")]


def test_stateful_map_builder_without_arguments_is_called_with_none():
    calls = []

    def builder():
        calls.append(())
        return []

    logic = StatefulMapLogic("sm", builder, lambda s, v: (s + [v], len(s) + 1))
    r = logic.on_values(KeyedCall("k", None, NOW, ["x", "y"]))
    assert calls == [()]
    assert r.emitted == [("k", 1), ("k", 2)]
    assert r.state == (["x", "y"],)


def test_stateful_map_builder_with_one_argument_gets_the_key():
    logic = StatefulMapLogic("sm", lambda key: f"<{key}>", lambda s, v: (s, s + v))
    assert logic.on_values(KeyedCall("kk", None, NOW, ["!"])).emitted == [("kk", "<kk>!")]


@pytest.mark.parametrize("builder, initial", [(int, 0), (list, []), (dict, {}), (str, "")])
def test_stateful_map_builtin_builders_are_called_without_arguments(builder, initial):
    logic = StatefulMapLogic("sm", builder, lambda s, v: (s, s))
    assert logic.on_values(KeyedCall("key", None, NOW, [1])).emitted == [("key", initial)]


def test_stateful_map_none_state_forgets_and_the_builder_runs_again():
    built = []

    def builder(key):
        built.append(key)
        return 0

    def mapper(state, v):
        state += v
        return (None if state >= 3 else state), state

    logic = StatefulMapLogic("sm", builder, mapper)
    r = logic.on_values(KeyedCall("k", None, NOW, [1, 2, 5, 1]))
    assert r.emitted == [("k", 1), ("k", 3), ("k", 5), ("k", 1)]
    assert built == ["k", "k", "k"]  # after 3 and after 5 the state was dropped
    assert r.state == (1,)
    r = logic.on_values(KeyedCall("k", None, NOW, []))
    assert r.state is None and r.emitted == []


def test_stateful_map_state_dropped_at_the_end_of_a_call_is_none():
    logic = StatefulMapLogic("sm", lambda: 0, lambda s, v: (None, v))
    assert logic.on_values(KeyedCall("k", None, NOW, [1])).state is None


@pytest.mark.parametrize("bad", [None, 5, [1, 2], (1, 2, 3), (1,)])
def test_stateful_map_mapper_must_return_a_2_tuple(bad):
    logic = StatefulMapLogic("dedupe", lambda: 0, lambda s, v: bad)
    with pytest.raises(RemoteStepFailure) as info:
        logic.on_values(KeyedCall("k", None, NOW, ["item"]))
    error = decode(info.value)
    assert error.step_id == "dedupe"
    assert "'item'" in error.item
    assert "2-tuple" in str(error)
    assert isinstance(error.__cause__, TypeError)


def test_stateful_map_builder_failure_names_the_step():
    def builder():
        raise KeyError("boom")

    logic = StatefulMapLogic("sm", builder, lambda s, v: (s, v))
    with pytest.raises(RemoteStepFailure) as info:
        logic.on_values(KeyedCall("k", None, NOW, [1]))
    error = decode(info.value)
    assert error.step_id == "sm"
    assert "builder" in error.function
    assert isinstance(error.__cause__, KeyError)


# -- batch -----------------------------------------------------------------------------


def batch_logic(max_size=2, timeout=timedelta(seconds=10)) -> BatchLogic:
    logic = logic_for(step_of(lambda s: s.batch("batch", max_size, timeout)))
    assert isinstance(logic, BatchLogic)
    return logic


def test_batch_example_emits_full_batches_then_the_rest_at_eof():
    logic = batch_logic(max_size=2)
    assert logic.timeout_ms == 10 * SEC
    r = logic.on_values(KeyedCall("a", None, NOW, [0, 1, 2, 3, 4]))
    end = logic.on_timer(KeyedCall("a", r.state, EOF_MS))
    assert r.emitted + end.emitted == [("a", [0, 1]), ("a", [2, 3]), ("a", [4])]
    assert r.emitted == [("a", [0, 1]), ("a", [2, 3])]
    assert end.state is None and end.wake is None


def test_batch_wakes_timeout_after_the_first_item_of_the_batch():
    logic = batch_logic(max_size=10, timeout=timedelta(seconds=5))
    r = logic.on_values(KeyedCall("a", None, NOW, ["x"]))
    assert r.wake == NOW + 5 * SEC
    r = logic.on_values(KeyedCall("a", r.state, NOW + 3 * SEC, ["y"]))
    assert r.wake == NOW + 5 * SEC  # later items do not move the deadline
    assert r.emitted == []


def test_batch_timer_before_the_deadline_keeps_waiting():
    logic = batch_logic(max_size=10, timeout=timedelta(seconds=5))
    r = logic.on_values(KeyedCall("a", None, NOW, ["x"]))
    t = logic.on_timer(KeyedCall("a", r.state, NOW + 4 * SEC))
    assert t.emitted == [] and t.wake == NOW + 5 * SEC and t.state == r.state


def test_batch_timer_at_the_deadline_emits_and_forgets():
    logic = batch_logic(max_size=10, timeout=timedelta(seconds=5))
    r = logic.on_values(KeyedCall("a", None, NOW, ["x", "y"]))
    t = logic.on_timer(KeyedCall("a", r.state, r.wake))
    assert t.emitted == [("a", ["x", "y"])]
    assert t.state is None and t.wake is None


def test_batch_values_arriving_after_the_deadline_flush_the_batch():
    logic = batch_logic(max_size=10, timeout=timedelta(seconds=5))
    r = logic.on_values(KeyedCall("a", None, NOW, ["x"]))
    r = logic.on_values(KeyedCall("a", r.state, NOW + 6 * SEC, ["y"]))
    assert r.emitted == [("a", ["x", "y"])]
    assert r.state is None and r.wake is None


def test_batch_full_batch_clears_the_deadline_and_a_new_one_starts_at_its_first_item():
    logic = batch_logic(max_size=2, timeout=timedelta(seconds=5))
    r = logic.on_values(KeyedCall("a", None, NOW, [1, 2]))
    assert r.emitted == [("a", [1, 2])] and r.state is None and r.wake is None
    r = logic.on_values(KeyedCall("a", r.state, NOW + 1 * SEC, [3]))
    assert r.wake == NOW + 6 * SEC


def test_batch_timer_without_state_does_nothing():
    out = batch_logic().on_timer(KeyedCall("a", None, EOF_MS))
    assert out.state is None and out.emitted == [] and out.wake is None


# -- windows: the page's examples -------------------------------------------------------


def test_reduce_window_example_from_the_page():
    def add(acc, x):
        acc["val"] += x["val"]
        return acc

    clock = EventClockConfig(lambda e: e["time"], wait_for_system_duration=timedelta(0))
    logic = window_logic("reduce_window", clock, tumbling(10), add)
    inp = [
        ("b", {"time": ALIGN, "val": 1}),
        ("a", {"time": at(4), "val": 1}),
        ("a", {"time": at(8), "val": 1}),
        ("b", {"time": at(12), "val": 1}),
    ]
    out = []
    for key in ("a", "b"):
        in_call, at_eof, late = run_to_eof(logic, key, [v for k, v in inp if k == key])
        assert late == []
        out.extend(in_call + at_eof)
    out = [(key, event["val"]) for key, event in out]
    assert sorted(out) == sorted([("b", 1), ("a", 2), ("b", 1)])


def test_fold_window_example_from_the_page():
    def add(acc, x):
        acc.append(x["val"])
        return acc

    clock = EventClockConfig(lambda e: e["time"], wait_for_system_duration=timedelta(seconds=0))
    logic = window_logic("fold_window", clock, tumbling(10), list, add)
    inp = [
        {"time": ALIGN, "val": "a"},
        {"time": at(4), "val": "b"},
        {"time": at(8), "val": "c"},
        # The 10 second window should close just before processing this item.
        {"time": at(12), "val": "d"},
        {"time": at(16), "val": "e"},
    ]
    in_call, at_eof, late = run_to_eof(logic, "ALL", inp)
    assert in_call == [("ALL", ["a", "b", "c"])]
    assert at_eof == [("ALL", ["d", "e"])]
    assert late == []


def test_reduce_window_reducer_not_called_for_a_single_value():
    calls = []

    def reducer(acc, v):
        calls.append(v)
        return acc

    logic = window_logic("reduce_window", event_clock(), tumbling(10), reducer)
    _, at_eof, _ = run_to_eof(logic, "k", [ev(1, "only")])
    assert at_eof == [("k", ev(1, "only"))]
    assert calls == []


def test_fold_window_builder_runs_once_per_window_and_may_take_the_key():
    built = []

    def builder(key):
        built.append(key)
        return key + ":"

    logic = window_logic(
        "fold_window", event_clock(wait_s=60), tumbling(10), builder, lambda a, v: a + v[1]
    )
    _, at_eof, _ = run_to_eof(logic, "k", [ev(1, "x"), ev(11, "y"), ev(2, "z")])
    assert at_eof == [("k", "k:xz"), ("k", "k:y")]
    assert built == ["k", "k"]


# -- windows: late items ---------------------------------------------------------------


def test_item_whose_window_closed_is_late_with_no_wait():
    logic = collect(event_clock(wait_s=0), tumbling(10))
    late_item = ev(3, "late")
    r = logic.on_values(KeyedCall("k", None, NOW, [ev(0, "a"), ev(12, "b"), late_item]))
    assert labels(r.emitted) == [("k", ["a"])]  # [0, 10) closed when 12 arrived
    assert r.late == [("k", late_item)]
    end = logic.on_timer(KeyedCall("k", r.state, EOF_MS))
    assert labels(end.emitted) == [("k", ["b"])]


def test_late_is_about_the_window_not_the_item_time():
    # 10.5 < watermark 12, but its window [10, 20) is still open: bytewax 0.17 accepts it.
    logic = collect(event_clock(wait_s=0), tumbling(10))
    _, at_eof, late = run_to_eof(logic, "k", [ev(12, "b"), ev(10.5, "c")])
    assert late == []
    assert labels(at_eof) == [("k", ["c", "b"])]


def test_item_with_window_close_equal_to_the_watermark_is_accepted():
    logic = collect(event_clock(wait_s=0), tumbling(10))
    _, at_eof, late = run_to_eof(logic, "k", [ev(10, "b"), ev(3, "a")])
    assert late == []  # close 10 is not < watermark 10
    assert labels(at_eof) == [("k", ["a"]), ("k", ["b"])]


def test_wait_for_system_duration_accepts_an_item_behind_the_max():
    # Behaviour reference §2.2: wait=5s, 10 s windows, t=3 after t=12: watermark 7 < close 10.
    logic = collect(event_clock(wait_s=5), tumbling(10))
    r = logic.on_values(KeyedCall("k", None, NOW, [ev(0, "a"), ev(12, "b"), ev(3, "c")]))
    assert r.late == [] and r.emitted == []
    assert r.wake == NOW + 3 * SEC + 1  # watermark 7 s passes close 10 s after 3 s
    early = logic.on_timer(KeyedCall("k", r.state, r.wake - 1))
    assert early.emitted == [] and early.wake == r.wake
    t = logic.on_timer(KeyedCall("k", r.state, r.wake))
    assert labels(t.emitted) == [("k", ["a", "c"])]
    assert t.wake == NOW + 13 * SEC + 1  # the next window [10, 20)
    end = logic.on_timer(KeyedCall("k", t.state, EOF_MS))
    assert labels(end.emitted) == [("k", ["b"])]


def test_system_time_passing_makes_an_item_late():
    logic = collect(event_clock(wait_s=5), tumbling(10))
    r = logic.on_values(KeyedCall("k", None, NOW, [ev(12, "b")]))
    # 4 s of system time later the watermark is 12 - 5 + 4 = 11 > close 10.
    r = logic.on_values(KeyedCall("k", r.state, NOW + 4 * SEC, [ev(3, "c")]))
    assert r.late == [("k", ev(3, "c"))]


def test_each_key_has_its_own_clock():
    logic = collect(event_clock(wait_s=0), tumbling(10))
    a = logic.on_values(KeyedCall("a", None, NOW, [ev(100, "a")]))
    b = logic.on_values(KeyedCall("b", None, NOW, [ev(3, "b")]))  # far behind key a: still on time
    assert a.late == [] and b.late == []


def test_gapped_sliding_window_sends_items_in_gaps_to_late():
    window = SlidingWindow(timedelta(seconds=5), offset=timedelta(seconds=10), align_to=ALIGN)
    logic = collect(event_clock(wait_s=60), window)
    _, at_eof, late = run_to_eof(logic, "k", [ev(1, "in"), ev(7, "gap")])
    assert late == [("k", ev(7, "gap"))]
    assert labels(at_eof) == [("k", ["in"])]


# -- windows: ordering, overlap, metadata ------------------------------------------------


def test_collect_window_sorts_by_event_time_then_arrival():
    logic = collect(event_clock(wait_s=60), tumbling(10))
    values = [ev(5, "x"), ev(1, "y"), ev(5, "z"), ev(1, "w"), ev(0, "v")]
    _, at_eof, _ = run_to_eof(logic, "k", values)
    assert labels(at_eof) == [("k", ["v", "y", "w", "x", "z"])]


def test_collect_window_order_holds_across_calls():
    logic = collect(event_clock(wait_s=60), tumbling(10))
    r = logic.on_values(KeyedCall("k", None, NOW, [ev(5, "x"), ev(1, "y")]))
    r = logic.on_values(
        KeyedCall("k", pickle.loads(pickle.dumps(r.state)), NOW, [ev(5, "z"), ev(1, "w")])
    )
    end = logic.on_timer(KeyedCall("k", r.state, EOF_MS))
    assert labels(end.emitted) == [("k", ["y", "w", "x", "z"])]


def test_sliding_overlap_puts_an_item_in_two_windows():
    window = SlidingWindow(timedelta(seconds=10), offset=timedelta(seconds=5), align_to=ALIGN)
    logic = collect(event_clock(wait_s=60), window, with_window=True)
    _, at_eof, _ = run_to_eof(logic, "k", [ev(7, "x"), ev(2, "y")])
    assert at_eof == [
        ("k", ((at(-5), at(5)), [ev(2, "y")])),
        ("k", ((at(0), at(10)), [ev(2, "y"), ev(7, "x")])),
        ("k", ((at(5), at(15)), [ev(7, "x")])),
    ]


def test_with_window_emits_the_window_bounds_as_aware_datetimes():
    logic = window_logic(
        "reduce_window", event_clock(), tumbling(10), lambda a, v: a, with_window=True
    )
    _, at_eof, _ = run_to_eof(logic, "k", [ev(12, "x")])
    assert at_eof == [("k", ((at(10), at(20)), ev(12, "x")))]
    [(_, ((start, end), _))] = at_eof
    assert start.tzinfo is not None and end.tzinfo is not None


def test_without_with_window_the_output_carries_no_window():
    logic = window_logic("reduce_window", event_clock(), tumbling(10), lambda a, v: a)
    _, at_eof, _ = run_to_eof(logic, "k", [ev(12, "x")])
    assert at_eof == [("k", ev(12, "x"))]


# -- windows: sessions -----------------------------------------------------------------


def sessions(wait_s=0, gap_s=10, **kw) -> WindowLogic:
    return collect(event_clock(wait_s=wait_s), SessionWindow(gap=timedelta(seconds=gap_s)), **kw)


def test_session_items_within_the_gap_share_a_session():
    _, at_eof, _ = run_to_eof(sessions(), "k", [ev(0, "a"), ev(4, "b"), ev(9, "c")])
    assert labels(at_eof) == [("k", ["a", "b", "c"])]


def test_session_gap_is_exclusive():
    # bytewax 0.17: an item joins a session only if it is < last event + gap.
    _, at_eof, _ = run_to_eof(sessions(wait_s=60), "k", [ev(0, "a"), ev(10, "b")])
    assert labels(at_eof) == [("k", ["a"]), ("k", ["b"])]


def test_session_item_before_a_session_merges_into_it():
    _, at_eof, _ = run_to_eof(sessions(wait_s=60), "k", [ev(20, "b"), ev(12, "a")])
    assert labels(at_eof) == [("k", ["a", "b"])]


def test_an_item_bridging_two_sessions_merges_them_into_one():
    logic = sessions(wait_s=10, with_window=True)
    r = logic.on_values(KeyedCall("k", None, NOW, [ev(0, "a"), ev(15, "c")]))
    assert len(r.state[1]) == 2  # two sessions so far
    in_call, at_eof, late = run_to_eof(logic, "k", [ev(0, "a"), ev(15, "c"), ev(8, "b")])
    assert late == [] and in_call == []
    assert at_eof == [("k", ((at(0), at(25)), [ev(0, "a"), ev(8, "b"), ev(15, "c")]))]


def test_session_closes_when_the_watermark_passes_last_event_plus_gap():
    logic = sessions(wait_s=0, gap_s=10)
    r = logic.on_values(KeyedCall("k", None, NOW, [ev(0, "a"), ev(5, "b")]))
    assert r.emitted == []
    assert r.wake == NOW + 10 * SEC + 1  # watermark 5 s passes 15 s after 10 s
    r2 = logic.on_values(KeyedCall("k", r.state, NOW, [ev(15, "c")]))
    assert r2.emitted == []  # watermark 15 == close: not yet
    r3 = logic.on_values(KeyedCall("k", r2.state, NOW, [ev(16, "d")]))
    assert labels(r3.emitted) == [("k", ["a", "b"])]
    end = logic.on_timer(KeyedCall("k", r3.state, EOF_MS))
    assert labels(end.emitted) == [("k", ["c", "d"])]


def test_session_closes_on_a_timer_as_system_time_passes():
    logic = sessions(wait_s=0, gap_s=10)
    r = logic.on_values(KeyedCall("k", None, NOW, [ev(5, "b")]))
    assert logic.on_timer(KeyedCall("k", r.state, r.wake - 1)).emitted == []
    t = logic.on_timer(KeyedCall("k", r.state, r.wake))
    assert labels(t.emitted) == [("k", ["b"])]
    assert t.wake is None


def test_session_item_older_than_the_watermark_is_late_even_within_the_gap():
    logic = sessions(wait_s=0, gap_s=10)
    _, at_eof, late = run_to_eof(logic, "k", [ev(20, "a"), ev(15, "b")])
    assert late == [("k", ev(15, "b"))]
    assert labels(at_eof) == [("k", ["a"])]


def test_session_reduce_sees_values_in_time_order():
    logic = window_logic(
        "reduce_window",
        event_clock(wait_s=60),
        SessionWindow(gap=timedelta(seconds=10)),
        lambda acc, v: (acc[0], acc[1] + v[1]),
    )
    _, at_eof, _ = run_to_eof(logic, "k", [ev(5, "b"), ev(1, "a"), ev(9, "c")])
    assert at_eof == [("k", (1, "abc"))]


def test_session_fold_window():
    logic = window_logic(
        "fold_window",
        event_clock(wait_s=60),
        SessionWindow(gap=timedelta(seconds=3)),
        lambda: 0,
        lambda acc, v: acc + 1,
    )
    _, at_eof, _ = run_to_eof(logic, "k", [ev(0), ev(1), ev(2), ev(10), ev(11)])
    assert at_eof == [("k", 3), ("k", 2)]


# -- windows: system clock ---------------------------------------------------------------


def test_system_clock_items_get_now_and_windows_close_as_now_advances():
    logic = collect(SystemClockConfig(), tumbling(10), with_window=True)
    r = logic.on_values(KeyedCall("k", None, A + 1 * SEC, ["x"]))
    assert r.late == [] and r.emitted == []
    assert r.wake == A + 10 * SEC + 1
    r = logic.on_values(KeyedCall("k", r.state, A + 5 * SEC, ["y"]))
    assert r.wake == A + 10 * SEC + 1
    t = logic.on_timer(KeyedCall("k", r.state, r.wake))
    assert t.emitted == [("k", ((at(0), at(10)), ["x", "y"]))]
    assert t.wake is None
    r = logic.on_values(KeyedCall("k", t.state, A + 12 * SEC, ["z"]))
    assert r.wake == A + 20 * SEC + 1
    end = logic.on_timer(KeyedCall("k", r.state, EOF_MS))
    assert end.emitted == [("k", ((at(10), at(20)), ["z"]))]
    assert end.wake is None


def test_system_clock_values_in_a_later_batch_close_old_windows_without_a_timer():
    logic = collect(SystemClockConfig(), tumbling(10))
    r = logic.on_values(KeyedCall("k", None, A + 1 * SEC, ["x"]))
    r = logic.on_values(KeyedCall("k", r.state, A + 15 * SEC, ["y"]))
    assert r.emitted == [("k", ["x"])]
    assert r.late == []


def test_system_clock_keeps_arrival_order_and_everything_closes_at_eof():
    logic = collect(SystemClockConfig(), tumbling(60))
    r = logic.on_values(KeyedCall("k", None, A, ["c", "a", "b"]))
    r = logic.on_values(KeyedCall("k", r.state, A + 30 * SEC, ["d"]))
    end = logic.on_timer(KeyedCall("k", r.state, EOF_MS))
    assert end.emitted == [("k", ["c", "a", "b", "d"])]


def test_values_flushed_at_the_end_join_the_open_system_clock_window_at_wall_time():
    # An upstream keyed step flushes its last results as the input ends: they belong
    # to the window open at the system time, not to one at the end of time.
    logic = collect(SystemClockConfig(), tumbling(60), with_window=True)
    r = logic.on_values(KeyedCall("k", None, A + 1 * SEC, ["a"]))
    end = logic.on_values_at_end(KeyedCall("k", r.state, A + 2 * SEC, ["b"]))
    assert end.emitted == [("k", ((at(0), at(60)), ["a", "b"]))]
    assert end.state is not None and end.state[1] == {} and end.wake is None


def test_system_clock_is_never_late():
    logic = collect(SystemClockConfig(), tumbling(1))
    state = None
    for i in range(5):
        r = logic.on_values(KeyedCall("k", state, A + i * 7_777, [i]))
        assert r.late == []
        state = r.state


# -- windows: timers, state and errors -----------------------------------------------------


def test_wake_is_none_when_no_window_is_open():
    logic = collect(event_clock(), tumbling(10))
    r = logic.on_values(KeyedCall("k", None, NOW, [ev(0, "a"), ev(12, "b")]))
    assert r.wake is not None
    end = logic.on_timer(KeyedCall("k", r.state, EOF_MS))
    assert end.wake is None
    assert logic.on_timer(KeyedCall("k", None, NOW)).state is None
    only_late = logic.on_values(KeyedCall("k", end.state, NOW, [ev(1, "late")]))
    assert only_late.wake is None and only_late.late == [("k", ev(1, "late"))]


def test_wake_tracks_the_earliest_open_window():
    logic = collect(event_clock(wait_s=30), tumbling(10))
    r = logic.on_values(KeyedCall("k", None, NOW, [ev(25, "b"), ev(3, "a")]))
    # watermark -5 s; the earliest close is 10 s: 15 s of system time away.
    assert r.wake == NOW + 15 * SEC + 1


def test_the_clock_survives_after_all_windows_closed():
    logic = collect(event_clock(wait_s=0), tumbling(10))
    r = logic.on_values(KeyedCall("k", None, NOW, [ev(50, "a")]))
    t = logic.on_timer(KeyedCall("k", r.state, r.wake))
    assert labels(t.emitted) == [("k", ["a"])]
    late = logic.on_values(KeyedCall("k", t.state, NOW + 20 * SEC, [ev(41, "old")])).late
    assert late == [("k", ev(41, "old"))]  # watermark 50 + 20 s of system time


def test_window_reducer_failure_names_the_step():
    logic = window_logic("reduce_window", event_clock(60), tumbling(10), lambda a, v: a + 1)
    with pytest.raises(RemoteStepFailure) as info:
        logic.on_values(KeyedCall("k", None, NOW, [ev(1, "a"), ev(2, "b")]))
    error = decode(info.value)
    assert error.step_id == "win"
    assert isinstance(error.__cause__, TypeError)


@pytest.mark.parametrize(
    "getter, cause",
    [
        (lambda v: 1 / 0, ZeroDivisionError),
        (lambda v: "noon", TypeError),
        (lambda v: datetime(2022, 1, 1), ValueError),
    ],
    ids=["raises", "not-a-datetime", "naive"],
)
def test_clock_getter_failures_name_the_step(getter, cause):
    logic = collect(EventClockConfig(getter, timedelta(0)), tumbling(10))
    with pytest.raises(RemoteStepFailure) as info:
        logic.on_values(KeyedCall("k", None, NOW, ["v"]))
    error = decode(info.value)
    assert error.step_id == "win"
    assert "'v'" in error.item
    assert isinstance(error.__cause__, cause)


# -- windows: splitting and pickling give the same results -------------------------------


def _cat(acc, v):
    return acc + v[1]


WINDOW_CASES = {
    "tumbling": TumblingWindow(length=timedelta(seconds=10), align_to=ALIGN),
    "sliding": SlidingWindow(timedelta(seconds=10), timedelta(seconds=4), ALIGN),
    "gapped": SlidingWindow(timedelta(seconds=3), timedelta(seconds=5), ALIGN),
    "session": SessionWindow(gap=timedelta(seconds=4)),
}
KINDS = {
    "collect_window": (),
    "fold_window": (str, _cat),
    "reduce_window": (lambda a, v: (a[0], a[1] + v[1]),),
}


def _run_split(logic, values, cuts, now):
    """Feed ``values`` cut at ``cuts``, pickling the state between calls."""
    state, emitted, late = None, [], []
    bounds = [0, *sorted(cuts), len(values)]
    for lo, hi in zip(bounds, bounds[1:]):
        r = logic.on_values(KeyedCall("k", state, now, values[lo:hi]))
        state = pickle.loads(pickle.dumps(r.state))
        emitted += r.emitted
        late += r.late
    end = logic.on_timer(KeyedCall("k", state, EOF_MS))
    return emitted, end.emitted, late, r.wake


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(sorted(KINDS)),
    window=st.sampled_from(sorted(WINDOW_CASES)),
    wait_s=st.sampled_from([0, 3]),
    times=st.lists(st.integers(-20, 40), min_size=1, max_size=12),
    data=st.data(),
)
def test_split_calls_with_pickled_state_equal_one_big_call(kind, window, wait_s, times, data):
    values = [ev(t, chr(ord("a") + i)) for i, t in enumerate(times)]
    cuts = data.draw(st.lists(st.integers(0, len(values)), max_size=4))
    logic = window_logic(kind, event_clock(wait_s), WINDOW_CASES[window], *KINDS[kind])
    whole = _run_split(logic, values, [], NOW)
    split = _run_split(logic, values, cuts, NOW)
    assert split == whole


@settings(max_examples=60, deadline=None)
@given(
    window=st.sampled_from(sorted(WINDOW_CASES)),
    wait_s=st.sampled_from([0, 3]),
    batches=st.lists(
        st.tuples(st.integers(0, 5_000), st.lists(st.integers(-20, 40), max_size=4)),
        min_size=1,
        max_size=6,
    ),
)
def test_every_value_is_emitted_or_late_and_wakes_are_in_the_future(window, wait_s, batches):
    logic = collect(event_clock(wait_s), WINDOW_CASES[window], with_window=True)
    now, state, seen, emitted, late = NOW, None, [], [], []
    n = 0
    for step, times in batches:
        now += step
        values = []
        for t in times:
            values.append(ev(t, str(n)))
            n += 1
        seen += values
        if state is not None:  # a timer that fires late, as Spark's may
            r = logic.on_timer(KeyedCall("k", state, now))
            emitted += r.emitted
            state = r.state
        r = logic.on_values(KeyedCall("k", state, now, values))
        assert r.wake is None or r.wake > now
        emitted += r.emitted
        late += [v for _, v in r.late]
        state = r.state
    if state is not None:
        emitted += logic.on_timer(KeyedCall("k", state, EOF_MS)).emitted
    in_windows = {v for _, (_, vs) in emitted for v in vs}
    assert in_windows | set(late) == set(seen)
    assert not in_windows & set(late)
    for _, ((start, end), vs) in emitted:  # every value lies in the window it is emitted for
        assert all(start <= ev_time(v) < end for v in vs)
        assert vs == sorted(vs, key=lambda v: (v[0], int(v[1])))


def test_logic_for_every_window_kind_carries_with_window():
    for kind, fns in KINDS.items():
        logic = window_logic(kind, SystemClockConfig(), tumbling(1), *fns, with_window=True)
        assert logic.with_window and logic.kind == kind and logic.uses_timers


def test_from_ms_of_window_bounds_matches_at():
    assert datetime_from_ms(A + 10 * SEC) == at(10)


# -- logic_for ----------------------------------------------------------------------------


def test_logic_for_builds_each_keyed_kind_from_its_builder():
    from flowspark.api.steps import OPERATORS
    from flowspark.runtime.logics import BUILDERS

    keyed = {kind for kind, op in OPERATORS.items() if op.family == "keyed"}
    # and an output whose parts Spark's tasks write (keyed by part, runtime/parts.py)
    assert set(BUILDERS) == keyed | {"output"}
    assert isinstance(logic_for(step_of(lambda s: s.reduce("r", max, bool))), ReduceLogic)
    step = step_of(lambda s: s.batch("b", 3, timedelta(seconds=1)))
    assert isinstance(logic_for(step), BatchLogic)


def test_logic_for_an_unknown_keyed_kind_raises():
    import dataclasses

    step = step_of(lambda s: s.reduce("mystery", max, bool))
    step = dataclasses.replace(step, kind="sort_window")
    with pytest.raises(
        ValueError, match="step 'mystery': unknown keyed operator kind 'sort_window'"
    ):
        logic_for(step)
