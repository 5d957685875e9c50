"""Child-process entry point of the benchmark (pure Python, no deps).

Usage (``run.py`` does this, one process per run)::

    PYTHON bench/harness.py SYSTEM JOB N

It imports ``bench/jobs.py`` (untimed), then imports the system module
``bench/SYSTEM_jobs.py`` while timing it -- that import pulls in the engine
(bytewax, pyspark, flowspark) -- calls ``run_JOB(N)`` once and prints exactly
one result line on stdout::

    FLOWSPARK_BENCH_RESULT {"seconds": ..., "startup_s": ..., "ok": ..., ...}

A system module defines ``run_<job>(n) -> dict`` returning ``seconds`` (the
timed processing), ``startup_s`` (engine start-up done *inside* the call, e.g.
SparkSession creation; 0.0 if none) and ``ok`` (output checked by
``jobs.py``), plus optional extra keys. The harness adds the module import
time to ``startup_s`` (and reports it as ``import_s``). An exception becomes
``{"ok": false, "error": ...}`` with the traceback on stderr and exit code 1.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import jobs

RESULT_PREFIX = "FLOWSPARK_BENCH_RESULT "
BENCH_DIR = Path(__file__).resolve().parent
SRC_DIR = BENCH_DIR.parent / "src"  # the in-repo flowspark package


def run_child(system: str, job: str, n: int) -> dict[str, Any]:
    """Import ``<system>_jobs`` (timed) and run its ``run_<job>(n)`` once."""
    if job not in jobs.JOBS:
        raise ValueError(f"unknown job {job!r}; choose from {', '.join(jobs.JOBS)}")
    if SRC_DIR.is_dir() and str(SRC_DIR) not in sys.path:
        sys.path.insert(1, str(SRC_DIR))
    t0 = time.perf_counter()
    module = importlib.import_module(f"{system}_jobs")
    import_s = time.perf_counter() - t0
    result = dict(getattr(module, f"run_{job}")(n))
    result["startup_s"] = float(result.get("startup_s", 0.0)) + import_s
    result["import_s"] = import_s
    return result


def main(argv: list[str]) -> int:
    """Parse ``SYSTEM JOB N``, run, print the result line; return the exit code."""
    if len(argv) != 3:
        print(f"usage: {sys.argv[0]} SYSTEM JOB N", file=sys.stderr)
        return 2
    system, job, n = argv[0], argv[1], int(argv[2])
    try:
        result = run_child(system, job, n)
        code = 0 if result.get("ok") is True else 1
    except Exception as exc:  # noqa: BLE001 - reported in the result, not swallowed
        traceback.print_exc(file=sys.stderr)
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        code = 1
    sys.stdout.flush()
    # Prefixed so the parent can tell it apart from anything a library printed.
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
