"""Benchmark jobs in flowspark (embedded Spark, ``local[2]``).

Contract (see ``harness.py`` and ``README.md``): each ``run_<job>(n)`` runs the
job once on ``n`` items and returns ``seconds`` (processing, excluding engine
start-up and input generation), ``startup_s`` and ``ok`` (checked by
``jobs.py``).

Start-up here is: creating the SparkSession (JVM start) and one tiny warm-up
flow with a keyed step, which starts Spark's Python worker daemon and loads the
classes every query (and transformWithState) needs. Both are one-time costs of
a running engine, not of the job; the job's own query start (source planning
process, transformWithState planning, checkpoint) is inside ``seconds``.
"""

from __future__ import annotations

import time
from typing import Any

import jobs


def _engine() -> float:
    """Start Spark and warm it up; return the seconds it took."""
    from flowspark.dataflow import Dataflow
    from flowspark.engine.session import get_session
    from flowspark.testing import TestingInput, TestingOutput, run_main

    t0 = time.perf_counter()
    get_session("local[2]")
    warm = Dataflow()
    warm.input("inp", TestingInput(range(10)))
    warm.map(lambda x: (str(x % 2), x))
    warm.stateful_map("warm_state", lambda: 0, lambda s, x: (s + x, s + x))
    warm.output("out", TestingOutput([]))
    run_main(warm)
    return time.perf_counter() - t0


def run_mapfilter(n: int) -> dict[str, Any]:
    """Ints ``0..n-1`` -> map ``x*3+1`` -> keep evens -> count and sum."""
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput, TestingOutput, run_main

    startup = _engine()
    out: list[int] = []
    flow = Dataflow()
    flow.input("inp", TestingInput(jobs.mapfilter_input(n), batch_size=1000))
    flow.map(jobs.mapfilter_fn)
    flow.filter(jobs.mapfilter_keep)
    flow.output("out", TestingOutput(out))
    t0 = time.perf_counter()
    run_main(flow)
    seconds = time.perf_counter() - t0
    ok = jobs.mapfilter_check(n, len(out), sum(out))
    return {"seconds": seconds, "startup_s": startup, "ok": ok, "outputs": len(out)}


def run_wordcount(n: int) -> dict[str, Any]:
    """n lines of 6 words -> split -> final count per word (at the end of input).

    bytewax 0.17 has no ``count_final``; the 0.17 way is a window that spans the
    whole run: ``reduce_window`` on the system clock with one very long
    tumbling window, which closes when the input ends.
    """
    from datetime import timedelta

    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput, TestingOutput, run_main
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
    run_main(flow)
    seconds = time.perf_counter() - t0
    ok = jobs.wordcount_check(n, out)
    return {"seconds": seconds, "startup_s": startup, "ok": ok, "outputs": len(out)}


def run_window_count(n: int) -> dict[str, Any]:
    """n events over 100 keys -> 10 s tumbling event-time windows -> count per key."""
    from datetime import timedelta

    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput, TestingOutput, run_main
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
    run_main(flow)
    seconds = time.perf_counter() - t0
    triples = [(key, jobs.window_index_of_start(start), c) for key, ((start, _end), c) in out]
    ok = jobs.window_count_check(n, triples, late=len(late))
    return {
        "seconds": seconds,
        "startup_s": startup,
        "ok": ok,
        "outputs": len(out),
        "late": len(late),
    }
