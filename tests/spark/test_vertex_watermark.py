"""Numaflow's vertex watermark: a flow whose inputs carry a ``SourceWatermark`` runs
keyed Numaflow steps on the least source watermark, one for all keys.

The same data gives different answers under the per-key clock (each key's own
latest event time), which is how these tests tell the two apart.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable
from datetime import UTC, datetime, timedelta

from flowspark.accumulator import Accumulator
from flowspark.accumulator import Message as AccMessage
from flowspark.api.udf.types import Datum
from flowspark.dataflow import Dataflow
from flowspark.inputs import PartitionedInput, SourceWatermark, StatefulSource
from flowspark.reducestreamer import Message, ReduceStreamer
from flowspark.testing import TestingInput, TestingOutput, run_main
from flowspark.window import TumblingWindow

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _datum(key: str, seconds: float) -> Datum:
    at = T0 + timedelta(seconds=seconds)
    return Datum([key], str(seconds).encode(), at, at, {}, id=f"{key}-{seconds}")


class _Scripted(StatefulSource):
    """Gives one scripted batch per call, ``every`` seconds apart; then ends
    (after ``linger`` more seconds of empty batches)."""

    def __init__(self, batches: list[list[Datum]], i: int, every: float, linger: float) -> None:
        self.batches, self.i, self.every, self.linger = batches, i, every, linger
        self.due = time.time()
        self.end = None

    def next_batch(self) -> list[Datum]:
        now = time.time()
        if self.i >= len(self.batches):
            self.end = self.end or now + self.linger
            if now >= self.end:
                raise StopIteration
            return []
        if now < self.due:
            return []
        self.due = now + self.every
        self.i += 1
        return self.batches[self.i - 1]

    def next_awake(self) -> datetime:
        return datetime.fromtimestamp(min(self.due, time.time() + 0.05), UTC)

    def snapshot(self) -> int:
        return self.i


class _Parts(PartitionedInput):
    def __init__(self, parts: dict[str, tuple[list[list[Datum]], float, float]]) -> None:
        self.parts = parts

    def list_parts(self) -> list[str]:
        return list(self.parts)

    def build_part(self, for_part: str, resume_state: int | None) -> _Scripted:
        batches, every, linger = self.parts[for_part]
        return _Scripted(batches, resume_state or 0, every, linger)


class _Count(ReduceStreamer):
    async def handler(self, keys: list[str], datums: AsyncIterable, output, md) -> None:  # noqa: ANN001
        n = 0
        async for _ in datums:
            n += 1
        await output.put(Message(str(n).encode(), keys=keys))


def _reduce_flow(
    inp: PartitionedInput, out: list, late: list, clock: str | None = None
) -> Dataflow:
    flow = Dataflow()
    counted = flow.input("inp", inp).reduce_stream(
        "count", _Count, TumblingWindow(length=timedelta(seconds=60), align_to=T0), clock=clock
    )
    counted.map(lambda d: (d.keys[0], d.value.decode(), time.time())).output(
        "out", TestingOutput(out)
    )
    counted.late.map(lambda d: (d.keys[0], d.value.decode())).output("late", TestingOutput(late))
    return flow


def _batches() -> list[list[Datum]]:
    # Key a in the first minute; then key b two minutes on; then a again, at 30 s.
    return [[_datum("a", 1), _datum("a", 2)], [_datum("b", 130)], [_datum("a", 30)]]


def test_a_key_behind_the_vertex_watermark_is_late_though_its_own_clock_is_not():
    per_vertex_out, per_vertex_late = [], []
    inp = _Parts({"p": (_batches(), 0.3, 0.0)})
    inp.watermark = SourceWatermark()
    run_main(_reduce_flow(inp, per_vertex_out, per_vertex_late), epoch_interval=timedelta(0))
    # b's datum moved the vertex watermark to 130 s: window [0, 60) of a closed, so
    # a's datum at 30 s is late, as on Numaflow.
    assert sorted((k, v) for k, v, _ in per_vertex_out) == [("a", "2"), ("b", "1")]
    assert per_vertex_late == [("a", "30")]

    per_key_out, per_key_late = [], []
    inp = _Parts({"p": (_batches(), 0.3, 0.0)})
    flow = _reduce_flow(inp, per_key_out, per_key_late, clock="key")
    run_main(flow, epoch_interval=timedelta(0))
    assert sorted((k, v) for k, v, _ in per_key_out) == [("a", "3"), ("b", "1")]
    assert per_key_late == []


def test_an_idle_source_moves_the_watermark_so_windows_close_before_the_input_ends():
    # Part p sends a's datums and then one far later; part q never sends anything and
    # ends only after 6 s. q holds the vertex watermark at -1 until its idle rule
    # (init_source_delay) gives it the wall clock.
    batches = [[_datum("a", 1)], [_datum("a", 2)], [_datum("z", 200)]]
    parts = {"p": (batches, 0.2, 6.0), "q": ([], 0.2, 6.0)}
    out: list = []
    late: list = []
    inp = _Parts(parts)
    inp.watermark = SourceWatermark(
        idle_threshold=timedelta(milliseconds=300),
        idle_increment=timedelta(seconds=1),
        init_source_delay=timedelta(milliseconds=500),
    )
    started = time.time()
    run_main(_reduce_flow(inp, out, late), epoch_interval=timedelta(0))
    ended = time.time()
    closed_a = [at for key, _, at in out if key == "a"]
    assert [(k, v) for k, v, _ in out if k == "a"] == [("a", "2")]
    # Closed by the watermark, seconds before the input's end closed the rest.
    assert closed_a[0] - started < (ended - started) - 2.0


class _Closing(Accumulator):
    """Forwards every datum, and says when the key's stream ended."""

    async def handler(self, datums: AsyncIterable[Datum], output) -> None:  # noqa: ANN001
        keys: list[str] = []
        async for datum in datums:
            keys = datum.keys
            await output.put(AccMessage.from_datum(datum))
        await output.put(AccMessage(b"end", keys=keys, event_time=T0))


def _accumulate_flow(parts: dict, out: list, clock: str | None = None) -> Dataflow:
    """Plain ``(key, seconds)`` items made datums by ``to_datums`` (no source
    watermark), into an accumulator with a 10 s timeout."""
    flow = Dataflow()
    datums = flow.input("inp", _Parts(parts)).to_datums(
        keys=lambda item: [item[0]],
        value=lambda item: str(item[1]).encode(),
        event_time=lambda item: T0 + timedelta(seconds=item[1]),
    )
    closed = datums.accumulate("acc", _Closing, timedelta(seconds=10), clock=clock)
    closed.map(lambda m: f"{m.keys[0]}:{m.value.decode()}").output("out", TestingOutput(out))
    return flow


def _busy_a_quiet_b() -> list[list[tuple[str, int]]]:
    # b sends once; a goes on, its event times 5 s apart, well past b's timeout.
    return [[("a", 0), ("b", 0)], *[[("a", s)] for s in range(5, 65, 5)]]


def test_a_quiet_key_times_out_on_the_vertex_watermark_while_another_is_busy():
    """The default clock of a Python flow's Numaflow steps is the vertex's: the least
    over the input parts of the event times they sent. b's stream ends once the
    watermark (moved by a's datums) passes b's last event time + 10 s, while a is
    still busy; on the per-key clock b ends only with the input."""
    out: list = []
    run_main(
        _accumulate_flow({"p": (_busy_a_quiet_b(), 0.25, 0.0)}, out), epoch_interval=timedelta(0)
    )
    assert sorted(out) == sorted([f"a:{s}" for s in range(0, 65, 5)] + ["a:end", "b:0", "b:end"])
    # b ended after a's datum at 15 s (the watermark passed 10 s) and long before a's last.
    assert out.index("a:15") < out.index("b:end") < out.index("a:50")

    per_key: list = []
    flow = _accumulate_flow({"p": (_busy_a_quiet_b(), 0.25, 0.0)}, per_key, clock="key")
    run_main(flow, epoch_interval=timedelta(0))
    assert sorted(per_key) == sorted(out)
    assert per_key.index("b:end") > per_key.index("a:60")  # only when the input ended


def test_the_vertex_watermark_is_the_least_over_the_input_parts():
    """A part that lags holds the watermark back for every key: b's stream stays open
    while part q's event times are behind, though part p's are far ahead."""
    p = [[("b", 0)], *[[("a", s)] for s in range(100, 400, 50)]]
    q = [[("c", 0)], [("c", 1)], [("c", 2)], [("c", 3)], [("c", 4)], [("c", 5)], [("c", 6)]]
    out: list = []
    run_main(
        _accumulate_flow({"p": (p, 0.25, 0.0), "q": (q, 0.25, 0.0)}, out),
        epoch_interval=timedelta(0),
    )
    assert "b:end" in out and "c:end" in out
    # q's times never passed 0 + 10 s, so b (and c) stay open until the input ends.
    assert out.index("b:end") > out.index("a:350") and out.index("b:end") > out.index("c:6")


def test_a_flow_cannot_mix_the_vertex_clock_with_a_per_key_one():
    import pytest

    out: list = []
    flow = _accumulate_flow({"p": ([[("a", 0)]], 0.1, 0.0)}, out, clock="vertex")
    flow.input("other", TestingInput([("k", 1)])).reduce(
        "sum", lambda a, b: a + b, lambda acc: True
    ).output("sums", TestingOutput([]))
    with pytest.raises(ValueError, match="one flow has one clock"):
        run_main(flow)
