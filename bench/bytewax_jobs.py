"""Benchmark jobs in bytewax 0.21.1 (runs inside ``bench/.venv-bytewax``).

One worker, ``TestingSource(items, batch_size=1000)`` -> operators ->
``TestingSink(list)``, executed with ``bytewax.testing.run_main``.

``startup_s`` is the time to import bytewax (measured by ``harness.py`` when
it imports this module); ``seconds`` covers building the dataflow and
``run_main`` (input generation and output checking are excluded).
"""

from __future__ import annotations

import heapq
import time
from datetime import datetime, timedelta
from typing import Any

import bytewax.operators as op
import bytewax.operators.windowing as win
import jobs
from bytewax.dataflow import Dataflow
from bytewax.operators import StatefulLogic
from bytewax.testing import TestingSink, TestingSource, run_main

BATCH_SIZE = 1000


def _timed_run(flow: Dataflow) -> float:
    """Run *flow* to completion on one worker; return elapsed seconds."""
    t0 = time.perf_counter()
    run_main(flow)
    return time.perf_counter() - t0


def _result(seconds: float, ok: bool, **extra: Any) -> dict[str, Any]:
    return {"seconds": seconds, "startup_s": 0.0, "ok": ok, **extra}


def run_mapfilter(n: int) -> dict[str, Any]:
    """``op.map(x*3+1)`` -> ``op.filter(even)`` -> sink; count and sum outputs."""
    items = jobs.mapfilter_input(n)
    out: list[int] = []
    t0 = time.perf_counter()
    flow = Dataflow("mapfilter")
    s = op.input("inp", flow, TestingSource(items, batch_size=BATCH_SIZE))
    s = op.map("map", s, jobs.mapfilter_fn)
    s = op.filter("filter", s, jobs.mapfilter_keep)
    op.output("out", s, TestingSink(out))
    build_s = time.perf_counter() - t0
    seconds = build_s + _timed_run(flow)
    ok = jobs.mapfilter_check(n, len(out), sum(out))
    return _result(seconds, ok, outputs=len(out))


def run_wordcount(n: int) -> dict[str, Any]:
    """``op.flat_map(split)`` -> ``op.count_final`` (keyed on the word)."""
    lines = jobs.wordcount_input(n)
    jobs.log(f"bytewax wordcount: generated {len(lines)} lines")
    out: list[tuple[str, int]] = []
    t0 = time.perf_counter()
    flow = Dataflow("wordcount")
    s = op.input("inp", flow, TestingSource(lines, batch_size=BATCH_SIZE))
    words = op.flat_map("split", s, str.split)
    counts = op.count_final("count", words, lambda w: w)
    op.output("out", counts, TestingSink(out))
    build_s = time.perf_counter() - t0
    seconds = build_s + _timed_run(flow)
    ok = jobs.wordcount_check(n, out)
    return _result(seconds, ok, outputs=len(out))


def run_window_count(n: int) -> dict[str, Any]:
    """``windowing.count_window`` with an ``EventClock`` and 10 s tumbling windows."""
    events = jobs.window_count_input(n)
    jobs.log(f"bytewax window_count: generated {len(events)} events")
    out: list[tuple[str, tuple[int, int]]] = []
    late: list[Any] = []
    t0 = time.perf_counter()
    flow = Dataflow("window_count")
    s = op.input("inp", flow, TestingSource(events, batch_size=BATCH_SIZE))
    clock = win.EventClock(lambda e: e[1], wait_for_system_duration=timedelta(0))
    windower = win.TumblingWindower(length=timedelta(seconds=jobs.WINDOW_S), align_to=jobs.ALIGN_TO)
    wo = win.count_window("count", s, clock, windower, lambda e: e[0])
    op.output("out", wo.down, TestingSink(out))
    op.output("late", wo.late, TestingSink(late))
    build_s = time.perf_counter() - t0
    seconds = build_s + _timed_run(flow)
    # Tumbling windows aligned to ALIGN_TO: window id i opens at
    # ALIGN_TO + i * length, i.e. the id is the window index.
    triples = [(key, wid, c) for key, (wid, c) in out]
    ok = jobs.window_count_check(n, triples, late=len(late))
    return _result(seconds, ok, outputs=len(out), late=len(late))


class _ReorderLogic(StatefulLogic):
    """One key's reorder buffer: a heap of ``(event_time, i)``.

    On each event: push it, watermark = latest event time of the key - 3 s,
    pop and emit everything at or below the watermark. At the end of input
    (``on_eof``) emit the rest in order.
    """

    def __init__(self, resume_state: tuple[list[tuple[datetime, int]], datetime] | None) -> None:
        self.heap: list[tuple[datetime, int]] = list(resume_state[0]) if resume_state else []
        self.latest: datetime | None = resume_state[1] if resume_state else None
        self.delay = timedelta(seconds=jobs.REORDER_DELAY_S)

    def on_item(self, value: tuple[datetime, int]) -> tuple[list[tuple[datetime, int]], bool]:
        heap = self.heap
        heapq.heappush(heap, value)
        if self.latest is None or value[0] > self.latest:
            self.latest = value[0]
        watermark = self.latest - self.delay
        out = []
        while heap and heap[0][0] <= watermark:
            out.append(heapq.heappop(heap))
        return out, StatefulLogic.RETAIN

    def on_eof(self) -> tuple[list[tuple[datetime, int]], bool]:
        heap = self.heap
        return [heapq.heappop(heap) for _ in range(len(heap))], StatefulLogic.DISCARD

    def snapshot(self) -> tuple[list[tuple[datetime, int]], datetime | None]:
        return list(self.heap), self.latest


def run_reorder(n: int) -> dict[str, Any]:
    """``op.map`` to ``(key, (event_time, i))`` -> ``op.stateful`` heap sort per key."""
    events = jobs.reorder_input(n)
    jobs.log(f"bytewax reorder: generated {len(events)} events")
    out: list[tuple[str, tuple[datetime, int]]] = []
    t0 = time.perf_counter()
    flow = Dataflow("reorder")
    s = op.input("inp", flow, TestingSource(events, batch_size=BATCH_SIZE))
    keyed = op.map("key", s, lambda e: (e[0], (e[1], e[2])))
    ordered = op.stateful("sort", keyed, _ReorderLogic)
    op.output("out", ordered, TestingSink(out))
    build_s = time.perf_counter() - t0
    seconds = build_s + _timed_run(flow)
    triples = [(key, ts, i) for key, (ts, i) in out]
    ok = jobs.reorder_check(n, triples)
    return _result(seconds, ok, outputs=len(out), inversions=jobs.reorder_inversions(triples))
