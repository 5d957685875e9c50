"""Benchmark jobs in flowspark (embedded Spark, ``local[2]``, or run.py ``--master``).

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
(``run.py --stream``) makes them stream anyway, with checkpointing on: a fresh
recovery directory per run (``RunConfig(batch_job=False, recovery_dir=...)``),
all removed when the process exits, outside the clock. Each result says which
(``"mode"``, ``"checkpoint"``). ``many_keys`` always streams with checkpointing.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
import time
from typing import Any

import jobs
from udfs import spec_handlers


def _engine(stream: bool | None = None) -> float:
    """Start Spark and warm it up (run as ``_run(flow, stream)``); return the seconds."""
    from flowspark.dataflow import Dataflow
    from flowspark.engine.session import get_session
    from flowspark.testing import TestingInput, TestingOutput

    t0 = time.perf_counter()
    get_session(os.environ.get("FLOWSPARK_BENCH_MASTER") or "local[2]")  # run.py --master
    warm = Dataflow()
    warm.input("inp", TestingInput(range(10)))
    warm.map(lambda x: (str(x % 2), x))
    warm.stateful_map("warm_state", lambda: 0, lambda s, x: (s + x, s + x))
    warm.output("out", TestingOutput([]))
    _run(warm, stream)
    return time.perf_counter() - t0


_RECOVERY_ROOT: list[str] = []  # this process's parent of the runs' recovery directories
_RUN_NUMBERS = itertools.count(1)


def _fresh_recovery_dir() -> str:
    """A new, not yet existing recovery directory; all of them are removed at exit
    (not in ``_run``, so the deletion is not timed)."""
    if not _RECOVERY_ROOT:
        root = tempfile.mkdtemp(prefix="bench-flowspark-recovery-")
        _RECOVERY_ROOT.append(root)
        atexit.register(shutil.rmtree, root, True)
    return os.path.join(_RECOVERY_ROOT[0], f"run-{next(_RUN_NUMBERS)}")


# run.py --batch-items N: the most items one micro-batch reads from an input.
BATCH_ITEMS_ENV = "FLOWSPARK_BENCH_BATCH_ITEMS"


def _run(flow: Any, stream: bool | None = None, max_batch_items: int | None = None) -> str:
    """Run ``flow`` as ``run_main`` does; return how it ran ("batch job" or "stream").

    ``stream`` (default: ``$FLOWSPARK_BENCH_STREAM`` set, ``run.py --stream``)
    streams a bounded input that fits one micro-batch instead of running it as one
    batch job, with checkpointing on (a fresh recovery directory), as a flow run
    with recovery would. "stream" therefore always means "checkpointed" here.
    ``max_batch_items``: ``RunConfig.max_batch_items`` (the most items a micro-batch
    reads from an input).
    """
    from flowspark.engine.query import RunConfig, run_flow

    if stream is None:
        stream = os.environ.get("FLOWSPARK_BENCH_STREAM", "") not in ("", "0")
    if max_batch_items is None and os.environ.get(BATCH_ITEMS_ENV):
        max_batch_items = int(os.environ[BATCH_ITEMS_ENV])  # run.py --batch-items
    if stream:
        # run.py --master: a cluster on this machine, whose workers share its disk.
        on_cluster = not (os.environ.get("FLOWSPARK_BENCH_MASTER") or "local").startswith("local")
        config = RunConfig(
            batch_job=False,
            recovery_dir=_fresh_recovery_dir(),
            max_batch_items=max_batch_items,
            recovery_shared=on_cluster,
            release_planning_workers=True,  # one flow per process, as the CLI runs it
        )
    else:
        config = RunConfig(max_batch_items=max_batch_items)
    report = run_flow(flow, config)
    return "stream" if report.streamed else "batch job"


def _timed_run(
    flow: Any, stream: bool | None = None, max_batch_items: int | None = None
) -> tuple[float, str]:
    """``_run(flow, ...)`` on the clock: the seconds it took and how it ran."""
    t0 = time.perf_counter()
    mode = _run(flow, stream, max_batch_items)
    return time.perf_counter() - t0, mode


def _result(
    seconds: float, startup: float, mode: str, ok: bool, outputs: int, **extra: Any
) -> dict[str, Any]:
    """A job's result (see ``harness.py``): its outputs, ``extra`` and how it ran."""
    return {
        "seconds": seconds,
        "startup_s": startup,
        "ok": ok,
        "outputs": outputs,
        **extra,
        **_mode_keys(mode),
    }


def _mode_keys(mode: str) -> dict[str, Any]:
    """The result keys saying how a run went (``_run`` checkpoints every stream)."""
    keys: dict[str, Any] = {"mode": mode, "checkpoint": mode == "stream"}
    if os.environ.get(BATCH_ITEMS_ENV):
        keys["batch_items"] = int(os.environ[BATCH_ITEMS_ENV])
    keys["master"] = os.environ.get("FLOWSPARK_BENCH_MASTER") or "local[2]"
    return keys


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
    seconds, mode = _timed_run(flow)
    ok = jobs.mapfilter_check(n, len(out), sum(out))
    return _result(seconds, startup, mode, ok, len(out))


API_ENV = "FLOWSPARK_BENCH_API"  # run.py --api: "021" writes jobs with bytewax 0.21's operators


def _api() -> str:
    """The API a job is written with: ``"017"`` (flowspark's ``Dataflow`` methods,
    bytewax 0.17's) or ``"021"`` (``flowspark.operators``, bytewax 0.21.1's)."""
    return os.environ.get(API_ENV) or "017"


def _wordcount_021(lines: list[str], out: list[Any]) -> Any:
    """bytewax_jobs' wordcount with the prefix changed: ``op.count_final`` on the words."""
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource

    flow = Dataflow("wordcount")
    words = op.flat_map("split", op.input("inp", flow, TestingSource(lines, 1000)), str.split)
    op.output("out", op.count_final("count", words, lambda w: w), TestingSink(out))
    return flow


def _window_count_021(events: list[Any], out: list[Any], late: list[Any]) -> Any:
    """bytewax_jobs' window_count with the prefix changed: ``count_window`` with an
    ``EventClock`` and 10 s tumbling windows (the window id is the window index)."""
    from datetime import timedelta

    import flowspark.operators as op
    import flowspark.operators.windowing as win
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource

    flow = Dataflow("window_count")
    s = op.input("inp", flow, TestingSource(events, 1000))
    clock = win.EventClock(lambda e: e[1], wait_for_system_duration=timedelta(0))
    windower = win.TumblingWindower(timedelta(seconds=jobs.WINDOW_S), align_to=jobs.ALIGN_TO)
    wo = win.count_window("count", s, clock, windower, lambda e: e[0])
    op.output("out", wo.down, TestingSink(out))
    op.output("late", wo.late, TestingSink(late))
    return flow


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
    if _api() == "021":
        seconds, mode = _timed_run(_wordcount_021(lines, out))
        return _result(seconds, startup, mode, jobs.wordcount_check(n, out), len(out), api="021")
    flow = Dataflow()
    flow.input("inp", TestingInput(lines, batch_size=1000))
    flow.flat_map(str.split)
    flow.map(lambda word: (word, 1))
    flow.reduce_window(
        "count", SystemClockConfig(), TumblingWindow(timedelta(days=36500)), lambda a, b: a + b
    )
    flow.output("out", TestingOutput(out))
    seconds, mode = _timed_run(flow)
    ok = jobs.wordcount_check(n, out)
    return _result(seconds, startup, mode, ok, len(out))


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
    if _api() == "021":
        seconds, mode = _timed_run(_window_count_021(events, out, late))
        triples = [(key, wid, c) for key, (wid, c) in out]
        ok = jobs.window_count_check(n, triples, late=len(late))
        return _result(seconds, startup, mode, ok, len(out), late=len(late), api="021")
    flow = Dataflow()
    stream = flow.input("inp", TestingInput(events, batch_size=1000))
    clock = EventClockConfig(lambda t: t, wait_for_system_duration=timedelta(0))
    windows = TumblingWindow(timedelta(seconds=jobs.WINDOW_S), align_to=jobs.ALIGN_TO)
    counts = stream.fold_window(
        "count", clock, windows, lambda: 0, lambda acc, _t: acc + 1, with_window=True
    )
    counts.output("out", TestingOutput(out))
    counts.late.output("late", TestingOutput(late))
    seconds, mode = _timed_run(flow)
    triples = [(key, jobs.window_index_of_start(start), c) for key, ((start, _end), c) in out]
    ok = jobs.window_count_check(n, triples, late=len(late))
    return _result(seconds, startup, mode, ok, len(out), late=len(late))


def _stream_sorter() -> type:
    """The spec's ``StreamSorter`` on flowspark (the code ``pynumaflow_jobs`` runs on
    pynumaflow). Built here so that importing this module does not import flowspark."""
    import flowspark.accumulator

    return spec_handlers.stream_sorter(flowspark.accumulator)


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
    seconds, mode = _timed_run(flow)
    triples = [(d.keys[0], d.event_time, int(d.id)) for d in out]
    ok = jobs.reorder_check(n, triples)
    return _result(
        seconds, startup, mode, ok, len(out), inversions=jobs.reorder_inversions(triples)
    )


def _map_stream_handler() -> Any:
    """The spec's ``map_stream_handler`` (pynumaflow map-streamer example) on flowspark."""
    import flowspark.mapstreamer

    return spec_handlers.map_stream_handler(flowspark.mapstreamer)


def _batch_output(write_batch: Any) -> Any:
    """An output whose sink (in this driver process, per micro-batch) calls
    ``write_batch(items)``: for results that must not pile up in a list."""
    from flowspark.outputs import DynamicOutput, StatelessSink

    class _CallSink(StatelessSink):
        def write_batch(self, items: list[Any]) -> None:
            write_batch(items)

    class CallingOutput(DynamicOutput):
        def build(self, worker_index: int, worker_count: int) -> StatelessSink:
            return _CallSink()

    return CallingOutput()


def _counting_output(acc: list[int]) -> Any:
    """An output that only counts items into ``acc[0]`` and sums ``int(value)`` into
    ``acc[1]`` (3n datums in a ``TestingOutput`` list would cost GBs of driver memory)."""

    def count(items: list[Any]) -> None:
        acc[0] += len(items)
        acc[1] += sum(int(d.value) for d in items)

    return _batch_output(count)


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
    seconds, mode = _timed_run(flow)
    count, total = acc
    ok = jobs.mapstream_check(n, count, total)
    return _result(seconds, startup, mode, ok, count)


def run_batchmap(n: int) -> dict[str, Any]:
    """The ``mapstream`` values -> datums -> ``batch_map(Flatmap(), batch_size=500)``
    (pynumaflow's batch-map example, comma split) -> count and checksum the 3n messages.

    The datums have no ids, so each batch's request ids are positions; the step
    itself checks that every request id got exactly one response."""
    import flowspark.batchmapper
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput

    startup = _engine()
    values = jobs.mapstream_input(n)
    jobs.log(f"flowspark batchmap: generated {len(values)} values")
    acc = [0, 0]
    event_time = jobs.ALIGN_TO
    flatmap = spec_handlers.batch_flatmap(flowspark.batchmapper)()
    flow = Dataflow()
    flow.input("inp", TestingInput(values, batch_size=1000)).to_datums(
        value=lambda x: x, event_time=lambda _: event_time
    ).batch_map("flatmap", flatmap, batch_size=jobs.BATCHMAP_BATCH_SIZE).output(
        "out", _counting_output(acc)
    )
    seconds, mode = _timed_run(flow)
    count, total = acc
    ok = jobs.mapstream_check(n, count, total)
    return _result(seconds, startup, mode, ok, count, batch_size=jobs.BATCHMAP_BATCH_SIZE)


def run_reorder_heap(n: int) -> dict[str, Any]:
    """The ``reorder`` events through the bytewax 0.17 method API: ``stateful_map``
    with a heap per key (``jobs.reorder_heap_mapper``, flushed at the end by the
    per-key sentinels of the input) -> ``flat_map`` the emitted lists."""
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput, TestingOutput

    startup = _engine()
    items = jobs.reorder_heap_input(n)
    jobs.log(f"flowspark reorder_heap: generated {len(items)} items (incl. sentinels)")
    out: list[tuple[str, Any, int]] = []
    flow = Dataflow()
    flow.input("inp", TestingInput(items, batch_size=1000))
    flow.stateful_map("sort", jobs.reorder_heap_builder, jobs.reorder_heap_mapper)
    flow.flat_map(jobs.reorder_heap_flatten)
    flow.output("out", TestingOutput(out))
    seconds, mode = _timed_run(flow)
    ok = jobs.reorder_check(n, out)
    return _result(seconds, startup, mode, ok, len(out), inversions=jobs.reorder_inversions(out))


def _checking_output(checker: jobs.ManyKeysChecker) -> Any:
    """An output that hands each ``(key, value)`` to ``checker`` (no list of n items)."""

    def check(items: list[Any]) -> None:
        for key, value in items:
            checker.add(key, value)

    return _batch_output(check)


MANY_KEYS_BATCH_ITEMS = 100_000


def run_many_keys(n: int) -> dict[str, Any]:
    """``range(n)`` -> ``map`` to ``("u{i}", i)`` (n distinct keys) -> ``stateful_map``
    keeping ``(count, sum)`` for every key -> a checking output. Always streamed with
    checkpointing on, so the keys' state lives in Spark's RocksDB state store, in
    micro-batches of at most ``MANY_KEYS_BATCH_ITEMS`` items (so what is in memory
    at once is one micro-batch, whatever n, and the state is what grows with n)."""
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput

    startup = _engine(stream=True)
    checker = jobs.ManyKeysChecker(n)
    flow = Dataflow()
    flow.input("inp", TestingInput(range(n), batch_size=1000))
    flow.map(jobs.many_keys_item)
    flow.stateful_map("sum", jobs.many_keys_builder, jobs.many_keys_mapper)
    flow.output("out", _checking_output(checker))
    seconds, mode = _timed_run(flow, stream=True, max_batch_items=MANY_KEYS_BATCH_ITEMS)
    return _result(seconds, startup, mode, checker.ok(), checker.count)


def _paced_input(params: jobs.LatencyParams) -> Any:
    """A live bytewax 0.17 ``DynamicInput``: ``params.n`` events at ``params.rate``/s.

    Built (and read) in Spark's source-planning Python process; its clock starts
    at ``build``. ``next_batch`` returns the events due by now, ``next_awake`` the
    (UTC-aware) time the next one is due, ``None`` once all were emitted.
    """
    from datetime import UTC, datetime

    from flowspark.inputs import DynamicInput, StatelessSource

    class _PacedSource(StatelessSource):
        def __init__(self) -> None:
            self.pacer = jobs.LatencyPacer(params.n, params.rate, time.time())

        def next_batch(self) -> list[jobs.LatencyEvent]:
            return self.pacer.emit(time.time())

        def next_awake(self) -> datetime | None:
            due = self.pacer.next_due()
            return None if due is None else datetime.fromtimestamp(due, UTC)

    class PacedInput(DynamicInput):
        def build(self, worker_index: int, worker_count: int) -> StatelessSource:
            return _PacedSource()

    return PacedInput()


def _recording_output(recorder: jobs.LatencyRecorder) -> Any:
    """An output that records each item's latency at the time of the write."""
    return _batch_output(lambda items: recorder.record(items, time.time()))


def run_latency(n: int) -> dict[str, Any]:
    """A paced live input -> ``map`` (stateless) or ``stateful_map`` running count over
    1000 keys (keyed) -> a recording output; ``run_flow(RunConfig(bounded=False,
    recovery_dir=...))``: a stream checkpointed every micro-batch, which ends when
    the input raises ``StopIteration``."""
    import cloudpickle

    from flowspark.dataflow import Dataflow
    from flowspark.engine.query import RunConfig, run_flow

    params = jobs.latency_params(n)
    startup = _engine(stream=True)
    # The input runs in another process: ship jobs' pacer by value (bench/ is not
    # on that process's path).
    cloudpickle.register_pickle_by_value(jobs)
    recorder = jobs.LatencyRecorder(params)
    flow = Dataflow()
    flow.input("inp", _paced_input(params))
    if params.shape == "stateless":
        flow.map(jobs.latency_map)
    else:
        flow.map(jobs.latency_key)
        flow.stateful_map("count", jobs.latency_count_builder, jobs.latency_count_mapper)
        flow.map(jobs.latency_unkey)
    flow.output("out", _recording_output(recorder))
    with tempfile.TemporaryDirectory(prefix="bench-flowspark-latency-") as recovery_dir:
        t0 = time.perf_counter()
        config = RunConfig(
            bounded=False, recovery_dir=recovery_dir, release_planning_workers=True
        )  # one flow per process, as the CLI runs it
        report = run_flow(flow, config)
        seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "startup_s": startup,
        **recorder.summary(),
        "recovery": True,
        "snapshot": "every micro-batch",
        "mode": "stream" if report.streamed else "batch job",
    }


def run_dir_output(n: int) -> dict[str, Any]:
    """``(key, line)`` items over 1 000 keys -> ``DirOutput`` of 8 files, written on the
    driver or, with ``run.py --writes-on executors``, by Spark's tasks."""
    from flowspark.connectors.files import DirOutput
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput

    writes_on = os.environ.get(jobs.WRITES_ON_ENV) or "driver"
    startup = _engine()
    folder = tempfile.mkdtemp(prefix="bench-dir-output-")
    try:
        flow = Dataflow()
        flow.input("inp", TestingInput(range(n), batch_size=1000))
        flow.map(jobs.dir_output_item)
        files = DirOutput(folder, jobs.DIR_OUTPUT_FILES, writes_on=writes_on)  # type: ignore[arg-type]
        flow.output("out", files)
        seconds, mode = _timed_run(flow)
        ok, found = jobs.dir_output_check(n, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return _result(seconds, startup, mode, ok, found, writes_on=writes_on)
