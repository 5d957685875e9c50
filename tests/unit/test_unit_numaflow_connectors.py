"""Numaflow's generator source, log/blackhole sinks and the user-defined sink, without Spark.

The generator's part is driven with a fake nanosecond clock; the sinks are built
and written to directly, as the engine's ``foreachBatch`` does.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import runpy
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowspark.api.outputs import DynamicOutput, StatelessSink
from flowspark.api.udf.servers import capturing_servers
from flowspark.api.udf.times import UTCDateTime
from flowspark.api.udf.types import Datum as FlowDatum
from flowspark.connectors.numaflow import (
    LOG_TARGET,
    BlackholeOutput,
    GeneratorInput,
    LogOutput,
    RetryPolicy,
    SinkError,
    UdSinkOutput,
    log_text,
)
from flowspark.sinker import (
    Datum,
    Message,
    Response,
    Responses,
    SinkAsyncServer,
    Sinker,
    SinkServer,
)

S = 1_000_000_000  # nanoseconds per second
T0 = 1_700_000_000 * S  # a whole second, so tick arithmetic is easy to read
ET = datetime(2022, 9, 12, 16, 0, tzinfo=UTC)  # 1662998400000 ms


class FakeClock:
    """Nanoseconds since the epoch; moves only when told (``+= n``)."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def part_of(inp: GeneratorInput, clock: FakeClock, resume: Any = None) -> Any:
    part = inp.build_part(inp.list_parts()[0], resume)
    part.clock = clock
    return part


def payload(datum: Any) -> dict[str, Any]:
    return json.loads(datum.value)


# ---------------------------------------------------------------------------- generator


def test_generator_emits_rpu_per_tick_in_batches_then_waits_for_the_next_tick():
    clock = FakeClock()
    part = part_of(GeneratorInput("gen", rpu=5, read_batch_size=2), clock)
    assert part.next_awake() is None  # nothing read yet: read at once
    assert [len(part.next_batch()) for _ in range(3)] == [2, 2, 1]
    assert part.next_batch() == []
    awake = part.next_awake()
    assert awake.tzinfo is not None
    assert awake == datetime.fromtimestamp((T0 + S) // S, UTC)
    clock.now = T0 + S // 2  # too early: still nothing
    assert part.next_batch() == []
    clock.now = T0 + S  # the next tick
    assert len(part.next_batch()) == 2
    assert part.next_awake() is None  # quota left: read again at once
    assert part.snapshot() == 7


def test_generator_skips_missed_ticks_instead_of_bursting():
    clock = FakeClock()
    part = part_of(GeneratorInput("gen", rpu=3, duration=timedelta(seconds=1)), clock)
    assert len(part.next_batch()) == 3
    clock.now = T0 + 5 * S + S // 2  # ticks 1..5 were missed
    assert len(part.next_batch()) == 3  # one tick's worth, not 15
    assert part.next_batch() == []
    assert part.next_awake() == datetime.fromtimestamp(T0 // S + 6, UTC)  # aligned to start


def test_generator_keys_round_robin_and_rpu_floored_to_a_multiple_of_key_count():
    inp = GeneratorInput("gen", rpu=10, key_count=3)
    assert (inp.rpu, inp.key_count, inp.batch_size) == (9, 3, 9)
    part = part_of(inp, FakeClock())
    keys = [d.keys for d in part.next_batch()]
    assert keys == [[f"key-{i % 3}"] for i in range(9)]
    assert part.next_batch() == []


def test_generator_key_count_is_capped_at_255_and_at_rpu():
    assert GeneratorInput("g", rpu=1000, key_count=300).key_count == 255
    assert GeneratorInput("g", rpu=1000, key_count=300).rpu == 765
    small = GeneratorInput("g", rpu=3, key_count=7)
    assert (small.key_count, small.rpu) == (3, 3)
    assert GeneratorInput("g", rpu=5).key_count == 0


def test_generator_payload_ids_times_and_headers():
    clock = FakeClock(T0 + 123_456_789)
    part = part_of(GeneratorInput("gen", rpu=3, replica=2), clock)
    assert GeneratorInput("gen", replica=2).list_parts() == ["2"]
    batch = part.next_batch()
    ids = [d.id for d in batch]
    assert ids == [f"{T0 + 123_456_789 + i}-2" for i in range(3)]  # unique on a still clock
    for datum in batch:
        body = payload(datum)
        assert list(body) == ["id", "value"]
        assert body["id"] == datum.id
        assert body["value"] == int(datum.id.split("-")[0])  # event time ns (no jitter)
        assert datum.keys == []
        assert datum.headers == {}
        assert isinstance(datum, FlowDatum)
        assert isinstance(datum.event_time, UTCDateTime)
        assert datum.watermark == datum.event_time
        assert datum.event_time == datetime.fromtimestamp(body["value"] // 1000 / 1e6, UTC)
    assert batch[0].value == (
        f'{{"id":"{T0 + 123_456_789}-2","value":{T0 + 123_456_789}}}'.encode()
    )


def test_generator_fixed_value_padding_and_value_blob():
    part = part_of(GeneratorInput("gen", rpu=2, value=5, msg_size=12), FakeClock())
    for datum in part.next_batch():
        body = payload(datum)
        assert body["value"] == 5
        assert len(body["padding"]) == 4
        assert all(isinstance(b, int) and 0 <= b <= 255 for b in body["padding"])
    blob = part_of(GeneratorInput("gen", rpu=2, value_blob=b"\x00raw"), FakeClock())
    assert [d.value for d in blob.next_batch()] == [b"\x00raw", b"\x00raw"]
    encoded = base64.b64encode(b"hello").decode()
    from_b64 = part_of(GeneratorInput("gen", rpu=1, value_blob=encoded), FakeClock())
    assert from_b64.next_batch()[0].value == b"hello"
    with pytest.raises(ValueError, match="base64"):
        GeneratorInput("gen", value_blob="not base64!")


def test_generator_jitter_subtracts_whole_seconds_below_jitter():
    clock = FakeClock(T0 + 500)
    part = part_of(GeneratorInput("gen", rpu=200, jitter=timedelta(seconds=3)), clock)
    lags = set()
    for datum in part.next_batch():
        now_ns = int(datum.id.split("-")[0])
        lag = now_ns - payload(datum)["value"]
        assert lag % S == 0
        lags.add(lag // S)
    assert lags <= {0, 1, 2}
    assert len(lags) > 1  # 200 draws from 3 values


def test_generator_snapshot_resumes_the_round_robin():
    inp = GeneratorInput("gen", rpu=4, key_count=3)  # rpu floored to 3
    first = part_of(inp, FakeClock())
    assert [d.keys[0] for d in first.next_batch()[:2]] == ["key-0", "key-1"]
    state = pickle.loads(pickle.dumps(first.snapshot()))
    assert state == 3
    resumed = part_of(inp, FakeClock(T0 + 10 * S), resume=state)
    first_again = part_of(inp, FakeClock())
    first_again.emitted = 2
    assert [d.keys[0] for d in first_again.next_batch()] == ["key-2", "key-0", "key-1"]
    assert resumed.next_batch()[0].keys == ["key-0"]
    assert resumed.snapshot() == 6


def test_generator_limit_ends_the_part():
    clock = FakeClock()
    part = part_of(GeneratorInput("gen", rpu=4, limit=6), clock)
    assert len(part.next_batch()) == 4
    clock.now += S
    assert len(part.next_batch()) == 2
    assert part.next_awake() is None
    with pytest.raises(StopIteration):
        part.next_batch()
    resumed = part_of(GeneratorInput("gen", rpu=4, limit=6), clock, resume=6)
    with pytest.raises(StopIteration):
        resumed.next_batch()


def test_generator_on_the_real_clock():
    inp = GeneratorInput("gen", rpu=2, duration=timedelta(milliseconds=20), limit=6)
    part = inp.build_part("0", None)
    seen = 0
    while True:
        try:
            seen += len(part.next_batch())
        except StopIteration:
            break
        awake = part.next_awake()
        if awake is not None:
            wait = (awake - datetime.now(UTC)).total_seconds()
            assert wait <= 0.021
            if wait > 0:
                import time

                time.sleep(wait)
    assert seen == 6


def test_generator_rejects_bad_arguments():
    with pytest.raises(ValueError, match="rpu"):
        GeneratorInput("gen", rpu=0)
    with pytest.raises(ValueError, match="duration"):
        GeneratorInput("gen", duration=timedelta(0))
    with pytest.raises(ValueError, match="key_count"):
        GeneratorInput("gen", key_count=-1)
    assert GeneratorInput("gen", duration=0.5).duration == timedelta(milliseconds=500)


# ----------------------------------------------------------------------------------- log

_TIMESTAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"


def write(output: Any, items: list[Any]) -> StatelessSink:
    sink = output.build(0, 1)
    sink.write_batch(items)
    sink.close()
    return sink


def test_log_text_has_numaflows_format():
    datum = FlowDatum(["a", "b"], b"hi", ET, ET, {"x": "1", "y": "2"}, id="cat-17-0")
    assert log_text(datum) == (
        "Payload - hi Keys - a,b EventTime - 1662998400000 Headers - x: 1, y: 2,  ID - cat-17-0"
    )
    bare = FlowDatum([], b"\xffok", ET, ET, id="i")
    assert (
        log_text(bare) == "Payload - \ufffdok Keys -  EventTime - 1662998400000 Headers -  ID - i"
    )


def test_log_output_prints_json_records(capsys, monkeypatch):
    monkeypatch.delenv("NUMAFLOW_DEBUG", raising=False)
    datum = FlowDatum(["k"], b'{"v": 1}', ET, ET, {"h": "v"}, id="gen-1-0")
    write(LogOutput("out"), [datum, datum])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    record = json.loads(lines[0])
    assert list(record) == ["timestamp", "level", "message", "target"]
    assert re.fullmatch(_TIMESTAMP, record["timestamp"])
    assert record["level"] == "INFO"
    assert record["target"] == LOG_TARGET == "numaflow_core::sinker::sink::log"
    assert record["message"] == (
        'Payload - {"v": 1} Keys - k EventTime - 1662998400000 Headers - h: v,  ID - gen-1-0'
    )
    assert lines[0].startswith('{"timestamp":"') and '"level":"INFO","message":"' in lines[0]


def test_log_output_human_format(capsys, monkeypatch):
    datum = FlowDatum(["k"], b"hello", ET, ET, id="x")
    text = "Payload - hello Keys - k EventTime - 1662998400000 Headers -  ID - x"
    write(LogOutput("out", human=True), [datum])
    line = capsys.readouterr().out
    assert re.fullmatch(f"{_TIMESTAMP}  INFO {LOG_TARGET}: {re.escape(text)}\n", line)
    monkeypatch.setenv("NUMAFLOW_DEBUG", "TRUE")
    write(LogOutput("out"), [datum])
    assert capsys.readouterr().out.endswith(f"INFO {LOG_TARGET}: {text}\n")
    write(LogOutput("out", human=False), [datum])
    assert json.loads(capsys.readouterr().out)["message"] == text


def test_log_output_is_forgiving_about_items(capsys):
    import pynumaflow.sinker as pnf

    naive = datetime(2022, 9, 12, 16, 0)  # pynumaflow's naive UTC
    items = [
        ("key", "value"),
        b"bytes",
        "text",
        42,
        pnf.Datum(["p"], "pid", b"pv", naive, naive, {"a": "b"}),
        Datum(["s"], "sid", b"sv", ET, ET),
    ]
    write(LogOutput("out", human=True), items)
    messages = [
        line.split(f"{LOG_TARGET}: ", 1)[1] for line in capsys.readouterr().out.splitlines()
    ]
    assert messages[0].startswith("Payload - value Keys - key EventTime - ")
    assert messages[1].startswith("Payload - bytes Keys -  EventTime - ")
    assert messages[2].startswith("Payload - text Keys -  EventTime - ")
    assert messages[3].startswith("Payload - 42 Keys -  EventTime - ")
    assert (
        messages[4] == "Payload - pv Keys - p EventTime - 1662998400000 Headers - a: b,  ID - pid"
    )
    assert messages[5] == "Payload - sv Keys - s EventTime - 1662998400000 Headers -  ID - sid"


def test_blackhole_writes_nothing(capsys):
    write(BlackholeOutput(), [FlowDatum([], b"x", ET, ET), ("k", "v"), b"y"])
    assert capsys.readouterr() == ("", "")


# -------------------------------------------------------------------------------- udsink


class Recorder(DynamicOutput):
    """A DynamicOutput keeping what it was given (a fallback / onSuccess sink in tests)."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.closed = False

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        recorder = self

        class _Sink(StatelessSink):
            def write_batch(self, items: list[Any]) -> None:
                recorder.items.extend(items)

            def close(self) -> None:
                recorder.closed = True

        return _Sink()


class ScriptedSink(Sinker):
    """Answers by value: ``plan[value]`` is a list of answers, one per call
    (``"ok"``, ``"fail"``, ``"fb"``, ``"ons"``, ``("ons", Message)``, ``"skip"``);
    the last answer repeats. Unknown values succeed."""

    def __init__(self, plan: dict[bytes, list[Any]] | None = None) -> None:
        self.plan = plan or {}
        self.calls: list[list[Datum]] = []

    def handler(self, datums):
        batch = list(datums)
        self.calls.append(batch)
        responses = Responses()
        for d in batch:
            answers = self.plan.get(d.value, ["ok"])
            answer = answers[min(len(self.calls), len(answers)) - 1]
            if answer == "ok":
                responses.append(Response.as_success(d.id))
            elif answer == "fail":
                responses.append(Response.as_failure(d.id, f"cannot write {d.value!r}"))
            elif answer == "fb":
                responses.append(Response.as_fallback(d.id))
            elif answer == "ons":
                responses.append(Response.as_on_success(d.id))
            elif isinstance(answer, tuple):
                responses.append(Response.as_on_success(d.id, answer[1]))
        return responses


def datums(*values: bytes) -> list[FlowDatum]:
    return [
        FlowDatum(["k"], v, ET, ET + timedelta(seconds=1), {"h": "1"}, id=f"v-{i}-0")
        for i, v in enumerate(values)
    ]


FAST = RetryPolicy(interval=timedelta(milliseconds=1), steps=3)


def test_udsink_success_passes_sink_datums():
    sinker = ScriptedSink()
    write(UdSinkOutput(sinker, "sink"), datums(b"a", b"b"))
    [batch] = sinker.calls
    assert [type(d) for d in batch] == [Datum, Datum]
    first = batch[0]
    assert (first.keys, first.id, first.value, first.headers) == (["k"], "v-0-0", b"a", {"h": "1"})
    assert first.event_time == ET and first.watermark == ET + timedelta(seconds=1)


def test_udsink_with_a_function_handler_and_no_items():
    seen: list[list[str]] = []

    def handler(datums):
        ids = [d.id for d in datums]
        seen.append(ids)
        return Responses(*(Response.as_success(i) for i in ids))

    sink = UdSinkOutput(handler, "sink").build(0, 1)
    sink.write_batch([])
    sink.write_batch(datums(b"a") + [b"plain", ("key", "v")])
    assert seen == [["v-0-0", "sink-1-1", "sink-1-2"]]  # ids made up for plain items


def test_udsink_retries_only_failed_datums_until_they_succeed():
    sinker = ScriptedSink({b"b": ["fail", "fail", "ok"]})
    write(UdSinkOutput(sinker, "sink", retry=FAST), datums(b"a", b"b"))
    assert [[d.value for d in call] for call in sinker.calls] == [[b"a", b"b"], [b"b"], [b"b"]]


def test_udsink_failure_after_retries_is_an_error():
    sinker = ScriptedSink({b"b": ["fail"]})
    with pytest.raises(SinkError, match="Failed to write messages after retries") as info:
        write(UdSinkOutput(sinker, "sink", retry=FAST), datums(b"a", b"b"))
    assert "cannot write b'b'" in str(info.value)
    assert len(sinker.calls) == 1 + 3


def test_udsink_failure_then_drop():
    sinker = ScriptedSink({b"b": ["fail"]})
    fallback = Recorder()
    policy = RetryPolicy(on_failure="drop", interval=timedelta(milliseconds=1), steps=2)
    write(UdSinkOutput(sinker, "sink", fallback=fallback, retry=policy), datums(b"a", b"b"))
    assert len(sinker.calls) == 3
    assert fallback.items == []


def test_udsink_failure_then_fallback():
    sinker = ScriptedSink({b"b": ["fail"]})
    fallback = Recorder()
    policy = RetryPolicy(on_failure="fallback", interval=timedelta(milliseconds=1), steps=1)
    items = datums(b"a", b"b")
    write(UdSinkOutput(sinker, "sink", fallback=fallback, retry=policy), items)
    assert fallback.items == [items[1]]
    assert fallback.closed


def test_udsink_fallback_answer_goes_to_the_fallback_sink(capsys):
    sinker = ScriptedSink({b"b": ["fb"]})
    fallback = LogOutput("sink", human=True)
    write(UdSinkOutput(sinker, "sink", fallback=fallback), datums(b"a", b"b"))
    out = capsys.readouterr().out
    assert out.endswith(
        "Payload - b Keys - k EventTime - 1662998400000 Headers - h: 1,  ID - v-1-0\n"
    )
    assert out.count("\n") == 1


def test_udsink_fallback_answer_without_fallback_sink_is_an_error():
    with pytest.raises(SinkError, match="no fallback sink is configured"):
        write(UdSinkOutput(ScriptedSink({b"a": ["fb"]}), "sink"), datums(b"a"))


def test_a_fallback_sink_answering_fallback_is_an_error():
    primary = ScriptedSink({b"a": ["fb"]})
    secondary = ScriptedSink({b"a": ["fb"]})
    output = UdSinkOutput(primary, "sink", fallback=UdSinkOutput(secondary, "sink"))
    with pytest.raises(
        SinkError, match="Specifying fallback status in fallback sink is not allowed"
    ):
        write(output, datums(b"a"))
    assert len(secondary.calls) == 1


def test_a_fallback_udsink_that_succeeds():
    secondary = ScriptedSink()
    output = UdSinkOutput(
        ScriptedSink({b"a": ["fb"]}), "sink", fallback=UdSinkOutput(secondary, "sink")
    )
    write(output, datums(b"a", b"b"))
    assert [[d.id for d in call] for call in secondary.calls] == [["v-0-0"]]


def test_udsink_on_success_with_and_without_a_message():
    sinker = ScriptedSink({b"a": ["ons"], b"b": [("ons", Message(b"B!", ["new"]))], b"c": ["ok"]})
    on_success = Recorder()
    items = datums(b"a", b"b", b"c")
    write(UdSinkOutput(sinker, "sink", on_success=on_success), items)
    original, replaced = on_success.items
    assert original is items[0]
    assert (replaced.value, replaced.keys, replaced.id) == (b"B!", ["new"], "v-1-0")
    assert (replaced.event_time, replaced.headers) == (ET, {"h": "1"})
    keyless = ScriptedSink({b"a": [("ons", Message(b"x"))]})
    recorder = Recorder()
    write(UdSinkOutput(keyless, "sink", on_success=recorder), datums(b"a"))
    assert recorder.items[0].keys == []


def test_udsink_on_success_without_on_success_sink_is_an_error():
    with pytest.raises(SinkError, match="no OnSuccess sink is configured"):
        write(UdSinkOutput(ScriptedSink({b"a": ["ons"]}), "sink"), datums(b"a"))


def test_udsink_missing_response_is_an_error_naming_the_id():
    sinker = ScriptedSink({b"b": ["skip"]})
    with pytest.raises(SinkError, match="no response for message id 'v-1-0'"):
        write(UdSinkOutput(sinker, "sink"), datums(b"a", b"b"))


def test_udsink_async_handlers():
    class AsyncSink(Sinker):
        async def handler(self, datums):
            responses = Responses()
            async for d in datums:
                responses.append(Response.as_success(d.id))
            return responses

    async def fn(datums):
        return Responses(*[Response.as_failure(d.id, "no") async for d in datums])

    write(UdSinkOutput(AsyncSink(), "sink"), datums(b"a", b"b"))
    with pytest.raises(SinkError, match="after retries"):
        write(UdSinkOutput(fn, "sink", retry=RetryPolicy(steps=1)), datums(b"a"))


def test_udsink_accepts_pynumaflows_own_responses_and_servers():
    import pynumaflow.sinker as pnf

    def handler(datums):
        return pnf.Responses(*(pnf.Response.as_success(d.id) for d in datums))

    write(UdSinkOutput(handler, "sink"), datums(b"a"))
    write(UdSinkOutput(SinkServer(handler), "sink"), datums(b"a"))


def test_udsink_rejects_bad_configurations():
    with pytest.raises(TypeError, match="instance of the Sinker subclass"):
        UdSinkOutput(ScriptedSink, "sink")
    with pytest.raises(TypeError, match="expected a function"):
        UdSinkOutput(42, "sink")
    with pytest.raises(ValueError, match="fallback sink is not provided"):
        UdSinkOutput(ScriptedSink(), "sink", retry=RetryPolicy(on_failure="fallback"))
    nested = UdSinkOutput(ScriptedSink(), "fb", fallback=Recorder())
    with pytest.raises(ValueError, match="of its own"):
        UdSinkOutput(ScriptedSink(), "sink", fallback=nested)


def test_retry_policy_defaults_checks_and_backoff():
    default = RetryPolicy()
    assert (default.on_failure, default.interval, default.steps) == (
        "retry",
        timedelta(milliseconds=1),
        None,
    )
    assert RetryPolicy(on_failure=None, factor=None, jitter=None).factor == 1.0
    delays = RetryPolicy(interval=timedelta(seconds=1), factor=2, steps=5, cap=timedelta(seconds=5))
    assert list(delays.delays()) == [1, 2, 4, 5, 5]
    jittered = list(RetryPolicy(interval=1, steps=50, jitter=0.5).delays())
    assert all(0.5 <= d <= 1.5 for d in jittered) and len(set(jittered)) > 1
    for kwargs, message in [
        ({"steps": 0}, "steps in backoff strategy cannot be 0"),
        ({"factor": 0.5}, "factor in backoff strategy cannot be less than 1"),
        ({"interval": 2, "cap": 1}, "cap in backoff strategy cannot be less than interval"),
        ({"jitter": 1.0}, "jitter in backoff strategy should be between 0 and 1"),
        ({"on_failure": "panic"}, "onFailure"),
    ]:
        with pytest.raises(ValueError, match=message):
            RetryPolicy(**kwargs)


# ------------------------------------------------------------------- sinker data types


def test_sink_datum_matches_pynumaflow():
    headers = {"a": "b"}
    d = Datum(["k"], "id-1", b"v", ET, ET, headers)
    assert (d.id, d.keys, d.value, d.event_time, d.watermark) == ("id-1", ["k"], b"v", ET, ET)
    d.headers["x"] = "y"
    assert d.headers == {"a": "b"}
    assert (d.user_metadata, d.system_metadata) == (None, None)
    assert str(d).startswith("keys: ['k'], id: id-1, value: v, event_time: ")
    again = pickle.loads(pickle.dumps(d))
    assert type(again) is Datum and again == d and again.id == "id-1"
    with pytest.raises(TypeError, match="Wrong data type: <class 'int'> for Datum.event_time"):
        Datum([], "i", b"", 0, ET)
    naive = Datum([], None, None, datetime(2022, 9, 12, 16, 0), ET)
    assert (naive.id, naive.value, naive.event_time) == ("", b"", ET)


def test_responses_and_messages_match_pynumaflow():
    import pynumaflow.sinker as pnf

    for name, args in [
        ("as_success", ("i",)),
        ("as_failure", ("i", "err")),
        ("as_fallback", ("i",)),
        ("as_on_success", ("i",)),
    ]:
        mine, theirs = getattr(Response, name)(*args), getattr(pnf.Response, name)(*args)
        fields = ("id", "success", "err", "fallback", "on_success", "on_success_msg")
        assert [getattr(mine, f) for f in fields] == [getattr(theirs, f) for f in fields]
    msg = Message(b"v", ["k"])
    assert Response.as_on_success("i", msg).on_success_msg is msg
    assert (msg.value, msg.keys, msg.user_metadata) == (b"v", ["k"], None)
    assert Message(b"v").with_keys(["x"]).keys == ["x"]
    with pytest.raises(TypeError):
        Message("not bytes")
    responses = Responses(Response.as_success("a"))
    responses.append(Response.as_success("b"))
    assert [r.id for r in responses] == ["a", "b"] and len(responses) == 2
    with pytest.raises(TypeError, match="Slicing is not supported for Responses"):
        responses[0:1]


def test_sink_servers(monkeypatch):
    def handler(datums):
        return Responses()

    server = SinkServer(handler)
    assert (server.udf_kind, server.kind, server.handler) == ("sink", "sink", handler)
    assert server.sinker_instance is handler
    assert server.sock_path == "unix:///var/run/numaflow/sink.sock"
    assert server.max_threads <= 16
    instance = ScriptedSink()
    async_server = SinkAsyncServer(instance, shutdown_callback=print)
    assert async_server.handler is instance and async_server.shutdown_callback is print
    with pytest.raises(TypeError):
        SinkServer(ScriptedSink)
    with pytest.raises(TypeError):
        SinkAsyncServer("nope")
    monkeypatch.setenv("NUMAFLOW_UD_CONTAINER_TYPE", "fb-udsink")
    assert SinkServer(handler).sock_path == "unix:///var/run/numaflow/fb-sink.sock"
    monkeypatch.setenv("NUMAFLOW_UD_CONTAINER_TYPE", "ons-udsink")
    assert SinkServer(handler).server_info_file == "/var/run/numaflow/ons-sinker-server-info"


def test_start_is_captured_in_a_pipeline_and_runs_locally_otherwise(capsys, monkeypatch):
    sinker = ScriptedSink({b"b": ["fail"], b"c": [("ons", Message(b"C", ["k"]))]})
    server = SinkServer(sinker)
    with capturing_servers() as started:
        server.start()
    assert started == [server] and sinker.calls == []
    lines = 'a\n{"id": "x", "value": "b", "keys": ["k1"], "event_time": 0}\n\n{"value": "c"}\n'
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    server.start()
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out == [
        {"id": "1", "status": "success", "err": None, "on_success": None},
        {"id": "x", "status": "failure", "err": "cannot write b'b'", "on_success": None},
        {
            "id": "4",
            "status": "on_success",
            "err": None,
            "on_success": {"keys": ["k"], "value": "C"},
        },
    ]
    assert sinker.calls[0][1].keys == ["k1"]


# ---------------------------------------------------------- numaflow-python's example

# numaflow-python's examples/sink/log/example.py, with ``pynumaflow`` renamed to ``flowspark``.
LOG_SINK_EXAMPLE = textwrap.dedent(
    """\
    import os
    from collections.abc import Iterator
    from flowspark.sinker import Datum, Responses, Response, SinkServer
    from flowspark.sinker import Sinker
    import logging

    logging.basicConfig(level=logging.DEBUG)
    _LOGGER = logging.getLogger(__name__)


    class UserDefinedSink(Sinker):
        def handler(self, datums: Iterator[Datum]) -> Responses:
            responses = Responses()
            for msg in datums:
                _LOGGER.info("User Defined Sink %s", msg.value.decode("utf-8"))
                responses.append(Response.as_success(msg.id))
            # if we are not able to write to sink and if we have a fallback sink configured
            # we can use Response.as_fallback(msg.id)) to write the message to fallback sink
            return responses


    def udsink_handler(datums: Iterator[Datum]) -> Responses:
        responses = Responses()
        for msg in datums:
            _LOGGER.info(
                "User Defined Sink: Payload %s , Headers %s", msg.value.decode("utf-8"), msg.headers
            )
            responses.append(Response.as_success(msg.id))
            # if we are not able to write to sink and if we have a fallback sink configured
            # we can use Response.as_fallback(msg.id)) to write the message to fallback sink
        return responses


    if __name__ == "__main__":
        invoke = os.getenv("INVOKE", "func_handler")
        if invoke == "class":
            sink_handler = UserDefinedSink()
        else:
            sink_handler = udsink_handler
        grpc_server = SinkServer(sink_handler)
        grpc_server.start()
    """
)


@pytest.fixture
def log_sink_example(tmp_path: Path) -> Path:
    path = tmp_path / "example.py"
    path.write_text(LOG_SINK_EXAMPLE)
    return path


@pytest.mark.parametrize("invoke", ["class", "func_handler"])
def test_numaflow_python_log_sink_example_runs_in_a_udsink(
    log_sink_example, invoke, monkeypatch, caplog
):
    import logging

    monkeypatch.setenv("INVOKE", invoke)
    monkeypatch.setattr(logging, "basicConfig", lambda **kwargs: None)
    with capturing_servers() as started:
        runpy.run_path(str(log_sink_example), run_name="__main__")
    [server] = started
    assert server.udf_kind == "sink"
    handler = server.handler
    assert type(handler).__name__ == ("UserDefinedSink" if invoke == "class" else "function")
    caplog.set_level(logging.INFO)
    write(UdSinkOutput(handler, "sink"), datums(b"one", b"two"))
    logged = [r.getMessage() for r in caplog.records]
    assert any("User Defined Sink" in m and "one" in m for m in logged)
    assert any("two" in m for m in logged)


def test_numaflow_python_log_sink_example_runs_as_a_script(log_sink_example):
    result = subprocess.run(
        [sys.executable, str(log_sink_example)],
        input='hello\n{"id": "m-2", "value": "world", "keys": ["k"]}\n',
        capture_output=True,
        text=True,
        timeout=60,
        env={"INVOKE": "class", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == ["1", "m-2"]
    assert "User Defined Sink hello" in result.stderr
