"""Stateful operators end to end on local Spark: reduce, stateful_map, batch and windows.

The seed page's examples run as written (import prefix aside; those other tests build too
are in tests/bytewax_pages.py); the rest checks the bytewax 0.17 behaviour reference
(bytewax-semantics.md §2.1-2.2) and that keyed state survives being spread over many
micro-batches.
"""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta, timezone

import pytest

from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.runtime.errors import StepError
from flowspark.testing import TestingInput, TestingOutput, run_main
from flowspark.window import (
    EventClockConfig,
    SessionWindow,
    SlidingWindow,
    SystemClockConfig,
    TumblingWindow,
)
from tests.bytewax_pages import (
    SESSION_EVENTS,
    reduce_window_example,
    remove_duplicates_example,
    sessionizer_example,
)
from tests.event_times import ALIGN, at


def _add(a, b):
    return a + b


def _first(event):
    return event[0]


def _by_key(items) -> dict:
    """``[(key, x), ...]`` -> ``{key: [x, ...]}`` keeping the order within a key."""
    out: dict = defaultdict(list)
    for key, x in items:
        out[key].append(x)
    return dict(out)


def _assert_aware_utc(dt: datetime) -> None:
    assert isinstance(dt, datetime)
    assert dt.tzinfo is not None
    assert dt.utcoffset() == timedelta(0)


# -- 1. the seed page's examples ------------------------------------------------------


def test_reduce_sessionizer_example(capsys):
    run_main(sessionizer_example(SESSION_EVENTS, StdOutput()))
    lines = capsys.readouterr().out.splitlines()
    # The order between keys is not defined; each tuple is printed once.
    assert sorted(lines) == sorted(
        [
            "('b', [{'user': 'b', 'type': 'login'}, {'user': 'b', 'type': 'logout'}])",
            "('a', [{'user': 'a', 'type': 'login'}, {'user': 'a', 'type': 'post'}, "
            "{'user': 'a', 'type': 'logout'}])",
        ]
    )


def test_stateful_map_remove_duplicates_example(capsys):
    run_main(remove_duplicates_example(["a", "a", "a", "a", "b"], StdOutput()))
    assert capsys.readouterr().out == "a\nb\n"


def test_reduce_window_example():
    align_to = datetime(2022, 1, 1, tzinfo=timezone.utc)  # noqa: UP017 - the page's code
    inp = [
        ("b", {"time": align_to, "val": 1}),
        ("a", {"time": align_to + timedelta(seconds=4), "val": 1}),
        ("a", {"time": align_to + timedelta(seconds=8), "val": 1}),
        ("b", {"time": align_to + timedelta(seconds=12), "val": 1}),
    ]
    out = []
    run_main(reduce_window_example(inp, TestingOutput(out), align_to))
    assert sorted(out) == sorted([("b", 1), ("a", 2), ("b", 1)])


def test_fold_window_example():
    align_to = datetime(2022, 1, 1, tzinfo=timezone.utc)  # noqa: UP017 - the page's code
    flow = Dataflow()
    inp = [
        ("ALL", {"time": align_to, "val": "a"}),
        ("ALL", {"time": align_to + timedelta(seconds=4), "val": "b"}),
        ("ALL", {"time": align_to + timedelta(seconds=8), "val": "c"}),
        # The 10 second window should close just before processing this item.
        ("ALL", {"time": align_to + timedelta(seconds=12), "val": "d"}),
        ("ALL", {"time": align_to + timedelta(seconds=16), "val": "e"}),
    ]
    flow.input("inp", TestingInput(inp))
    clock_config = EventClockConfig(
        lambda e: e["time"], wait_for_system_duration=timedelta(seconds=0)
    )
    window_config = TumblingWindow(length=timedelta(seconds=10), align_to=align_to)

    def add(acc, x):
        acc.append(x["val"])
        return acc

    flow.fold_window("sum", clock_config, window_config, list, add)
    out = []
    flow.output("out", TestingOutput(out))
    run_main(flow)
    assert sorted(out) == sorted([("ALL", ["a", "b", "c"]), ("ALL", ["d", "e"])])


# -- 2. bytewax 0.17 facts (behaviour reference §2.1) ---------------------------------


def test_reduce_incomplete_keys_and_stateful_map_builders_and_reset():
    """reduce never flushes at EOF; builder() / builder(key); a None state resets the key."""
    flow = Dataflow()
    s = flow.input("inp", TestingInput([("a", 1), ("b", 2), ("a", 3), ("a", -1), ("a", 5)]))

    reduced: list = []
    s.reduce("red", lambda acc, v: acc + v, lambda acc: acc >= 8).output(
        "o_red", TestingOutput(reduced)
    )

    zero_arg: list = []

    def build_zero():
        return 100

    def running(state, v):
        return state + v, state + v

    s.stateful_map("zero", build_zero, running).output("o_zero", TestingOutput(zero_arg))

    one_arg: list = []

    def build_from_key(key):
        return key * 2

    def append(state, v):
        return state + str(v), state + str(v)

    s.stateful_map("one", build_from_key, append).output("o_one", TestingOutput(one_arg))

    reset: list = []

    def sum_until_negative(state, v):
        if v < 0:
            return None, "reset"
        return state + v, state + v

    s.stateful_map("reset", lambda: 0, sum_until_negative).output("o_reset", TestingOutput(reset))

    run_main(flow)
    # 'a' completes at 1+3-1+5 == 8; 'b' (2) never completes and is never emitted.
    assert reduced == [("a", 8)]
    assert _by_key(zero_arg) == {"a": [101, 104, 103, 108], "b": [102]}
    assert _by_key(one_arg) == {"a": ["aa1", "aa13", "aa13-1", "aa13-15"], "b": ["bb2"]}
    assert _by_key(reset) == {"a": [1, 4, "reset", 5], "b": [2]}


def test_batch_by_size_flushes_the_rest_at_eof():
    flow = Dataflow()
    flow.input("inp", TestingInput([("a", i) for i in range(5)]))
    flow.batch("batch", 2, timedelta(seconds=60))
    out: list = []
    flow.output("out", TestingOutput(out))
    run_main(flow)
    assert out == [("a", [0, 1]), ("a", [2, 3]), ("a", [4])]


@pytest.mark.parametrize(
    ("item", "keyed_step", "says", "shown"),
    [
        (
            "x",
            lambda flow: flow.reduce("red", lambda a, b: a + b, lambda acc: True),
            "Dataflow requires a `(key, value)` 2-tuple",
            "'x'",
        ),
        (
            (1, "x"),
            lambda flow: flow.stateful_map("sm", lambda: 0, lambda s, v: (s, v)),
            "`str` keys",
            "int",
        ),
    ],
    ids=["non-tuple-item", "int-key"],
)
def test_a_keyed_step_refuses_items_that_are_not_str_keyed_pairs(item, keyed_step, says, shown):
    flow = Dataflow()
    flow.input("inp", TestingInput([item]))
    keyed_step(flow)
    flow.output("out", TestingOutput([]))
    with pytest.raises(StepError) as info:
        run_main(flow)
    assert says in str(info.value)
    assert shown in str(info.value)
    assert isinstance(info.value.__cause__, TypeError)


# -- 3. state across micro-batches ------------------------------------------------------


@pytest.mark.parametrize(
    ("epoch_interval", "batch_size"),
    [(None, 12), (timedelta(0), 2)],
    ids=["one-micro-batch", "six-micro-batches"],
)
def test_keyed_state_is_the_same_over_one_or_many_micro_batches(epoch_interval, batch_size):
    # Keys a, b, c interleaved; item i is at minute i (in order per key), value i.
    # Minute-grained event times keep a few seconds of wall time from mattering.
    items = [("abc"[i % 3], (at(minutes=i), i)) for i in range(12)]
    clock = EventClockConfig(_first, wait_for_system_duration=timedelta(0))
    windows = TumblingWindow(length=timedelta(minutes=5), align_to=ALIGN)

    flow = Dataflow()
    s = flow.input("inp", TestingInput(items, batch_size=batch_size))
    values = s.map("value", lambda kv: (kv[0], kv[1][1]))
    reduced, mapped, batched, rw, cw = [], [], [], [], []
    values.reduce("red", lambda a, b: a + b, lambda acc: acc >= 10).output(
        "o_red", TestingOutput(reduced)
    )
    values.stateful_map("sm", lambda: 0, lambda st, v: (st + v, st + v)).output(
        "o_sm", TestingOutput(mapped)
    )
    values.batch("batch", 3, timedelta(hours=1)).output("o_batch", TestingOutput(batched))
    s.reduce_window("rw", clock, windows, lambda a, b: (a[0], a[1] + b[1])).map(
        "rw_val", lambda kv: (kv[0], kv[1][1])
    ).output("o_rw", TestingOutput(rw))
    s.collect_window("cw", clock, windows).map(
        "cw_vals", lambda kv: (kv[0], [v for _, v in kv[1]])
    ).output("o_cw", TestingOutput(cw))
    run_main(flow, epoch_interval=epoch_interval)

    # a: 0 3 6 9 / b: 1 4 7 10 / c: 2 5 8 11
    assert sorted(reduced) == [("a", 18), ("b", 10), ("b", 12), ("c", 11), ("c", 15)]
    assert _by_key(mapped) == {"a": [0, 3, 9, 18], "b": [1, 5, 12, 22], "c": [2, 7, 15, 26]}
    assert _by_key(batched) == {
        "a": [[0, 3, 6], [9]],
        "b": [[1, 4, 7], [10]],
        "c": [[2, 5, 8], [11]],
    }
    # 5-minute windows [0,5) [5,10) [10,15)
    assert sorted(rw) == sorted(
        [("a", 3), ("a", 15), ("b", 5), ("b", 7), ("b", 10), ("c", 2), ("c", 13), ("c", 11)]
    )
    assert sorted(cw) == sorted(
        [("a", [0, 3]), ("a", [6, 9]), ("b", [1, 4]), ("b", [7]), ("b", [10])]
        + [("c", [2]), ("c", [5, 8]), ("c", [11])]
    )


# -- 4. windows -------------------------------------------------------------------------


def test_tumbling_and_sliding_windows_with_window_metadata():
    items = [("k", (at(1), 1)), ("k", (at(7), 7)), ("k", (at(12), 12))]
    clock = EventClockConfig(_first, wait_for_system_duration=timedelta(0))
    flow = Dataflow()
    s = flow.input("inp", TestingInput(items))
    tumbling, sliding, gappy, gappy_late, plain = [], [], [], [], []

    def values(kv):
        key, (window, events) = kv
        return key, (window, [v for _, v in events])

    s.collect_window(
        "tumble", clock, TumblingWindow(timedelta(seconds=10), ALIGN), with_window=True
    ).map("t_vals", values).output("o_t", TestingOutput(tumbling))
    s.collect_window(
        "slide",
        clock,
        SlidingWindow(timedelta(seconds=10), timedelta(seconds=5), ALIGN),
        with_window=True,
    ).map("s_vals", values).output("o_s", TestingOutput(sliding))
    # offset > length: t=7 falls in the gap [5, 10) and belongs to no window.
    gaps = s.collect_window(
        "gaps", clock, SlidingWindow(timedelta(seconds=5), timedelta(seconds=10), ALIGN)
    )
    gaps.map("g_vals", lambda kv: (kv[0], [v for _, v in kv[1]])).output(
        "o_g", TestingOutput(gappy)
    )
    gaps.late.output("o_g_late", TestingOutput(gappy_late))
    # Without with_window the output is just (key, acc), as in bytewax 0.17.
    s.reduce_window(
        "plain",
        clock,
        TumblingWindow(timedelta(seconds=10), ALIGN),
        lambda a, b: (a[0], a[1] + b[1]),
    ).output("o_p", TestingOutput(plain))
    run_main(flow)

    assert sorted(tumbling) == [
        ("k", ((at(0), at(10)), [1, 7])),
        ("k", ((at(10), at(20)), [12])),
    ]
    # The item at 7 lands in two overlapping windows: [0, 10) and [5, 15).
    assert sorted(sliding) == [
        ("k", ((at(-5), at(5)), [1])),
        ("k", ((at(0), at(10)), [1, 7])),
        ("k", ((at(5), at(15)), [7, 12])),
        ("k", ((at(10), at(20)), [12])),
    ]
    for _, ((start, end), _) in tumbling + sliding:
        _assert_aware_utc(start)
        _assert_aware_utc(end)
    assert sorted(gappy) == [("k", [1]), ("k", [12])]
    assert gappy_late == [("k", (at(7), 7))]
    assert sorted(plain) == [("k", (at(1), 8)), ("k", (at(12), 12))]


def test_late_items_go_to_late_stream_unless_wait_covers_them():
    # 'a' sees t=12 then t=3, in one micro-batch (no wall time passes between them).
    items = [("a", (at(12), "a12")), ("a", (at(3), "a3")), ("b", (at(3), "b3"))]
    windows = TumblingWindow(timedelta(seconds=10), ALIGN)
    flow = Dataflow()
    s = flow.input("inp", TestingInput(items))

    strict, strict_late, patient, patient_late = [], [], [], []
    w0 = s.collect_window("wait0", EventClockConfig(_first, timedelta(0)), windows)
    w0.map("w0_vals", lambda kv: (kv[0], [v for _, v in kv[1]])).output(
        "o_w0", TestingOutput(strict)
    )
    w0.late.output("o_w0_late", TestingOutput(strict_late))
    # wait 5 s: after t=12 the watermark is 7, before [0, 10) closes: t=3 is accepted.
    w5 = s.collect_window("wait5", EventClockConfig(_first, timedelta(seconds=5)), windows)
    w5.map("w5_vals", lambda kv: (kv[0], [v for _, v in kv[1]])).output(
        "o_w5", TestingOutput(patient)
    )
    w5.late.output("o_w5_late", TestingOutput(patient_late))
    run_main(flow)

    assert sorted(strict) == [("a", ["a12"]), ("b", ["b3"])]
    assert strict_late == [("a", (at(3), "a3"))]
    assert sorted(patient) == [("a", ["a12"]), ("a", ["a3"]), ("b", ["b3"])]
    assert patient_late == []


def _sleep_on_pause(item):
    if item == "pause":
        time.sleep(3)


def test_event_clock_watermark_never_goes_back():
    # 'a' sees t=0, then >= 3 s of wall time pass (a sleep in its own micro-batch), then
    # t=1. The watermark had reached 0 + 3 s, past the close (2 s) of [0, 2): t=1 is late.
    # Adopting t=1 as the new max would move the watermark back to 1 s and accept it.
    items = [("a", (at(0), "a0")), "pause", ("a", (at(1), "a1"))]
    flow = Dataflow()
    s = flow.input("inp", TestingInput(items))
    events = s.inspect("pause", _sleep_on_pause).filter("events", lambda x: x != "pause")
    results, late = [], []
    w = events.collect_window(
        "cw", EventClockConfig(_first, timedelta(0)), TumblingWindow(timedelta(seconds=2), ALIGN)
    )
    w.map("vals", lambda kv: (kv[0], [v for _, v in kv[1]])).output("o", TestingOutput(results))
    w.late.output("o_late", TestingOutput(late))
    run_main(flow, epoch_interval=timedelta(0))
    assert (results, late) == ([("a", ["a0"])], [("a", (at(1), "a1"))])


def test_session_windows_merge_across_micro_batches_and_sort_by_time():
    # Every item is its own micro-batch; 's' arrives out of order: 0, 30, 8, 25, 17.
    # With gap 10: {0,8} and {25,30} form, then 17 bridges them into one session.
    order = [("s", 0), ("t", 0), ("s", 30), ("s", 8), ("t", 100), ("s", 25), ("s", 17)]
    items = [(k, (at(sec), sec)) for k, sec in order]
    clock = EventClockConfig(_first, wait_for_system_duration=timedelta(hours=1))
    sessions = SessionWindow(gap=timedelta(seconds=10))
    flow = Dataflow()
    s = flow.input("inp", TestingInput(items))
    collected, summed, folded = [], [], []
    s.collect_window("cw", clock, sessions, with_window=True).map(
        "cw_vals", lambda kv: (kv[0], (kv[1][0], [v for _, v in kv[1][1]]))
    ).output("o_cw", TestingOutput(collected))
    s.reduce_window("rw", clock, sessions, lambda a, b: (a[0], a[1] + b[1])).map(
        "rw_val", lambda kv: (kv[0], kv[1][1])
    ).output("o_rw", TestingOutput(summed))

    def append(acc, event):
        acc.append(event[1])
        return acc

    s.fold_window("fw", clock, sessions, list, append).output("o_fw", TestingOutput(folded))
    run_main(flow, epoch_interval=timedelta(0))

    assert sorted(collected) == [
        ("s", ((at(0), at(40)), [0, 8, 17, 25, 30])),
        ("t", ((at(0), at(10)), [0])),
        ("t", ((at(100), at(110)), [100])),
    ]
    assert sorted(summed) == [("s", 80), ("t", 0), ("t", 100)]
    assert sorted(folded) == [("s", [0, 8, 17, 25, 30]), ("t", [0]), ("t", [100])]


def test_system_clock_windows_all_close_at_eof():
    before = datetime.now(UTC)
    items = [(k, 1) for k in "ababa"] + [("c", 5)]
    flow = Dataflow()
    s = flow.input("inp", TestingInput(items, batch_size=2))
    summed, collected = [], []
    hour = TumblingWindow(timedelta(hours=1), ALIGN)
    s.reduce_window("rw", SystemClockConfig(), hour, lambda a, b: a + b, with_window=True).output(
        "o_rw", TestingOutput(summed)
    )
    s.collect_window("cw", SystemClockConfig(), hour).output("o_cw", TestingOutput(collected))
    run_main(flow, epoch_interval=timedelta(0))
    after = datetime.now(UTC)

    # The run might straddle an hour boundary: add up each key's windows.
    totals: dict = defaultdict(int)
    for key, ((start, end), acc) in summed:
        totals[key] += acc
        _assert_aware_utc(start)
        assert end - start == timedelta(hours=1)
        assert start <= after and end > before
    assert dict(totals) == {"a": 3, "b": 2, "c": 5}
    assert {k: sum(vs, []) for k, vs in _by_key(collected).items()} == {
        "a": [1, 1, 1],
        "b": [1, 1],
        "c": [5],
    }


def test_naive_datetime_from_dt_getter_fails_naming_timezone():
    flow = Dataflow()
    flow.input("inp", TestingInput([("a", datetime(2022, 1, 1))]))
    clock = EventClockConfig(lambda dt: dt, wait_for_system_duration=timedelta(0))
    flow.reduce_window("naive", clock, TumblingWindow(timedelta(seconds=10), ALIGN), max)
    flow.output("out", TestingOutput([]))
    with pytest.raises(StepError) as info:
        run_main(flow)
    assert info.value.step_id == "naive"
    assert "timezone" in str(info.value)


# -- 5. batch timeout -------------------------------------------------------------------


def test_batch_timeout_emits_before_max_size():
    flow = Dataflow()
    flow.input("inp", TestingInput([("a", i) for i in range(6)], batch_size=1))
    flow.batch("batch", 100, timedelta(milliseconds=1))
    out: list = []
    flow.output("out", TestingOutput(out))
    run_main(flow, epoch_interval=timedelta(0))
    assert all(key == "a" for key, _ in out)
    batches = [b for _, b in out]
    # More than one batch: the timeout, not the end of input, emitted them.
    assert len(batches) > 1
    assert all(0 < len(b) < 100 for b in batches)
    assert [v for b in batches for v in b] == list(range(6))


# -- 6. steps after stateful steps -------------------------------------------------------


def test_stateful_after_stateful_and_output_passes_items_on():
    # Minutes apart, in two micro-batches: wall time passing cannot make anything late.
    items = [(k, (at(minutes=m), 1)) for k, m in [("a", 1), ("b", 2), ("a", 3), ("a", 14)]]
    clock = EventClockConfig(_first, wait_for_system_duration=timedelta(0))
    flow = Dataflow()
    flow.input("inp", TestingInput(items, batch_size=2))
    flow.reduce_window(
        "count",
        clock,
        TumblingWindow(timedelta(minutes=10), ALIGN),
        lambda a, b: (a[0], a[1] + b[1]),
    )
    flow.map(lambda kv: (kv[0], kv[1][1]))
    counts: list = []
    flow.output("counts", TestingOutput(counts))  # passes items on downstream
    flow.map(lambda kv: ("all", kv[1]))
    flow.stateful_map("running", lambda: 0, lambda total, n: (total + n, total + n))
    totals: list = []
    flow.output("totals", TestingOutput(totals))
    run_main(flow, epoch_interval=timedelta(0))

    assert sorted(counts) == [("a", 1), ("a", 2), ("b", 1)]
    # One running total per window; the order windows close in is not defined.
    assert len(totals) == 3
    assert all(key == "all" for key, _ in totals)
    assert sorted(t for _, t in totals)[-1] == 4
    assert [t for _, t in totals] == sorted(t for _, t in totals)


# -- 7. errors ----------------------------------------------------------------------------


def _explode_on_13(acc, value):
    if value == 13 or (isinstance(value, tuple) and value[1] == 13):
        raise ValueError("unlucky value")
    return acc


@pytest.mark.parametrize("kind", ["reduce", "reduce_window"])
def test_reducer_error_names_step_and_item(kind):
    flow = Dataflow()
    if kind == "reduce":
        flow.input("inp", TestingInput([("k", 1), ("k", 13), ("k", 2)]))
        flow.reduce("boom", _explode_on_13, lambda acc: False)
    else:
        flow.input("inp", TestingInput([("k", (at(1), 1)), ("k", (at(2), 13))]))
        clock = EventClockConfig(_first, wait_for_system_duration=timedelta(0))
        flow.reduce_window(
            "boom", clock, TumblingWindow(timedelta(seconds=10), ALIGN), _explode_on_13
        )
    flow.output("out", TestingOutput([]))
    with pytest.raises(StepError) as info:
        run_main(flow)
    err = info.value
    assert err.step_id == "boom"
    assert "'boom'" in str(err)
    assert "13" in err.item and "'k'" in err.item
    assert "_explode_on_13" in str(err)
    assert "ValueError: unlucky value" in str(err)
    assert isinstance(err.__cause__, ValueError)


def test_keyed_steps_after_a_window_get_its_end_of_input_flush():
    """The last windows close when the input ends; what they emit reaches the next keyed
    steps with the end-of-input time and must be counted there, not called late."""
    flow = Dataflow()
    nums = flow.input("inp", TestingInput([("k", i) for i in range(20)]))
    clock = EventClockConfig(lambda v: at(v), timedelta(0))
    sums = nums.reduce_window("w1", clock, TumblingWindow(timedelta(seconds=5), ALIGN), _add)
    totals = sums.map("rekey", lambda kv: ("all", kv[1])).reduce_window(
        "w2",
        EventClockConfig(lambda v: ALIGN, timedelta(0)),
        TumblingWindow(timedelta(seconds=5), ALIGN),
        _add,
    )
    batches = sums.batch("b", 10, timedelta(hours=1))
    out_totals: list = []
    out_batches: list = []
    late: list = []
    totals.output("totals", TestingOutput(out_totals))
    totals.late.output("late", TestingOutput(late))
    batches.output("batches", TestingOutput(out_batches))
    run_main(flow)
    assert out_totals == [("all", sum(range(20)))] and late == []
    assert [sorted(values) for _, values in out_batches] == [[10, 35, 60, 85]]


def test_state_buckets_that_outgrow_their_inline_blob_keep_every_key():
    # 96 keys share 32 state buckets; each key's state grows by 8 KB per item, so
    # buckets pass the inline blob's 64 KB limit after a few micro-batches and move
    # their states to the map state mid-run; keys whose state is discarded restart.
    # A collect_window over the same keys keeps wake times through the same move.
    keys = [f"k{i}" for i in range(96)]
    rounds = 6
    items = [(key, (key, r)) for r in range(rounds) for key in keys]
    clock = EventClockConfig(lambda v: at(minutes=v[1]), wait_for_system_duration=timedelta(0))
    windows = TumblingWindow(length=timedelta(minutes=4), align_to=ALIGN)

    def grow(state, value):
        key, r = value
        if r == 4 and int(key[1:]) % 5 == 0:
            return None, -1  # discard this key's state
        payload, n = state or ("", 0)
        return (payload + "x" * 8192, n + 1), n + 1

    flow = Dataflow()
    s = flow.input("inp", TestingInput(items, batch_size=len(keys)))
    counts, collected = [], []
    s.stateful_map("grow", lambda: None, grow).output("o_counts", TestingOutput(counts))
    s.collect_window("cw", clock, windows).map(
        "rounds", lambda kv: (kv[0], [r for _, r in kv[1]])
    ).output("o_cw", TestingOutput(collected))
    run_main(flow, epoch_interval=timedelta(0))

    assert len(counts) == len(keys) * rounds
    by_key = _by_key(counts)
    for key in keys:
        expected = [1, 2, 3, 4, -1, 1] if int(key[1:]) % 5 == 0 else [1, 2, 3, 4, 5, 6]
        assert by_key[key] == expected, key
    assert sorted(collected) == sorted(
        [(key, [0, 1, 2, 3]) for key in keys] + [(key, [4, 5]) for key in keys]
    )
