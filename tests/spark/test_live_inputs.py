"""Live bytewax-style inputs: ``next_awake`` pacing, several inputs, runs that end.

A live source paces itself with ``next_awake()`` (a timezone-aware datetime, or
None = call again at once) and ends a part with ``StopIteration``. Whatever the
pacing, every item arrives exactly once and the run ends when every input has.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, run_flow
from flowspark.inputs import DynamicInput, PartitionedInput, StatefulSource, StatelessSource
from flowspark.testing import TestingInput, TestingOutput, run_main
from flowspark.window import EventClockConfig, TumblingWindow

pytestmark = pytest.mark.spark


class _PacedPart(StatefulSource, StatelessSource):
    """Items ``prefix0 … prefix{n-1}``, one per ``every``; nothing before its time."""

    def __init__(self, prefix: str, n: int, every: timedelta, start: int = 0) -> None:
        self.prefix, self.n, self.every, self.i = prefix, n, every, start
        self.due = datetime.now(UTC)

    def next_batch(self) -> list[Any]:
        if self.i >= self.n:
            raise StopIteration
        now = datetime.now(UTC)
        if now < self.due:
            return []  # polled before its time: nothing (bytewax must not call early)
        self.i += 1
        self.due = now + self.every
        return [f"{self.prefix}{self.i - 1}"]

    def next_awake(self) -> datetime | None:
        return self.due

    def snapshot(self) -> int:
        return self.i


class PacedDynamic(DynamicInput):
    def __init__(self, n: int, every: timedelta, prefix: str = "d") -> None:
        self.n, self.every, self.prefix = n, every, prefix

    def build(self, worker_index: int, worker_count: int) -> StatelessSource:
        return _PacedPart(self.prefix, self.n, self.every)


class PacedPartitioned(PartitionedInput):
    """Parts of different lengths and speeds; one part may be empty."""

    def __init__(self, parts: dict[str, tuple[int, timedelta]]) -> None:
        self.parts = parts

    def list_parts(self) -> list[str]:
        return list(self.parts)

    def build_part(self, for_part: str, resume_state: int | None) -> StatefulSource:
        n, every = self.parts[for_part]
        return _PacedPart(f"{for_part}-", n, every, resume_state or 0)


class _Bursty(StatelessSource):
    """Returns nothing (next_awake None) several times between items."""

    def __init__(self, n: int) -> None:
        self.n, self.calls, self.sent = n, 0, 0

    def next_batch(self) -> list[Any]:
        if self.sent >= self.n:
            raise StopIteration
        self.calls += 1
        if self.calls % 4:
            return []
        self.sent += 1
        return [self.sent]

    def next_awake(self) -> datetime | None:
        return None


class BurstyInput(DynamicInput):
    def __init__(self, n: int) -> None:
        self.n = n

    def build(self, worker_index: int, worker_count: int) -> StatelessSource:
        return _Bursty(self.n)


MS = timedelta(milliseconds=1)


def test_dynamic_input_paced_by_next_awake_delivers_every_item():
    flow = Dataflow()
    flow.input("inp", PacedDynamic(15, 60 * MS))
    out: list[str] = []
    flow.output("out", TestingOutput(out))
    run_main(flow)
    assert out == [f"d{i}" for i in range(15)]


def test_empty_batches_with_next_awake_none_are_polled_again():
    flow = Dataflow()
    flow.input("inp", BurstyInput(20))
    out: list[int] = []
    flow.output("out", TestingOutput(out))
    run_main(flow)
    assert out == list(range(1, 21))


def test_partitioned_input_parts_of_different_speeds_and_an_empty_part():
    parts = {"fast": (30, 5 * MS), "slow": (6, 150 * MS), "none": (0, MS)}
    flow = Dataflow()
    flow.input("inp", PacedPartitioned(parts))
    out: list[str] = []
    flow.output("out", TestingOutput(out))
    run_main(flow)
    expected = [f"fast-{i}" for i in range(30)] + [f"slow-{i}" for i in range(6)]
    assert sorted(out) == sorted(expected)
    assert [x for x in out if x.startswith("slow")] == [f"slow-{i}" for i in range(6)]


@pytest.mark.parametrize("epoch_interval", [None, timedelta(0)])
def test_two_inputs_of_different_lengths_into_a_keyed_step_lose_nothing(epoch_interval):
    # One input ending must not end the flow's clock while the other still sends.
    flow = Dataflow()
    short = flow.input("short", TestingInput([("k", 1)] * 4))
    long = flow.input("long", PacedDynamic(12, 40 * MS, prefix=""))
    merged = short.merge(long.map(lambda x: ("k", 10)))
    out: list[Any] = []
    merged.stateful_map("sum", lambda: 0, lambda acc, x: (acc + x, acc + x)).output(
        "out", TestingOutput(out)
    )
    run_main(flow, epoch_interval=epoch_interval)
    assert len(out) == 16
    assert out[-1] == ("k", 4 + 12 * 10)


def test_idle_and_empty_inputs_beside_a_live_one_into_a_window():
    # An empty input and an input that ends at once must not close the windows
    # of a live input that still sends (event time from the items).
    base = datetime(2024, 1, 1, tzinfo=UTC)
    flow = Dataflow()
    empty = flow.input("empty", TestingInput([]))
    quick = flow.input("quick", TestingInput([("k", base)]))
    live = flow.input("live", PacedDynamic(10, 30 * MS, prefix=""))
    events = live.map(lambda x: ("k", base + timedelta(seconds=int(x))))
    merged = empty.merge(quick, events)
    clock = EventClockConfig(lambda t: t, wait_for_system_duration=timedelta(0))
    window = TumblingWindow(length=timedelta(minutes=1), align_to=base)
    out: list[Any] = []
    counted = merged.fold_window("count", clock, window, lambda: 0, lambda n, _: n + 1)
    counted.output("out", TestingOutput(out))
    run_main(flow)
    assert out == [("k", 11)]


def test_bounded_run_stops_at_what_is_available_now():
    # A source whose next item is far in the future: --bounded does not wait for it.
    flow = Dataflow()
    flow.input("inp", PacedDynamic(3, timedelta(hours=1)))
    out: list[str] = []
    flow.output("out", TestingOutput(out))
    run_flow(flow, RunConfig(bounded=True))
    assert out == ["d0"]


def test_live_input_with_a_recovery_directory_and_trigger_interval(tmp_path):
    flow = Dataflow()
    flow.input("inp", PacedPartitioned({"a": (8, 20 * MS), "b": (5, 50 * MS)}))
    flow.map(lambda s: (s[0], 1))
    flow.reduce("count", lambda a, b: a + b, lambda n: n >= 5)
    out: list[Any] = []
    flow.output("out", TestingOutput(out))
    run_flow(
        flow,
        RunConfig(recovery_dir=str(tmp_path / "rec"), trigger_interval=timedelta(seconds=0.2)),
    )
    assert sorted(out) == [("a", 5), ("b", 5)]


def test_input_code_errors_name_the_input_step():
    class Broken(DynamicInput):
        def build(self, worker_index: int, worker_count: int) -> StatelessSource:
            raise ValueError("no connection")

    flow = Dataflow()
    flow.input("my_source", Broken())
    flow.output("out", TestingOutput([]))
    with pytest.raises(Exception, match="my_source.*no connection"):
        run_main(flow)


@pytest.mark.parametrize("epoch_interval", [None, timedelta(0)])
def test_two_numaflow_sources_of_different_lengths_into_a_reduce_stream(epoch_interval):
    from flowspark.reducestreamer import Datum, Message

    async def count(keys, datums, output, metadata):
        n = 0
        async for _ in datums:
            n += 1
        await output.put(Message(str(n).encode(), keys=keys))

    t0 = datetime(2024, 1, 1, tzinfo=UTC)

    def datums(n: int) -> list[Datum]:
        return [
            Datum(keys=["k"], value=b"v", event_time=t0 + timedelta(seconds=s), watermark=t0)
            for s in range(n)
        ]

    flow = Dataflow()
    short = flow.input("short", TestingInput(datums(4)))
    long = flow.input("long", TestingInput(datums(12)))
    out: list[Any] = []
    short.merge(long).reduce_stream("count", count, timedelta(seconds=60)).output(
        "out", TestingOutput(out)
    )
    run_main(flow, epoch_interval=epoch_interval)
    assert [d.value for d in out] == [b"16"]
