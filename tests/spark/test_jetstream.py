"""JetStream input and output against a real ``nats-server -js`` on loopback.

Offsets are stream sequences in Spark's checkpoint; the output names every
message by the recovery directory's token, the batch id and its position.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flowspark.connectors.jetstream import (
    KEY_HEADER,
    JetStreamInput,
    JetStreamMessage,
    JetStreamOutput,
)
from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, run_flow
from flowspark.testing import TestingInput, TestingOutput
from flowspark.window import EventClockConfig, TumblingWindow
from tests.nats_server import NatsServer, add_stream, publish, read_all, stream_state

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def nats(tmp_path_factory: pytest.TempPathFactory):
    with NatsServer(tmp_path_factory.mktemp("nats") / "store") as server:
        yield server


_streams = iter(range(10_000))


def _fresh_streams(url: str) -> tuple[str, str]:
    """A new input stream ``IN<n>`` on ``in<n>.>`` and output ``OUT<n>`` on ``out<n>.>``."""
    n = next(_streams)
    add_stream(url, f"IN{n}", [f"in{n}.>"])
    add_stream(url, f"OUT{n}", [f"out{n}.>"], duplicate_window=300.0)
    return f"IN{n}", f"OUT{n}"


def _bounded(flow: Dataflow, recovery: Path | None = None, **config) -> None:
    run_flow(
        flow, RunConfig(bounded=True, recovery_dir=str(recovery) if recovery else None, **config)
    )


def _two_runs(
    url: str, inp: Callable[[], JetStreamInput], recovery: Path, later: tuple[str, bytes, None]
) -> tuple[list, list]:
    """What a bounded run of ``inp() -> out`` on ``recovery`` reads, and what the next one
    reads after ``later`` was published."""

    def run() -> list:
        out: list = []
        flow = Dataflow()
        flow.input("in", inp())
        flow.output("out", TestingOutput(out))
        _bounded(flow, recovery)
        return out

    first = run()
    publish(url, (later,))
    return first, run()


def test_keyed_window_from_a_stream_to_a_stream_paused_and_resumed(nats, tmp_path):
    """A bounded run with a recovery directory pauses at the stream's end (its open
    windows stay open); the next run reads only what came since and goes on."""
    stream_in, stream_out = _fresh_streams(nats.url)
    prefix = stream_in.lower()
    base = datetime(2020, 1, 1, tzinfo=UTC)

    def event(key: str, t: int, v: int):
        return (f"{prefix}.{key}", json.dumps({"t": t, "v": v}).encode(), {KEY_HEADER: key})

    publish(nats.url, (event(k, i, i) for i in range(3000) for k in "ab"))
    recovery = tmp_path / "recovery"

    def build() -> Dataflow:
        flow = Dataflow()
        flow.input("in", JetStreamInput(nats.url, stream_in, max_messages=700))
        flow.map(lambda m: (m.key, json.loads(m.data)))
        clock = EventClockConfig(
            lambda e: base + timedelta(seconds=e["t"]), wait_for_system_duration=timedelta(0)
        )
        window = TumblingWindow(length=timedelta(seconds=100), align_to=base)
        flow.fold_window("sum", clock, window, lambda: 0, lambda acc, e: acc + e["v"])
        flow.map(lambda kv: (kv[0], json.dumps([kv[0], kv[1]])))
        flow.output("out", JetStreamOutput(nats.url, f"out{stream_out[3:]}.sums"))
        return flow

    _bounded(build(), recovery)
    got = [json.loads(data) for _, data, _ in read_all(nats.url, stream_out)]
    for key in "ab":  # every window but the last (still open) closed, once
        sums = [v for k, v in got if k == key]
        assert sorted(sums) == sorted(sum(range(w * 100, w * 100 + 100)) for w in range(29))
    headers = [h for _, _, h in read_all(nats.url, stream_out)]
    assert {h[KEY_HEADER] for h in headers} == {"a", "b"}

    # Later events close the last window: the next run reads only them and goes on.
    publish(nats.url, (event(k, 10_000, 0) for k in "ab"))
    _bounded(build(), recovery)
    after = [json.loads(data) for _, data, _ in read_all(nats.url, stream_out)]
    assert after[: len(got)] == got
    assert sorted(after[len(got) :]) == [
        ["a", sum(range(2900, 3000))],
        ["b", sum(range(2900, 3000))],
    ]


def test_items_as_values_or_key_value_pairs_and_subject_filters(nats):
    stream_in, _ = _fresh_streams(nats.url)
    prefix = stream_in.lower()
    publish(
        nats.url, ((f"{prefix}.{s}", f"{s}{i}".encode(), None) for i in range(50) for s in "xy")
    )

    flow = Dataflow()
    flow.input("in", JetStreamInput(nats.url, stream_in, subjects=f"{prefix}.y", items="value"))
    values = []
    flow.output("out", TestingOutput(values))
    _bounded(flow)
    assert values == [f"y{i}".encode() for i in range(50)]

    flow = Dataflow()
    flow.input("in", JetStreamInput(nats.url, stream_in, items="key_value", start=99))
    pairs = []
    flow.output("out", TestingOutput(pairs))
    _bounded(flow)
    assert pairs == [(f"{prefix}.x", b"x49"), (f"{prefix}.y", b"y49")]


def test_start_new_reads_only_what_arrives_after_the_first_start(nats, tmp_path):
    stream_in, _ = _fresh_streams(nats.url)
    prefix = stream_in.lower()
    publish(nats.url, ((f"{prefix}.old", b"old", None),))
    inp = lambda: JetStreamInput(nats.url, stream_in, start="new", items="value")
    later = (f"{prefix}.new", b"new", None)
    assert _two_runs(nats.url, inp, tmp_path / "recovery", later) == ([], [b"new"])


def test_start_at_a_time_and_message_fields(nats):
    stream_in, _ = _fresh_streams(nats.url)
    prefix = stream_in.lower()
    publish(nats.url, ((f"{prefix}.a", b"early", {"h": "1"}),))
    cut = datetime.now(UTC)
    publish(nats.url, ((f"{prefix}.b", b"late", {"h": "2"}),))
    flow = Dataflow()
    flow.input("in", JetStreamInput(nats.url, stream_in, start=cut))
    out: list[JetStreamMessage] = []
    flow.output("out", TestingOutput(out))
    _bounded(flow)
    assert [(m.subject, m.data, m.seq, m.headers) for m in out] == [
        (f"{prefix}.b", b"late", 2, {"h": "2"})
    ]
    assert out[0].key == f"{prefix}.b"
    assert abs(out[0].timestamp - cut) < timedelta(seconds=5)


def test_200k_messages_read_by_two_tasks_in_parallel(nats):
    # (A million, and their rate, are bench/run.py jetstream's.)
    stream_in, stream_out = _fresh_streams(nats.url)
    prefix = stream_in.lower()
    n = 200_000
    payload = b"x" * 90
    publish(nats.url, ((f"{prefix}.{i % 7}", payload, None) for i in range(n)))
    inp = JetStreamInput(nats.url, stream_in, max_messages=n)
    assert [(s.lo, s.hi) for s in inp.splits(stream_in, 0, n + 1, 2)] == [
        (1, 100_001),
        (100_001, n + 1),
    ]
    flow = Dataflow()
    flow.input("in", inp)
    flow.map(lambda m: (m.seq, m.subject))
    seqs: list = []
    flow.output("out", TestingOutput(seqs))
    report = run_flow(flow, RunConfig(bounded=True, batch_job=False))
    assert report.batches >= 1
    assert len(seqs) == n
    assert sorted(s for s, _ in seqs) == list(range(1, n + 1))
    assert Counter(subject for _, subject in seqs)[f"{prefix}.3"] == len(range(3, n, 7))


def test_output_items_of_each_kind_and_a_subject_function(nats):
    _, stream_out = _fresh_streams(nats.url)
    prefix = "out" + stream_out[3:]
    items = [
        ("k1", b"bytes"),
        ("k2", "text"),
        b"plain",
        "plain text",
        JetStreamMessage("x", b"msg", 1, 0, {"h": "v", "Nats-Msg-Id": "dropped"}),
    ]
    flow = Dataflow()
    flow.input("in", TestingInput(items))
    flow.output(
        "out",
        JetStreamOutput(
            nats.url, subject_fn=lambda item: f"{prefix}.{type(item).__name__}", stream=stream_out
        ),
    )
    _bounded(flow)
    got = read_all(nats.url, stream_out)
    # Spark's tasks publish their partitions' items side by side: no order among them.
    assert sorted((s, d) for s, d, _ in got) == [
        (f"{prefix}.JetStreamMessage", b"msg"),
        (f"{prefix}.bytes", b"plain"),
        (f"{prefix}.str", b"plain text"),
        (f"{prefix}.tuple", b"bytes"),
        (f"{prefix}.tuple", b"text"),
    ]
    headers = {d: h for _, d, h in got}
    assert headers[b"bytes"][KEY_HEADER] == "k1"
    assert headers[b"msg"]["h"] == "v" and headers[b"msg"]["Nats-Msg-Id"] != "dropped"


def test_a_replayed_batch_is_dropped_as_duplicates(nats, tmp_path, monkeypatch):
    """The same recovery directory, partition and batch give the same message ids: a
    task run again (here: outside Spark, partition 0 of micro-batch 0) publishes
    nothing twice."""
    _, stream_out = _fresh_streams(nats.url)
    subject = f"out{stream_out[3:]}.x"
    from flowspark.engine.sink import _DynamicWriter
    from flowspark.runtime import executor_writes
    from flowspark.runtime.executor_writes import ExecutorOutput, close_task_sinks, write_here
    from flowspark.runtime.stage import StageContext

    output = JetStreamOutput(nats.url, subject)
    token_file = tmp_path / "sinks" / "out.token"
    for attempt in range(2):  # the second attempt is the replay after a crash
        token = _DynamicWriter(output, token_file).token  # as the driver makes it
        task = StageContext(attempt=attempt)
        monkeypatch.setattr(executor_writes, "task_context", lambda t=task: t)
        target = ExecutorOutput("out", output, 1, token)
        list(write_here(target, [b"a", b"b"]))
        list(write_here(target, [b"c"]))
        close_task_sinks()
    assert [d for _, d, _ in read_all(nats.url, stream_out)] == [b"a", b"b", b"c"]
    assert stream_state(nats.url, stream_out).messages == 3
    ids = [h["Nats-Msg-Id"] for _, _, h in read_all(nats.url, stream_out)]
    token = token_file.read_text()
    assert ids == [f"{token}.0:0:0", f"{token}.0:0:1", f"{token}.0:0:2"]


def test_bad_config_fails_before_spark_with_one_clear_line(nats):
    flow = Dataflow()
    flow.input("in", JetStreamInput(nats.url, "NO_SUCH_STREAM"))
    flow.output("out", TestingOutput([]))
    with pytest.raises(LookupError, match="^input 'in': no JetStream stream 'NO_SUCH_STREAM' on"):
        _bounded(flow)

    from flowspark.engine.cluster import free_port

    port = free_port()
    flow = Dataflow()
    flow.input("in", JetStreamInput(f"nats://127.0.0.1:{port}", "IN"))
    flow.output("out", TestingOutput([]))
    with pytest.raises(
        ConnectionError, match=f"^input 'in': cannot reach the NATS server .*:{port}"
    ):
        _bounded(flow)

    flow = Dataflow()
    flow.input("in", TestingInput([b"x"]))
    flow.output("out", JetStreamOutput(nats.url, "nobody.stores.this"))
    with pytest.raises(LookupError, match="^output 'out': no JetStream stream .* stores subject"):
        _bounded(flow)


PIPELINE = """
apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: from-jetstream
spec:
  vertices:
    - name: in
      source:
        jetstream:
          url: {url}
          stream: {stream}
          consumer: ignored-here
          filter_subjects: ["{subject}"]
    - name: cat
      udf:
        builtin:
          name: cat
    - name: out
      sink:
        log: {{}}
  edges:
    - from: in
      to: cat
    - from: cat
      to: out
"""


def test_a_numaflow_pipeline_reads_a_jetstream_source(nats, capfd):
    from flowspark.pipeline.build import load
    from tests.numaflow_log import log_records

    stream_in, _ = _fresh_streams(nats.url)
    prefix = stream_in.lower()
    publish(
        nats.url, ((f"{prefix}.{s}", f"{s}{i}".encode(), {"h": s}) for i in range(5) for s in "ab")
    )
    flow = load(PIPELINE.format(url=nats.url, stream=stream_in, subject=f"{prefix}.b"))
    _bounded(flow)
    records = log_records(capfd.readouterr().out.splitlines())
    assert [r["payload"] for r in records] == [f"b{i}" for i in range(5)]
    assert all(r["keys"] == "" for r in records)


def test_the_cli_reports_a_missing_stream_or_server_in_one_line(nats, tmp_path):
    import subprocess
    import sys

    from flowspark.engine.cluster import free_port

    port = free_port()
    (tmp_path / "badflow.py").write_text(
        "from flowspark.connectors.jetstream import JetStreamInput\n"
        "from flowspark.connectors.stdio import StdOutput\n"
        "from flowspark.dataflow import Dataflow\n"
        "def make(url):\n"
        "    flow = Dataflow()\n"
        "    flow.input('in', JetStreamInput(url, 'NOPE'))\n"
        "    flow.output('out', StdOutput())\n"
        "    return flow\n"
    )
    for url, line in [
        (
            nats.url,
            f"flowspark: NoSuchStream: input 'in': no JetStream stream 'NOPE' on {nats.url}",
        ),
        (
            f"nats://127.0.0.1:{port}",
            f"flowspark: ConnectionError: input 'in': cannot reach the NATS server "
            f"(nats://127.0.0.1:{port}: Connection refused)",
        ),
    ]:
        proc = subprocess.run(
            [sys.executable, "-m", "flowspark.run", f"{tmp_path / 'badflow.py'}:make({url!r})"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", line + "\n")


def test_an_empty_stream_reads_nothing_and_a_later_run_reads_what_came(nats, tmp_path):
    stream_in, _ = _fresh_streams(nats.url)
    inp = lambda: JetStreamInput(nats.url, stream_in, items="value")
    later = (f"{stream_in.lower()}.x", b"later", None)
    assert _two_runs(nats.url, inp, tmp_path / "recovery", later) == ([], [b"later"])


def test_the_progress_of_a_run_carries_the_streams_backlog(nats, tmp_path):
    stream_in, _ = _fresh_streams(nats.url)
    publish(nats.url, ((f"{stream_in.lower()}.x", b"m", None) for _ in range(3000)))
    flow = Dataflow()
    flow.input("in", JetStreamInput(nats.url, stream_in, items="value", max_messages=1000))
    out: list = []
    flow.output("out", TestingOutput(out))
    log = tmp_path / "progress.jsonl"
    _bounded(flow, tmp_path / "recovery", progress_json=str(log))
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    backlogs = [line["steps"]["in"].get("backlog") for line in lines if "in" in line["steps"]]
    assert len(out) == 3000
    assert backlogs == [2000, 1000, 0]


def test_max_batch_items_reads_at_most_that_many_messages_per_micro_batch(nats, tmp_path):
    stream_in, _ = _fresh_streams(nats.url)
    publish(nats.url, ((f"{stream_in.lower()}.x", b"%d" % i, None) for i in range(1050)))
    flow = Dataflow()
    flow.input("in", JetStreamInput(nats.url, stream_in, items="value"))
    out: list = []
    flow.output("out", TestingOutput(out))
    log = tmp_path / "progress.jsonl"
    _bounded(flow, tmp_path / "recovery", progress_json=str(log), max_batch_items=300)
    read = [json.loads(line)["steps"]["in"]["out"] for line in log.read_text().splitlines()]
    assert read == [300, 300, 300, 150]
    assert out == [b"%d" % i for i in range(1050)]


def test_a_broker_that_stays_away_fails_the_write_with_one_line_naming_it(tmp_path):
    """Publishes retry with back-off for retry_for, then fail naming the server; a
    broker that comes back within it loses nothing."""
    with NatsServer(tmp_path / "store") as server:
        add_stream(server.url, "AWAY", ["away.>"], duplicate_window=600.0)
        output = JetStreamOutput(server.url, "away.x", retry_for=timedelta(seconds=3))
        sink = output.build(0, 1)
        sink.begin_batch(0, "t")
        sink.write_batch([b"before"])
        server.stop()
        sink.begin_batch(1, "t")
        expected = f"^JetStream output: the NATS server {server.url} did not acknowledge 1 of 1 "
        with pytest.raises(ConnectionError, match=expected + "messages within 3 s"):
            sink.write_batch([b"lost?"])
        server.start()
        sink.begin_batch(1, "t")  # the replay of batch 1, with the broker back
        sink.write_batch([b"lost?"])
        assert [d for _, d, _ in read_all(server.url, "AWAY")] == [b"before", b"lost?"]


def test_a_connection_opened_while_the_broker_restarts_waits_for_it(tmp_path: Path) -> None:
    # A run's first connection fails at once with one line; one opened mid-run (a new
    # planning process, a read task, a sink) waits for a restarting broker instead.
    import threading

    from flowspark.connectors.jetstream import _Connection

    with NatsServer(tmp_path / "store") as server:
        servers = (server.url,)
        server.stop()
        with pytest.raises(ConnectionError, match="cannot reach the NATS server"):
            _Connection.to(servers, 1.0)
        threading.Timer(1.5, server.start).start()
        conn = _Connection.to(servers, 1.0, retry_for=30.0)
        assert conn.nc.is_connected
        conn.run(conn.nc.close(), timeout=10)
