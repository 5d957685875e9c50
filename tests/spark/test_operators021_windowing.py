"""bytewax 0.21.1's windowing operators end to end on local Spark: the outputs its
docs and tests (pytests/operators/windowing/ at tag v0.21.1) expect, checked against
real bytewax 0.21.1 where they print nothing.

bytewax emits window results as windows close, per key; a run that reads its whole
input in one micro-batch emits the same items grouped per step and key, so those
compare sorted. Runs with ``epoch_interval=timedelta(0)`` (one micro-batch per item)
keep each key's state in Spark's state store between items.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.operators.windowing import (
    LATE_SESSION_ID,
    ZERO_TD,
    EventClock,
    SessionWindower,
    SlidingWindower,
    SystemClock,
    TumblingWindower,
    WindowMetadata,
)
from flowspark.recovery import RecoveryConfig
from flowspark.testing import TestingSink, TestingSource, run_main
from tests.docs_blocks import ROOT, blocks_for
from tests.event_times import ALIGN, at

NOON = datetime(2023, 1, 1, 12, 0, tzinfo=UTC)


def _outputs(flow: Dataflow, wo: win.WindowOut) -> tuple[list[Any], list[Any], list[Any]]:
    down: list[Any] = []
    late: list[Any] = []
    meta: list[Any] = []
    op.output("down", wo.down, TestingSink(down))
    op.output("late", wo.late, TestingSink(late))
    op.output("meta", wo.meta, TestingSink(meta))
    return down, late, meta


def test_the_docs_collect_window_example(capsys):
    flow = Dataflow("collect_window_example")
    data = [
        ("key1", "apple", NOON),
        ("key1", "banana", NOON + timedelta(minutes=5)),
        ("key2", "cherry", NOON + timedelta(minutes=10)),
        ("key1", "date", NOON + timedelta(minutes=15)),
        ("key2", "elderberry", NOON + timedelta(minutes=20)),
    ]
    keyed = op.key_on("key_on", op.input("input", flow, TestingSource(data)), lambda x: x[0])
    clock = EventClock(ts_getter=lambda x: x[2], wait_for_system_duration=timedelta(seconds=0))
    windower = TumblingWindower(length=timedelta(minutes=10), align_to=NOON)
    windowed = win.collect_window("collect_window", keyed, clock, windower)

    def flatten(item: Any) -> Any:
        key, (window_id, values) = item
        for k, s, ts in values:
            yield ((k, s.upper(), ts.strftime("%H:%M")), window_id)

    def fmt(item: Any) -> str:
        (k, s_upper, ts_str), window_id = item
        return f"({k!r}, {s_upper!r}, {ts_str}) => Window {window_id}"

    flat = op.flat_map("to_uppercase_and_flatten", windowed.down, flatten)
    op.inspect("output", op.map("format_output", flat, fmt))
    run_main(flow)
    assert sorted(capsys.readouterr().out.splitlines()) == [
        "collect_window_example.output: \"('key1', 'APPLE', 12:00) => Window 0\"",
        "collect_window_example.output: \"('key1', 'BANANA', 12:05) => Window 0\"",
        "collect_window_example.output: \"('key1', 'DATE', 12:15) => Window 1\"",
        "collect_window_example.output: \"('key2', 'CHERRY', 12:10) => Window 1\"",
        "collect_window_example.output: \"('key2', 'ELDERBERRY', 12:20) => Window 2\"",
    ]


def test_the_docs_count_window_and_fold_window_examples():
    flow = Dataflow("count_window_example")
    data = [
        ("apple", NOON),
        ("banana", NOON + timedelta(minutes=5)),
        ("apple", NOON + timedelta(minutes=10)),
        ("banana", NOON + timedelta(minutes=15)),
        ("apple", NOON + timedelta(minutes=20)),
        ("cherry", NOON + timedelta(minutes=25)),
    ]
    up = op.input("input", flow, TestingSource(data))
    clock = EventClock(ts_getter=lambda x: x[1], wait_for_system_duration=ZERO_TD)
    windower = TumblingWindower(length=timedelta(minutes=15), align_to=NOON)
    counted = win.count_window("count_window", up, clock, windower, key=lambda x: x[0])
    folds = [("key1", 1, 0), ("key1", 2, 5), ("key2", 3, 10), ("key2", 4, 15), ("key1", 5, 20)]
    rows = [(k, v, NOON + timedelta(minutes=m)) for k, v, m in folds]
    keyed = op.key_on("key_on", op.input("input2", flow, TestingSource(rows)), lambda x: x[0])
    folded = win.fold_window(
        "fold_window",
        keyed,
        EventClock(ts_getter=lambda x: x[2], wait_for_system_duration=ZERO_TD),
        TumblingWindower(length=timedelta(minutes=10), align_to=NOON),
        builder=lambda: 0,
        folder=lambda acc, x: acc + x[1],
        merger=lambda a, b: a + b,
    )
    counts: list[Any] = []
    sums: list[Any] = []
    op.output("counts", counted.down, TestingSink(counts))
    op.output("sums", folded.down, TestingSink(sums))
    run_main(flow)
    assert sorted(counts) == [
        ("apple", (0, 2)),
        ("apple", (1, 1)),
        ("banana", (0, 1)),
        ("banana", (1, 1)),
        ("cherry", (1, 1)),
    ]
    assert sorted(sums) == [("key1", (0, 3)), ("key1", (2, 5)), ("key2", (1, 7))]


def _fold_tumbling(recovery: RecoveryConfig | None = None) -> list[Any]:
    """bytewax's test_fold_window_tumbling."""
    inp = [(at(0), "login"), (at(4), "post"), (at(8), "post"), (at(16), "post")]
    flow = Dataflow("test_df")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource(inp)), lambda _: "ALL")

    def count(counts: dict[str, int], event: Any) -> dict[str, int]:
        counts[event[1]] += 1
        return counts

    fold_out = win.fold_window(
        "count",
        keyed,
        EventClock(lambda e: e[0], wait_for_system_duration=ZERO_TD),
        TumblingWindower(length=timedelta(seconds=10), align_to=ALIGN),
        lambda: defaultdict(int),
        count,
        lambda a, b: {**a, **b},
    )
    cleaned = op.map(
        "normal_dict", op.key_rm("key_rm", fold_out.down), lambda iv: (iv[0], dict(iv[1]))
    )
    out: list[Any] = []
    op.output("out", cleaned, TestingSink(out))
    if recovery is None:
        run_main(flow)
    else:
        run_main(flow, epoch_interval=timedelta(0), recovery_config=recovery)
    return out


def test_fold_window_tumbling_as_bytewaxs_test():
    assert _fold_tumbling() == [(0, {"login": 1, "post": 2}), (1, {"post": 1})]


def test_window_state_lives_in_sparks_state_store_one_micro_batch_per_item(tmp_path: Path):
    out = _fold_tumbling(RecoveryConfig(tmp_path / "ckpt"))
    assert out == [(0, {"login": 1, "post": 2}), (1, {"post": 1})]


def test_sliding_windows_late_items_and_metadata():
    # bytewax's test_fold_window_sliding, with its late and meta streams (as real
    # bytewax 0.21.1 emits them).
    seconds = [(1, "a"), (4, "b"), (8, "c"), (12, "d"), (13, "e"), (14, "f"), (16, "g"), (1, "h")]
    flow = Dataflow("test_df")
    events = op.input("inp", flow, TestingSource([(at(s), v) for s, v in seconds]))
    keyed = op.key_on("key", events, lambda _: "ALL")
    windower = SlidingWindower(timedelta(seconds=10), timedelta(seconds=5), ALIGN)
    wo = win.fold_window(
        "sum",
        keyed,
        EventClock(lambda e: e[0], wait_for_system_duration=ZERO_TD),
        windower,
        list,
        lambda acc, e: [*acc, e[1]],
        list.__add__,
    )
    down, late, meta = _outputs(flow, wo)
    run_main(flow)
    assert down == [
        ("ALL", (-1, ["a", "b"])),
        ("ALL", (0, ["a", "b", "c"])),
        ("ALL", (1, ["c", "d", "e", "f"])),
        ("ALL", (2, ["d", "e", "f", "g"])),
        ("ALL", (3, ["g"])),
    ]
    assert late == [("ALL", (-1, (at(1), "h"))), ("ALL", (0, (at(1), "h")))]
    assert meta == [
        ("ALL", (n, WindowMetadata(at(5 * n), at(5 * n + 10), set()))) for n in range(-1, 4)
    ]


def test_sessions_merge_and_a_late_item_gets_the_late_session_id():
    # bytewax's test_fold_window_session, plus one item bridging two sessions.
    seconds = [(1, "a"), (5, "b"), (11, "c"), (12, "d"), (13, "e"), (14, "f"), (20, "g"), (1, "h")]
    flow = Dataflow("test_df")
    events = op.input("inp", flow, TestingSource([(at(s), v) for s, v in seconds]))
    keyed = op.key_on("key", events, lambda _: "ALL")
    clock = EventClock(lambda e: e[0], wait_for_system_duration=ZERO_TD)
    wo = win.collect_window("sum", keyed, clock, SessionWindower(gap=timedelta(seconds=5)))
    down, late, meta = _outputs(flow, wo)
    bridged = op.input("inp2", flow, TestingSource([(at(0), "x"), (at(20), "y"), (at(10), "z")]))
    slow = EventClock(lambda e: e[0], wait_for_system_duration=timedelta(minutes=1))
    keyed2 = op.key_on("key2", bridged, lambda _: "B")
    # Unordered, so y (20 s) opens session 1 before z (10 s) bridges it to session 0.
    wo2 = win.collect_window(
        "merged", keyed2, slow, SessionWindower(timedelta(seconds=10)), ordered=False
    )
    merged: list[Any] = []
    merged_meta: list[Any] = []
    op.output("merged_down", wo2.down, TestingSink(merged))
    op.output("merged_meta", wo2.meta, TestingSink(merged_meta))
    run_main(flow)

    def values(down: list[Any]) -> list[Any]:
        return [(key, (wid, [v for _, v in items])) for key, (wid, items) in down]

    assert values(down) == [
        ("ALL", (0, ["a", "b"])),
        ("ALL", (1, ["c", "d", "e", "f"])),
        ("ALL", (2, ["g"])),
    ]
    assert late == [("ALL", (LATE_SESSION_ID, (at(1), "h")))]
    assert meta[1] == ("ALL", (1, WindowMetadata(at(11), at(14), set())))
    assert values(merged) == [("B", (0, ["x", "z", "y"]))]  # z joined 0, then 1 merged in
    assert merged_meta == [("B", (0, WindowMetadata(at(0), at(20), {1})))]


def test_count_window_with_the_system_clock_counts_what_was_read_together():
    flow = Dataflow("sys")
    words = op.input("inp", flow, TestingSource(["a", "b", "a", "a"]))
    windower = TumblingWindower(timedelta(hours=1), ALIGN)
    wo = win.count_window("count", words, SystemClock(), windower, lambda w: w)
    down, late, meta = _outputs(flow, wo)
    started = datetime.now(UTC)
    run_main(flow)
    assert late == []
    assert sorted((key, n) for key, (_wid, n) in down) == [("a", 3), ("b", 1)]
    assert len({wid for _key, (wid, _n) in down}) == 1  # read together: one window
    hour = timedelta(hours=1)
    for _key, (wid, md) in meta:
        assert md.open_time == ALIGN + wid * hour and md.close_time == md.open_time + hour
        assert started - hour < md.open_time <= datetime.now(UTC)


def test_max_min_and_reduce_window():
    flow = Dataflow("mm")
    rows = [("k", 3, 1), ("k", 9, 2), ("k", 5, 12), ("k", 1, 13)]
    keyed = op.key_on("key", op.input("inp", flow, TestingSource(rows)), lambda r: r[0])
    clock = EventClock(lambda r: at(r[2]), wait_for_system_duration=ZERO_TD)
    windower = TumblingWindower(timedelta(seconds=10), ALIGN)
    outs: dict[str, list[Any]] = {"max": [], "min": [], "sum": []}
    by = lambda r: r[1]  # noqa: E731
    op.output(
        "o_max", win.max_window("max", keyed, clock, windower, by).down, TestingSink(outs["max"])
    )
    op.output(
        "o_min", win.min_window("min", keyed, clock, windower, by).down, TestingSink(outs["min"])
    )
    values = op.map_value("v", keyed, lambda r: r[1])
    vclock = EventClock(lambda v: at({3: 1, 9: 2, 5: 12, 1: 13}[v]), ZERO_TD)
    summed = win.reduce_window("sum", values, vclock, windower, lambda a, b: a + b)
    op.output("o_sum", summed.down, TestingSink(outs["sum"]))
    run_main(flow)
    assert [(w, r[1]) for _k, (w, r) in outs["max"]] == [(0, 9), (1, 5)]
    assert [(w, r[1]) for _k, (w, r) in outs["min"]] == [(0, 3), (1, 1)]
    assert outs["sum"] == [("k", (0, 12)), ("k", (1, 6))]


def _join(insert: str, emit: str, lefts: list[Any], rights: list[Any]) -> list[Any]:
    """bytewax's _build_join_window_dataflow: sessions of 10 s, a clock that waits
    for ever (so everything is ordered and closes at the end)."""
    flow = Dataflow("test_df")
    ls = op.key_on("key_l", op.input("inp_l", flow, TestingSource(lefts)), lambda _: "ALL")
    rs = op.key_on("key_r", op.input("inp_r", flow, TestingSource(rights)), lambda _: "ALL")
    clock = EventClock(lambda e: e[0], wait_for_system_duration=timedelta.max)
    joined = win.join_window(
        "join",
        clock,
        SessionWindower(timedelta(seconds=10)),
        ls,
        rs,
        insert_mode=insert,  # type: ignore[arg-type]
        emit_mode=emit,  # type: ignore[arg-type]
    )

    def clean(id_row: Any) -> Any:
        _wid, row = id_row
        return tuple(None if side is None else side[1] for side in row)

    out: list[Any] = []
    op.output("out", op.map("clean", op.key_rm("unkey", joined.down), clean), TestingSink(out))
    run_main(flow)
    return out


def test_join_window_modes_as_bytewaxs_tests():
    one = [(at(0), 1)]
    assert _join("first", "complete", one, [(at(2), 3), (at(1), 2)]) == [(1, 2)]
    assert _join("last", "complete", one, [(at(1), 2)]) == [(1, 2)]
    assert _join("last", "final", one, [(at(1), 2), (at(2), 3)]) == [(1, 3)]
    assert _join("last", "running", one, [(at(1), 2), (at(2), 3)]) == [(1, None), (1, 2), (1, 3)]
    product = _join("product", "final", [(at(0), 1), (at(1), 2)], [(at(1), 3), (at(2), 4)])
    assert product == [(1, 3), (1, 4), (2, 3), (2, 4)]


def test_the_bytewax_021_page_window_example(request, capsys: pytest.CaptureFixture[str]):
    # Runs the window block of docs/bytewax-021.md (a whole-input run: grouped per step).
    [block] = blocks_for(request)
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(block.text, str(Path(ROOT / block.path)), "exec"), namespace)
    late_click = ("ann", datetime(2024, 1, 1, 0, 0, 3, tzinfo=UTC))
    assert sorted(capsys.readouterr().out.splitlines()) == [
        "clicks.down: ('ann', (0, 1))",
        "clicks.down: ('ann', (1, 1))",
        f"clicks.late: ('ann', (0, {late_click!r}))",
        "clicks.meta: ('ann', (0, 0))",
        "clicks.meta: ('ann', (1, 10))",
    ]
