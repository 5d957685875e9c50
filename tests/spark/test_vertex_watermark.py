"""Numaflow's vertex watermark: a flow whose inputs carry a ``SourceWatermark`` runs
keyed Numaflow steps on the least source watermark, one for all keys.

The same data gives different answers under the per-key clock (each key's own
latest event time), which is how these tests tell the two apart.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable
from datetime import UTC, datetime, timedelta

from flowspark.api.udf.types import Datum
from flowspark.dataflow import Dataflow
from flowspark.inputs import PartitionedInput, SourceWatermark, StatefulSource
from flowspark.reducestreamer import Message, ReduceStreamer
from flowspark.testing import TestingOutput, run_main
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


def _reduce_flow(inp: PartitionedInput, out: list, late: list) -> Dataflow:
    flow = Dataflow()
    counted = flow.input("inp", inp).reduce_stream(
        "count", _Count, TumblingWindow(length=timedelta(seconds=60), align_to=T0)
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
    inp = _Parts({"p": (_batches(), 0.3, 0.0)})  # no source watermark: a clock per key
    run_main(_reduce_flow(inp, per_key_out, per_key_late), epoch_interval=timedelta(0))
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
