"""Numaflow pipelines with HTTP sources, run by the CLI as a user runs them and fed
by real HTTP clients: the accumulator page's example (two HTTP sources into an
accumulator that joins and sorts, then a log sink) and the example pipelines
with an HTTP source (bearer auth, builtin filter).

Each test starts ``python -m flowspark.run pipeline.yaml`` in its own process (the
HTTP server lives in the run), waits for ``GET /health`` to answer 200, posts, then
stops the run with SIGINT.
"""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flowspark.engine.cluster import free_port
from tests.http_clients import post, wait_healthy
from tests.numaflow_log import log_records
from tests.pipeline_yaml import pipeline
from tests.warm_cli import WarmRun

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "numaflow"
SORTER = ROOT / "examples" / "numaflow" / "udfs" / "stream_sorter.py"
T0 = 1_700_000_000_000  # event times in epoch ms


class Run:
    """``python -m flowspark.run`` on the warm child (:mod:`tests.warm_cli`), or, with
    ``warm=False`` (its UDFs print in Spark's Python workers), as a process of its own
    whose stdout is collected as it comes."""

    def __init__(
        self, args: list[str], tmp_path: Path, token: str | None = None, warm: bool = True
    ) -> None:
        self.port = free_port()
        argv = [*args, "--http-port", str(self.port)]
        self._lines: list[str] = []
        self._reader: threading.Thread | None = None
        self.proc: WarmRun | subprocess.Popen
        if warm:
            self.proc = WarmRun(argv, cwd=ROOT)
            self.stderr_path = self.proc.stderr_path
        else:
            self.stderr_path = tmp_path / "stderr.txt"
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "flowspark.run", *argv],
                stdout=subprocess.PIPE,
                stderr=self.stderr_path.open("w"),
                text=True,
                cwd=ROOT,
            )
            self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
            self._reader.start()
        try:
            wait_healthy(self.port, self.proc, timeout=120, token=token)  # type: ignore[arg-type]
        except BaseException:
            self.stop()
            raise

    @property
    def lines(self) -> list[str]:
        """What the run printed so far."""
        return self.proc.lines() if isinstance(self.proc, WarmRun) else list(self._lines)

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self._lines.append(line.rstrip("\n"))

    def log_records(self) -> list[dict]:
        """The log sink's records so far (Numaflow's JSON log lines), parsed."""
        return log_records(list(self.lines))

    def wait_for(self, predicate, timeout: float, poke=None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            assert self.proc.poll() is None, self.stderr_path.read_text()[-3000:]
            if poke is not None:
                poke()
            time.sleep(0.5)
        raise AssertionError(
            f"timed out; stdout so far:\n{chr(10).join(self.lines[-20:])}\n"
            f"stderr:\n{self.stderr_path.read_text()[-3000:]}"
        )

    def stop(self) -> int:
        if isinstance(self.proc, WarmRun):
            return self.proc.interrupt()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=10)  # the lines printed before the exit
        return self.proc.returncode


@pytest.fixture
def runs():
    started: list[Run] = []
    yield started
    for run in started:
        run.stop()


def test_the_accumulator_pages_pipeline_joins_and_sorts_two_http_clients(tmp_path, runs):
    # The page's YAML unchanged; its stream-sorter image runs as the Python StreamSorter.
    run = Run(
        [
            str(DATA / "accumulator-page.yaml"),
            "--udf",
            f"accum={SORTER}",
            "-r",
            str(tmp_path / "recovery"),
        ],
        tmp_path,
    )
    runs.append(run)
    keys = ["k0", "k1", "k2"]
    # Ten events per key, 1 s apart in event time. Each source is fed in event-time
    # order (as one producer's stream is), the even seconds to http-one, the odd ones
    # to http-two, one source after the other: the accumulator sees them out of order
    # (0, 2, 4, ..., then 1, 3, ...) and must join and sort them. The vertex
    # watermark (the least over both sources) holds until http-two catches up, so
    # none of them is behind it when it arrives.
    events = [(key, T0 + i * 1000) for i in range(10) for key in keys]
    halves = {
        "http-one": [(k, t) for k, t in events if (t - T0) // 1000 % 2 == 0],
        "http-two": [(k, t) for k, t in events if (t - T0) // 1000 % 2 == 1],
    }

    def client(vertex: str) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", run.port, timeout=30)  # keep-alive
        for key, t in halves[vertex]:
            body = f"{key}@{t - T0}".encode()
            status, _ = post(run.port, vertex, body, t, key, f"{key}-{t}", conn=conn)
            assert status == 200
        conn.close()

    for vertex in halves:  # a real client each, one after the other
        thread = threading.Thread(target=client, args=(vertex,))
        thread.start()
        thread.join()
        time.sleep(1.5)  # http-one's events are read (and kept) before http-two's come
    # Later events on both sources move the vertex watermark (the least over the two
    # sources) past every event above; the sorter releases a key's kept events when
    # a datum arrives with a later watermark. Event times stay within the 10 s
    # timeout of each key's latest event, so no key closes before that.
    step = iter(range(12_000, 19_000, 500))

    def poke() -> None:
        t = T0 + next(step, 18_500)
        for vertex in halves:
            for key in keys:
                post(run.port, vertex, f"{key}@tick".encode(), t, key, f"{vertex}-{key}-{t}")

    def released() -> bool:
        got = {r["id"] for r in run.log_records()}
        return all(f"{key}-{t}" in got for key, t in events)

    run.wait_for(released, timeout=90, poke=poke)
    records = [r for r in run.log_records() if "@tick" not in r["payload"]]
    for key in keys:
        mine = [r for r in records if r["keys"] == key]
        times = [r["event_time"] for r in mine]
        assert times == [T0 + i * 1000 for i in range(10)], (key, times)  # once, sorted
        assert [r["payload"] for r in mine] == [f"{key}@{i * 1000}" for i in range(10)]


def test_numaflows_http_filter_pipeline_with_bearer_auth(tmp_path, runs):
    # 3-pipeline-filter: http with auth.token from secret my-secret/my-key, then the
    # map-filter-id image as the builtin filter ``int(json(payload).id) < 100``.
    run = Run(
        [
            str(DATA / "3-pipeline-filter.yaml"),
            "--secret",
            "my-secret/my-key=s3cret",
            "-r",
            str(tmp_path / "recovery"),
        ],
        tmp_path,
        token="s3cret",
    )
    runs.append(run)
    vertex = "in"
    assert post(run.port, vertex, b'{"id": 1}', token=None)[0] == 401
    assert post(run.port, vertex, b'{"id": 1}', token="wrong")[0] == 401
    for n in (5, 150, 99, 100, 7):
        body = json.dumps({"id": n, "msg": "hello"}).encode()
        assert post(run.port, vertex, body, token="s3cret", event_id=f"e{n}")[0] == 200
    assert post(run.port, vertex, b'{"id": 5}', token="s3cret", event_id="e5")[0] == 409
    run.wait_for(lambda: len(run.log_records()) >= 3, timeout=90)
    time.sleep(2)  # nothing more may come
    ids = sorted(json.loads(r["payload"])["id"] for r in run.log_records())
    assert ids == [5, 7, 99]


def test_max_batch_items_caps_what_one_micro_batch_takes_from_the_http_source(tmp_path, runs):
    progress = tmp_path / "progress.jsonl"
    run = Run(
        [
            str(DATA / "2-http-pipeline.yaml"),
            "--max-batch-items",
            "40",
            "--progress-json",
            str(progress),
            "-r",
            str(tmp_path / "recovery"),
        ],
        tmp_path,
    )
    runs.append(run)
    conn = http.client.HTTPConnection("127.0.0.1", run.port, timeout=30)
    for n in range(300):
        assert post(run.port, "in", b"%d" % n, event_id=f"e{n}", conn=conn)[0] == 200
    conn.close()
    run.wait_for(lambda: len(run.log_records()) >= 300, timeout=120)
    assert sorted(int(r["payload"]) for r in run.log_records()) == list(range(300))

    def read() -> list[int]:  # per micro-batch; a batch's line comes after its output
        text = progress.read_text() if progress.exists() else ""
        lines = text.split("\n")[:-1]  # whole lines only: the last may be mid-write
        return [json.loads(line)["steps"].get("in", {}).get("out", 0) for line in lines]

    run.wait_for(lambda: sum(read()) >= 300, timeout=60)
    assert sum(read()) == 300 and max(read()) == 40


def _walk_through() -> tuple[list[str], list[tuple[str, int, str, str]]]:
    """The run's arguments and the posts of docs/http-source.md's walk-through."""
    import shlex

    from tests.docs_blocks import blocks

    run_block, posts_block = [
        b for b in blocks(ROOT / "docs" / "http-source.md") if b.lang == "bash"
    ][:2]
    words = shlex.split(run_block.text.replace("\\\n", " "), comments=True)
    assert words[:3] == ["python", "-m", "flowspark.run"], run_block.where
    assert "-H 'x-numaflow-keys: a'" in posts_block.text  # every post has key "a"
    posts = []
    for line in posts_block.text.splitlines():
        if line.startswith("post "):
            _, vertex, event_time, event_id, payload = shlex.split(line, comments=True)
            posts.append((vertex, int(event_time), event_id, payload))
    return words[3:], posts


def test_the_http_source_pages_walk_through_ends_in_sorted_output(tmp_path, runs):
    """docs/http-source.md's run and six posts, read from there, one after the other:
    each read in a micro-batch of its own, as when a person types them (a micro-batch
    takes less time than typing a curl)."""
    args, posts = _walk_through()
    assert len(posts) == 6
    recovery = args.index("-r") + 1
    args[recovery] = str(tmp_path / "recovery")
    progress = tmp_path / "progress.jsonl"
    run = Run([*args, "--progress-json", str(progress)], tmp_path)

    def read() -> int:
        text = progress.read_text() if progress.exists() else ""
        lines = text.split("\n")[:-1]  # whole lines only: the last may be mid-write
        steps = [json.loads(line)["steps"] for line in lines]
        return sum(s.get(v, {}).get("out", 0) for s in steps for v in ("http-one", "http-two"))

    runs.append(run)
    for n, (vertex, t, event_id, payload) in enumerate(posts, 1):
        assert post(run.port, vertex, payload.encode(), t, "a", event_id)[0] == 200
        run.wait_for(lambda n=n: read() >= n, timeout=60)
    run.wait_for(lambda: len(run.log_records()) >= 4, timeout=90)
    time.sleep(3)  # nothing more may come
    assert [r["payload"] for r in run.log_records()] == ["first", "second", "third", "fourth"]


RETRY = ROOT / "examples" / "numaflow" / "udfs" / "retry.py"


@pytest.mark.parametrize("example", ["10-cycle-to-self", "10-cycle-to-prev"])
def test_numaflows_cycle_examples_send_each_event_round_until_it_leaves(example, tmp_path, runs):
    # Numaflow's YAML unchanged; its map-retry image runs as retry.py (map-cat is the
    # builtin cat). retry tags a value "retry" twice, so the edge back (to retry
    # itself, or to cat before it) brings it round twice; the third time it goes on
    # untagged, along the "not retry" edge to the log sink.
    run = Run([str(DATA / f"{example}.yaml"), "--udf", f"retry={RETRY}"], tmp_path, warm=False)
    runs.append(run)
    values = [f"event-{i}" for i in range(6)]
    for i, value in enumerate(values):
        status, _ = post(run.port, "in", value.encode(), T0 + i, None, f"id-{i}")
        assert status == 200

    def all_out() -> bool:
        return {r["payload"] for r in run.log_records()} >= set(values)

    run.wait_for(all_out, timeout=90)
    time.sleep(2)  # anything that would come out twice has had its micro-batch
    assert sorted(r["payload"] for r in run.log_records()) == values  # each once
    tries = [line for line in run.lines if line.startswith("count for ")]
    for value in values:  # retry saw each value three times, counting 1, 2, 3
        assert [t.rsplit("=", 1)[1] for t in tries if f'"{value}"' in t] == ["1", "2", "3"]


SPIN = pipeline(
    "spin",
    """
    vertices:
      - {name: in, source: {http: {}}}
      - {name: spin, udf: {builtin: {name: cat}}}
      - {name: out, sink: {log: {}}}
    edges:
      - {from: in, to: out}
      - {from: in, to: spin}
      - {from: spin, to: spin}
    """,
)


def _progress(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _idle_spins(path: Path) -> list[int]:
    """The datums the cycle ran in each batch that read no new event."""
    return [
        line["steps"]["spin.cycle"]["in"]
        for line in _progress(path)
        if "spin.cycle" in line["steps"] and not line["steps"].get("in", {}).get("out")
    ]


def test_a_cycle_with_no_exit_goes_round_for_ever_and_keeps_its_datums_across_a_restart(
    tmp_path, runs
):
    # Numaflow allows a cycle nothing leaves. Each micro-batch runs ROUNDS_PER_BATCH
    # rounds of what is on it, with or without new input (a clock tick), and the
    # datums on it are the step's keyed state: a restart from the recovery
    # directory picks them up.
    from flowspark.runtime.numaflow.cycle import ROUNDS_PER_BATCH

    spec = tmp_path / "spin.yaml"
    spec.write_text(SPIN)
    recovery = tmp_path / "recovery"
    first_json, second_json = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    run = Run([str(spec), "-r", str(recovery), "--progress-json", str(first_json)], tmp_path)
    runs.append(run)
    for i in range(3):
        status, _ = post(run.port, "in", f"round-{i}".encode(), T0 + i, None, f"id-{i}")
        assert status == 200
    run.wait_for(lambda: len(run.log_records()) == 3, timeout=90)
    run.wait_for(lambda: len(_idle_spins(first_json)) >= 3, timeout=90)
    assert run.stop() == 130  # Ctrl-C's exit code
    # Once the three datums are on the cycle, every batch without input runs each
    # of them ROUNDS_PER_BATCH times.
    assert _idle_spins(first_json)[-3:] == [3 * ROUNDS_PER_BATCH] * 3

    second = Run([str(spec), "-r", str(recovery), "--progress-json", str(second_json)], tmp_path)
    runs.append(second)
    second.wait_for(lambda: len(_idle_spins(second_json)) >= 2, timeout=90)
    assert _idle_spins(second_json)[-2:] == [3 * ROUNDS_PER_BATCH] * 2
    assert second.log_records() == []  # nothing new came in; nothing was written again
