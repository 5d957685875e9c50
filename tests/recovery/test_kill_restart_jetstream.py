"""JetStream → keyed window → JetStream through kill -9 of the run and a restart of
the broker: the output stream holds exactly the uninterrupted run's messages.

Offsets (stream sequences) live in Spark's checkpoint; the sink names every
message by the recovery directory's token, batch id and position, so JetStream
drops what a replayed micro-batch publishes again.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.nats_server import NatsServer, add_stream, publish, read_all, stream_state
from tests.recovery.cli_runs import kill_campaign, start_cli

KEYS = 5
N = 10_000
WINDOW = 100  # items per window (of all keys)
SPACING = 1_000  # event-time seconds between items: far more than any pause of a test

FLOW = """
import json
from datetime import datetime, timedelta, timezone

from flowspark.connectors.jetstream import JetStreamInput, JetStreamOutput
from flowspark.dataflow import Dataflow
from flowspark.window import EventClockConfig, TumblingWindow

BASE = datetime(2020, 1, 1, tzinfo=timezone.utc)
flow = Dataflow()
flow.input("in", JetStreamInput({url!r}, {stream!r}, max_messages=500))
flow.map(lambda m: (m.key, json.loads(m.data)))
clock = EventClockConfig(
    lambda e: BASE + timedelta(seconds=e["t"]), wait_for_system_duration=timedelta(0)
)
window = TumblingWindow(length=timedelta(seconds={length}), align_to=BASE)
flow.fold_window("sum", clock, window, lambda: 0, lambda acc, e: acc + e["v"])
flow.map(lambda kv: (kv[0], f"{{kv[0]}} {{kv[1]}}"))
flow.output("out", JetStreamOutput({url!r}, {subject!r}))
"""


def _events(start: int, stop: int):
    for i in range(start, stop):
        key = f"k{i % KEYS}"
        yield "in.data", json.dumps({"t": i * SPACING, "v": i}).encode(), {"Flowspark-Key": key}


def _closers():
    """One event per key far in the future: it closes every window of the data."""
    for k in range(KEYS):
        body = json.dumps({"t": (N + 10 * WINDOW) * SPACING, "v": 0}).encode()
        yield "in.data", body, {"Flowspark-Key": f"k{k}"}


def _expected() -> Counter:
    sums: Counter = Counter()
    for i in range(N):
        sums[(f"k{i % KEYS}", i // WINDOW)] += i
    return Counter(f"{key} {total}" for (key, _), total in sums.items())


def _output(url: str, stream: str) -> Counter:
    return Counter(data.decode() for _, data, _ in read_all(url, stream))


def _wait_for(url: str, stream: str, count: int, proc: subprocess.Popen, seconds: float) -> bool:
    """Whether ``stream`` reached ``count`` messages while ``proc`` still ran."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if stream_state(url, stream).messages >= count:
            return proc.poll() is None
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"the run ended early ({proc.returncode}): {err.decode()[-2000:]}")
        time.sleep(0.05)
    raise AssertionError(f"{stream} did not reach {count} messages in {seconds} s")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    with NatsServer(tmp_path_factory.mktemp("nats") / "store") as server:
        add_stream(server.url, "IN", ["in.>"])
        publish(server.url, _events(0, N))
        publish(server.url, _closers())
        yield server


@pytest.mark.slow
def test_ten_kills_at_random_points_then_a_run_to_the_end_give_the_uninterrupted_output(
    broker: NatsServer, tmp_path: Path
):
    """The output is published by Spark's tasks (JetStreamOutput writes on the
    executors): a run SIGKILLed ten times at random points, then run to its end, holds
    every message once."""
    expected = _expected()
    add_stream(broker.url, "OUT", ["out.>"], duplicate_window=600.0)
    flow_file = tmp_path / "jsflow.py"
    flow_file.write_text(
        FLOW.format(url=broker.url, stream="IN", subject="out.sums", length=WINDOW * SPACING)
    )
    total = sum(expected.values())
    written = lambda: stream_state(broker.url, "OUT").messages  # noqa: E731
    points = kill_campaign(flow_file, tmp_path / "recovery", written, total, 10, 7, "--bounded")
    assert len(points) == 10 and all(point < total for point in points)
    got = _output(broker.url, "OUT")
    assert got == expected, (
        f"killed at {points} messages: missing {sum((expected - got).values())}, "
        f"extra {sum((got - expected).values())}"
    )


@pytest.mark.slow
def test_broker_restart_mid_run_loses_and_duplicates_nothing(broker: NatsServer, tmp_path: Path):
    """An unbounded run keeps going while its broker restarts, and picks up new
    messages as they arrive."""
    with NatsServer(tmp_path / "store") as server:
        add_stream(server.url, "LIVE", ["in.>"])
        add_stream(server.url, "OUT", ["out.>"], duplicate_window=600.0)
        flow_file = tmp_path / "jsflow.py"
        flow_file.write_text(
            FLOW.format(url=server.url, stream="LIVE", subject="out.sums", length=WINDOW * SPACING)
        )
        expected = _expected()
        proc = start_cli(flow_file, tmp_path / "recovery")
        try:
            publish(server.url, _events(0, N // 2))
            _wait_for(server.url, "OUT", 100, proc, 240)
            server.stop()  # SIGTERM: the broker goes away mid-run ...
            time.sleep(2)
            server.start()  # ... and comes back on its store
            publish(server.url, _events(N // 2, N))
            publish(server.url, _closers())
            _wait_for(server.url, "OUT", sum(expected.values()), proc, 240)
            time.sleep(2)  # nothing more may come
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err.decode()[-3000:]
        assert _output(server.url, "OUT") == expected
