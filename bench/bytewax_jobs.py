"""Benchmark jobs in bytewax 0.21.1 (runs inside ``bench/.venv-bytewax``).

One worker, ``TestingSource(items, batch_size=1000)`` -> operators ->
``TestingSink(list)``, executed with ``bytewax.testing.run_main``.

``startup_s`` is the time to import bytewax (measured by ``harness.py`` when
it imports this module); ``seconds`` covers building the dataflow and
``run_main`` (input generation and output checking are excluded).
"""

from __future__ import annotations

import heapq
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
import bytewax.operators.windowing as win
import jobs
from bytewax.dataflow import Dataflow
from bytewax.inputs import DynamicSource, StatelessSourcePartition
from bytewax.operators import StatefulLogic
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSink, TestingSource, run_main

BATCH_SIZE = 1000


def _timed_run(flow: Dataflow) -> float:
    """Run *flow* to completion on one worker; return elapsed seconds."""
    t0 = time.perf_counter()
    run_main(flow)
    return time.perf_counter() - t0


def _timed(name: str, items: Any, build: Callable[[Any], None]) -> float:
    """Seconds to build flow ``name`` (``build`` adds its steps after the input of
    ``items``) and run it."""
    t0 = time.perf_counter()
    flow = Dataflow(name)
    build(op.input("inp", flow, TestingSource(items, batch_size=BATCH_SIZE)))
    build_s = time.perf_counter() - t0
    return build_s + _timed_run(flow)


def _result(seconds: float, ok: bool, **extra: Any) -> dict[str, Any]:
    return {"seconds": seconds, "startup_s": 0.0, "ok": ok, **extra}


def run_mapfilter(n: int) -> dict[str, Any]:
    """``op.map(x*3+1)`` -> ``op.filter(even)`` -> sink; count and sum outputs."""
    items = jobs.mapfilter_input(n)
    out: list[int] = []

    def build(s: Any) -> None:
        s = op.map("map", s, jobs.mapfilter_fn)
        s = op.filter("filter", s, jobs.mapfilter_keep)
        op.output("out", s, TestingSink(out))

    seconds = _timed("mapfilter", items, build)
    ok = jobs.mapfilter_check(n, len(out), sum(out))
    return _result(seconds, ok, outputs=len(out))


def run_wordcount(n: int) -> dict[str, Any]:
    """``op.flat_map(split)`` -> ``op.count_final`` (keyed on the word)."""
    lines = jobs.wordcount_input(n)
    jobs.log(f"bytewax wordcount: generated {len(lines)} lines")
    out: list[tuple[str, int]] = []

    def build(s: Any) -> None:
        words = op.flat_map("split", s, str.split)
        counts = op.count_final("count", words, lambda w: w)
        op.output("out", counts, TestingSink(out))

    seconds = _timed("wordcount", lines, build)
    ok = jobs.wordcount_check(n, out)
    return _result(seconds, ok, outputs=len(out))


def run_window_count(n: int) -> dict[str, Any]:
    """``windowing.count_window`` with an ``EventClock`` and 10 s tumbling windows."""
    events = jobs.window_count_input(n)
    jobs.log(f"bytewax window_count: generated {len(events)} events")
    out: list[tuple[str, tuple[int, int]]] = []
    late: list[Any] = []

    def build(s: Any) -> None:
        clock = win.EventClock(lambda e: e[1], wait_for_system_duration=timedelta(0))
        length = timedelta(seconds=jobs.WINDOW_S)
        windower = win.TumblingWindower(length=length, align_to=jobs.ALIGN_TO)
        wo = win.count_window("count", s, clock, windower, lambda e: e[0])
        op.output("out", wo.down, TestingSink(out))
        op.output("late", wo.late, TestingSink(late))

    seconds = _timed("window_count", events, build)
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

    def build(s: Any) -> None:
        keyed = op.map("key", s, lambda e: (e[0], (e[1], e[2])))
        ordered = op.stateful("sort", keyed, _ReorderLogic)
        op.output("out", ordered, TestingSink(out))

    seconds = _timed("reorder", events, build)
    triples = [(key, ts, i) for key, (ts, i) in out]
    ok = jobs.reorder_check(n, triples)
    return _result(seconds, ok, outputs=len(out), inversions=jobs.reorder_inversions(triples))


def run_reorder_heap(n: int) -> dict[str, Any]:
    """``op.stateful_map`` with a heap per key (``jobs.reorder_heap_mapper``; no
    end-of-input hook, so the input's per-key sentinels flush the tail) ->
    ``op.flat_map`` the emitted lists."""
    items = jobs.reorder_heap_input(n)
    jobs.log(f"bytewax reorder_heap: generated {len(items)} items (incl. sentinels)")
    out: list[tuple[str, datetime, int]] = []

    def build(s: Any) -> None:
        emitted = op.stateful_map("sort", s, jobs.reorder_heap_mapper)
        flat = op.flat_map("flat", emitted, jobs.reorder_heap_flatten)
        op.output("out", flat, TestingSink(out))

    seconds = _timed("reorder_heap", items, build)
    ok = jobs.reorder_check(n, out)
    return _result(seconds, ok, outputs=len(out), inversions=jobs.reorder_inversions(out))


class _CheckPartition(StatelessSinkPartition[tuple[str, int]]):
    def __init__(self, checker: jobs.ManyKeysChecker) -> None:
        self.checker = checker

    def write_batch(self, items: list[tuple[str, int]]) -> None:
        for key, value in items:
            self.checker.add(key, value)


class _CheckingSink(DynamicSink[tuple[str, int]]):
    """A sink that hands each ``(key, value)`` to a checker (no list of n items)."""

    def __init__(self, checker: jobs.ManyKeysChecker) -> None:
        self.checker = checker

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _CheckPartition:
        return _CheckPartition(self.checker)


def run_many_keys(n: int) -> dict[str, Any]:
    """``range(n)`` -> ``op.map`` to ``("u{i}", i)`` -> ``op.stateful_map`` keeping
    ``(count, sum)`` per key (n keys, in bytewax's in-memory state; no recovery) ->
    a checking sink."""
    checker = jobs.ManyKeysChecker(n)

    def build(s: Any) -> None:
        keyed = op.map("key", s, jobs.many_keys_item)
        sums = op.stateful_map("sum", keyed, jobs.many_keys_mapper)
        op.output("out", sums, _CheckingSink(checker))

    seconds = _timed("many_keys", range(n), build)
    return _result(seconds, checker.ok(), outputs=checker.count, checkpoint=False)


def run_dir_output(n: int) -> dict[str, Any]:
    """``(key, line)`` items over 1 000 keys -> bytewax's ``DirSink`` of 8 files."""
    from bytewax.connectors.files import DirSink

    folder = tempfile.mkdtemp(prefix="bench-dir-output-")

    def build(s: Any) -> None:
        keyed = op.map("key", s, jobs.dir_output_item)
        op.output("out", keyed, DirSink(Path(folder), jobs.DIR_OUTPUT_FILES))

    seconds = _timed("dir_output", range(n), build)
    ok, found = jobs.dir_output_check(n, folder)
    shutil.rmtree(folder, ignore_errors=True)
    return _result(seconds, ok, outputs=found, checkpoint=False)


# --------------------------------------------------------------------------
# latency: a live input paced at R events/s, recovery on
# --------------------------------------------------------------------------

# bytewax snapshots state (and commits the recovery DB) at every epoch's end.
LATENCY_EPOCH = timedelta(seconds=1)


class _PacedPartition(StatelessSourcePartition[jobs.LatencyEvent]):
    """Emits the events due by now; wakes when the next one is due."""

    def __init__(self, pacer: jobs.LatencyPacer) -> None:
        self.pacer = pacer

    def next_batch(self) -> list[jobs.LatencyEvent]:
        return self.pacer.emit(time.time())

    def next_awake(self) -> datetime | None:
        due = self.pacer.next_due()
        return None if due is None else datetime.fromtimestamp(due, UTC)


class _PacedSource(DynamicSource[jobs.LatencyEvent]):
    """A live input of ``n`` events at ``rate``/s; the clock starts at ``build``."""

    def __init__(self, n: int, rate: int) -> None:
        self.n = n
        self.rate = rate

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _PacedPartition:
        return _PacedPartition(jobs.LatencyPacer(self.n, self.rate, time.time()))


class _RecordingPartition(StatelessSinkPartition[jobs.LatencyOut]):
    def __init__(self, recorder: jobs.LatencyRecorder) -> None:
        self.recorder = recorder

    def write_batch(self, items: list[jobs.LatencyOut]) -> None:
        self.recorder.record(items, time.time())


class _RecordingSink(DynamicSink[jobs.LatencyOut]):
    """Records each output's latency at the time it is written."""

    def __init__(self, recorder: jobs.LatencyRecorder) -> None:
        self.recorder = recorder

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _RecordingPartition:
        return _RecordingPartition(self.recorder)


def run_latency(n: int) -> dict[str, Any]:
    """A paced ``DynamicSource`` -> ``op.map`` (stateless) or ``op.stateful_map`` running
    count over 1000 keys (keyed) -> a recording ``DynamicSink``; ``run_main`` with 1 s
    epochs and, for the keyed shape, recovery on (a fresh DB dir, 1 partition).

    The stateless shape runs without recovery: it has nothing to snapshot, and
    bytewax 0.21.1 with recovery on ends such a flow at once (its progress probe
    then watches only the snapshot stream, which is empty: ``worker.rs``), after a
    few events.
    """
    params = jobs.latency_params(n)
    recorder = jobs.LatencyRecorder(params)
    flow = Dataflow("latency")
    s = op.input("inp", flow, _PacedSource(params.n, params.rate))
    if params.shape == "stateless":
        out = op.map("map", s, jobs.latency_map)
    else:
        keyed = op.map("key", s, jobs.latency_key)
        counted = op.stateful_map("count", keyed, jobs.latency_count_mapper)
        out = op.map("unkey", counted, jobs.latency_unkey)
    op.output("out", out, _RecordingSink(recorder))
    recover = params.shape == "keyed"
    with tempfile.TemporaryDirectory(prefix="bytewax-bench-latency-") as db_dir:
        recovery = None
        if recover:
            init_db_dir(Path(db_dir), 1)  # = python -m bytewax.recovery DB_DIR 1
            recovery = RecoveryConfig(Path(db_dir))
        t0 = time.perf_counter()
        run_main(flow, epoch_interval=LATENCY_EPOCH, recovery_config=recovery)
        seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "startup_s": 0.0,
        **recorder.summary(),
        "recovery": recover,
        "snapshot": f"every {LATENCY_EPOCH.total_seconds():g} s epoch" if recover else None,
    }
