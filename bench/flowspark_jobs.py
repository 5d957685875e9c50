"""Benchmark jobs in flowspark (embedded Spark, ``local[2]``).

Contract (see ``harness.py`` and ``README.md``): each ``run_<job>(n)`` runs the
job once on ``n`` items and returns ``seconds`` (processing, excluding engine
start-up and input generation), ``startup_s`` and ``ok`` (checked by
``jobs.py``).

Start-up here is: creating the SparkSession (JVM start) and one tiny warm-up
flow with a keyed step, run the way the job will run, which starts Spark's
Python worker daemon and loads the classes every job needs. Both are one-time
costs of a running engine, not of the job; the job's own start (for a streamed
run: the source's planning process, transformWithState planning, the
checkpoint) is inside ``seconds``.

Jobs run as ``run_main`` runs them: an in-memory input that fits one
micro-batch runs as one Spark batch job. ``$FLOWSPARK_BENCH_STREAM``
(``run.py --stream``) makes them stream anyway; each result says which
(``"mode"``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import jobs


def _engine() -> float:
    """Start Spark and warm it up; return the seconds it took."""
    from flowspark.dataflow import Dataflow
    from flowspark.engine.session import get_session
    from flowspark.testing import TestingInput, TestingOutput

    t0 = time.perf_counter()
    get_session("local[2]")
    warm = Dataflow()
    warm.input("inp", TestingInput(range(10)))
    warm.map(lambda x: (str(x % 2), x))
    warm.stateful_map("warm_state", lambda: 0, lambda s, x: (s + x, s + x))
    warm.output("out", TestingOutput([]))
    _run(warm)
    return time.perf_counter() - t0


def _run(flow: Any) -> str:
    """Run ``flow`` as ``run_main`` does; return how it ran ("batch job" or "stream").

    With ``$FLOWSPARK_BENCH_STREAM`` set (``run.py --stream``) a bounded input
    that fits one micro-batch streams anyway instead of running as one batch job.
    """
    from flowspark.engine.query import RunConfig, run_flow

    stream = os.environ.get("FLOWSPARK_BENCH_STREAM", "") not in ("", "0")
    report = run_flow(flow, RunConfig(batch_job=not stream))
    return "stream" if report.streamed else "batch job"


def run_mapfilter(n: int) -> dict[str, Any]:
    """Ints ``0..n-1`` -> map ``x*3+1`` -> keep evens -> count and sum."""
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput, TestingOutput

    startup = _engine()
    out: list[int] = []
    flow = Dataflow()
    flow.input("inp", TestingInput(jobs.mapfilter_input(n), batch_size=1000))
    flow.map(jobs.mapfilter_fn)
    flow.filter(jobs.mapfilter_keep)
    flow.output("out", TestingOutput(out))
    t0 = time.perf_counter()
    mode = _run(flow)
    seconds = time.perf_counter() - t0
    ok = jobs.mapfilter_check(n, len(out), sum(out))
    return {"seconds": seconds, "startup_s": startup, "ok": ok, "outputs": len(out), "mode": mode}


def run_wordcount(n: int) -> dict[str, Any]:
    """n lines of 6 words -> split -> final count per word (at the end of input).

    bytewax 0.17 has no ``count_final``; the 0.17 way is a window that spans the
    whole run: ``reduce_window`` on the system clock with one very long
    tumbling window, which closes when the input ends.
    """
    from datetime import timedelta

    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput, TestingOutput
    from flowspark.window import SystemClockConfig, TumblingWindow

    startup = _engine()
    lines = jobs.wordcount_input(n)
    out: list[tuple[str, int]] = []
    flow = Dataflow()
    flow.input("inp", TestingInput(lines, batch_size=1000))
    flow.flat_map(str.split)
    flow.map(lambda word: (word, 1))
    flow.reduce_window(
        "count", SystemClockConfig(), TumblingWindow(timedelta(days=36500)), lambda a, b: a + b
    )
    flow.output("out", TestingOutput(out))
    t0 = time.perf_counter()
    mode = _run(flow)
    seconds = time.perf_counter() - t0
    ok = jobs.wordcount_check(n, out)
    return {"seconds": seconds, "startup_s": startup, "ok": ok, "outputs": len(out), "mode": mode}


def run_window_count(n: int) -> dict[str, Any]:
    """n events over 100 keys -> 10 s tumbling event-time windows -> count per key."""
    from datetime import timedelta

    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput, TestingOutput
    from flowspark.window import EventClockConfig, TumblingWindow

    startup = _engine()
    events = jobs.window_count_input(n)
    out: list[Any] = []
    late: list[Any] = []
    flow = Dataflow()
    stream = flow.input("inp", TestingInput(events, batch_size=1000))
    clock = EventClockConfig(lambda t: t, wait_for_system_duration=timedelta(0))
    windows = TumblingWindow(timedelta(seconds=jobs.WINDOW_S), align_to=jobs.ALIGN_TO)
    counts = stream.fold_window(
        "count", clock, windows, lambda: 0, lambda acc, _t: acc + 1, with_window=True
    )
    counts.output("out", TestingOutput(out))
    counts.late.output("late", TestingOutput(late))
    t0 = time.perf_counter()
    mode = _run(flow)
    seconds = time.perf_counter() - t0
    triples = [(key, jobs.window_index_of_start(start), c) for key, ((start, _end), c) in out]
    ok = jobs.window_count_check(n, triples, late=len(late))
    return {
        "seconds": seconds,
        "startup_s": startup,
        "ok": ok,
        "outputs": len(out),
        "late": len(late),
        "mode": mode,
    }


def _stream_sorter() -> type:
    """The spec's ``StreamSorter`` (pynumaflow accumulator example) on flowspark.

    As on the spec page, with its bug fixed (the loop reads ``async for datum in
    datums``) and everything left flushed after the loop (the page's second
    version). Built here so that importing this module does not import flowspark.
    """
    from collections.abc import AsyncIterable
    from datetime import datetime

    from flowspark.accumulator import Accumulator, Datum, Message
    from flowspark.shared.asynciter import NonBlockingIterator

    class StreamSorter(Accumulator):
        def __init__(self) -> None:
            self.latest_wm = datetime.fromtimestamp(-1)
            self.sorted_buffer: list[Datum] = []

        async def handler(self, datums: AsyncIterable[Datum], output: NonBlockingIterator) -> None:
            async for datum in datums:
                # If watermark has moved forward
                if datum.watermark and datum.watermark > self.latest_wm:
                    self.latest_wm = datum.watermark
                    await self.flush_buffer(output)
                self.insert_sorted(datum)
            await self.flush_buffer(output, flush_all=True)

        def insert_sorted(self, datum: Datum) -> None:
            # Binary insert to keep sorted buffer in order
            left, right = 0, len(self.sorted_buffer)
            while left < right:
                mid = (left + right) // 2
                if self.sorted_buffer[mid].event_time > datum.event_time:
                    right = mid
                else:
                    left = mid + 1
            self.sorted_buffer.insert(left, datum)

        async def flush_buffer(self, output: NonBlockingIterator, flush_all: bool = False) -> None:
            i = 0
            for datum in self.sorted_buffer:
                if not flush_all and datum.event_time > self.latest_wm:
                    break
                await output.put(Message.from_datum(datum))
                i += 1
            # Remove flushed items
            self.sorted_buffer = self.sorted_buffer[i:]

    return StreamSorter


def run_reorder(n: int) -> dict[str, Any]:
    """n jittered events -> datums keyed by ``k{i%100}`` -> ``accumulate(StreamSorter)``
    with a 3 s watermark delay; every event comes out, sorted within its key."""
    from datetime import timedelta

    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput, TestingOutput

    startup = _engine()
    events = jobs.reorder_input(n)
    jobs.log(f"flowspark reorder: generated {len(events)} events")
    out: list[Any] = []
    flow = Dataflow()
    stream = flow.input("inp", TestingInput(events, batch_size=1000))
    stream.to_datums(
        keys=lambda e: [e[0]],
        value=lambda e: b"",
        event_time=lambda e: e[1],
        id=lambda e: str(e[2]),
    ).accumulate(
        "sort",
        _stream_sorter(),
        timeout=timedelta(seconds=10),
        watermark_delay=timedelta(seconds=jobs.REORDER_DELAY_S),
    ).output("out", TestingOutput(out))
    t0 = time.perf_counter()
    mode = _run(flow)
    seconds = time.perf_counter() - t0
    triples = [(d.keys[0], d.event_time, int(d.id)) for d in out]
    ok = jobs.reorder_check(n, triples)
    return {
        "seconds": seconds,
        "startup_s": startup,
        "ok": ok,
        "outputs": len(out),
        "inversions": jobs.reorder_inversions(triples),
        "mode": mode,
    }


def _map_stream_handler() -> Any:
    """The spec's ``map_stream_handler`` (pynumaflow map-streamer example) on flowspark."""
    from collections.abc import AsyncIterable

    from flowspark.mapstreamer import Datum, Message

    async def map_stream_handler(_: list[str], datum: Datum) -> AsyncIterable[Message]:
        val = datum.value
        _ = datum.event_time
        _ = datum.watermark
        strs = val.decode("utf-8").split(",")

        if len(strs) == 0:
            yield Message.to_drop()
            return
        for s in strs:
            yield Message(str.encode(s))

    return map_stream_handler


def _counting_output(acc: list[int]) -> Any:
    """An output that only counts items into ``acc[0]`` and sums ``int(value)`` into
    ``acc[1]`` (3n datums in a ``TestingOutput`` list would cost GBs of driver memory)."""
    from flowspark.outputs import DynamicOutput, StatelessSink

    class _CountSink(StatelessSink):
        def write_batch(self, items: list[Any]) -> None:
            acc[0] += len(items)
            acc[1] += sum(int(d.value) for d in items)

    class CountingOutput(DynamicOutput):
        def build(self, worker_index: int, worker_count: int) -> StatelessSink:
            return _CountSink()

    return CountingOutput()


def run_mapstream(n: int) -> dict[str, Any]:
    """n values ``b"i,i+1,i+2"`` -> datums -> ``map_stream(map_stream_handler)``
    (comma split) -> count and checksum the 3n messages."""
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput

    startup = _engine()
    values = jobs.mapstream_input(n)
    jobs.log(f"flowspark mapstream: generated {len(values)} values")
    acc = [0, 0]
    event_time = jobs.ALIGN_TO
    flow = Dataflow()
    flow.input("inp", TestingInput(values, batch_size=1000)).to_datums(
        value=lambda x: x, event_time=lambda _: event_time
    ).map_stream("split", _map_stream_handler()).output("out", _counting_output(acc))
    t0 = time.perf_counter()
    mode = _run(flow)
    seconds = time.perf_counter() - t0
    count, total = acc
    ok = jobs.mapstream_check(n, count, total)
    return {"seconds": seconds, "startup_s": startup, "ok": ok, "outputs": count, "mode": mode}
