"""Benchmark driver: ``python bench/run.py JOB --system SYSTEM --n N [--repeat R]``.

Every run is a fresh child process (``harness.py``) so that a crash or a
leftover JVM of one system cannot affect another. The child prints one result
line; this parent adds job/system/n/items_per_s and prints exactly one JSON
line per run on stdout::

    {"job", "system", "n", "seconds", "items_per_s", "startup_s", "ok", ...extras}

Every line has ``peak_rss_mb``, the peak summed RSS of the child's process tree,
sampled by this parent (``rss.py``). ``latency`` takes ``--rate``, ``--shape`` and
``--duration`` instead of ``--n`` (its n = rate x duration). ``http_ingest`` (see
``http_ingest.py``) takes ``--pipeline``, ``--clients`` and ``--duration``;
``jetstream`` (see ``jetstream.py``) takes ``--system``, ``--n`` and ``--size``;
``soak`` (see ``soak.py``) takes ``--system``, ``--rate``, ``--keys``, ``--duration``.
``--api 021`` runs flowspark's ``wordcount`` and ``window_count`` written with
bytewax 0.21's operators (``flowspark.operators``; the line gets ``"api": "021"``).

Logs go to stderr. Exit code 0 if every run was ok, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jobs
import rss
from harness import RESULT_PREFIX

BENCH_DIR = Path(__file__).resolve().parent
SYSTEMS: tuple[str, ...] = ("flowspark", "bytewax", "pyspark", "pynumaflow")
# The systems each job runs on (``--system all`` = these, in this order).
JOB_SYSTEMS: dict[str, tuple[str, ...]] = {
    "mapfilter": ("flowspark", "bytewax", "pyspark"),
    "wordcount": ("flowspark", "bytewax", "pyspark"),
    "window_count": ("flowspark", "bytewax", "pyspark"),
    "reorder": ("flowspark", "bytewax", "pynumaflow"),
    "mapstream": ("flowspark", "pynumaflow"),
    "batchmap": ("flowspark", "pynumaflow"),
    "reorder_heap": ("flowspark", "bytewax"),
    "many_keys": ("flowspark", "bytewax"),
    "dir_output": ("flowspark", "bytewax"),
    "latency": ("flowspark", "bytewax"),
}
assert set(JOB_SYSTEMS) == set(jobs.JOBS), "every job needs its systems"
# The jobs flowspark also runs written with bytewax 0.21's operators (--api 021).
API_JOBS: tuple[str, ...] = ("wordcount", "window_count")
BYTEWAX_VERSION = "0.21.1"
BYTEWAX_VENV = BENCH_DIR / ".venv-bytewax"
BYTEWAX_STAMP = BYTEWAX_VENV / f".installed-bytewax-{BYTEWAX_VERSION}"
BASE_KEYS = ("job", "system", "n", "seconds", "items_per_s", "startup_s", "ok")


def spark_python() -> str:
    """Interpreter with pyspark (for the pyspark and flowspark systems)."""
    return os.environ.get("FLOWSPARK_BENCH_PYTHON") or sys.executable


def check_pynumaflow(python: str) -> None:
    """Fail the run with a clear message unless *python* can import pynumaflow + grpc."""
    probe = (
        "import grpc, pynumaflow.mapstreamer, pynumaflow.accumulator, pynumaflow.batchmapper, "
        "pynumaflow.proto.mapper.map_pb2_grpc, pynumaflow.proto.accumulator.accumulator_pb2_grpc"
    )
    proc = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(
            f"the pynumaflow system needs pynumaflow (0.14) importable by {python} "
            f"($FLOWSPARK_BENCH_PYTHON): {last}; install it there with "
            f"'{python} -m pip install pynumaflow==0.14.0'"
        )


def ensure_bytewax_venv() -> str:
    """Create ``bench/.venv-bytewax`` with bytewax pinned, once; return its python."""
    python = BYTEWAX_VENV / "bin" / "python"
    if BYTEWAX_STAMP.exists() and python.exists():
        return str(python)
    base = os.environ.get("FLOWSPARK_BENCH_BYTEWAX_BASE_PYTHON") or sys.executable
    jobs.log(f"creating {BYTEWAX_VENV} with bytewax=={BYTEWAX_VERSION} (first use)")
    steps = [
        [base, "-m", "venv", str(BYTEWAX_VENV)],
        [
            str(python),
            *("-m", "pip", "install", "--quiet", "--only-binary", "bytewax"),
            f"bytewax=={BYTEWAX_VERSION}",
        ],
        [str(python), "-c", "import bytewax.testing, bytewax.operators.windowing"],
    ]
    for cmd in steps:
        # Child stdout -> our stderr: stdout is reserved for result lines.
        proc = subprocess.run(cmd, stdout=sys.stderr, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"bytewax=={BYTEWAX_VERSION} venv setup failed: {' '.join(cmd)}")
    BYTEWAX_STAMP.touch()
    return str(python)


def child_command(
    system: str, job: str, n: int, stream: bool = False, extra_env: dict[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """Return the argv and environment of the child process for one run."""
    env = {**os.environ, **(extra_env or {})}
    if stream:
        env["FLOWSPARK_BENCH_STREAM"] = "1"
    if system == "bytewax":
        python = ensure_bytewax_venv()
    elif system == "pynumaflow":
        python = spark_python()
        check_pynumaflow(python)
    else:
        python = spark_python()
        env["PYSPARK_PYTHON"] = python
        env["PYSPARK_DRIVER_PYTHON"] = python
    return [python, str(BENCH_DIR / "harness.py"), system, job, str(n)], env


def run_once(
    system: str,
    job: str,
    n: int,
    timeout: float,
    stream: bool = False,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run one child process and return its parsed result (or an error result).

    ``peak_rss_mb`` (every result): the largest summed RSS of the child and its
    descendants, sampled while it runs (``rss.py``).
    """
    try:
        cmd, env = child_command(system, job, n, stream, extra_env)
    except Exception as exc:  # noqa: BLE001 - reported as a failed run
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "peak_rss_mb": None}
    jobs.log(f"run {system} {job} n={n}")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    out: str | None = None
    with rss.TreeRssSampler(proc.pid) as memory:
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the child's own group (incl. its JVM)
            proc.communicate()
    if out is None:
        return {
            "ok": False,
            "error": f"timeout after {timeout:.0f} s",
            "peak_rss_mb": memory.peak_mb,
        }
    wall = time.perf_counter() - t0
    result: dict[str, Any] | None = None
    for line in out.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
        elif line.strip():
            print(line, file=sys.stderr)  # stray library output
    if result is None:
        result = {"ok": False, "error": f"child exited {proc.returncode}, no result"}
    elif proc.returncode != 0 and result.get("ok"):
        result["ok"] = False
        result["error"] = f"child exited {proc.returncode}"
    result["wall_s"] = wall
    result["peak_rss_mb"] = memory.peak_mb
    return result


def result_line(job: str, system: str, n: int, res: dict[str, Any]) -> str:
    """Order the keys of one result as the interface requires; return JSON."""
    seconds = res.get("seconds")
    timed = isinstance(seconds, (int, float)) and seconds > 0
    ok = res.get("ok") is True and timed
    out: dict[str, Any] = {
        "job": job,
        "system": system,
        "n": n,
        "seconds": seconds,
        "items_per_s": n / seconds if timed else None,
        "startup_s": res.get("startup_s"),
        "ok": ok,
    }
    out.update({k: v for k, v in res.items() if k not in BASE_KEYS})
    return json.dumps(out)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run every (system, repeat), print one line per run."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["http_ingest"]:  # Numaflow pipelines fed over HTTP (own flags)
        import http_ingest

        return http_ingest.main(argv[1:])
    if argv[:1] == ["soak"]:  # a live keyed flow for a long time (own flags)
        import soak

        return soak.main(argv[1:])
    if argv[:1] == ["jetstream"]:  # JetStream -> map -> JetStream vs nats-py (own flags)
        import jetstream

        return jetstream.main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job", choices=[*jobs.JOBS, "all"])
    ap.add_argument("--system", required=True, choices=[*SYSTEMS, "all"])
    ap.add_argument("--n", type=int, help="number of input items (every job but latency)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per system")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run (default 1800)")
    ap.add_argument(
        "--stream",
        action="store_true",
        help="flowspark: stream bounded inputs that fit one micro-batch (not one batch job)",
    )
    ap.add_argument(
        "--master",
        default=None,
        metavar="URL",
        help="flowspark: the Spark master (default local[2]; e.g. spark://127.0.0.1:7077 "
        "from python -m flowspark.cluster start)",
    )
    ap.add_argument(
        "--batch-items",
        type=int,
        default=None,
        metavar="N",
        help="flowspark: read at most N items per micro-batch (with --stream: many batches)",
    )
    ap.add_argument(
        "--api",
        choices=("017", "021"),
        default="017",
        help="flowspark: write wordcount and window_count with flowspark's Dataflow methods "
        "(017, bytewax 0.17's API) or with flowspark.operators (021, bytewax 0.21.1's)",
    )
    ap.add_argument(
        "--writes-on",
        choices=("driver", "executors"),
        default="driver",
        help="flowspark dir_output: where the files are written (DirOutput's writes_on)",
    )
    ap.add_argument(
        "--rate",
        type=int,
        default=jobs.LATENCY_DEFAULT_RATE,
        help=f"latency: events per second (default {jobs.LATENCY_DEFAULT_RATE})",
    )
    ap.add_argument(
        "--shape",
        choices=jobs.LATENCY_SHAPES,
        default=jobs.LATENCY_SHAPES[0],
        help="latency: the step, a map or a running count over 1000 keys (default stateless)",
    )
    ap.add_argument(
        "--duration",
        type=float,
        default=jobs.LATENCY_DEFAULT_DURATION_S,
        help=f"latency: seconds the input emits for (default {jobs.LATENCY_DEFAULT_DURATION_S:g})",
    )
    args = ap.parse_args(argv)
    job_list = list(jobs.JOBS) if args.job == "all" else [args.job]
    if args.system != "all":
        # One system: every chosen job that runs on it.
        job_list = [job for job in job_list if args.system in JOB_SYSTEMS[job]]
        if not job_list:
            ap.error(
                f"job {args.job!r} does not run on {args.system!r}; "
                f"its systems: {', '.join(JOB_SYSTEMS[args.job])}"
            )
    if args.n is None and any(job != "latency" for job in job_list):
        ap.error("--n is required (every job but latency)")
    # latency: n = rate * duration events; the child reads rate and shape from env.
    latency_n = round(args.rate * args.duration)
    latency_env = {jobs.LATENCY_RATE_ENV: str(args.rate), jobs.LATENCY_SHAPE_ENV: args.shape}
    if "latency" in job_list and (
        args.rate <= 0 or args.duration <= jobs.LATENCY_WARMUP_S or latency_n < 1
    ):
        ap.error(f"latency needs --rate > 0 and --duration > {jobs.LATENCY_WARMUP_S:g} s")
    if args.batch_items:
        os.environ["FLOWSPARK_BENCH_BATCH_ITEMS"] = str(args.batch_items)  # children inherit
    if args.master:
        os.environ["FLOWSPARK_BENCH_MASTER"] = args.master  # children inherit
    os.environ[jobs.WRITES_ON_ENV] = args.writes_on  # children inherit (flowspark reads it)
    if args.api != "017":
        if any(job not in API_JOBS for job in job_list):
            ap.error(f"--api {args.api} is for the jobs {', '.join(API_JOBS)}")
        os.environ["FLOWSPARK_BENCH_API"] = args.api  # children inherit (flowspark reads it)
    all_ok = True
    for job in job_list:
        systems = list(JOB_SYSTEMS[job]) if args.system == "all" else [args.system]
        n, extra_env = (latency_n, latency_env) if job == "latency" else (args.n, None)
        for system in systems:
            for _ in range(args.repeat):
                res = run_once(system, job, n, args.timeout, args.stream, extra_env)
                line = result_line(job, system, n, res)
                print(line, flush=True)
                all_ok = all_ok and json.loads(line)["ok"]
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
