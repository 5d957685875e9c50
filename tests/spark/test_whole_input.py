"""A fresh bounded run whose whole input fits one micro-batch finishes its keyed steps
inside that batch, with the same results as when the input is spread over batches.

Without a recovery directory that batch runs as one Spark batch job; with one, as
the streaming query's only micro-batch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, RunReport, run_flow
from flowspark.runtime.errors import StepError
from flowspark.testing import TestingInput, TestingOutput
from flowspark.window import EventClockConfig, SessionWindow, SystemClockConfig, TumblingWindow

T0 = datetime(2024, 1, 1, tzinfo=UTC)
EVENTS = [(f"k{i % 7}", T0 + timedelta(seconds=13 * i)) for i in range(400)]


def _flow(out: dict[str, list], batch_size: int, inputs: int = 1) -> Dataflow:
    """Keyed steps of every kind, two of them chained (a window after a window)."""
    flow = Dataflow()
    per_input = len(EVENTS) // inputs
    streams = [
        flow.input(f"in{n}", TestingInput(EVENTS[n * per_input : (n + 1) * per_input], batch_size))
        for n in range(inputs)
    ]
    events = streams[0] if inputs == 1 else streams[0].merge(*streams[1:], step_id="both")
    clock = EventClockConfig(lambda t: t, wait_for_system_duration=timedelta(0))
    minutes = events.fold_window(
        "per_minute", clock, TumblingWindow(timedelta(minutes=1), T0), list, lambda a, t: [*a, t]
    )
    minutes.map("count", lambda kv: (kv[0], len(kv[1]))).reduce_window(
        "total", SystemClockConfig(), TumblingWindow(timedelta(days=36500), T0), lambda a, b: a + b
    ).output("o_total", TestingOutput(out.setdefault("total", [])))
    events.collect_window("sessions", clock, SessionWindow(timedelta(seconds=100))).map(
        "session_len", lambda kv: (kv[0], len(kv[1]))
    ).output("o_sessions", TestingOutput(out.setdefault("sessions", [])))
    numbered = events.stateful_map("n", lambda: 0, lambda n, t: (n + 1, n + 1))
    numbered.output("o_n", TestingOutput(out.setdefault("n", [])))
    numbered.batch("batch", 10, timedelta(hours=1)).map(
        "batch_sum", lambda kv: (kv[0], sum(kv[1]))
    ).output("o_batch", TestingOutput(out.setdefault("batch", [])))
    numbered.reduce("r", lambda a, b: a + b, lambda acc: acc > 100).output(
        "o_r", TestingOutput(out.setdefault("r", []))
    )
    return flow


def _run(
    batch_size: int, per_batch: bool, inputs: int = 1, recovery_dir: str | None = None
) -> tuple[dict[str, list], RunReport]:
    out: dict[str, list] = {}
    config = RunConfig(
        epoch_interval=timedelta(0) if per_batch else None, recovery_dir=recovery_dir
    )
    report = run_flow(_flow(out, batch_size, inputs), config)
    return {name: sorted(items) for name, items in out.items()}, report


def _check_counts(results: dict[str, list]) -> None:
    # Every event counted once per key; every stateful_map result seen.
    assert sum(total for _, total in results["total"]) == len(EVENTS)
    assert sum(n for _, n in results["sessions"]) == len(EVENTS)
    assert len(results["n"]) == len(EVENTS)


@pytest.fixture(scope="module")
def spread_over_batches() -> dict[str, list]:
    """The results with the input spread over many micro-batches (the timer path)."""
    spread, report = _run(batch_size=37, per_batch=True)
    assert report.streamed
    assert report.batches > 10
    _check_counts(spread)
    return spread


def test_without_recovery_the_whole_input_runs_as_one_batch_job(spread_over_batches):
    whole, report = _run(batch_size=len(EVENTS), per_batch=False)
    assert not report.streamed
    assert report.batches == 1
    assert whole == spread_over_batches


def test_with_recovery_the_whole_input_streams_in_one_micro_batch(spread_over_batches, tmp_path):
    whole, report = _run(batch_size=len(EVENTS), per_batch=False, recovery_dir=str(tmp_path))
    assert report.streamed
    assert report.batches == 1  # no end-of-input batch
    assert whole == spread_over_batches
    # The checkpoint records the end: a restart runs no batch and writes nothing.
    again, report = _run(batch_size=len(EVENTS), per_batch=False, recovery_dir=str(tmp_path))
    assert report.batches == 0
    assert all(not items for items in again.values())


def test_two_inputs_run_as_one_batch_job_without_recovery(spread_over_batches):
    two, report = _run(batch_size=len(EVENTS), per_batch=False, inputs=2)
    assert not report.streamed
    assert two == spread_over_batches


def test_two_inputs_streamed_whole_in_one_batch(spread_over_batches, tmp_path):
    # One source reads every input: both end in the first batch, so it is the whole input.
    two, report = _run(
        batch_size=len(EVENTS), per_batch=False, inputs=2, recovery_dir=str(tmp_path)
    )
    assert report.streamed
    assert report.batches == 1
    assert two == spread_over_batches


@pytest.mark.parametrize("recovery", [False, True], ids=["batch-job", "streamed"])
def test_a_failing_step_names_the_step_and_item_either_way(recovery, tmp_path):
    flow = Dataflow()
    words = flow.input("inp", TestingInput(["a", "b", "boom", "c"]))
    words.map("explode", lambda s: 1 / 0 if s == "boom" else s).output("out", TestingOutput([]))
    config = RunConfig(recovery_dir=str(tmp_path) if recovery else None)
    with pytest.raises(StepError, match="step 'explode'.*'boom'.*ZeroDivisionError"):
        run_flow(flow, config)
