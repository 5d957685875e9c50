"""A fresh bounded run whose whole input fits one micro-batch finishes its keyed steps
inside that batch, with the same results as when the input is spread over batches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, run_flow
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


def _run(batch_size: int, per_batch: bool, inputs: int = 1) -> tuple[dict[str, list], int]:
    out: dict[str, list] = {}
    config = RunConfig(epoch_interval=timedelta(0) if per_batch else None)
    report = run_flow(_flow(out, batch_size, inputs), config)
    return {name: sorted(items) for name, items in out.items()}, report.batches


def test_the_whole_input_in_one_batch_gives_the_results_of_many_batches():
    whole, whole_batches = _run(batch_size=len(EVENTS), per_batch=False)
    spread, spread_batches = _run(batch_size=37, per_batch=True)
    assert whole_batches == 1  # no end-of-input batch
    assert spread_batches > 10
    assert whole == spread
    # Every event counted once per key; every stateful_map result seen.
    assert sum(total for _, total in whole["total"]) == len(EVENTS)
    assert sum(n for _, n in whole["sessions"]) == len(EVENTS)
    assert len(whole["n"]) == len(EVENTS)


def test_a_flow_with_two_inputs_ends_with_a_separate_end_of_input_batch():
    # Each input's end is not the flow's end: keyed steps close on the timer path.
    two, batches = _run(batch_size=len(EVENTS), per_batch=False, inputs=2)
    assert batches == 2
    assert sum(total for _, total in two["total"]) == len(EVENTS)
    assert len(two["n"]) == len(EVENTS)
