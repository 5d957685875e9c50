"""A standalone cluster whose workers see nothing of the driver's disk but one shared
directory, as separate machines would: each worker runs in a mount namespace of
its own where the temp directory (the driver's scratch, the tests' project folders;
only this test's folder when the checkout itself lives there) and the repository's
``examples/`` are empty, and only the shared directory is bound back.

On it, with the recovery directory on the shared directory: the quickstart and the
Numaflow example (accumulator + reduce stream) give the local run's output, and a
keyed event-time window flow whose steps reach a helper module through a global
gives exactly the expected sums although one worker's whole process tree is
SIGKILLed mid-run and a replacement is started; JetStream and a directory output on S3,
both written by the executors, hold every item once although the worker whose task is
publishing is SIGKILLed; and files in a bucket of a real S3 server, which the executors
open themselves, give the local run's output.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from flowspark.engine.cluster import (
    ClusterInfo,
    free_port,
    start_cluster,
    start_worker,
    stop_cluster,
)
from tests.recovery.cli_runs import (
    PACED_INPUT,
    WINDOW_FLOW,
    WINDOW_HELPERS,
    WINDOW_PARTS,
    expected_window_sums,
    output_lines,
)

ROOT = Path(__file__).resolve().parents[2]


def _private_mounts_work() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    return probe.returncode == 0


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not _private_mounts_work(),
        reason="needs root and `unshare --mount` to give each worker a filesystem view of its own",
    ),
]


def _driver_only_trees(tests_temp: Path) -> list[str]:
    """What the workers must not see of the driver's disk: the whole temp directory
    (the driver's scratch, every test's files), unless the workers' own software
    (this checkout, its virtualenv, Java) lives there; then the tests' temp folder
    (``tests_temp``: pytest's, which holds every test's ``tmp_path``)."""
    from flowspark.engine.java import find_java_home

    temp = Path(tempfile.gettempdir()).resolve()
    software = [ROOT, Path(sys.prefix), Path(find_java_home())]
    if any(path.resolve().is_relative_to(temp) for path in software):
        return [str(tests_temp)]
    return [str(temp)]


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


class PrivateCluster:
    """A master and workers that each see only ``shared_root`` of the driver's files;
    each test works in a folder of its own there, ``shared``."""

    def __init__(self, tmp_path: Path, tests_temp: Path) -> None:
        self.shared_root = tmp_path / "shared"
        self.shared_root.mkdir()
        self.shared = self.shared_root
        self.info: ClusterInfo = start_cluster(
            workers=0, directory=tmp_path / "cluster", port=free_port(), ui_port=free_port()
        )
        # Started from this process, the master is its child: reaped here once it ends
        # (as ``python -m flowspark.cluster start``'s are by init), else stop_cluster
        # would wait out its grace period for a zombie.
        threading.Thread(target=_reap, args=(self.info.master_pid,), daemon=True).start()
        hidden = [str(ROOT / "examples"), *_driver_only_trees(tests_temp)]
        self.wrapper = (
            "unshare", "--mount", "--propagation", "private",
            sys.executable, str(ROOT / "tests" / "private_mounts.py"),
            *(arg for tree in hidden for arg in ("--hide", tree)),
            "--share", str(self.shared_root), "--",
        )  # fmt: skip
        self.workers: list[subprocess.Popen] = []

    def add_worker(self) -> subprocess.Popen:
        """One more worker, at an address of its own (127.0.0.2, .3, …): Spark reads
        shuffle files of executors on the same host straight from their disk."""
        index = len(self.workers)
        worker = start_worker(
            self.info, index, cores=1, host=f"127.0.0.{index + 2}", wrapper=self.wrapper
        )
        self.workers.append(worker)
        return worker

    def alive_workers(self) -> int:
        with urllib.request.urlopen(f"{self.info.ui_url}/json/", timeout=2) as reply:
            workers = json.loads(reply.read())["workers"]
        return sum(w["state"] == "ALIVE" for w in workers)

    def wait_for_workers(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while self.alive_workers() < count:
            assert time.monotonic() < deadline, f"{count} workers did not register"
            time.sleep(0.2)

    def keep_workers(self, count: int) -> None:
        """``count`` workers running and registered: a replacement for each one a
        test killed."""
        while sum(worker.poll() is None for worker in self.workers) < count:
            self.add_worker()
        self.wait_for_workers(count)

    def kill_worker(self, worker: subprocess.Popen) -> None:
        """SIGKILL the worker's whole process tree: its JVM, executor, Python workers."""
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()

    def stop(self) -> None:
        for worker in self.workers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        stop_cluster(Path(self.info.directory))


@pytest.fixture(scope="module")
def private_cluster(tmp_path_factory: pytest.TempPathFactory):
    """One cluster for the module's tests (starting one takes a master's and two
    workers' JVMs)."""
    cluster = PrivateCluster(tmp_path_factory.mktemp("private"), tmp_path_factory.getbasetemp())
    try:
        yield cluster
    finally:
        cluster.stop()


_RUNS: list[subprocess.Popen] = []


@pytest.fixture
def cluster(private_cluster: PrivateCluster, request: pytest.FixtureRequest):
    """The module's cluster with two workers running (whatever an earlier test killed)
    and a folder of this test's own on the shared directory, ``cluster.shared``; the
    runs the test started are killed on the way out if they still run, so that none
    holds the cluster's cores for the next test."""
    private_cluster.keep_workers(2)
    private_cluster.shared = private_cluster.shared_root / request.node.name
    private_cluster.shared.mkdir()
    try:
        yield private_cluster
    finally:
        while _RUNS:
            run = _RUNS.pop()
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.communicate()


def _run(flow: str, master: str | None, *args: str, cwd: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "flowspark.run", flow, *args]
    if master:
        cmd += ["--master", master]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.Popen(
        cmd, cwd=cwd, env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    _RUNS.append(run)
    return run


def test_the_quickstart_on_workers_that_share_only_one_directory(
    cluster: PrivateCluster, local_output
):
    # The project (flow file and its data) lives on the shared directory, as it would
    # on a shared filesystem; the recovery directory too.
    project = cluster.shared / "quickstart"
    (project / "data").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "quickstart.py", project)
    shutil.copy(ROOT / "examples" / "data" / "poem.txt", project / "data")
    recovery = cluster.shared / "recovery"
    on_cluster = _run("quickstart.py", cluster.info.master_url, "-r", str(recovery),
                      "--shared-recovery", cwd=project)  # fmt: skip
    out, err = on_cluster.communicate(timeout=300)
    assert on_cluster.returncode == 0, err[-3000:]
    local = local_output("examples/quickstart.py")  # the same flow and data, run locally
    assert out.strip() and sorted(out.splitlines()) == sorted(local.splitlines())


def test_the_numaflow_example_on_workers_that_share_only_one_directory(
    cluster: PrivateCluster, local_output
):
    """examples/numaflow_join_sort.py (accumulator + reduce stream, pynumaflow code):
    the flow's module is in examples/, which the workers do not see; it ships."""
    recovery = cluster.shared / "recovery"
    flow = "examples/numaflow_join_sort.py"
    on_cluster = _run(flow, cluster.info.master_url, "--bounded", "-r", str(recovery),
                      "--shared-recovery", cwd=ROOT)  # fmt: skip
    out, err = on_cluster.communicate(timeout=400)
    assert on_cluster.returncode == 0, err[-3000:]
    local = local_output(flow, "--bounded")
    assert out.strip() and sorted(out.splitlines()) == sorted(local.splitlines())


def _count(directory: Path) -> int:
    """Files (not ``.crc``) in a checkpoint log directory: its micro-batches."""
    if not directory.exists():
        return 0
    return sum(not p.name.startswith(".") for p in directory.iterdir())


def _run_to_end_after_a_kill(
    cluster: PrivateCluster, run: subprocess.Popen, args: tuple[str, ...], project: Path
) -> None:
    """Start a replacement worker, as a cluster manager would, and let ``run`` (of
    ``project``'s ``flow.py:flow``) end; a query that gave up is run again (twice at
    most, as a user would), and the run must end well."""
    cluster.add_worker()
    _, err = run.communicate(timeout=400)
    restarts = 0
    while run.returncode != 0 and restarts < 2:
        restarts += 1
        run = _run("flow.py:flow", cluster.info.master_url, *args, cwd=project)
        _, err = run.communicate(timeout=400)
    assert run.returncode == 0, err[-3000:]


def test_a_worker_killed_mid_run_loses_nothing_and_duplicates_nothing(
    cluster: PrivateCluster, tmp_path: Path
):
    project = tmp_path / "project"  # on the driver only: hidden from the workers
    project.mkdir()
    (project / "helpers.py").write_text(WINDOW_HELPERS)
    out = cluster.shared / "sums.txt"
    (project / "flow.py").write_text(
        f"PARTS = {WINDOW_PARTS!r}\n" + PACED_INPUT + WINDOW_FLOW.format(out=str(out))
    )
    recovery = cluster.shared / "recovery"
    args = ("-r", str(recovery), "--shared-recovery")
    run = _run("flow.py:flow", cluster.info.master_url, *args, cwd=project)
    commits = recovery / "commits"
    deadline = time.monotonic() + 240
    while _count(commits) < 3 and run.poll() is None:  # a few micro-batches in
        assert time.monotonic() < deadline, "the flow made no progress"
        time.sleep(0.05)
    assert run.poll() is None, run.communicate()[1][-3000:]
    assert output_lines(out) == []  # the kill lands mid-run: every window still open
    cluster.kill_worker(cluster.workers[0])
    _run_to_end_after_a_kill(cluster, run, args, project)
    lines = output_lines(out)
    duplicates = [line for line, n in Counter(lines).items() if n > 1]
    assert not duplicates, f"{len(duplicates)} lines written twice, e.g. {duplicates[:3]}"
    assert sorted(lines) == sorted(expected_window_sums())


JETSTREAM_FLOW = """
import os
import time

from flowspark.connectors.files import DirOutput
from flowspark.connectors.jetstream import JetStreamInput, JetStreamOutput
from flowspark.dataflow import Dataflow

CHUNK = 4096  # a source task's items reach the program (and the sink) in chunks of this


def upper(m, seen=[0]):
    # Once a task's first chunk is published, the next one is mapped slowly and the
    # Python worker's pid is left for the test, which kills its worker then.
    seen[0] += 1
    if CHUNK < seen[0] <= CHUNK + 500:
        if seen[0] == CHUNK + 1:
            try:
                with open({mark!r}, "x") as out:
                    out.write(str(os.getpid()))
            except FileExistsError:
                pass
        time.sleep(0.002)
    return (m.key, m.data.upper())


flow = Dataflow()
flow.input("in", JetStreamInput({url!r}, "IN", max_messages={per_batch}))
flow.map(upper)
flow.output("out", JetStreamOutput({url!r}, "out.copy"))
flow.map(lambda kv: (kv[0], kv[1].decode()))
flow.output("files", DirOutput({files!r}, 3, writes_on="executors"))
"""
JETSTREAM_N = 20_000
JETSTREAM_PER_BATCH = 10_000  # two tasks publish 5 000 each per micro-batch


def _publishing_worker(cluster: PrivateCluster, mark: Path, run: subprocess.Popen) -> int:
    """Wait until a task has published its first chunk (the flow's map leaves its
    Python worker's pid in ``mark`` then) and return the index of that task's worker."""
    import psutil

    deadline = time.monotonic() + 240
    while not mark.exists() or not mark.read_text():
        assert run.poll() is None, run.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no task reached its second chunk"
        time.sleep(0.01)
    pid = int(mark.read_text())
    for index, worker in enumerate(cluster.workers):
        with contextlib.suppress(psutil.NoSuchProcess):
            if pid in {p.pid for p in psutil.Process(worker.pid).children(recursive=True)}:
                return index
    raise AssertionError(f"python worker {pid} is under no Spark worker")


def _segment_lines(root: Any) -> dict[str, list[str]]:
    """Each part's lines of a DirOutput on an object store (its objects in name order)."""
    from flowspark.runtime.storage import read_bytes

    parts: dict[str, list[str]] = {}
    for name in root.files("*/*"):
        part = name.split("/")[0]
        parts.setdefault(part, []).extend(read_bytes(root.child(*name.split("/"))).decode().split())
    return parts


def test_jetstream_and_s3_outputs_written_by_the_executors_hold_every_item_once_after_a_kill(
    cluster: PrivateCluster, tmp_path: Path
):
    """JetStream → map → JetStream and a DirOutput on S3 (moto), both written by the
    executors: one worker's whole process tree is SIGKILLed while a task publishes,
    and a replacement is started. Spark runs the lost tasks again: the output stream
    holds every message once, each named by the run's token, its partition,
    micro-batch and position; every part of the S3 output holds its keys' lines once,
    in order."""
    from flowspark.runtime.storage import Location
    from tests.nats_server import NatsServer, add_stream, publish, read_all, stream_state
    from tests.s3_server import S3Server

    with NatsServer(tmp_path / "nats") as nats, S3Server(tmp_path) as s3:
        s3.make_bucket("out")
        files = Location.parse(s3.uri("out", "copies"))
        add_stream(nats.url, "IN", ["in.>"])
        add_stream(nats.url, "OUT", ["out.>"], duplicate_window=600.0)
        messages = ((f"in.{i % 7}", f"m{i}".encode(), {"Flowspark-Key": f"k{i % 7}"})
                    for i in range(JETSTREAM_N))  # fmt: skip
        publish(nats.url, messages)
        project = tmp_path / "project"
        project.mkdir()
        mark = cluster.shared / "publishing.pid"
        flow = JETSTREAM_FLOW.format(
            url=nats.url, per_batch=JETSTREAM_PER_BATCH, mark=str(mark), files=files.spec
        )
        (project / "flow.py").write_text(flow)
        recovery = cluster.shared / "recovery"
        args = ("--bounded", "-r", str(recovery), "--shared-recovery")
        run = _run("flow.py:flow", cluster.info.master_url, *args, cwd=project)
        publishing = _publishing_worker(cluster, mark, run)
        seen = stream_state(nats.url, "OUT").messages
        cluster.kill_worker(cluster.workers[publishing])
        assert seen % (JETSTREAM_PER_BATCH // 2), f"killed at {seen}: no task was mid-way"
        _run_to_end_after_a_kill(cluster, run, args, project)
        published = read_all(nats.url, "OUT")
        parts = _segment_lines(files)
    got = Counter(data for _, data, _ in published)
    twice = sum(n - 1 for n in got.values() if n > 1)
    assert twice == 0, f"killed at {seen} messages: {twice} published twice"
    assert got == Counter(f"M{i}".encode() for i in range(JETSTREAM_N))
    ids = [headers["Nats-Msg-Id"] for _, _, headers in published]
    token = (recovery / "flowspark-sinks" / "out.token").read_text().strip()
    assert all(re.fullmatch(rf"{token}\.[01]:\d+:\d+", i) for i in ids), ids[:3]
    # The files: each key's lines in its part (DirOutput's adler32 of the key), once, in order.
    lines = [line for part in parts.values() for line in part]
    assert sorted(lines) == sorted(f"M{i}" for i in range(JETSTREAM_N))
    for part, part_lines in parts.items():
        keys = {f"k{int(line[1:]) % 7}" for line in part_lines}
        assert {f"part_{zlib.adler32(k.encode()) % 3}" for k in keys} == {part}
        for k in keys:
            numbers = [int(line[1:]) for line in part_lines if f"k{int(line[1:]) % 7}" == k]
            assert numbers == sorted(numbers), f"{part}: key {k} out of order"


S3_FLOW = """
from flowspark.connectors.files import DirInput
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow

flow = Dataflow()
flow.input("logs", DirInput({uri!r}, "*.txt", batch_size=50))
flow.flat_map(str.split)
flow.map(lambda w: (w, w))
flow.stateful_map("seen", lambda: 0, lambda n, w: (n + 1, n + 1))
flow.map(lambda kv: f"{{kv[0]}} {{kv[1]}}")
flow.output("out", StdOutput())
"""


def test_inputs_on_s3_are_read_by_workers_that_share_no_disk(
    cluster: PrivateCluster, tmp_path: Path
):
    """Files in a bucket of a real S3 server (moto, on loopback), listed by the driver
    and opened by executors that see none of the driver's files: a keyed running
    count over them, in micro-batches of at most 300 lines, equals the local run's."""
    from flowspark.runtime.storage import Location, write_bytes_atomic
    from tests.s3_server import S3Server

    with S3Server(tmp_path) as s3:
        s3.make_bucket("logs")
        root = Location.parse(s3.uri("logs", "2026"))
        for part in range(3):
            lines = (f"w{(part * 7 + k) % 11} v{k % 5}" for k in range(400 * (part + 1)))
            write_bytes_atomic(root.child(f"{part}.txt"), "\n".join(lines).encode())
        project = tmp_path / "project"  # on the driver only
        project.mkdir()
        (project / "flow.py").write_text(S3_FLOW.format(uri=root.spec))
        recovery = cluster.shared / "recovery"
        args = ("--bounded", "-r", str(recovery), "--shared-recovery", "--max-batch-items", "300")
        on_cluster = _run("flow.py:flow", cluster.info.master_url, *args, cwd=project)
        out, err = on_cluster.communicate(timeout=400)
        assert on_cluster.returncode == 0, err[-3000:]
        local = _run("flow.py:flow", None, "--bounded", cwd=project)
        local_out, local_err = local.communicate(timeout=300)
        assert local.returncode == 0, local_err[-3000:]
    assert len(out.splitlines()) == 2 * 400 * (1 + 2 + 3)
    assert sorted(out.splitlines()) == sorted(local_out.splitlines())
    assert _count(recovery / "commits") > 3  # several micro-batches
