"""Start-up: how long the quickstart takes to its first micro-batch, and where it goes.

``python bench/startup.py [--runs 5] [--out FILE]``

Each run is a new process, as a user starts one: ``python -m flowspark.run
examples/quickstart.py`` with ``--progress-json``, timed from ``Popen`` to

* ``first_batch_s``: the first line of the progress file (written when the first
  micro-batch is done);
* ``first_output_s``: the first line on standard output;
* ``exit_s``: the process's exit.

Two modes: ``batch`` (the command as the README gives it: a bounded input runs as
one Spark batch job) and ``stream`` (``-r DIR``: a streaming query with
checkpointing, a new recovery directory each run). The reference is bytewax
0.21.1 running the same flow (``bench/.venv-bytewax``, made by ``bench/run.py``),
to its first output line and its exit.

Then one more streamed flowspark run, in a process of its own, split into phases:
Python imports, the JVM and ``SparkSession``, the session made ready (the data
source's registration and the warm-up job, side by side: each also timed as a
``*_span_s``), the run (query start and its micro-batches), and stopping the session.

Prints a line per run, a summary per mode (min / median / max) and the breakdown;
appends them as JSON lines to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from run import BENCH_DIR, BYTEWAX_VENV  # bench/ is this script's folder, first on the path

ROOT = BENCH_DIR.parent
QUICKSTART = ROOT / "examples" / "quickstart.py"
BYTEWAX_PY = BYTEWAX_VENV / "bin" / "python"
PAUSE_S = 3.0
"""Between runs: the last run's JVM ends its shutdown after the Python process exits,
and each run is measured on a quiet machine, as a user's first start is."""

BYTEWAX_QUICKSTART = """
import bytewax.operators as op
from bytewax.connectors.files import FileSource
from bytewax.connectors.stdio import StdOutSink
from bytewax.dataflow import Dataflow

flow = Dataflow("quickstart")
lines = op.input("poem", flow, FileSource({poem!r}))
words = op.map("lower", op.flat_map("split", lines, str.split), str.lower)
kept = op.filter("drop_short", words, lambda w: len(w) > 3)
long_words = op.branch("is_long", kept, lambda w: len(w) >= 6).trues
op.output("print", op.map("with_length", kept, lambda w: f"{{w:>10}} {{len(w)}}"), StdOutSink())
marked = op.map("mark_long", long_words, lambda w: f"long word: {{w}}")
op.output("print_long", marked, StdOutSink())
"""

BREAKDOWN = """
import json, sys, time
t0 = time.perf_counter()
marks, spans = {}, {}
def mark(name):
    marks[name] = round(time.perf_counter() - t0, 3)
def timed(name, fn):
    def call(*args, **kwargs):
        began = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spans[name] = round(time.perf_counter() - began, 3)
    return call
import flowspark.cli as cli
import pyspark.sql
mark("imports")
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSourceRegistration
import flowspark.engine.session as session
build = SparkSession.Builder.getOrCreate
def timed_build(self):
    made = build(self)
    if "session" not in marks:  # PySpark calls it again for the active session
        mark("session")
    return made
SparkSession.Builder.getOrCreate = timed_build
DataSourceRegistration.register = timed("register", DataSourceRegistration.register)
session._warm_up = timed("warm_up", session._warm_up)
get_session = session.get_session
def timed_get_session(*args, **kwargs):
    made = get_session(*args, **kwargs)
    if "ready" not in marks:
        mark("ready")
    return made
session.get_session = timed_get_session
import flowspark.engine.query as query
query.get_session = timed_get_session
code = cli.main(sys.argv[1:])
mark("run")
session.stop_session()
mark("stopped")
print(json.dumps({"marks": marks, "spans": spans}), file=sys.stderr)
"""


def _timed(cmd: list[str], progress: Path | None) -> dict[str, float]:
    """Run ``cmd``; seconds from start to its first output line, its first progress
    line (polled every 5 ms) and its exit."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    first_output: list[float] = []

    def read_output() -> None:
        assert proc.stdout is not None
        for _line in proc.stdout:  # StdOutput flushes at each micro-batch's end
            if not first_output:
                first_output.append(time.perf_counter() - t0)

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    first_batch = None
    while proc.poll() is None:
        seen = progress is not None and progress.exists() and progress.stat().st_size > 0
        if first_batch is None and seen:
            first_batch = time.perf_counter() - t0
        time.sleep(0.005)
    exit_s = time.perf_counter() - t0
    reader.join()
    err = proc.stderr.read() if proc.stderr else b""
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} exited {proc.returncode}: {err.decode()[-2000:]}")
    timings = {"first_output_s": round(first_output[0] if first_output else exit_s, 3)}
    if progress is not None:
        timings["first_batch_s"] = round(first_batch or exit_s, 3)
    timings["exit_s"] = round(exit_s, 3)
    return timings


def _flowspark(mode: str, scratch: Path, run: int) -> dict[str, float]:
    progress = scratch / f"progress-{mode}-{run}.jsonl"
    cmd = [sys.executable, "-m", "flowspark.run", str(QUICKSTART), "--progress-json", str(progress)]
    if mode == "stream":
        cmd += ["-r", str(scratch / f"recovery-{run}")]
    return _timed(cmd, progress)


def _bytewax(scratch: Path) -> dict[str, float]:
    flow_file = scratch / "bytewax_quickstart.py"
    flow_file.write_text(BYTEWAX_QUICKSTART.format(poem=str(ROOT / "examples/data/poem.txt")))
    return _timed([str(BYTEWAX_PY), "-m", "bytewax.run", f"{flow_file}:flow"], None)


def _breakdown(scratch: Path) -> dict[str, float]:
    """One streamed run in a process of its own, its phases as seconds since start."""
    recovery = scratch / "recovery-breakdown"
    cmd = [sys.executable, "-c", BREAKDOWN, str(QUICKSTART), "-r", str(recovery)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    timed = json.loads(done.stderr.strip().splitlines()[-1])
    marks, spans = timed["marks"], timed["spans"]
    phases, before = {}, 0.0
    for name in ["imports", "session", "ready", "run", "stopped"]:
        phases[f"{name}_s"] = round(marks[name] - before, 3)
        before = marks[name]
    # Inside "ready": the two that run side by side.
    phases.update({f"{name}_span_s": seconds for name, seconds in spans.items()})
    return phases


def _summary(system: str, mode: str, runs: list[dict[str, float]]) -> dict[str, Any]:
    key = "first_batch_s" if "first_batch_s" in runs[0] else "first_output_s"
    values = sorted(run[key] for run in runs)
    return {
        "job": "startup",
        "system": system,
        "mode": mode,
        "measure": key,
        "runs": len(values),
        "min_s": values[0],
        "median_s": statistics.median(values),
        "max_s": values[-1],
        "exit_median_s": statistics.median(run["exit_s"] for run in runs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="append JSON lines here")
    args = parser.parse_args(argv)
    lines: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="flowspark-startup-") as tmp:
        scratch = Path(tmp)
        systems = [("flowspark", "batch"), ("flowspark", "stream")]
        if BYTEWAX_PY.exists():
            systems.append(("bytewax", "run"))
        else:
            print("no bench/.venv-bytewax (bench/run.py makes it): flowspark only", file=sys.stderr)
        for system, mode in systems:
            runs = []
            for run in range(args.runs):
                time.sleep(PAUSE_S)
                if system == "bytewax":
                    timings = _bytewax(scratch)
                else:
                    timings = _flowspark(mode, scratch, run)
                runs.append(timings)
                line = {"job": "startup", "system": system, "mode": mode, "run": run, **timings}
                print(json.dumps(line), flush=True)
                lines.append(line)
            summary = _summary(system, mode, runs)
            print(json.dumps(summary), flush=True)
            lines.append(summary)
        phases = {"job": "startup", "system": "flowspark", "mode": "stream-breakdown"}
        phases.update(_breakdown(scratch))
        print(json.dumps(phases), flush=True)
        lines.append(phases)
    if args.out is not None:
        with args.out.open("a") as out:
            out.writelines(json.dumps(line) + "\n" for line in lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
