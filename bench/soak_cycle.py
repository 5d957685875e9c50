"""Soak of a Numaflow cycle: does minute 30 look like minute 2?

``python bench/soak_cycle.py [MINUTES] [RATE]`` (default 30 minutes, 100 events/s)

A pipeline ``http -> countdown -> (back to countdown | log sink)``
(``tests/data/numaflow/countdown-cycle.yaml``) runs with a recovery directory;
``countdown`` (``examples/numaflow/udfs/countdown.py``, a pynumaflow-style map UDF
script) sends each event round the cycle 250 times, more than one micro-batch's
rounds, so the events wait in the cycle's keyed state between micro-batches. One client posts
``RATE`` events/s. Each minute's line: event->sink latency (post to the log sink's
write), the micro-batch time, the process tree's peak RSS, and the recovery
directory's size, with its keyed state and the HTTP journal apart.

There is no reference system: Numaflow needs Kubernetes, and bytewax has no cycles.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from tempfile import mkdtemp

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.rss import tree_rss  # noqa: E402 - the repository's root on the path first

UDF = ROOT / "examples" / "numaflow" / "udfs" / "countdown.py"
PIPELINE = ROOT / "tests" / "data" / "numaflow" / "countdown-cycle.yaml"
PORT = 18601
SINK_LINE = re.compile(r'"timestamp":"([^"]+)".*Payload - t(\d+)-')


def _mb(path: Path) -> float:
    # On disk: a file's holes (the HTTP journal's dropped prefix) take none.
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file()) / 2**20


def _wait_healthy(proc: subprocess.Popen) -> None:
    for _ in range(240):
        assert proc.poll() is None, "the run ended before it was healthy"
        try:
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError("the run never answered /health")


def _post(rate: int, stop: threading.Event) -> None:
    """Post ``rate`` events/s, each named by its post time in ms."""
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    i, due = 0, time.time()
    while not stop.is_set():
        conn.request("POST", "/vertices/in", body=f"t{int(time.time() * 1000)}-{i}".encode())
        conn.getresponse().read()
        i += 1
        due += 1 / rate
        time.sleep(max(0.0, due - time.time()))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(minutes: float, rate: int) -> None:
    work = Path(mkdtemp(prefix="flowspark-soak-cycle-"))
    rec, out, progress = work / "recovery", work / "out.txt", work / "progress.jsonl"
    cmd = [sys.executable, "-m", "flowspark.run", str(PIPELINE), "--udf", f"countdown={UDF}"]
    cmd += ["-r", str(rec), "--progress-json", str(progress), "--http-port", str(PORT)]
    with out.open("w") as stdout, (work / "stderr.txt").open("w") as stderr:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr)
    _wait_healthy(proc)
    start = time.time()
    stop = threading.Event()
    poster = threading.Thread(target=_post, args=(rate, stop))
    poster.start()
    samples = []  # (seconds in, tree RSS MB, recovery MB, state MB, HTTP journal MB)
    while time.time() - start < minutes * 60:
        time.sleep(10)
        rss = tree_rss(psutil.Process(proc.pid)) / 2**20
        samples.append(
            (time.time() - start, rss, _mb(rec), _mb(rec / "state"), _mb(rec / "numaflow-http"))
        )
    stop.set()
    poster.join()
    proc.send_signal(2)
    proc.wait(timeout=60)
    latencies: dict[int, list[float]] = {}
    for line in out.read_text().splitlines():
        if m := SINK_LINE.search(line):
            written = datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
            posted = int(m.group(2)) / 1000
            latencies.setdefault(int((posted - start) // 60), []).append(1000 * (written - posted))
    batches: dict[int, list[float]] = {}
    for line in progress.read_text().splitlines():
        p = json.loads(line)
        batches.setdefault(int((p["wall_ms"] / 1000 - start) // 60), []).append(
            p["duration_ms"] or 0
        )
    for minute in sorted(latencies):
        at = [s for s in samples if int(s[0] // 60) == minute] or [(0, 0, 0, 0, 0)]
        print(
            json.dumps(
                {
                    "minute": minute + 1,
                    "events": len(latencies[minute]),
                    "p50_ms": round(_pct(latencies[minute], 0.5)),
                    "p99_ms": round(_pct(latencies[minute], 0.99)),
                    "batch_ms_p50": _pct(batches.get(minute, [0]), 0.5),
                    "rss_mb_max": round(max(s[1] for s in at)),
                    "recovery_mb": round(at[-1][2], 1),
                    "state_mb": round(at[-1][3], 2),
                    "http_journal_mb": round(at[-1][4], 1),
                }
            )
        )


if __name__ == "__main__":
    main(
        float(sys.argv[1]) if len(sys.argv) > 1 else 30,
        int(sys.argv[2]) if len(sys.argv) > 2 else 100,
    )
