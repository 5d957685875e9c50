"""A local Spark standalone cluster from the pip package, in one command.

The ``pyspark`` wheel has Spark's jars and ``bin/spark-class`` but not the
``sbin/start-master.sh``/``start-worker.sh`` scripts of a Spark download, so
this module starts Spark's own ``Master`` and ``Worker`` classes through
``spark-class``, with the Java flowspark picks (``engine/java.py``) and this
interpreter as the executors' Python. What it started (pids, URLs) is kept in
``DIR/cluster.json`` so that ``stop`` ends exactly those processes::

    python -m flowspark.cluster start --workers 2      # prints spark://127.0.0.1:7077
    python -m flowspark.run flow.py --master spark://127.0.0.1:7077
    python -m flowspark.cluster stop

The workers share this machine's disk with the driver, so a flow's local paths
(inputs, the recovery directory) work as they are; on real separate machines they
must be on storage every machine mounts.
"""

from __future__ import annotations

import contextlib
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
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from flowspark.engine.java import find_java_home
from flowspark.engine.session import JVM_FLAGS, engine_settings, local_cores
from flowspark.shared.processes import pid_alive

__all__ = [
    "ClusterInfo",
    "ConnectInfo",
    "start_connect_server",
    "stop_connect_server",
    "cluster_of_processes",
    "cluster_status",
    "default_dir",
    "free_port",
    "host_port",
    "serve_cluster_process",
    "start_cluster",
    "start_worker",
    "stop_cluster",
]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@dataclass
class ClusterInfo:
    """What ``start`` started: the master's URL and web UI, and every process's pid."""

    master_url: str
    ui_url: str
    master_pid: int
    worker_pids: list[int] = field(default_factory=list)
    directory: str = ""


def default_dir() -> Path:
    """``$FLOWSPARK_CLUSTER_DIR``, else ``~/.flowspark/cluster``."""
    return Path(os.environ.get("FLOWSPARK_CLUSTER_DIR") or Path.home() / ".flowspark" / "cluster")


def _spark_home() -> Path:
    import pyspark  # noqa: PLC0415 pyspark: when Spark starts

    return Path(pyspark.__file__).resolve().parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["SPARK_HOME"] = str(_spark_home())
    env["JAVA_HOME"] = find_java_home()
    env["PYSPARK_PYTHON"] = sys.executable  # the executors' Python: this one, with flowspark
    env.setdefault("SPARK_LOG_DIR", "")
    return env


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), 0.3):
            return True
    except OSError:
        return False


def _launch(
    args: list[str], log: Path, env: dict[str, str], wrapper: tuple[str, ...] = ()
) -> subprocess.Popen:
    spark_class = _spark_home() / "bin" / "spark-class"
    with open(log, "ab") as out:
        return subprocess.Popen(
            [*wrapper, str(spark_class), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # outlives this command; stopped by pid
        )


def _master_state(ui_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{ui_url}/json/", timeout=2) as reply:
        return json.loads(reply.read())


def _claim(directory: Path, state_name: str, host: str, port: int, stop: str) -> Path:
    """The state file for what is about to start from ``directory``; fails if what
    it names still runs, or if ``host:port`` is taken."""
    state = directory / state_name
    if state.exists():
        running = json.loads(state.read_text())
        pid = running.get("master_pid", running.get("pid"))
        if pid is not None and pid_alive(int(pid)):
            where = running.get("master_url", running.get("url"))
            raise RuntimeError(
                f"what {directory} started is running at {where}; stop it first "
                f"(python -m flowspark.cluster {stop})"
            )
    if _listening(host, port):
        raise RuntimeError(f"{host}:{port} is taken: give another --port")
    directory.mkdir(parents=True, exist_ok=True)
    return state


def start_cluster(
    workers: int = 1,
    cores: int = 1,
    memory: str = "1g",
    host: str = "127.0.0.1",
    port: int = 7077,
    ui_port: int = 8080,
    directory: Path | None = None,
    timeout: float = 120.0,
) -> ClusterInfo:
    """Start a master and ``workers`` workers (each with ``cores`` and ``memory``) and
    wait until every worker has registered; fail with the log's tail otherwise."""
    directory = Path(directory or default_dir()).absolute()
    state = _claim(directory, "cluster.json", host, port, "stop")
    env = _env()
    master_url, ui_url = f"spark://{host}:{port}", f"http://{host}:{ui_port}"
    log = directory / "master.log"
    master = _launch(
        [MASTER_CLASS, "--host", host, "--port", str(port), "--webui-port", str(ui_port)], log, env
    )
    info = ClusterInfo(master_url, ui_url, master.pid, [], str(directory))
    try:
        _wait(lambda: _listening(host, port), master, log, timeout, "the master")
        for i in range(workers):
            info.worker_pids.append(start_worker(info, i, cores, memory, host).pid)

        def registered() -> bool:
            try:
                alive = [w for w in _master_state(ui_url)["workers"] if w["state"] == "ALIVE"]
            except (OSError, ValueError, KeyError):
                return False
            return len(alive) >= workers

        _wait(registered, master, log, timeout, f"{workers} worker(s) to register")
    except BaseException:
        _terminate([info.master_pid, *info.worker_pids])
        raise
    state.write_text(json.dumps(asdict(info)))
    return info


def start_worker(
    cluster: ClusterInfo,
    index: int,
    cores: int = 1,
    memory: str = "1g",
    host: str = "127.0.0.1",
    wrapper: tuple[str, ...] = (),
    port: int = 0,
) -> subprocess.Popen:
    """Start one more worker of ``cluster`` (work directory and log named by
    ``index`` in the cluster's directory) on ``host:port`` (0: any port);
    ``wrapper`` is a command prefix it runs under (e.g. one that gives it a mount
    namespace of its own). Its process group holds everything it starts
    (executors, their Python workers)."""
    directory = Path(cluster.directory)
    work = directory / f"worker-{index}"
    work.mkdir(parents=True, exist_ok=True)
    return _launch(
        [WORKER_CLASS, cluster.master_url, "--host", host, "--port", str(port),
         "--cores", str(cores), "--memory", memory, "--work-dir", str(work),
         "--webui-port", "0"],
        directory / f"worker-{index}.log",
        _env(),
        wrapper,
    )  # fmt: skip


# -- bytewax's cluster_main over several processes -----------------------------------


def host_port(address: str) -> tuple[str, int]:
    """``"host:port"`` as ``(host, port)``; ``ValueError`` for anything else.

    >>> host_port("127.0.0.1:2101")
    ('127.0.0.1', 2101)
    """
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"an address is host:port; got {address!r}")
    return host, int(port)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _worker_memory() -> str:
    """A cluster process's worker memory: room for one executor
    (``$FLOWSPARK_EXECUTOR_MEMORY``, else Spark's 1g)."""
    return os.environ.get("FLOWSPARK_EXECUTOR_MEMORY") or "1g"


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """For the block's length, SIGTERM raises ``KeyboardInterrupt`` (in the main
    thread), so a cluster process told to stop still stops its Spark processes on
    the way out, as on Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _scratch_directory() -> Iterator[Path]:
    """A folder for a cluster process's Spark state and logs: removed at the end,
    kept when the block fails (its error names the log there)."""
    directory = Path(tempfile.mkdtemp(prefix="flowspark-cluster-main-"))
    try:
        yield directory
    except Exception:
        raise
    except BaseException:  # Ctrl-C: nothing to look at
        shutil.rmtree(directory, ignore_errors=True)
        raise
    shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def cluster_of_processes(addresses: list[str], cores: int, timeout: float = 180.0) -> Iterator[str]:
    """Process 0's part of ``cluster_main``: a master on ``addresses[0]`` and a worker
    of ``cores`` cores, then a wait until every other process's worker has joined;
    yields the master's URL. The cluster stops when the block ends, which tells the
    other processes the run is over."""
    host, port = host_port(addresses[0])
    with _terminate_as_interrupt(), _scratch_directory() as directory:
        ui_port = free_port(host)
        info = start_cluster(1, cores, _worker_memory(), host, port, ui_port, directory, timeout)
        try:
            needed = len(addresses)

            def joined() -> bool:
                state = cluster_status(directory) or {}
                return sum(w["state"] == "ALIVE" for w in state.get("workers", [])) >= needed

            what = f"the workers of {needed} processes to join"
            _wait(joined, _Pid(info.master_pid), directory / "master.log", timeout, what)
            yield info.master_url
        finally:
            stop_cluster(directory)


def serve_cluster_process(
    addresses: list[str], proc_id: int, cores: int, timeout: float = 180.0
) -> None:
    """Process ``proc_id``'s part of ``cluster_main`` (not 0): a worker of ``cores``
    cores on ``addresses[proc_id]`` for process 0's master, until that master
    stops (the run is over)."""
    master_host, master_port = host_port(addresses[0])
    host, port = host_port(addresses[proc_id])
    with _terminate_as_interrupt():
        deadline = time.monotonic() + timeout
        while not _listening(master_host, master_port):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"cluster_main: process 0's master at {addresses[0]} did not come up "
                    f"in {timeout:.0f} s"
                )
            time.sleep(0.2)
        with _scratch_directory() as directory:
            master_url = f"spark://{master_host}:{master_port}"
            cluster = ClusterInfo(master_url, "", 0, [], str(directory))
            worker = start_worker(cluster, proc_id, cores, _worker_memory(), host, port=port)
            try:
                while _listening(master_host, master_port):
                    if worker.poll() is not None:
                        log = directory / f"worker-{proc_id}.log"
                        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
                        raise RuntimeError(
                            f"cluster_main: this process's Spark worker exited (see {log}):\n"
                            + "\n".join(lines[-15:])
                        )
                    time.sleep(0.5)
            finally:
                _terminate([worker.pid])


class _Pid:
    """A process that another started, as much of ``Popen`` as :func:`_wait` needs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self) -> int | None:
        return None if pid_alive(self.pid) else 0


def _wait(ready: Any, proc: Any, log: Path, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
            raise RuntimeError(f"waiting for {what} failed (see {log}):\n" + "\n".join(tail))
        time.sleep(0.2)


def _terminate(pids: list[int], grace: float = 15.0) -> None:
    for pid in pids:  # the process group: spark-class and its JVM
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def stop_cluster(directory: Path | None = None) -> ClusterInfo | None:
    """Stop what ``start`` started from ``directory`` (workers first); ``None`` if
    nothing was started there."""
    state = Path(directory or default_dir()).absolute() / "cluster.json"
    if not state.exists():
        return None
    info = ClusterInfo(**json.loads(state.read_text()))
    _terminate(info.worker_pids)
    _terminate([info.master_pid])
    state.unlink()
    return info


def cluster_status(directory: Path | None = None) -> dict[str, Any] | None:
    """The running cluster's master URL and its workers (from the master's JSON)."""
    state = Path(directory or default_dir()).absolute() / "cluster.json"
    if not state.exists():
        return None
    info = ClusterInfo(**json.loads(state.read_text()))
    try:
        workers = _master_state(info.ui_url)["workers"]
    except (OSError, ValueError, KeyError):
        return {"master": info.master_url, "running": False, "workers": []}
    return {
        "master": info.master_url,
        "running": True,
        "ui": info.ui_url,
        "workers": [{"id": w["id"], "cores": w["cores"], "state": w["state"]} for w in workers],
    }


# -- a Spark Connect server --------------------------------------------------------

CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@dataclass
class ConnectInfo:
    """What ``connect-start`` started: the server's ``sc://`` URL and its pid."""

    url: str
    pid: int
    master: str
    directory: str = ""


def _connect_settings(master: str, host: str, port: int) -> dict[str, str]:
    """The server's Spark settings: flowspark's engine's, plus Connect's own."""
    return {
        **engine_settings(master, local_cores(master), " ".join(JVM_FLAGS)),
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
        # The source spec (with in-memory inputs) travels inside the query plan.
        "spark.connect.grpc.maxInboundMessageSize": str(1 << 30),
        "spark.ui.enabled": "false",
    }


def start_connect_server(
    port: int = 15002,
    master: str = "local[*]",
    host: str = "127.0.0.1",
    memory: str = "4g",
    directory: Path | None = None,
    timeout: float = 120.0,
) -> ConnectInfo:
    """Start a Spark Connect server (Spark's ``SparkConnectServer`` through the
    wheel's ``spark-submit``, with flowspark's settings) on ``host:port`` running
    on ``master``; wait until it listens; fail with its log's tail otherwise."""
    directory = Path(directory or default_dir()).absolute()
    state = _claim(directory, "connect.json", host, port, "connect-stop")
    submit = str(_spark_home() / "bin" / "spark-submit")
    args = [submit, "--class", CONNECT_CLASS, "--master", master, "--driver-memory", memory]
    for key, value in _connect_settings(master, host, port).items():
        args += ["--conf", f"{key}={value}"]
    log = directory / "connect.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [*args, "spark-internal"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_env(),
            start_new_session=True,
        )
    info = ConnectInfo(f"sc://{host}:{port}", proc.pid, master, str(directory))
    try:
        _wait(lambda: _listening(host, port), proc, log, timeout, "the Connect server")
    except BaseException:
        _terminate([proc.pid])
        raise
    state.write_text(json.dumps(asdict(info)))
    return info


def stop_connect_server(directory: Path | None = None) -> ConnectInfo | None:
    """Stop the Connect server ``connect-start`` started from ``directory``."""
    state = Path(directory or default_dir()).absolute() / "connect.json"
    if not state.exists():
        return None
    info = ConnectInfo(**json.loads(state.read_text()))
    _terminate([info.pid])
    state.unlink()
    return info
