"""Soak: a live keyed flow for a long time; does minute 30 look like minute 2?

``python bench/run.py soak --system flowspark|bytewax|all [--rate 2000] [--keys 100]
[--duration 1800] [--interval 60]``

The input emits ``rate`` events/s over ``keys`` always-busy keys for ``duration``
seconds, with checkpointing on; every event must reach the sink exactly once.

* flowspark: ``to_datums`` -> ``accumulate`` with a handler that forwards every
  datum as it comes (``Message.from_datum``), a recovery directory, a micro-batch
  as soon as the last ends;
* bytewax 0.21.1: ``key_on`` -> ``stateful_map`` that forwards every event (and
  counts them per key), recovery on, 1 s epochs (the reference: level by design).

Each ``interval`` seconds of the run the child reports the latencies (write time -
due time) of the events written in that interval; this parent adds the process
tree's RSS at that moment (the child and every descendant, flowspark's handler
hosts included), and flowspark's handler figures of the latest micro-batch (open
handlers, rebuilds since the start, WAL datums retained). One JSON line per
interval, then a summary line per system with the issue's checks: the p99 of the
last 5 intervals against intervals 2-6, RSS and recovery-directory size level after
interval 5 (within +-20% of their mean), and the worst interval's p99.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
LINE_PREFIX = "FLOWSPARK_SOAK "
BUCKET_S = 1e-4  # latencies counted in 0.1 ms buckets


def _quantile_ms(hist: Counter[int], p: float) -> float | None:
    total = sum(hist.values())
    if not total:
        return None
    rank, seen = max(1, math.ceil(p * total)), 0
    for bucket in sorted(hist):
        seen += hist[bucket]
        if seen >= rank:
            return round(bucket * BUCKET_S * 1000, 1)
    return None  # pragma: no cover


def dir_mb(path: str | Path) -> float:
    """What a directory takes on disk, in MB (a file's holes take none)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                # On disk: a file's holes (an HTTP journal's dropped prefix) take none.
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return round(total / 1e6, 2)


class SoakRecorder:
    """The sink's side: per-interval latency histograms and an exactly-once check.
    Prints a line for each interval once the run has moved past it."""

    def __init__(self, n: int, interval: float, recovery_dir: str) -> None:
        self.n = n
        self.interval = interval
        self.recovery_dir = recovery_dir
        self.start = time.time()
        self.seen = bytearray(n)
        self.delivered = self.duplicates = 0
        self.hist: dict[int, Counter[int]] = {}
        self.reported = 0
        self.figures: dict[str, Any] = {}  # the engine's latest figures (flowspark's hosts)

    def record(self, pairs: list[tuple[int, float]], now: float) -> None:
        """One written batch of ``(event index, due time)``."""
        slot = int((now - self.start) // self.interval)
        hist = self.hist.setdefault(slot, Counter())
        for i, due in pairs:
            self.delivered += 1
            if self.seen[i]:
                self.duplicates += 1
                continue
            self.seen[i] = 1
            hist[round((now - due) / BUCKET_S)] += 1
        while self.reported < slot:
            self.report(self.reported)
            self.reported += 1

    def report(self, slot: int, after_run: bool = False) -> None:
        hist = self.hist.pop(slot, Counter())
        line = {
            "minute": slot + 1,
            **({"after_run": True} if after_run else {}),
            "events": sum(hist.values()),
            "p50_ms": _quantile_ms(hist, 0.5),
            "p99_ms": _quantile_ms(hist, 0.99),
            "max_ms": _quantile_ms(hist, 1.0),
            "recovery_mb": dir_mb(self.recovery_dir),
            **self.figures,
        }
        print(LINE_PREFIX + json.dumps(line), flush=True)

    def finish(self) -> dict[str, Any]:
        for slot in sorted(self.hist):
            if slot >= self.reported:
                self.report(slot, after_run=True)
        missing = self.seen.count(0)
        return {
            "final": True,
            "sent": self.n,
            "delivered": self.delivered,
            "duplicates": self.duplicates,
            "lost": missing,
            "ok": missing == 0 and self.duplicates == 0,
        }


# -- the children ---------------------------------------------------------------------


WINDOW_S = 1  # --flow window021: tumbling windows of this many seconds of event time
# ... and its clock's wait: an event's time is when it was due, and a batch of events
# is read up to a second after the first was due; a shorter wait makes some late.
WAIT_S = 2


def _window021_flow(prefix: str, n: int, rate: int, keys: int, recorder: SoakRecorder) -> Any:
    """``--flow window021``: bytewax 0.21 code that both systems run, only the import
    ``prefix`` (``bytewax`` or ``flowspark``) differing. Events keyed over ``keys`` keys
    are collected into 1 s tumbling windows of their due time (an ``EventClock``
    waiting 2 s); each closed window's events are recorded when written, so the
    latency is write time - due time, the window's length and wait included (3 s at
    the least). A late event is never written: the run then reports it lost."""
    import importlib
    from datetime import UTC, datetime, timedelta

    import jobs

    op = importlib.import_module(f"{prefix}.operators")
    win = importlib.import_module(f"{prefix}.operators.windowing")
    inputs = importlib.import_module(f"{prefix}.inputs")
    outputs = importlib.import_module(f"{prefix}.outputs")
    dataflow = importlib.import_module(f"{prefix}.dataflow")

    class Paced(inputs.StatelessSourcePartition):
        def __init__(self) -> None:
            self.pacer = jobs.LatencyPacer(n, rate, time.time())

        def next_batch(self) -> list[Any]:
            return self.pacer.emit(time.time())

        def next_awake(self) -> datetime | None:
            due = self.pacer.next_due()
            return None if due is None else datetime.fromtimestamp(due, UTC)

    class Source(inputs.DynamicSource):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Paced:
            return Paced()

    class Part(outputs.StatelessSinkPartition):
        def write_batch(self, items: list[Any]) -> None:
            now = time.time()
            recorder.record([(e[0], e[1]) for _k, (_w, events) in items for e in events], now)

    class Sink(outputs.DynamicSink):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Part:
            return Part()

    flow = dataflow.Dataflow("soak_window")
    events = op.input("inp", flow, Source())
    keyed = op.key_on("key", events, lambda e: f"k{e[0] % keys}")
    clock = win.EventClock(
        lambda e: datetime.fromtimestamp(e[1], UTC),
        wait_for_system_duration=timedelta(seconds=WAIT_S),
    )
    windower = win.TumblingWindower(timedelta(seconds=WINDOW_S), datetime(2024, 1, 1, tzinfo=UTC))
    op.output("out", win.collect_window("collect", keyed, clock, windower).down, Sink())
    return flow


def _flowspark_child(n: int, rate: int, keys: int, interval: float, kind: str) -> dict[str, Any]:
    from datetime import UTC, datetime, timedelta

    import cloudpickle
    import flowspark_jobs
    import jobs

    from flowspark.accumulator import Accumulator, Message
    from flowspark.dataflow import Dataflow
    from flowspark.engine.query import RunConfig, run_flow
    from flowspark.outputs import DynamicOutput, StatelessSink

    class Forward(Accumulator):
        """Puts every datum on as it comes."""

        async def handler(self, datums: Any, output: Any) -> None:
            async for datum in datums:
                await output.put(Message.from_datum(datum))

    cloudpickle.register_pickle_by_value(jobs)
    recovery_dir = tempfile.mkdtemp(prefix="bench-soak-flowspark-")
    recorder = SoakRecorder(n, interval, recovery_dir)

    class _Sink(StatelessSink):
        def write_batch(self, items: list[Any]) -> None:
            now = time.time()
            recorder.record([(int(d.id), float(d.value)) for d in items], now)

    class Recording(DynamicOutput):
        def build(self, worker_index: int, worker_count: int) -> StatelessSink:
            return _Sink()

    class Figures:
        """Keeps the handler hosts' figures of the latest micro-batch for the lines."""

        def on_batch(self, progress: Any) -> None:
            recorder.figures = dict(progress.handlers.get("forward", {}))
            recorder.figures.pop("outbound_watermark_ms", None)

    if kind == "window021":
        try:
            flow = _window021_flow("flowspark", n, rate, keys, recorder)
            run_flow(
                flow,
                RunConfig(bounded=False, recovery_dir=recovery_dir, release_planning_workers=True),
            )
            return recorder.finish()
        finally:
            shutil.rmtree(recovery_dir, ignore_errors=True)
    params = jobs.LatencyParams(n, rate, "keyed")
    flow = Dataflow()
    flow.input("inp", flowspark_jobs._paced_input(params)).to_datums(
        keys=lambda e: [f"k{e[0] % keys}"],
        value=lambda e: repr(e[1]).encode(),
        event_time=lambda e: datetime.fromtimestamp(e[2], UTC),
        id=lambda e: str(e[0]),
    ).accumulate(
        "forward", Forward, timeout=timedelta(seconds=10), watermark_delay=timedelta(0)
    ).output("out", Recording())
    try:
        config = RunConfig(
            bounded=False,
            recovery_dir=recovery_dir,
            listeners=[Figures()],
            release_planning_workers=True,  # one flow per process, as the CLI runs it
        )
        run_flow(flow, config)
        return recorder.finish()
    finally:
        shutil.rmtree(recovery_dir, ignore_errors=True)


def _bytewax_child(n: int, rate: int, keys: int, interval: float, kind: str) -> dict[str, Any]:
    from datetime import timedelta

    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.outputs import DynamicSink, StatelessSinkPartition
    from bytewax.recovery import RecoveryConfig, init_db_dir
    from bytewax.testing import run_main
    from bytewax_jobs import _PacedSource

    db_dir = tempfile.mkdtemp(prefix="bench-soak-bytewax-")
    recorder = SoakRecorder(n, interval, db_dir)

    class _Partition(StatelessSinkPartition):
        def write_batch(self, items: list[Any]) -> None:
            now = time.time()
            recorder.record([(e[0], e[1]) for _, (_, e) in items], now)

    class _Sink(DynamicSink):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> _Partition:
            return _Partition()

    def forward(count: int | None, event: Any) -> tuple[int, tuple[int, Any]]:
        count = (count or 0) + 1
        return count, (count, event)

    if kind == "window021":
        flow = _window021_flow("bytewax", n, rate, keys, recorder)
    else:
        flow = Dataflow("soak")
        events = op.input("inp", flow, _PacedSource(n, rate))
        keyed = op.key_on("key", events, lambda e: f"k{e[0] % keys}")
        op.output("out", op.stateful_map("forward", keyed, forward), _Sink())
    try:
        init_db_dir(Path(db_dir), 1)
        recovery = RecoveryConfig(Path(db_dir))
        run_main(flow, epoch_interval=timedelta(seconds=1), recovery_config=recovery)
        return recorder.finish()
    finally:
        shutil.rmtree(db_dir, ignore_errors=True)


def child_main(argv: list[str]) -> int:
    system, n, rate, keys = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    interval, kind = float(argv[4]), argv[5]
    sys.path.insert(0, str(BENCH_DIR))
    sys.path.insert(1, str(BENCH_DIR.parent / "src"))
    run = _flowspark_child if system == "flowspark" else _bytewax_child
    print(LINE_PREFIX + json.dumps(run(n, rate, keys, interval, kind)), flush=True)
    return 0


# -- the parent -----------------------------------------------------------------------


def _level(values: list[float]) -> float | None:
    """The largest relative distance of ``values`` from their mean."""
    if not values:
        return None
    mean = sum(values) / len(values)
    return round(max(abs(v - mean) for v in values) / mean, 3) if mean else None


def summarize(system: str, lines: list[dict[str, Any]], final: dict[str, Any]) -> dict[str, Any]:
    """The checks of a run from its interval lines.

    The interval reported once the run had stopped (the input's last seconds, when
    the handlers end) is not one of the "last 5 minutes" and its RSS is a stopped
    run's: it is checked on its own, as ``p99_tail_ms``.
    """
    full = [x for x in lines if x["events"]]
    running = [x for x in full if not x.get("after_run")]
    tail = [x["p99_ms"] for x in full if x.get("after_run")]
    p99 = [x["p99_ms"] for x in running]
    early = p99[1:6]  # intervals 2-6
    late = p99[-5:]
    after5 = running[5:]
    return {
        "system": system,
        "summary": True,
        "intervals": len(full),
        "p99_early_ms": max(early) if early else None,
        "p99_last5_ms": max(late) if late else None,
        "p99_ratio": round(max(late) / max(early), 2) if early and late else None,
        "p99_worst_ms": max(p99) if p99 else None,
        "p99_worst_after_1_ms": max(p99[1:]) if p99[1:] else None,
        "p99_tail_ms": max(tail) if tail else None,
        "rss_level": _level([x["rss_mb"] for x in after5 if x.get("rss_mb")]),
        "recovery_level": _level([x["recovery_mb"] for x in after5]),
        **final,
    }


def run_system(system: str, args: argparse.Namespace) -> int:
    import jobs
    import rss
    from run import child_command

    n = round(args.rate * args.duration)
    cmd, env = child_command(system, "latency", n)
    cmd = [cmd[0], str(BENCH_DIR / "soak.py"), "--child", system, str(n), str(args.rate),
           str(args.keys), str(args.interval), args.flow]  # fmt: skip
    jobs.log(f"soak {system} ({args.flow}): {n} events at {args.rate}/s over {args.keys} keys")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    root = rss.psutil.Process(proc.pid) if rss.available() else None
    lines: list[dict[str, Any]] = []
    final: dict[str, Any] = {"ok": False, "error": "the child printed no result"}
    assert proc.stdout is not None
    for raw in proc.stdout:
        if not raw.startswith(LINE_PREFIX):
            print(raw, end="", file=sys.stderr)
            continue
        record = json.loads(raw[len(LINE_PREFIX) :])
        if record.get("final"):
            final = record
            continue
        if root is not None:
            record["rss_mb"] = round(rss.tree_rss(root) / rss.MB, 1)
        lines.append(record)
        line = {"job": "soak", "flow": args.flow, "system": system, **record}
        print(json.dumps(line), flush=True)
    proc.wait()
    summary = summarize(system, lines, final)
    print(json.dumps({"job": "soak", "flow": args.flow, **summary}), flush=True)
    return 0 if summary.get("ok") else 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    ap = argparse.ArgumentParser(prog="run.py soak", description=__doc__.splitlines()[0])
    ap.add_argument("--system", choices=["flowspark", "bytewax", "all"], default="all")
    ap.add_argument("--rate", type=int, default=2000, help="events per second (2000)")
    ap.add_argument("--keys", type=int, default=100, help="always-busy keys (100)")
    ap.add_argument("--duration", type=float, default=1800.0, help="seconds (1800)")
    ap.add_argument("--interval", type=float, default=60.0, help="seconds per line (60)")
    ap.add_argument(
        "--flow",
        choices=["accumulate", "window021"],
        default="accumulate",
        help="accumulate: flowspark's accumulator against bytewax's stateful_map (default); "
        "window021: the same bytewax 0.21 windowing code on both (1 s collect_window)",
    )
    args = ap.parse_args(argv)
    systems = ["flowspark", "bytewax"] if args.system == "all" else [args.system]
    return max(run_system(system, args) for system in systems)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
