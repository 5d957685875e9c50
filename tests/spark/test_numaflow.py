"""Numaflow UDFs end to end on local Spark: map stream, reduce stream, accumulator.

The spec pages' handlers run with only the import prefix changed, with keys and
windows spanning several micro-batches; the forced-rebuild setting (every
handler replayed from its WAL on every batch) must give identical outputs.
"""

from __future__ import annotations

import os
import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from bench.udfs.spec_handlers import stream_sorter
from flowspark import accumulator
from flowspark.accumulator import Accumulator, Datum, Message
from flowspark.dataflow import Dataflow
from flowspark.mapstreamer import Message as MapMessage
from flowspark.reducestreamer import Message as ReduceMessage
from flowspark.runtime.errors import StepError
from flowspark.runtime.numaflow.keyed import REBUILD_ENV
from flowspark.testing import TestingInput, TestingOutput, run_main
from flowspark.window import SlidingWindow, TumblingWindow
from tests.pynumaflow_pages import FlatMapStream, ReduceCounter, map_stream_handler, reduce_handler

T0 = datetime(2024, 1, 1, tzinfo=UTC)
PER_BATCH = timedelta(0)  # every source batch is its own micro-batch


def datum(key: str, seconds: float, value: bytes, id_: str = "") -> Datum:
    at = T0 + timedelta(seconds=seconds)
    return Datum(keys=[key], value=value, event_time=at, watermark=T0, id_=id_)


# The accumulator page's StreamSorter (its loop variable fixed: `async for datum`), flushing
# what is left when its stream ends.
StreamSorter = stream_sorter(accumulator)


def two_sources(n: int = 40, seed: int = 7) -> tuple[list[Datum], list[Datum]]:
    """Two ordered streams over three keys whose event times interleave, each a little
    out of order (jitter < the 3 s watermark delay)."""
    rng = random.Random(seed)
    one, two = [], []
    for i in range(n):
        for stream, offset in ((one, 0.0), (two, 0.5)):
            key = f"k{rng.randrange(3)}"
            seconds = i + offset + rng.uniform(-1, 1)
            stream.append(datum(key, seconds, f"{key}@{seconds:.3f}".encode(), f"{offset}-{i}"))
    return one, two


def sorter_flow(one: list[Datum], two: list[Datum], batch_size: int) -> tuple[Dataflow, list]:
    """Both sources' datums, merged, through step ``accum`` (the StreamSorter); and the
    list its output collects."""
    flow = Dataflow()
    a = flow.input("http-one", TestingInput(one, batch_size=batch_size))
    b = flow.input("http-two", TestingInput(two, batch_size=batch_size))
    out: list = []
    a.merge(b).accumulate(
        "accum", StreamSorter, timeout=timedelta(seconds=10), watermark_delay=timedelta(seconds=3)
    ).output("sink", TestingOutput(out))
    return flow, out


def check_sorted_once(sent: list[Datum], out: list[Datum]) -> None:
    """Each datum sent came out once, in event-time order per key."""
    assert Counter(d.id for d in out) == Counter(d.id for d in sent)
    by_key = defaultdict(list)
    for d in out:
        by_key[d.keys[0]].append(d.event_time)
    for key, times in by_key.items():
        assert times == sorted(times), f"key {key} out of order"


def run_sorter(one: list[Datum], two: list[Datum]) -> list:
    flow, out = sorter_flow(one, two, batch_size=8)
    run_main(flow, epoch_interval=PER_BATCH)
    return out


def test_stream_sorter_joins_two_sources_in_event_time_order_per_key():
    one, two = two_sources()
    out = run_sorter(one, two)
    check_sorted_once(one + two, out)
    # Message.from_datum carries the datum's value, keys and times through.
    sent = {d.id: d for d in one + two}
    for d in out:
        assert (d.value, d.keys, d.event_time) == (
            sent[d.id].value,
            sent[d.id].keys,
            sent[d.id].event_time,
        )


def test_forced_rebuild_gives_identical_accumulator_output(monkeypatch):
    one, two = two_sources(n=24, seed=3)
    normal = run_sorter(one, two)
    monkeypatch.setenv(REBUILD_ENV, "1")
    rebuilt = run_sorter(one, two)
    key = lambda d: (d.keys, d.id, d.event_time, d.watermark)  # noqa: E731
    assert sorted(map(key, rebuilt)) == sorted(map(key, normal))
    assert [d.id for d in rebuilt if d.keys == ["k0"]] == [d.id for d in normal if d.keys == ["k0"]]


class Counting(Accumulator):
    """Counts its datums; says how many when its stream ends (the code after the loop)."""

    def __init__(self, label: str):
        self.label = label

    async def handler(self, datums, output):
        n = 0
        async for d in datums:
            n += 1
            last = d
        text = f"{self.label}:{n}".encode()
        await output.put(Message(text, keys=last.keys, event_time=last.event_time))


def test_accumulator_stream_ends_when_the_key_idles_and_a_later_datum_opens_a_new_handler():
    # On the per-key clock with timeout 0, a key is idle as soon as a micro-batch
    # passes without its datums, so each micro-batch (3 datums) is one handler's
    # whole stream. (On the vertex watermark, the default, a key that keeps sending
    # stays open: the watermark never passes its latest event time.)
    items = [datum("a", s, b"x") for s in range(8)]
    flow = Dataflow()
    flow.input("inp", TestingInput(items, batch_size=3))
    out: list = []
    flow.accumulate("acc", Counting, timedelta(0), init_args=("n",), clock="key")
    flow.output("out", TestingOutput(out))
    run_main(flow, epoch_interval=PER_BATCH)
    assert [d.value for d in out] == [b"n:3", b"n:3", b"n:2"]


def test_accumulator_keeps_one_stream_while_the_key_is_active():
    items = [datum("a", s, b"x") for s in (0, 1, 2, 3, 4, 104, 105, 106)]
    flow = Dataflow()
    flow.input("inp", TestingInput(items, batch_size=3))
    out: list = []
    flow.accumulate("acc", Counting, timedelta(minutes=10), init_args=("n",))
    flow.output("out", TestingOutput(out))
    run_main(flow, epoch_interval=PER_BATCH)
    assert [d.value for d in out] == [b"n:8"]


async def collect_all(datums, output):
    """A function handler: its local list lives across micro-batches."""
    seen = []
    async for d in datums:
        seen.append(d.value)
    await output.put(Message(b"|".join(seen), keys=["all"], event_time=T0))


def test_function_handler_locals_persist_across_micro_batches():
    items = [datum("k", s, str(s).encode()) for s in range(12)]
    flow = Dataflow()
    flow.input("inp", TestingInput(items, batch_size=2))
    out: list = []
    flow.accumulate("acc", collect_all, timedelta(seconds=60))
    flow.output("out", TestingOutput(out))
    run_main(flow, epoch_interval=PER_BATCH)
    assert [d.value for d in out] == [b"|".join(str(s).encode() for s in range(12))]


# -- reduce stream: the reducestreamer page's ReduceCounter and reduce_handler ----------
# (tests/pynumaflow_pages.py)


def expected_counts(counts_per_window: list[int]) -> list[bytes]:
    out = []
    for n in counts_per_window:
        c = 0
        for _ in range(n):
            c += 1
            if c > 20:
                out.append(f"counter:{c}".encode())
                c = 0
        out.append(f"counter:{c}".encode())
    return out


def run_reduce(handler, **kw) -> list:
    # Keys x and y; one datum per second for 150 s: windows [0,60) [60,120) [120,180).
    items = [datum("x" if s % 3 else "y", s, b"v") for s in range(150)]
    flow = Dataflow()
    flow.input("inp", TestingInput(items, batch_size=25))
    out: list = []
    flow.reduce_stream("counter", handler, timedelta(seconds=60), **kw)
    flow.output("out", TestingOutput(out))
    run_main(flow, epoch_interval=PER_BATCH)
    return out


@pytest.mark.parametrize(
    "handler,kw", [(ReduceCounter, {"init_args": (0,)}), (reduce_handler, {})], ids=["class", "fn"]
)
def test_reduce_stream_counts_per_key_and_window_emitting_early(handler, kw):
    out = run_reduce(handler, **kw)
    by_window = defaultdict(list)
    for d in out:
        by_window[(d.keys[0], d.event_time)].append(d.value)
    x_counts = [40, 40, 20]  # s % 3 != 0 per window of 60 (150 s: the last has 30 s)
    y_counts = [20, 20, 10]
    for key, counts in (("x", x_counts), ("y", y_counts)):
        got = [
            by_window[(key, T0 + timedelta(seconds=60 * (w + 1), milliseconds=-1))]
            for w in range(3)
        ]
        assert got == [expected_counts([n]) for n in counts]
    # every output is timed at its window's end - 1 ms
    assert all(d.event_time == d.watermark for d in out)


def test_reduce_stream_forced_rebuild_is_identical(monkeypatch):
    normal = run_reduce(reduce_handler)
    monkeypatch.setenv(REBUILD_ENV, "1")
    rebuilt = run_reduce(reduce_handler)
    key = lambda d: (d.keys, d.event_time, d.value, d.id)  # noqa: E731
    assert sorted(map(key, rebuilt)) == sorted(map(key, normal))


def test_reduce_stream_sliding_windows_and_late_datums_routed():
    async def total(keys, datums, output, md):
        n = sum([1 async for _ in datums])
        start = md.interval_window.start
        await output.put(ReduceMessage(f"{start:%M:%S}={n}".encode(), keys=keys))

    # 0..19 s, then a datum at 2 s: its windows closed long ago on the key's clock ->
    # late. (On the vertex watermark it would carry the least event time read before
    # its micro-batch, 7 s, and window [0, 10) would still be open.)
    items = [datum("k", s, b"v") for s in range(20)] + [datum("k", 2, b"late")]
    flow = Dataflow()
    inp = flow.input("inp", TestingInput(items, batch_size=7))
    win = SlidingWindow(length=timedelta(seconds=10), offset=timedelta(seconds=5))
    results = inp.reduce_stream("slide", total, win, clock="key")
    out: list = []
    late: list = []
    results.output("out", TestingOutput(out))
    results.late.output("late", TestingOutput(late))
    run_main(flow, epoch_interval=PER_BATCH)
    assert sorted(d.value for d in out) == sorted(
        [b"59:55=5", b"00:00=10", b"00:05=10", b"00:10=10", b"00:15=5"]
    )
    assert [d.value for d in late] == [b"late"]


def test_reduce_stream_non_keyed_uses_one_stream():
    items = [datum(k, s, b"v") for s, k in enumerate("abcabc")]
    flow = Dataflow()
    flow.input("inp", TestingInput(items))
    out: list = []
    flow.reduce_stream(
        "all", reduce_handler, TumblingWindow(length=timedelta(minutes=1)), keyed=False
    )
    flow.output("out", TestingOutput(out))
    run_main(flow)
    assert [(d.keys, d.value) for d in out] == [(["NON_KEYED_STREAM"], b"counter:6")]


# -- map stream: the mapstreamer page's FlatMapStream and map_stream_handler ------------
# (tests/pynumaflow_pages.py)


@pytest.mark.parametrize("handler", [FlatMapStream(), map_stream_handler], ids=["class", "fn"])
def test_map_stream_splits_and_inherits_event_time(handler):
    lines = [f"{i},{i + 1},x" for i in range(0, 300, 3)]
    flow = Dataflow()
    flow.input("inp", TestingInput(lines, batch_size=40))
    flow.to_datums(event_time=lambda line: T0 + timedelta(seconds=int(line.split(",")[0])))
    flow.map_stream("split", handler)
    out: list = []
    flow.output("out", TestingOutput(out))
    run_main(flow, epoch_interval=PER_BATCH)
    assert [d.value for d in out] == [s.encode() for line in lines for s in line.split(",")]
    first = [d for d in out if d.value == b"x"][0]
    assert first.event_time == T0 and first.id.endswith("-2")


def test_map_stream_handlers_overlap_and_keep_yield_order():
    import asyncio

    async def slow(keys, datum):
        yield MapMessage(datum.value + b"-1")
        await asyncio.sleep(0.05)
        yield MapMessage(datum.value + b"-2")

    flow = Dataflow()
    flow.input("inp", TestingInput([str(i) for i in range(40)]))
    flow.to_datums(event_time=lambda _: T0)
    flow.map_stream("slow", slow, concurrency=40)
    out: list = []
    flow.output("out", TestingOutput(out))
    run_main(flow)
    assert [d.value for d in out] == [f"{i}-{n}".encode() for i in range(40) for n in (1, 2)]


def test_drop_is_never_forwarded_and_route_filters_by_tags():
    async def tagger(keys, datum):
        n = int(datum.value)
        if n % 5 == 0:
            yield MapMessage.to_drop()
            return
        yield MapMessage(datum.value, tags=["even"] if n % 2 == 0 else ["odd"])
        if n % 3 == 0:
            yield MapMessage(datum.value, tags=["three", "even" if n % 2 == 0 else "odd"])

    flow = Dataflow()
    tagged = (
        flow.input("inp", TestingInput([str(i) for i in range(1, 16)]))
        .to_datums(event_time=lambda _: T0)
        .map_stream("tag", tagger)
    )
    outs = {name: [] for name in ("or", "and", "not", "all")}
    tagged.route(tags=["three"]).output("o_or", TestingOutput(outs["or"]))
    tagged.route(tags=["three", "odd"], operator="and").output("o_and", TestingOutput(outs["and"]))
    tagged.route(tags=["odd", "three"], operator="not").output("o_not", TestingOutput(outs["not"]))
    tagged.output("o_all", TestingOutput(outs["all"]))
    run_main(flow)
    values = {name: [int(d.value) for d in items] for name, items in outs.items()}
    assert 5 not in values["all"] and 10 not in values["all"] and 15 not in values["all"]
    assert values["or"] == [3, 6, 9, 12]
    assert values["and"] == [3, 9]
    assert values["not"] == [2, 4, 6, 8, 12, 14]  # 6 and 12: their ["even"] message


def test_handler_error_names_step_and_key():
    class Boom(Accumulator):
        async def handler(self, datums, output):
            async for d in datums:
                if d.value == b"bad":
                    raise ValueError("cannot take this one")

    items = [datum("good", 0, b"ok"), datum("evil", 1, b"bad")]
    flow = Dataflow()
    flow.input("inp", TestingInput(items))
    flow.accumulate("boom", Boom, timedelta(seconds=1))
    flow.output("out", TestingOutput([]))
    with pytest.raises(StepError) as info:
        run_main(flow)
    text = str(info.value)
    assert "'boom'" in text and "key 'evil'" in text and "cannot take this one" in text
    assert isinstance(info.value.__cause__, ValueError)


def test_non_datum_items_fail_before_the_handler_with_a_hint():
    flow = Dataflow()
    flow.input("inp", TestingInput([1, 2]))
    flow.accumulate("acc", collect_all, timedelta(seconds=1))
    flow.output("out", TestingOutput([]))
    with pytest.raises(StepError, match="to_datums"):
        run_main(flow)


# -- pynumaflow's server classes: start() runs the UDF over stdin on flowspark ----------


def test_map_stream_server_serves_json_and_text_lines(capsys):
    import json

    from flowspark.mapstreamer import MapStreamAsyncServer
    from flowspark.serve import serve

    lines = ['{"keys": ["k"], "value": "a,b", "event_time": 1000, "id": "x"}\n', "c\n"]
    serve(MapStreamAsyncServer(map_stream_handler), lines=lines)
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(p["value"], p["id"]) for p in printed] == [("a", "x-0"), ("b", "x-1"), ("c", "2-0")]
    assert printed[0]["event_time"] == "1970-01-01T00:00:01+00:00"


def test_accumulator_server_with_class_and_init_args(capsys, monkeypatch):
    import json

    from flowspark.accumulator import AccumulatorAsyncServer
    from flowspark.serve import serve

    monkeypatch.setenv("FLOWSPARK_UDF_TIMEOUT", "600")
    lines = [
        json.dumps({"keys": [k], "value": "v", "event_time": s * 1000}) + "\n"
        for s, k in enumerate("aabab")
    ]
    serve(AccumulatorAsyncServer(Counting, init_args=("total",)), lines=lines)
    printed = sorted(json.loads(line)["value"] for line in capsys.readouterr().out.splitlines())
    assert printed == ["total:2", "total:3"]


def test_the_numaflow_example_joins_sorts_and_counts(capsys):
    """examples/numaflow_join_sort.py: accumulate feeding a reduce stream (a second keyed
    level), whose datums partly arrive with the end of the input."""
    import runpy
    from pathlib import Path

    example = Path(__file__).parents[2] / "examples" / "numaflow_join_sort.py"
    flow = runpy.run_path(str(example))["flow"]
    run_main(flow)
    lines = capsys.readouterr().out.splitlines()
    sorted_lines = [
        line.split() for line in lines if line.startswith("user") and ":" not in line[:6]
    ]
    by_user = defaultdict(list)
    for user, time_text, _ in sorted_lines:
        by_user[user].append(time_text)
    assert sum(map(len, by_user.values())) == 150
    assert all(times == sorted(times) for times in by_user.values())
    finals = [line for line in lines if " in the minute from " in line]
    assert sum(int(line.split(": ")[1].split()[0]) for line in finals) == 150


def test_the_example_stream_sorter_piped_from_stdin_prints_what_it_releases():
    """`python stream_sorter.py < events.jsonl`: one line per micro-batch (readBatchSize
    1), so each datum carries the watermark of the lines before it and the sorter
    releases as it goes; what no later watermark passed stays kept, as in the image."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).parents[2]
    sorter = root / "examples" / "numaflow" / "udfs" / "stream_sorter.py"
    # Out of order by up to 1 s; a 2 s watermark delay lets the sorter put them in order.
    seconds = [2, 1, 4, 3, 6, 5, 9]
    events = [("a", t, f"a{t}") for t in seconds] + [("b", 7, "b7")]
    lines = "".join(
        json.dumps({"keys": [k], "value": v, "event_time": s * 1000, "id": v}) + "\n"
        for k, s, v in events
    )
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "FLOWSPARK_UDF_WATERMARK_DELAY": "2"}
    done = subprocess.run(
        [sys.executable, str(sorter)], input=lines, capture_output=True, text=True,
        timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    # Key a's watermark reaches 4 s (6 s - 2 s) with its datum at 5 s: 1-4 s come out,
    # sorted; 5, 6 and 9 s stay kept (no later datum passed them), b's one datum too.
    assert [(p["keys"], p["value"]) for p in printed] == [(["a"], f"a{t}") for t in (1, 2, 3, 4)]
