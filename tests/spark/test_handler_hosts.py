"""Numaflow's stream handlers stay in their resident hosts across micro-batches: no
rebuild while the run lives; a host killed with SIGKILL loses nothing and puts
nothing twice; the hosts are gone when the run ends."""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from pathlib import Path

from flowspark.engine.observe import BatchProgress
from flowspark.engine.query import RunConfig, run_flow
from tests.spark.test_numaflow import check_sorted_once, sorter_flow, two_sources

HOST_MODULE = "flowspark.runtime.numaflow.handler_host"


def _processes() -> dict[int, tuple[int, str, list[str]]]:
    """Every process's (parent pid, state letter, command line)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
            cmdline = (entry / "cmdline").read_bytes().decode().split("\0")
        except (OSError, IndexError, ValueError):  # it ended meanwhile
            continue
        found[int(entry.name)] = (int(ppid), state, cmdline)
    return found


def _host_pids() -> set[int]:
    """The handler hosts that serve this test process's runs: each watches this process
    (started by the driver) or a process below it (started by a task), so hosts of
    runs elsewhere on the machine do not count."""
    processes = _processes()
    ours, grew = {os.getpid()}, True
    while grew:
        below = {pid for pid, (ppid, _, _) in processes.items() if ppid in ours}
        grew = not below <= ours
        ours |= below
    return {
        pid
        for pid, (_, _, cmdline) in processes.items()
        if HOST_MODULE in cmdline and cmdline[-2:-1] and int(cmdline[-2]) in ours
    }


class Figures:
    """A run listener keeping each batch's handler figures of step ``accum``; at batch
    ``kill_at`` it SIGKILLs every handler host."""

    def __init__(self, kill_at: int | None = None) -> None:
        self.batches: list[dict[str, int]] = []
        self.kill_at = kill_at
        self.killed: set[int] = set()

    def on_batch(self, progress: BatchProgress) -> None:
        self.batches.append(dict(progress.handlers.get("accum", {})))
        if self.kill_at is not None and len(self.batches) == self.kill_at:
            self.killed = _host_pids()
            for pid in self.killed:
                os.kill(pid, signal.SIGKILL)


def _sorted_run(figures: Figures, n: int = 60) -> tuple[list, list]:
    one, two = two_sources(n=n, seed=11)
    flow, out = sorter_flow(one, two, batch_size=4)
    run_flow(flow, RunConfig(epoch_interval=timedelta(0), listeners=[figures]))
    return one + two, out


def test_handlers_stay_in_their_hosts_for_the_whole_run():
    figures = Figures()
    sent, out = _sorted_run(figures)
    check_sorted_once(sent, out)
    seen = [f for f in figures.batches if f]
    assert len(seen) >= 10, figures.batches  # many micro-batches reported figures
    assert all(f["rebuilds"] == 0 for f in seen), seen
    assert max(f["open_handlers"] for f in seen) == 3  # k0, k1, k2 while open
    assert all(1 <= f["handler_hosts"] <= 2 for f in seen)  # one per partition used
    # A datum leaves the WAL once the sorter put out one read with a later watermark:
    # 3 keys keep a few batches (of 8 datums, 4 s of event time) each, not all 120.
    assert max(f["wal_datums"] for f in seen) < 64
    assert _host_pids() == set()  # stopped as the run ended


def test_a_killed_host_loses_nothing_and_puts_nothing_twice():
    figures = Figures(kill_at=8)
    sent, out = _sorted_run(figures)
    assert figures.killed, "no handler host was running at batch 8"
    check_sorted_once(sent, out)
    after = [f for f in figures.batches[8:] if f]
    assert after and max(f["rebuilds"] for f in after) >= 1  # rebuilt from the WAL
    assert _host_pids() == set()


class HostCount:
    """A run listener noting how many handler host processes run at each batch."""

    def __init__(self) -> None:
        self.counts: list[int] = []

    def on_batch(self, progress: BatchProgress) -> None:
        self.counts.append(len(_host_pids()))


def test_the_driver_starts_every_partitions_host_before_the_first_task():
    # One key: its tasks would start one host, in one partition, during the first
    # micro-batch; a local run's driver starts both partitions' hosts ahead of it.
    one, two = two_sources(n=20, seed=5)
    single = [d for d in one + two if d.keys == ["k1"]]
    flow, out = sorter_flow(single, [], batch_size=4)
    hosts = HostCount()
    run_flow(flow, RunConfig(epoch_interval=timedelta(0), listeners=[hosts]))
    check_sorted_once(single, out)
    assert hosts.counts and all(n == 2 for n in hosts.counts), hosts.counts
    assert _host_pids() == set()
    assert _zombie_children() == [], "the driver did not reap the hosts it started"


def _zombie_children() -> list[int]:
    """This process's children that have exited and were never waited for."""
    me = os.getpid()
    return [pid for pid, (ppid, state, _) in _processes().items() if ppid == me and state == "Z"]
