"""The Numaflow UDF runtime without Spark: map stream, stream handlers, keyed logics, datums.

Covers :mod:`flowspark.runtime.numaflow.run` (``run_map_stream``, ``HandlerRun``),
:mod:`flowspark.runtime.numaflow.keyed` (``AccumulateLogic``, ``ReduceStreamLogic``,
the WAL rebuild), :mod:`flowspark.runtime.numaflow.datums` and ``.convert``. Handlers mirror the
pynumaflow 0.14 documentation examples.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pynumaflow.accumulator import Datum as PDatum
from pynumaflow.mapstreamer import Datum as PMapDatum

import flowspark.accumulator as acc
import flowspark.mapstreamer as ms
import flowspark.reducestreamer as rs
from flowspark.api.udf.servers import handler_factory
from flowspark.api.udf.times import utc_from_ms
from flowspark.api.udf.types import DROP, Datum
from flowspark.runtime.codec import decode_items
from flowspark.runtime.errors import RemoteStepFailure
from flowspark.runtime.keyed import KeyedCall
from flowspark.runtime.numaflow.convert import DatumMaker, step_datum
from flowspark.runtime.numaflow.datums import NON_KEYED, DatumKeyer, MapStreamRunner, TagRoute
from flowspark.runtime.numaflow.keyed import (
    AccumulateLogic,
    KeyClock,
    MemoryWal,
    ReduceStreamLogic,
    RunOptions,
    key_list,
    live_handlers,
    routing_key,
)
from flowspark.runtime.numaflow.run import HandlerRun, run_map_stream
from flowspark.runtime.windowing import EOF_MS, NumaflowFixedWindower, NumaflowSlidingWindower
from flowspark.shared.times import naive_as_utc_to_ms
from tests.pynumaflow_pages import ReduceCounter, StreamSorter, map_stream_handler, reduce_handler

T0 = datetime(2024, 1, 1, tzinfo=UTC)
T0_MS = naive_as_utc_to_ms(T0)
NO_WATERMARK = utc_from_ms(-1)  # Numaflow's "no watermark yet": epoch - 1 ms
SEC = timedelta(seconds=1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def ms_at(seconds: float) -> int:
    return T0_MS + round(seconds * 1000)


@pytest.fixture(autouse=True)
def _fresh_registry():
    """Each test starts and ends with no live handlers."""
    for run in live_handlers().values():
        run.close()
    live_handlers().clear()
    yield
    for run in live_handlers().values():
        run.close()
    live_handlers().clear()


# -- handlers from the pynumaflow docs (and tests/pynumaflow_pages.py) ---------------------------


async def split_dropping_empty(_: list[str], datum: ms.Datum) -> AsyncIterable[ms.Message]:
    """The example, dropping empty parts instead of forwarding them."""
    for s in datum.value.decode("utf-8").split(","):
        yield ms.Message.to_drop() if not s else ms.Message(str.encode(s), keys=["w"])


class FlushingStreamSorter(StreamSorter):
    """StreamSorter that also flushes what is left when its stream ends."""

    async def handler(self, datums, output):
        await super().handler(datums, output)
        self.latest_wm = datetime.max
        await self.flush_buffer(output)


class Tally(acc.Accumulator):
    """Messages without id or times: ids and times come from the runtime."""

    def __init__(self):
        self.n = 0
        self.keys: list[str] = []

    async def handler(self, datums, output):
        async for datum in datums:
            self.n += 1
            self.keys = datum.keys
            if self.n % 2 == 0:
                await output.put(acc.Message(f"even:{self.n}".encode(), keys=datum.keys))
        await output.put(acc.Message(f"end:{self.n}".encode(), keys=self.keys))


class Forwarder(acc.Accumulator):
    """Puts every datum on as it comes (its watermark: the one it was read with)."""

    async def handler(self, datums, output):
        async for datum in datums:
            await output.put(acc.Message.from_datum(datum))


async def window_count(keys, datums, output, md):
    """Counts a window's datums; the output names the window (ms offsets from T0)."""
    n = 0
    async for _ in datums:
        n += 1
    start = naive_as_utc_to_ms(md.interval_window.start) - T0_MS
    end = naive_as_utc_to_ms(md.interval_window.end) - T0_MS
    await output.put(rs.Message(f"{start}-{end}:{n}".encode(), keys=keys))


def values(datums: list[Any]) -> list[bytes]:
    return [d.value for d in datums]


# -- run_map_stream -------------------------------------------------------------------------------


def as_item(message: Any, datum: Any, i: int) -> Any:
    return (datum, i, message)


def test_map_stream_sync_fast_path_keeps_order():
    async def fan_out(keys, datum):
        for j in range(datum % 3):
            yield f"{datum}.{j}"

    out = run_map_stream("s", fan_out, list(range(8)), 2, lambda d: [], as_item)
    expected = [(d, j, f"{d}.{j}") for d in range(8) for j in range(d % 3)]
    assert out == expected


def test_map_stream_passes_keys_and_drops_none_items():
    seen = []

    async def handler(keys, datum):
        seen.append(keys)
        yield datum

    out = run_map_stream(
        "s", handler, [1, 2, 3], 4, lambda d: [f"k{d}"], lambda m, d, i: None if m == 2 else m
    )
    assert out == [1, 3]
    assert seen == [["k1"], ["k2"], ["k3"]]


def _slow_handler(log: dict[str, int]):
    async def slow(keys, datum):
        yield f"{datum}:a"
        log["active"] += 1
        log["peak"] = max(log["peak"], log["active"])
        # later datums finish first, so completion order is the reverse of input order
        await asyncio.sleep(0.05 * (1 - datum / 100))
        log["active"] -= 1
        yield f"{datum}:b"
        await asyncio.sleep(0)
        yield f"{datum}:c"

    return slow


def test_map_stream_awaiting_handlers_run_concurrently_in_order():
    log = {"active": 0, "peak": 0}
    n = 50
    started = time.perf_counter()
    out = run_map_stream("s", _slow_handler(log), list(range(n)), n, lambda d: [], as_item)
    elapsed = time.perf_counter() - started
    assert elapsed < 1.5, f"{n} handlers sleeping 0.05 s did not overlap ({elapsed:.2f} s)"
    assert log["peak"] == n
    assert out == [(d, j, f"{d}:{s}") for d in range(n) for j, s in enumerate("abc")]


@pytest.mark.parametrize("concurrency", [1, 5])
def test_map_stream_concurrency_bound(concurrency):
    log = {"active": 0, "peak": 0}
    datums = list(range(90, 100))  # short sleeps (1-5 ms)
    out = run_map_stream("s", _slow_handler(log), datums, concurrency, lambda d: [], as_item)
    assert log["peak"] == concurrency
    assert log["active"] == 0
    assert out == [(d, j, f"{d}:{s}") for d in datums for j, s in enumerate("abc")]


def test_map_stream_mixes_inline_and_awaiting_handlers():
    async def handler(keys, datum):
        if datum % 2:
            await asyncio.sleep(0.001 * (10 - datum))
        yield datum
        if datum % 3 == 0:
            await asyncio.sleep(0)
        yield -datum

    out = run_map_stream("s", handler, list(range(10)), 3, lambda d: [], lambda m, d, i: m)
    assert out == [x for d in range(10) for x in (d, -d)]


def test_map_stream_sync_mapper_and_none():
    def sync_mapper(keys, datum):
        return [datum, datum * 10]

    def nothing(keys, datum):
        return None

    assert run_map_stream("s", sync_mapper, [1, 2], 2, lambda d: [], lambda m, d, i: m) == [
        1,
        10,
        2,
        20,
    ]
    assert run_map_stream("s", nothing, [1, 2], 2, lambda d: [], lambda m, d, i: m) == []


def test_map_stream_handler_error_names_step_and_datum():
    async def handler(keys, datum):
        yield datum
        if datum == "datum-3":
            raise ValueError("boom on 3")

    with pytest.raises(RemoteStepFailure) as info:
        run_map_stream(
            "split-step", handler, [f"datum-{i}" for i in range(5)], 2, lambda d: [], as_item
        )
    text = str(info.value)
    assert "split-step" in text
    assert "'datum-3'" in text
    assert "ValueError: boom on 3" in text


def test_map_stream_error_after_await_names_datum_and_loop_stays_usable():
    async def handler(keys, datum):
        await asyncio.sleep(0.001)
        if datum == "datum-2":
            raise KeyError("late boom")
        await asyncio.sleep(0.01)
        yield datum

    with pytest.raises(RemoteStepFailure) as info:
        run_map_stream("s2", handler, [f"datum-{i}" for i in range(6)], 6, lambda d: [], as_item)
    text = str(info.value)
    assert "'s2'" in text and "'datum-2'" in text and "KeyError" in text

    async def ok(keys, datum):
        await asyncio.sleep(0)
        yield datum

    assert run_map_stream("s", ok, [1, 2, 3], 2, lambda d: [], lambda m, d, i: m) == [1, 2, 3]


def test_async_map_handler_returning_messages_is_awaited():
    """MapAsyncServer's handler is ``async def`` returning Messages (no yield)."""

    async def async_mapper(keys, datum):
        await asyncio.sleep(0)
        return [datum, datum * 10]

    async def returns_nothing(keys, datum):
        return None

    assert run_map_stream("s", async_mapper, [1, 2], 2, lambda d: [], lambda m, d, i: m) == [
        1,
        10,
        2,
        20,
    ]
    assert run_map_stream("s", returns_nothing, [1], 1, lambda d: [], as_item) == []


def test_async_map_handler_returning_a_non_iterable_is_a_clear_error():
    async def not_messages(keys, datum):
        return 42

    with pytest.raises(RemoteStepFailure) as info:
        run_map_stream("s", not_messages, [1], 1, lambda d: [], as_item)
    text = str(info.value)
    assert "TypeError" in text and "must return Messages" in text and "returned int" in text


def test_map_stream_non_message_result_is_an_error():
    with pytest.raises(RemoteStepFailure, match="must yield Messages; it returned int"):
        run_map_stream("s", lambda keys, d: 42, [1], 1, lambda d: [], as_item)


def test_map_stream_to_item_error_names_datum():
    async def handler(keys, datum):
        yield datum

    def bad(message, datum, i):
        raise RuntimeError("cannot convert")

    with pytest.raises(RemoteStepFailure, match=r"'conv'.*'x-1'.*RuntimeError: cannot convert"):
        run_map_stream("conv", handler, ["x-1"], 1, lambda d: [], bad)


# -- MapStreamRunner ------------------------------------------------------------------------------


def test_map_stream_runner_spec_handler_inherits_times_and_ids():
    runner = MapStreamRunner("split", handler_factory(map_stream_handler, "map_stream"), 4)
    parent = Datum(["k"], b"a,b,c", at(5), at(1), {"h": "1"}, id="p1")
    other = ms.Datum(["k"], b"d", at(6), at(2))
    out = runner.run_chunk([parent, other])
    assert values(out) == [b"a", b"b", b"c", b"d"]
    assert [d.id for d in out] == ["p1-0", "p1-1", "p1-2", "-0"]
    assert [d.event_time for d in out] == [at(5)] * 3 + [at(6)]
    assert [d.watermark for d in out] == [at(1)] * 3 + [at(2)]
    assert out[0].headers == {"h": "1"}
    assert out[0].keys == []  # the example's messages carry no keys
    assert runner.__getstate__()["_handler"] is None


def test_map_stream_runner_removes_dropped_messages():
    runner = MapStreamRunner("drop", handler_factory(split_dropping_empty, "map_stream"), 2)
    out = runner.run_chunk([Datum([], b"x,,y,", at(0), at(0), id="p")])
    assert values(out) == [b"x", b"y"]
    assert [d.id for d in out] == ["p-0", "p-2"]  # indexes count the dropped messages
    assert all(d.keys == ["w"] and DROP not in d.tags for d in out)


def test_map_stream_runner_class_handler_and_pynumaflow_datums():
    class FlatMapStream(ms.MapStreamer):
        async def handler(self, keys, datum):
            for s in datum.value.decode().split(","):
                yield ms.Message(s.encode(), keys=keys, tags=["t"])

    runner = MapStreamRunner("cls", handler_factory(FlatMapStream(), "map_stream"), 2)
    out = runner.run_chunk([PMapDatum(["k"], b"u,v", datetime(2024, 1, 1), datetime(2024, 1, 1))])
    assert values(out) == [b"u", b"v"]
    assert [(d.keys, d.tags, d.event_time) for d in out] == [(["k"], ["t"], T0)] * 2


def test_map_stream_runner_rejects_non_datums():
    runner = MapStreamRunner("m", handler_factory(map_stream_handler, "map_stream"), 2)
    with pytest.raises(RemoteStepFailure, match="to_datums"):
        runner.run_chunk([Datum([], b"a", at(0), at(0)), 7])


def test_map_stream_runner_non_message_yield():
    async def handler(keys, datum):
        yield "not a message"

    runner = MapStreamRunner("m", lambda: handler, 1)
    with pytest.raises(RemoteStepFailure, match="must yield Message objects"):
        runner.run_chunk([Datum([], b"a", at(0), at(0))])


# -- HandlerRun -----------------------------------------------------------------------------------


def test_handler_run_locals_persist_and_post_loop_runs_at_end():
    events = []

    async def handler(datums, output):
        total = 0
        async for d in datums:
            total += d
            events.append(("datum", d))
            await output.put(("running", total))
        events.append("after loop")
        await output.put(("final", total))

    run = HandlerRun(handler)
    assert run.feed([1, 2]) == [("running", 1), ("running", 3)]
    assert run.feed([]) == []
    assert run.feed([10]) == [("running", 13)]
    assert "after loop" not in events
    assert (run.fed, run.emitted, run.done) == (3, 3, False)
    assert run.end() == [("final", 13)]
    assert events[-1] == "after loop"
    assert (run.fed, run.emitted, run.done) == (3, 4, True)


def test_handler_run_awaits_real_futures():
    async def handler(datums, output):
        seen = []
        async for d in datums:
            await asyncio.sleep(0.01)
            seen.append(d)
            await asyncio.sleep(0)
            await output.put(d * 2)
        await asyncio.sleep(0.01)
        await output.put(seen)

    run = HandlerRun(handler)
    assert run.feed([1, 2]) == [2, 4]
    assert run.feed([3]) == [6]
    assert run.end() == [[1, 2, 3]]


def test_handler_run_early_return_ignores_later_feeds():
    async def first_two(datums, output):
        taken = []
        async for d in datums:
            taken.append(d)
            if len(taken) == 2:
                break
        await output.put(taken)

    run = HandlerRun(first_two)
    assert run.feed([1]) == []
    assert run.feed([2, 3]) == [[1, 2]]
    assert run.done
    assert run.feed([4, 5]) == []
    assert run.fed == 5
    assert run.end() == []


def test_handler_run_exceptions_propagate():
    async def handler(datums, output):
        async for d in datums:
            if d < 0:
                raise ValueError(f"negative {d}")
            await output.put(d)
        raise RuntimeError("at end")

    run = HandlerRun(handler)
    assert run.feed([1]) == [1]
    with pytest.raises(ValueError, match="negative -1"):
        run.feed([2, -1])
    run2 = HandlerRun(handler)
    run2.feed([1])
    with pytest.raises(RuntimeError, match="at end"):
        run2.end()


def test_handler_run_future_error_raised_inside_handler():
    async def handler(datums, output):
        async for d in datums:
            future = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(future.set_exception, KeyError(d))
            try:
                await future
            except KeyError as exc:
                await output.put(f"caught {exc}")

    run = HandlerRun(handler)
    assert run.feed(["x"]) == ["caught 'x'"]
    assert run.end() == []


def test_handler_run_rejects_sync_handlers():
    def sync(datums, output):
        return None

    with pytest.raises(TypeError, match="must be an `async def`"):
        HandlerRun(sync)


def test_handler_run_close_stops_the_coroutine():
    cleaned = []

    async def handler(datums, output):
        try:
            async for _ in datums:
                pass
        finally:
            cleaned.append(True)

    run = HandlerRun(handler)
    run.feed([1])
    run.close()
    assert run.done and cleaned == [True]


# -- AccumulateLogic ------------------------------------------------------------------------------


def acc_datum(key: str, seconds: float, value: bytes | None = None) -> acc.Datum:
    value = value if value is not None else f"{key}{seconds:g}".encode()
    return acc.Datum([key], value, at(seconds), at(0), f"{key}-{seconds:g}")


class AccDriver:
    """Threads state, WAL and outputs per key through one logic, like the Spark adapter."""

    def __init__(self, logic: Any):
        self.logic = logic
        self.states: dict[str, Any] = {}
        self.wals: dict[str, MemoryWal] = {}
        self.wakes: dict[str, int | None] = {}
        self.emitted: list[Any] = []
        self.late: list[Any] = []

    def _record(self, key: str, outcome: Any) -> Any:
        self.states[key] = outcome.state
        self.wakes[key] = outcome.wake
        self.emitted += outcome.emitted
        self.late += outcome.late
        return outcome

    def values(self, key: str, datums: list[Any], now: int) -> Any:
        wal = self.wals.setdefault(key, MemoryWal())
        outcome = self.logic.on_values(KeyedCall(key, self.states.get(key), now, datums, wal))
        return self._record(key, outcome)

    def timer(self, key: str, now: int) -> Any:
        wal = self.wals.setdefault(key, MemoryWal())
        return self._record(
            key, self.logic.on_timer(KeyedCall(key, self.states.get(key), now, wal=wal))
        )

    def due_timers(self, now: int) -> None:
        for key in sorted(self.wakes):
            wake = self.wakes[key]
            if wake is not None and wake <= now:
                self.timer(key, now)

    def eof(self) -> None:
        for key in sorted(self.states):
            self.timer(key, EOF_MS)


def sorter_logic(cls: type = FlushingStreamSorter, delay: float = 10):
    factory = handler_factory(cls, "accumulate", init_args=(0,))
    return AccumulateLogic("sort", factory, timedelta(minutes=5), delay * SEC)


SORTER_BATCHES = [  # (key, event seconds, now ms)
    ("a", [15, 11, 13], 0),
    ("b", [102, 101], 0),
    ("a", [14, 22, 12], 1),
    ("a", [27, 16], 2),
    ("b", [100, 120], 2),
    ("a", [30, 21], 3),
]


def test_accumulate_stream_sorter_sorts_per_key():
    driver = AccDriver(sorter_logic())
    per_call = []
    for key, times, now in SORTER_BATCHES:
        outcome = driver.values(key, [acc_datum(key, t) for t in times], now)
        per_call.append([naive_as_utc_to_ms(d.event_time) - T0_MS for d in outcome.emitted])
    # delay 10 s: each batch's datums carry (key's max event time so far - 10 s)
    assert per_call == [[], [], [], [11_000, 12_000], [], [13_000, 14_000, 15_000, 16_000]]
    assert driver.wals["a"].read() and driver.states["a"][1] is not None
    driver.eof()
    out = driver.emitted
    for key, times in (
        ("a", [11, 12, 13, 14, 15, 16, 21, 22, 27, 30]),
        ("b", [100, 101, 102, 120]),
    ):
        mine = [d for d in out if d.keys == [key]]
        assert [d.event_time for d in mine] == [at(t) for t in times]
        assert [d.id for d in mine] == [f"{key}-{t}" for t in times]  # from_datum keeps ids
    # Message.from_datum carries the watermark the handler saw with each datum.
    wm = {d.id: d.watermark for d in out}
    assert wm["a-11"] == wm["a-13"] == wm["a-15"] == NO_WATERMARK
    assert wm["a-12"] == wm["a-14"] == wm["a-22"] == at(5)
    assert wm["a-16"] == wm["a-27"] == at(12)
    assert wm["a-21"] == wm["a-30"] == at(17)
    assert wm["b-100"] == wm["b-120"] == at(92)
    assert all(driver.wals[k].read() == [] for k in "ab")
    assert all(driver.states[k][1] is None and driver.wakes[k] is None for k in "ab")
    assert live_handlers() == {}


def test_accumulate_spec_stream_sorter_keeps_unflushed_tail():
    """The doc's StreamSorter has no code after its loop: what the last watermark did not
    release stays in its buffer when the stream ends."""
    driver = AccDriver(sorter_logic(StreamSorter))
    for key, times, now in SORTER_BATCHES:
        driver.values(key, [acc_datum(key, t) for t in times], now)
    before = len(driver.emitted)
    driver.eof()
    assert len(driver.emitted) == before
    assert [d.id for d in driver.emitted] == [f"a-{t}" for t in (11, 12, 13, 14, 15, 16)]


def test_accumulate_watermark_is_previous_batches_max_minus_delay():
    async def echo(datums, output):
        async for d in datums:
            await output.put(acc.Message(d.value, keys=d.keys, event_time=d.watermark))

    logic = AccumulateLogic("wm", lambda: echo, timedelta(minutes=1), 2 * SEC)
    driver = AccDriver(logic)
    b1 = driver.values("k", [acc_datum("k", 10), acc_datum("k", 5)], 0).emitted
    b2 = driver.values("k", [acc_datum("k", 3), acc_datum("k", 20)], 1).emitted
    b3 = driver.values("k", [acc_datum("k", 1)], 2).emitted
    assert [d.event_time for d in b1] == [NO_WATERMARK] * 2
    assert [d.event_time for d in b2] == [at(8)] * 2
    assert [d.event_time for d in b3] == [at(18)]
    # a message without its own watermark gets the step's (pre-batch) watermark
    assert [d.watermark for d in b1 + b2 + b3] == [NO_WATERMARK] * 2 + [at(8)] * 2 + [at(18)]
    # generated ids: step, key, the key's stream number, the output's index in it
    assert [d.id for d in b1 + b2 + b3] == [f"wm-k-1-{i}" for i in range(5)]


def test_accumulate_idle_timeout_closes_and_reopens():
    opened = []

    class Joiner(acc.Accumulator):
        def __init__(self):
            opened.append(self)

        async def handler(self, datums, output):
            seen = [d.value async for d in datums]
            await output.put(acc.Message(b"+".join(seen), keys=["k"]))

    timeout = 5000
    factory = handler_factory(Joiner, "accumulate")
    logic = AccumulateLogic("idle", factory, timedelta(milliseconds=timeout), timedelta(0))
    driver = AccDriver(logic)
    r1 = driver.values("k", [acc_datum("k", 1, b"a")], 100)
    assert r1.emitted == [] and r1.wake == 100 + timeout
    r2 = driver.values("k", [acc_datum("k", 2, b"b")], 100 + timeout - 1)
    assert r2.emitted == [] and r2.wake == 100 + 2 * timeout - 1
    assert len(opened) == 1 and len(driver.wals["k"].read()) == 2
    # a timer before the wake time does nothing
    early = driver.timer("k", 100 + 2 * timeout - 2)
    assert early.emitted == [] and early.state == r2.state and early.wake == r2.wake
    # a batch at (last datum's system time + timeout) ends the old stream first
    now3 = 100 + 2 * timeout - 1
    r3 = driver.values("k", [acc_datum("k", 3, b"c")], now3)
    assert values(r3.emitted) == [b"a+b"]
    assert r3.emitted[0].event_time == at(2)  # the watermark (latest event, delay 0)
    assert len(opened) == 2
    assert r3.state[1][0] != r2.state[1][0]  # a new handler incarnation
    assert len(driver.wals["k"].read()) == 1
    assert r3.wake == now3 + timeout
    # the timer at the wake time closes the new stream
    r4 = driver.timer("k", now3 + timeout)
    assert values(r4.emitted) == [b"c"]
    assert r4.wake is None and r4.state[1] is None
    assert driver.wals["k"].read() == [] and live_handlers() == {}
    # a closed key ignores timers
    assert driver.timer("k", EOF_MS).emitted == []


def test_accumulate_drop_and_message_fields():
    async def handler(datums, output):
        async for d in datums:
            if d.value == b"x":
                await output.put(acc.Message.to_drop())
                continue
            await output.put(
                acc.Message(
                    d.value,
                    keys=["out"],
                    tags=["t"],
                    event_time=datetime(2030, 1, 1),
                    headers={"h": "v"},
                    id="custom",
                )
            )

    driver = AccDriver(AccumulateLogic("f", lambda: handler, timedelta(minutes=1), timedelta(0)))
    out = driver.values("k", [acc_datum("k", 1, b"x"), acc_datum("k", 2, b"y")], 0).emitted
    assert len(out) == 1
    (d,) = out
    assert (d.keys, d.value, d.tags, d.headers, d.id) == (
        ["out"],
        b"y",
        ["t"],
        {"h": "v"},
        "custom",
    )
    assert d.event_time == datetime(2030, 1, 1, tzinfo=UTC)
    assert d.watermark == NO_WATERMARK


def test_accumulate_handler_error_names_step_key_and_datum():
    async def handler(datums, output):
        async for d in datums:
            if d.value == b"bad":
                raise ValueError("cannot take it")

    driver = AccDriver(AccumulateLogic("acc-x", lambda: handler, timedelta(1), timedelta(0)))
    driver.values("k", [acc_datum("k", 1, b"ok")], 0)
    with pytest.raises(RemoteStepFailure) as info:
        driver.values("k", [acc_datum("k", 2, b"bad")], 1)
    text = str(info.value)
    assert "'acc-x'" in text and "key 'k'" in text and "b'bad'" in text
    assert "ValueError: cannot take it" in text


def test_accumulate_rebuild_after_lost_worker_suppresses_replayed_outputs():
    built = []

    async def echo(datums, output):
        built.append(1)
        n = 0
        async for d in datums:
            n += 1
            await output.put(acc.Message(d.value + b"#%d" % n, keys=d.keys))
        await output.put(acc.Message(b"total:%d" % n, keys=["k"]))

    driver = AccDriver(AccumulateLogic("re", lambda: echo, timedelta(minutes=1), timedelta(0)))
    out1 = driver.values("k", [acc_datum("k", 1, b"a"), acc_datum("k", 2, b"b")], 0).emitted
    live_handlers().clear()  # the Python worker is gone
    out2 = driver.values("k", [acc_datum("k", 3, b"c")], 1).emitted
    assert len(built) == 2
    assert values(out1) == [b"a#1", b"b#2"]
    assert values(out2) == [b"c#3"]  # the replay's outputs are not emitted again
    assert [d.id for d in out1 + out2] == ["re-k-1-0", "re-k-1-1", "re-k-1-2"]
    live_handlers().clear()
    driver.eof()
    assert values(driver.emitted[-1:]) == [b"total:3"]
    assert driver.emitted[-1].id == "re-k-1-3"


def test_accumulate_stale_handle_is_rebuilt():
    """A retried batch (Spark state from before the last feed) must not reuse a handler
    that already saw more datums."""

    async def count(datums, output):
        n = 0
        async for _ in datums:
            n += 1
        await output.put(acc.Message(b"%d" % n, keys=["k"]))

    logic = AccumulateLogic("st", lambda: count, timedelta(minutes=1), timedelta(0))
    wal = MemoryWal()
    r1 = logic.on_values(KeyedCall("k", None, 0, [acc_datum("k", 1)], wal))
    saved_wal = wal.read()
    logic.on_values(
        KeyedCall("k", r1.state, 1, [acc_datum("k", 2)], wal)
    )  # this batch is then lost
    wal.write(saved_wal)
    r2b = logic.on_values(
        KeyedCall("k", r1.state, 1, [acc_datum("k", 3)], wal)
    )  # retried differently
    assert values(logic.on_timer(KeyedCall("k", r2b.state, EOF_MS, wal=wal)).emitted) == [b"2"]


def test_accumulate_two_steps_in_one_worker_stay_correct():
    """Two accumulate steps (two logic instances) alternating in one Python worker."""

    def run(logics: list[AccumulateLogic]) -> list[list[bytes]]:
        drivers = [AccDriver(logic) for logic in logics]
        for n in range(6):
            for driver in drivers:
                driver.values("k", [acc_datum("k", n, b"%d" % n)], n)
        for driver in drivers:
            driver.eof()
        return [values(driver.emitted) for driver in drivers]

    def make(step: str) -> AccumulateLogic:
        return AccumulateLogic(step, handler_factory(Tally, "accumulate"), timedelta(1), 0 * SEC)

    alone = run([make("one")]) + run([make("two")])
    assert run([make("one"), make("two")]) == alone
    assert alone[0] == [b"even:2", b"even:4", b"even:6", b"end:6"]


def test_accumulate_handler_awaiting_real_futures():
    async def slow_echo(datums, output):
        async for d in datums:
            await asyncio.sleep(0.001)
            await output.put(acc.Message(d.value, keys=d.keys))
        await asyncio.sleep(0.001)
        await output.put(acc.Message(b"end", keys=["k"]))

    driver = AccDriver(AccumulateLogic("aw", lambda: slow_echo, timedelta(1), timedelta(0)))
    assert values(driver.values("k", [acc_datum("k", 1, b"a")], 0).emitted) == [b"a"]
    live_handlers().clear()
    assert values(driver.values("k", [acc_datum("k", 2, b"b")], 1).emitted) == [b"b"]
    driver.eof()
    assert values(driver.emitted) == [b"a", b"b", b"end"]


def test_key_clock():
    clock = KeyClock(delay_ms=1000, idle_ms=500)
    state = clock.advance(None, {0: ms_at(5)}, 10)
    assert state == ({0: (ms_at(5), 10)}, 10, ms_at(4))
    state = clock.advance(state, {0: ms_at(3)}, 20)  # an older event does not go back
    assert state == ({0: (ms_at(5), 20)}, 20, ms_at(4))
    assert clock.watermark(None, 0) < 0 and clock.watermark(state, 0) == ms_at(4)
    assert not clock.idle(state, 519) and clock.idle(state, 520) and clock.idle(None, EOF_MS)
    assert clock.idle_at(state) == 520


def test_key_clock_takes_the_minimum_over_upstreams():
    # Two inputs feed the key; the lagging one holds the watermark back, as Numaflow's
    # minimum over upstream partitions does.
    clock = KeyClock(delay_ms=0, idle_ms=10_000)
    state = clock.advance(None, {1: ms_at(50), 2: ms_at(10)}, 0)
    assert clock.watermark(state, 0) == ms_at(10)
    state = clock.advance(state, {2: ms_at(30)}, 1)
    assert clock.watermark(state, 1) == ms_at(30)


def test_key_clock_stops_waiting_for_an_idle_upstream_and_never_goes_back():
    clock = KeyClock(delay_ms=0, idle_ms=1_000)
    state = clock.advance(None, {1: ms_at(5), 2: ms_at(100)}, 0)
    assert clock.watermark(state, 0) == ms_at(5)
    state = clock.advance(state, {2: ms_at(110)}, 999)  # upstream 1 silent, not yet idle
    assert clock.watermark(state, 999) == ms_at(5)
    state = clock.advance(state, {2: ms_at(120)}, 1_000)  # now it is: it no longer counts
    assert clock.watermark(state, 1_000) == ms_at(120)
    state = clock.advance(state, {1: ms_at(7)}, 1_001)  # it comes back, far behind
    assert clock.watermark(state, 1_001) == ms_at(120)


def test_accumulate_merged_inputs_one_running_ahead_are_not_overtaken():
    # Input 1 delivers up to 50 s while input 2 is still at 10 s; then input 2 catches
    # up with datums from 11 s on: a sorter must still emit everything in order.
    driver = AccDriver(sorter_logic(delay=0))
    first = [acc_datum("k", s) for s in (40, 45, 50)] + [acc_datum("k", s) for s in (8, 10)]
    wal = driver.wals.setdefault("k", MemoryWal())
    out = driver.logic.on_values(KeyedCall("k", None, 0, first, wal, [(1, 3), (2, 2)]))
    driver._record("k", out)
    later = [acc_datum("k", s) for s in (11, 20, 30)]
    driver._record("k", driver.logic.on_values(KeyedCall("k", out.state, 1, later, wal, [(2, 3)])))
    driver.eof()
    times = [d.event_time for d in driver.emitted]
    assert times == sorted(times) and len(times) == 8


# -- rebuild equivalence (hypothesis) -------------------------------------------------------------

KEYS = ("a", "b", "c")
TIMEOUT_MS = 3000

batch_steps = st.lists(
    st.tuples(
        st.sampled_from(KEYS),
        st.lists(st.integers(0, 40), min_size=1, max_size=4),  # event seconds
        st.integers(1, TIMEOUT_MS - 1),  # now advances less than the timeout
        st.booleans(),  # (c): the worker is lost before this batch
    ),
    min_size=1,
    max_size=12,
)


def _run_steps(
    logic: Any, steps: list, lose_workers: bool, twin_workers: bool = False
) -> tuple[list, list]:
    """Drive ``logic`` through ``steps``. ``lose_workers``: the Python worker (its live
    handlers) is lost before a batch flagged so; ``twin_workers``: such a batch runs
    in the other of two workers, whose handlers are behind (caught up from the WAL)."""
    driver = AccDriver(logic)
    now = 0
    other: dict = {}
    for n, (key, times, step, lose) in enumerate(steps):
        now += step
        if twin_workers and lose:
            mine = dict(live_handlers())
            live_handlers().clear()
            live_handlers().update(other)
            other = mine
        if lose_workers and lose:
            live_handlers().clear()
        driver.due_timers(now)
        batch = [
            acc.Datum([key], f"{n}.{j}".encode(), at(t), at(0), f"id-{n}-{j}")
            for j, t in enumerate(times)
        ]
        driver.values(key, batch, now)
    if lose_workers:
        live_handlers().clear()
    driver.eof()
    fields = [(d.keys, d.value, d.event_time, d.watermark, d.id) for d in driver.emitted]
    return fields, driver.late


# Handlers that keep nothing the outbound watermark has passed (Numaflow's retention
# contract), so a rebuild from the retained WAL gives what an unbroken run gives.
ACC_FACTORIES = {
    "sorter": handler_factory(FlushingStreamSorter, "accumulate", init_args=(0,)),
    "forwarder": handler_factory(Forwarder, "accumulate"),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=batch_steps, kind=st.sampled_from(sorted(ACC_FACTORIES)), delay=st.integers(0, 5))
def test_accumulate_rebuild_equivalence(steps, kind, delay):
    def logic(force_rebuild: bool = False) -> AccumulateLogic:
        return AccumulateLogic(
            "eq",
            ACC_FACTORIES[kind],
            timedelta(milliseconds=TIMEOUT_MS),
            delay * SEC,
            RunOptions(force_rebuild=force_rebuild),
        )

    normal, _ = _run_steps(logic(), steps, False)
    forced, _ = _run_steps(logic(force_rebuild=True), steps, False)
    lost, _ = _run_steps(logic(), steps, True)
    twins, _ = _run_steps(logic(), steps, False, twin_workers=True)
    assert forced == normal
    assert lost == normal
    assert twins == normal
    # every datum comes out exactly once
    assert sorted(f[4] for f in normal) == sorted(
        f"id-{n}-{j}" for n, (_, times, _, _) in enumerate(steps) for j in range(len(times))
    )


def test_a_rebuilt_handler_is_fed_only_what_the_wal_retains():
    """A handler that counts every datum it ever saw is rebuilt, after a loss, from
    the datums the outbound watermark has not passed: Numaflow's retention."""
    tally = handler_factory(Tally, "accumulate")
    driver = AccDriver(AccumulateLogic("t", tally, timedelta(minutes=5), timedelta(0)))
    for n, seconds in enumerate([(1, 2), (3, 4), (5, 6)]):
        driver.values("k", [acc_datum("k", t) for t in seconds], n)
    # "even:6" carried the watermark 4 s: the first batch (up to 2 s) left the WAL.
    index = driver.states["k"][4]
    assert (index.trimmed, index.retained(), index.out_wm) == (2, 4, ms_at(4))
    assert len(driver.wals["k"].read()) == 2
    live_handlers().clear()  # the handler is lost
    driver.eof()
    assert [d.value for d in driver.emitted] == [b"even:2", b"even:4", b"even:6", b"end:4"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=batch_steps, lateness=st.integers(0, 8))
def test_reduce_stream_rebuild_equivalence(steps, lateness):
    def logic(force_rebuild: bool = False) -> ReduceStreamLogic:
        return ReduceStreamLogic(
            "req",
            handler_factory(ReduceCounter, "reduce_stream", init_args=(0,)),
            NumaflowSlidingWindower(10_000, 5_000, T0_MS),
            lateness * SEC,
            2 * SEC,
            RunOptions(force_rebuild=force_rebuild),
        )

    normal, normal_late = _run_steps(logic(), steps, False)
    forced, forced_late = _run_steps(logic(force_rebuild=True), steps, False)
    lost, lost_late = _run_steps(logic(), steps, True)
    twins, _ = _run_steps(logic(), steps, False, twin_workers=True)
    assert forced == normal and lost == normal and twins == normal
    assert [d.id for d in forced_late] == [d.id for d in normal_late] == [d.id for d in lost_late]


# -- ReduceStreamLogic ----------------------------------------------------------------------------


def rs_datum(key: str, seconds: float) -> rs.Datum:
    return rs.Datum([key], f"{seconds:g}".encode(), at(seconds), at(0))


def tumbling_logic(factory: Any, lateness: float = 0, delay: float = 0) -> ReduceStreamLogic:
    windower = NumaflowFixedWindower(60_000, 0)
    return ReduceStreamLogic("rs", factory, windower, lateness * SEC, delay * SEC)


@pytest.mark.parametrize(
    "factory",
    [
        handler_factory(reduce_handler, "reduce_stream"),
        handler_factory(ReduceCounter, "reduce_stream", init_args=(0,)),
    ],
    ids=["function", "class"],
)
def test_reduce_stream_counter_early_and_final(factory):
    driver = AccDriver(tumbling_logic(factory))
    assert driver.values("k", [rs_datum("k", i) for i in range(15)], 0).emitted == []
    early = driver.values("k", [rs_datum("k", 30 + i) for i in range(10)], 1).emitted
    assert values(early) == [b"counter:21"]  # emitted as soon as the 21st datum came
    final = driver.values("k", [rs_datum("k", 61)], 2).emitted  # the watermark passes 60 s
    assert values(final) == [b"counter:4"]
    window_end = at(60) - timedelta(milliseconds=1)
    for d in early + final:
        assert (d.keys, d.event_time, d.watermark) == (["k"], window_end, window_end)
    ids = [d.id for d in early + final]
    assert ids == [f"rs-{T0_MS}-{T0_MS + 60_000}-k-{i}" for i in (0, 1)]
    driver.eof()
    assert values(driver.emitted[-1:]) == [b"counter:1"]
    assert driver.emitted[-1].event_time == at(120) - timedelta(milliseconds=1)
    assert driver.wals["k"].read() == [] and live_handlers() == {}


def test_reduce_stream_watermark_delay_holds_windows_open():
    driver = AccDriver(tumbling_logic(lambda: window_count, delay=5))
    driver.values("k", [rs_datum("k", 10)], 0)
    assert driver.values("k", [rs_datum("k", 61)], 1).emitted == []  # watermark 56 s
    assert values(driver.values("k", [rs_datum("k", 65)], 2).emitted) == [b"0-60000:1"]


def test_reduce_stream_sliding_windows_share_a_datum():
    windower = NumaflowSlidingWindower(10_000, 5_000, T0_MS)
    logic = ReduceStreamLogic("sl", lambda: window_count, windower, timedelta(0), timedelta(0))
    driver = AccDriver(logic)
    outcome = driver.values("k", [rs_datum("k", 7)], 0)
    assert sorted(outcome.state[1]) == [(ms_at(0), ms_at(10)), (ms_at(5), ms_at(15))]
    assert len(driver.wals["k"].read()) == 2
    driver.eof()
    assert values(driver.emitted) == [b"0-10000:1", b"5000-15000:1"]
    assert [d.event_time for d in driver.emitted] == [
        at(10) - timedelta(milliseconds=1),
        at(15) - timedelta(milliseconds=1),
    ]


def test_reduce_stream_late_datum():
    driver = AccDriver(tumbling_logic(lambda: window_count))
    driver.values("k", [rs_datum("k", 100)], 0)
    late = rs_datum("k", 30)
    outcome = driver.values("k", [late, rs_datum("k", 101)], 1)
    assert outcome.late == [late]
    assert outcome.emitted == []
    assert list(outcome.state[1]) == [(60_000 + T0_MS, 120_000 + T0_MS)]
    driver.eof()
    assert values(driver.emitted) == [b"60000-120000:2"]


def test_reduce_stream_allowed_lateness_accepts_late_datum():
    driver = AccDriver(tumbling_logic(lambda: window_count, lateness=50))
    driver.values("k", [rs_datum("k", 100)], 0)
    outcome = driver.values("k", [rs_datum("k", 30)], 1)  # 100 - 50 < 60: still open
    assert outcome.late == [] and outcome.emitted == []
    closing = driver.values("k", [rs_datum("k", 111)], 2)  # 111 - 50 >= 60: closes
    assert values(closing.emitted) == [b"0-60000:1"]
    assert closing.emitted[0].event_time == at(60) - timedelta(milliseconds=1)
    # beyond the allowed lateness the datum is late
    assert values(driver.values("k", [rs_datum("k", 5)], 3).late) == [b"5"]


def test_reduce_stream_idle_key_closes_its_windows():
    driver = AccDriver(tumbling_logic(lambda: window_count, lateness=1))
    r = driver.values("k", [rs_datum("k", 1), rs_datum("k", 2)], 1000)
    assert r.wake == 1000 + 61_000
    assert driver.timer("k", 1000 + 60_999).emitted == []
    closed = driver.timer("k", 1000 + 61_000)
    assert values(closed.emitted) == [b"0-60000:2"]
    assert closed.wake is None and closed.state[1] == {}


def test_reduce_stream_non_keyed_via_datum_keyer():
    keyer = DatumKeyer("reduce_stream 'nk'", keyed=False)
    pynumaflow_datum = PDatum(["c"], b"x", at(2), at(0), "i")
    keyed = [keyer(rs_datum(k, 1)) for k in ("a", "b")] + [keyer(pynumaflow_datum)]
    assert {key for key, _ in keyed} == {routing_key([NON_KEYED])}
    assert all(d.keys == ["NON_KEYED_STREAM"] for _, d in keyed)
    driver = AccDriver(tumbling_logic(handler_factory(reduce_handler, "reduce_stream")))
    driver.values(NON_KEYED, [d for _, d in keyed], 0)
    driver.eof()
    assert [(d.keys, d.value) for d in driver.emitted] == [(["NON_KEYED_STREAM"], b"counter:3")]


def test_reduce_stream_multi_keys_round_trip():
    seen = []

    async def handler(keys, datums, output, md):
        seen.append(keys)
        async for _ in datums:
            pass
        await output.put(rs.Message(b"done", keys=keys))

    key, datum = DatumKeyer("rs")(rs.Datum(["a", "b:c"], b"v", at(1), at(0)))
    assert key == routing_key(["a", "b:c"]) and key_list(key) == ["a", "b:c"]
    driver = AccDriver(tumbling_logic(lambda: handler))
    driver.values(key, [datum], 0)
    driver.eof()
    assert seen == [["a", "b:c"]]
    assert driver.emitted[0].keys == ["a", "b:c"]


@given(st.lists(st.text(min_size=1).filter(lambda s: "\x1e" not in s), min_size=1, max_size=4))
def test_routing_key_round_trip(keys):
    assert key_list(routing_key(keys)) == keys


def test_routing_key_empty():
    assert routing_key([]) == "" and key_list("") == []


# -- datums ---------------------------------------------------------------------------------------


def test_datum_maker_defaults():
    make = DatumMaker("conv", event_time=lambda x: T0)
    d = make(("user-1", "hello"))
    assert (d.keys, d.value, d.event_time, d.watermark, d.id, d.headers, d.tags) == (
        ["user-1"],
        b"hello",
        T0,
        T0,
        "",
        {},
        [],
    )
    assert make(("k", b"\x00raw")).value == b"\x00raw"
    assert (make("héllo").keys, make("héllo").value) == ([], "héllo".encode())
    assert make(bytearray(b"ba")).value == b"ba"
    with pytest.raises(TypeError, match=r"must be bytes or str; got int .*value=\.\.\."):
        make(42)
    with pytest.raises(TypeError, match="got tuple"):
        make((1, b"x"))  # the whole tuple is the value


def test_datum_maker_stamps_processing_time():
    before = datetime.now(UTC)
    d = DatumMaker("now")(b"x")
    assert before <= d.event_time <= datetime.now(UTC)
    assert d.event_time.tzinfo is UTC


def test_datum_maker_custom_functions():
    make = DatumMaker(
        "conv",
        keys=lambda x: x["user"],
        value=lambda x: x["n"].to_bytes(2, "big"),
        event_time=lambda x: datetime(2024, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1))),
        headers=lambda x: {"src": "test"},
        id=lambda x: x["n"],
    )
    d = make({"user": "u1", "n": 258})
    assert (d.keys, d.value, d.headers, d.id) == (["u1"], b"\x01\x02", {"src": "test"}, "258")
    assert d.event_time == T0 and d.event_time.tzinfo is UTC
    multi = DatumMaker("m", keys=lambda x: ("a", "b"), event_time=lambda x: T0)(b"v")
    assert multi.keys == ["a", "b"]
    with pytest.raises(TypeError, match="keys must be strings"):
        DatumMaker("m", keys=lambda x: [1], event_time=lambda x: T0)(b"v")
    with pytest.raises(TypeError, match="event_time must be a function"):
        DatumMaker("m", event_time=T0)


def test_datum_maker_naive_event_time_is_utc():
    d = DatumMaker("naive", event_time=lambda x: datetime(2024, 1, 1, 0, 0, 5))(b"v")
    assert d.event_time == at(5)
    assert d.event_time.tzinfo is UTC and d.watermark == at(5)
    with pytest.raises(TypeError, match="Datum.event_time"):
        DatumMaker("bad", event_time=lambda x: "2024-01-01")(b"v")


def tagged(*tags: str) -> Datum:
    return Datum([], b"v", T0, T0, tags=list(tags))


@pytest.mark.parametrize(
    ("tags", "operator", "datum_tags", "expected"),
    [
        (["a", "b"], "or", ["b"], True),
        (["a", "b"], "or", ["c"], False),
        (["a", "b"], "or", [], False),
        (["a", "b"], "and", ["a", "b", "c"], True),
        (["a", "b"], "and", ["a"], False),
        (["a", "b"], "and", [], False),
        (["a", "b"], "not", ["c"], True),
        (["a", "b"], "not", ["a"], False),
        (["a", "b"], "not", [], True),
        (["a"], "not", [DROP], False),
        ([], "or", [], True),
        ([], "and", ["x"], True),
        ([], "not", ["x"], True),
    ],
)
def test_tag_route(tags, operator, datum_tags, expected):
    assert TagRoute(tags, operator)(tagged(*datum_tags)) is expected


def test_tag_route_default_and_invalid():
    assert TagRoute(["a"])(tagged("a")) and not TagRoute(["a"])(tagged("b"))
    assert not TagRoute(["a"])(Datum([], b"", T0, T0))  # untagged datum
    with pytest.raises(ValueError, match="operator must be 'or', 'and' or 'not'"):
        TagRoute(["a"], "xor")
    with pytest.raises(TypeError, match="list of str"):
        TagRoute("a")


def test_step_datum_accepts_pynumaflow_datums():
    p = PDatum(["k"], b"v", datetime(2024, 1, 1), datetime(2024, 1, 1, 0, 0, 1), "id-1", {"h": "1"})
    d = step_datum(p, "accumulate 'x'")
    assert isinstance(d, Datum)
    assert (d.keys, d.value, d.id, d.headers, d.tags) == (["k"], b"v", "id-1", {"h": "1"}, [])
    assert d.event_time == T0 and d.watermark == at(1) and d.event_time.tzinfo is UTC
    m = step_datum(PMapDatum(["k"], b"w", datetime(2024, 1, 1), datetime(2024, 1, 1)), "m")
    assert (m.keys, m.value, m.id) == (["k"], b"w", "")
    ours = Datum(["k"], b"v", T0, T0)
    assert step_datum(ours, "x") is ours


def test_step_datum_rejects_plain_items_with_hint():
    with pytest.raises(TypeError, match=r"accumulate 'x' needs datums.*to_datums.*got 42"):
        step_datum(42, "accumulate 'x'")


def test_reduce_stream_window_closed_by_idleness_does_not_reopen():
    # The key idles for a window length: its window closes as if its watermark had
    # passed it, so a later datum for that window is late, not a second result.
    driver = AccDriver(tumbling_logic(handler_factory(reduce_handler, "reduce_stream")))
    driver.values("k", [rs_datum("k", 1)], 0)
    driver.values("k", [rs_datum("k", 2)], 60_000)
    driver.eof()
    assert values(driver.emitted) == [b"counter:1"]
    assert [d.event_time for d in driver.late] == [at(2)]


def test_two_udf_steps_in_one_process_keep_their_live_handlers():
    built = {"A": 0, "B": 0}

    def factory_for(name):
        def factory():
            built[name] += 1

            async def handler(datums, output):
                async for _ in datums:
                    pass

            return handler

        return factory

    drivers = {
        name: AccDriver(AccumulateLogic(name, factory_for(name), timedelta(minutes=1), SEC))
        for name in built
    }
    for batch in range(10):
        for driver in drivers.values():
            driver.values("k", [acc_datum("k", batch)], batch)
    assert built == {"A": 1, "B": 1}  # no rebuilds: neither step evicts the other's handlers


def test_plain_bytes_text_and_keyed_pairs_become_datums_with_to_datums_defaults():
    d = step_datum(("user-1", "hello"), "accumulate 'a'")
    assert (d.keys, d.value) == (["user-1"], b"hello")
    assert (step_datum(b"raw", "x").keys, step_datum("text", "x").value) == ([], b"text")
    with pytest.raises(TypeError, match="to_datums"):
        step_datum(("k", 5), "accumulate 'a'")


def test_a_busy_key_keeps_a_wal_of_about_the_watermark_delay():
    """10,000 datums for one key, 10 per batch, 10 ms of event time apart, 1 s watermark
    delay: the WAL never holds much more than the delay's 100 datums."""
    forward = handler_factory(Forwarder, "accumulate")
    driver = AccDriver(AccumulateLogic("f", forward, timedelta(minutes=5), SEC))
    retained = []
    for batch in range(1000):
        datums = [acc_datum("k", (batch * 10 + j) / 100) for j in range(10)]
        driver.values("k", datums, batch)
        index = driver.states["k"][4]
        retained.append(index.retained())
        assert index.retained() == sum(len(decode_items(e)) for e in driver.wals["k"].read())
    assert max(retained) <= 100 + 2 * 10, max(retained)  # the delay, and batch granularity
    assert driver.states["k"][4].trimmed + retained[-1] == 10_000
    driver.eof()
    assert len(driver.emitted) == 10_000
