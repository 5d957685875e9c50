"""A session's first live (unbounded, streamed) keyed run is preceded by one warm-up
run of a keyed step, which neither the run's outputs nor its listeners see; batch
jobs, bounded runs and runs without keyed steps start no warm-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowspark.dataflow import Dataflow
from flowspark.engine import query
from flowspark.engine.query import RunConfig, run_flow
from flowspark.testing import TestingInput, TestingOutput


@pytest.fixture
def warm_ups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The session as if no keyed run had happened yet; one entry per warm-up run."""
    monkeypatch.setattr(query, "_KEYED_PATH_WARM", False)
    runs: list[int] = []
    execute = query._execute

    def spy(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("warming"):
            runs.append(1)
        return execute(*args, **kwargs)

    monkeypatch.setattr(query, "_execute", spy)
    return runs


class _Batches:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def on_batch(self, progress: Any) -> None:
        self.seen.append(progress)


def _keyed_flow(out: list[Any]) -> Dataflow:
    flow = Dataflow()
    flow.input("inp", TestingInput(range(20)))
    flow.map(lambda x: (str(x % 2), x))
    flow.stateful_map("sum", lambda: 0, lambda s, x: (s + x, s + x))
    flow.output("out", TestingOutput(out))
    return flow


def test_the_first_streamed_keyed_run_warms_up_once(warm_ups: list[int], tmp_path: Path) -> None:
    for run in range(2):
        out: list[Any] = []
        batches = _Batches()
        config = RunConfig(recovery_dir=str(tmp_path / str(run)), listeners=[batches])
        report = run_flow(_keyed_flow(out), config)
        assert dict(sorted(out, key=lambda kv: kv[1])) == {"0": 90, "1": 100}
        assert len(out) == 20  # the warm-up's items went to its own output
        assert len(batches.seen) == report.batches  # and its batches to no listener
    assert warm_ups == [1]
    assert query._KEYED_PATH_WARM


def test_batch_jobs_bounded_runs_and_runs_without_keyed_steps_do_not_warm_up(
    warm_ups: list[int], tmp_path: Path
) -> None:
    out: list[Any] = []
    report = run_flow(_keyed_flow(out))  # no recovery directory: one batch job
    assert not report.streamed and len(out) == 20
    bounded = RunConfig(bounded=True, recovery_dir=str(tmp_path / "b"))
    assert run_flow(_keyed_flow(out), bounded).streamed and len(out) == 40
    stateless = Dataflow()
    stateless.input("inp", TestingInput(range(5)))
    stateless.map(lambda x: x + 1)
    plus_one: list[int] = []
    stateless.output("out", TestingOutput(plus_one))
    report = run_flow(stateless, RunConfig(recovery_dir=str(tmp_path / "r")))
    assert report.streamed and sorted(plus_one) == [1, 2, 3, 4, 5]
    assert warm_ups == []
    assert not query._KEYED_PATH_WARM
