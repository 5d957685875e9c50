"""Batch map without Spark: pynumaflow 0.14's ``batchmapper`` types and server on
flowspark, the request-id rules, the checks of the answers, batching, the flow API and
the pipeline vertex (the step on Spark: tests/spark/test_batch_map.py)."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pickle
import runpy
from collections.abc import AsyncIterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowspark.batchmapper as bm
from flowspark.api.steps import OPERATORS
from flowspark.api.udf.servers import capturing_servers, handler_factory
from flowspark.api.udf.types import DROP, Datum
from flowspark.dataflow import Dataflow
from flowspark.mapstreamer import MapStreamAsyncServer
from flowspark.pipeline.build import load
from flowspark.plan.graph import build_plan
from flowspark.runtime.errors import RemoteStepFailure
from flowspark.runtime.numaflow.batch_map import BatchMapRunner, request_ids, run_batch_map
from flowspark.runtime.numaflow.datums import BUILT_STEPS
from flowspark.testing import TestingInput, TestingOutput
from tests.pynumaflow_servers import parameter_names, server_settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "numaflow" / "udfs" / "batchmap_flatmap.py"
T0 = datetime(2024, 1, 1, tzinfo=UTC)

# pynumaflow's example, as the user's file holds it (not run as __main__: no server).
Flatmap = runpy.run_path(str(EXAMPLE), run_name="batchmap_flatmap")["Flatmap"]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def datum(value: bytes, id_: str = "", seconds: float = 0, **kw: Any) -> Datum:
    return Datum(kw.get("keys", []), value, at(seconds), at(seconds - 1), kw.get("headers"), id=id_)


async def flatmap_function(datums: AsyncIterable[bm.Datum]) -> bm.BatchResponses:
    """The example's handler as a function (pynumaflow: "a function can be used as well")."""
    responses = bm.BatchResponses()
    async for d in datums:
        parts = [bm.Message(p, keys=d.keys) for p in d.value.split(b",")]
        responses.append(bm.BatchResponse.with_msgs(d.id, parts))
    return responses


def answering(answer: Any) -> Any:
    """A handler reading its batch, then returning ``answer(datums)``."""

    async def handler(datums: AsyncIterable[bm.Datum]) -> Any:
        return answer([d async for d in datums])

    return handler


def run(handler: Any, datums: list[Datum], batch_size: int = 500, step: str = "bm") -> list:
    return run_batch_map(step, handler, datums, batch_size)


# -- the face module -------------------------------------------------------------------


def test_the_face_exports_pynumaflows_names_and_signatures():
    theirs = importlib.import_module("pynumaflow.batchmapper")
    assert bm.__all__ == theirs.__all__
    for name in ("Datum", "Message"):
        mine = inspect.signature(getattr(bm, name)).parameters
        their = inspect.signature(getattr(theirs, name)).parameters
        assert list(mine) == list(their), name
        defaults = [(p.name, p.default) for p in mine.values()]
        assert defaults == [(p.name, p.default) for p in their.values()], name
    server, their_server = bm.BatchMapAsyncServer, theirs.BatchMapAsyncServer
    assert parameter_names(server) == list(inspect.signature(their_server).parameters)
    assert server_settings(server(flatmap_function)) == server_settings(
        their_server(flatmap_function)
    )
    for method in ("from_id", "with_msgs", "append", "items"):
        mine = list(inspect.signature(getattr(bm.BatchResponse, method)).parameters)
        assert mine == list(inspect.signature(getattr(theirs.BatchResponse, method)).parameters)
    assert bm.DROP == theirs.DROP == DROP


def test_the_face_shares_the_engines_types():
    from flowspark.api.udf.batch import BatchMapDatum
    from flowspark.mapstreamer import Message

    assert bm.Datum is BatchMapDatum and issubclass(bm.Datum, Datum)
    assert bm.Message is Message


# -- types ---------------------------------------------------------------------------------


def test_datum_takes_the_id_first_and_returns_a_copy_of_its_headers():
    d = bm.Datum("id-1", ["k"], b"v", datetime(2024, 1, 1), at(1), {"h": "1"})
    assert (d.id, d.keys, d.value, d.event_time, d.watermark) == ("id-1", ["k"], b"v", T0, at(1))
    assert d.event_time.tzinfo is UTC  # naive taken as UTC
    d.headers["h"] = "changed"
    assert d.headers == {"h": "1"}
    plain = bm.Datum(id="x", keys=None, value=None, event_time=T0, watermark=T0)
    assert (plain.keys, plain.value, plain.headers) == ([], b"", {})
    assert pickle.loads(pickle.dumps(d)) == d and type(pickle.loads(pickle.dumps(d))) is bm.Datum


@pytest.mark.parametrize("field", ["event_time", "watermark"])
def test_datum_rejects_non_datetimes_with_pynumaflows_text(field: str):
    from pynumaflow.batchmapper import Datum as TheirDatum

    times = {"event_time": T0, "watermark": T0, field: "now"}
    with pytest.raises(TypeError) as mine:
        bm.Datum(id="x", keys=[], value=b"", **times)
    with pytest.raises(TypeError) as theirs:
        TheirDatum(id="x", keys=[], value=b"", **times)
    assert (
        str(mine.value) == str(theirs.value) == f"Wrong data type: <class 'str'> for Datum.{field}"
    )


def test_batch_response_is_pynumaflows():
    from pynumaflow.batchmapper import BatchResponse as TheirResponse
    from pynumaflow.batchmapper import BatchResponses as TheirResponses

    response = bm.BatchResponse.from_id("r1")
    assert (response.id, response.items(), repr(response)) == (
        "r1",
        [],
        repr(TheirResponse.from_id("r1")),
    )
    message = bm.Message(b"x")
    response.append(message)
    assert response.items() == [message] and response.messages is response.items()
    messages = [bm.Message(b"a")]
    assert bm.BatchResponse.with_msgs("r2", messages).messages is messages
    assert bm.BatchResponse.with_msgs("r2", messages) == bm.BatchResponse("r2", [bm.Message(b"a")])
    with pytest.raises(TypeError):
        bm.BatchResponse()  # type: ignore[call-arg]
    assert str(bm.BatchResponses(bm.BatchResponse.from_id("a"))) == str(
        TheirResponses(TheirResponse.from_id("a"))
    )


def test_batch_responses_index_slice_append_and_items():
    responses = bm.BatchResponses()
    assert len(responses) == 0 and repr(responses) == "[]"
    first, second = bm.BatchResponse.from_id("a"), bm.BatchResponse.from_id("b")
    responses.append(first)
    responses.append(second)
    assert len(responses) == 2 and responses[0] is first and responses[-1] is second
    assert responses[0:1] == [first]  # pynumaflow's BatchResponses allows slicing
    assert list(responses) == [first, second] and responses.items() == [first, second]
    assert responses.items() is responses.items()


def test_the_batch_mapper_abc_needs_a_handler_and_calls_it():
    with pytest.raises(TypeError):
        bm.BatchMapper()  # type: ignore[abstract]
    with pytest.raises(TypeError):
        type("Incomplete", (bm.BatchMapper,), {})()
    flatmap = Flatmap()

    async def one() -> AsyncIterable[bm.Datum]:
        yield bm.Datum("1", [], b"a,b", T0, T0)

    [response] = asyncio.run(flatmap(one()))  # calling the instance calls its handler
    assert (response.id, [m.value for m in response.items()]) == ("1", [b"a", b"b"])


# -- the server --------------------------------------------------------------------------


@pytest.mark.parametrize(("max_threads", "expected"), [(32, 16), (5, 5), (None, 4)])
def test_server_settings_as_pynumaflow(max_threads: int | None, expected: int):
    kwargs: dict[str, Any] = {"batch_mapper_instance": flatmap_function}
    if max_threads is not None:
        kwargs["max_threads"] = max_threads
    server = bm.BatchMapAsyncServer(**kwargs)
    assert server.max_threads == expected
    assert server.kind == "batch_map" and server.batch_mapper_instance is flatmap_function
    assert server.sock_path == "unix:///var/run/numaflow/batchmap.sock"
    assert server.server_info_file == "/var/run/numaflow/mapper-server-info"
    assert server.max_message_size == 64 * 1024 * 1024 and server.shutdown_callback is None
    assert server.make_handler() is flatmap_function


def test_server_takes_an_instance_and_refuses_classes_and_non_callables():
    instance = Flatmap()
    server = bm.BatchMapAsyncServer(instance)
    assert server.make_handler() == instance.handler
    assert handler_factory(server, "batch_map") is server.make_handler
    assert callable(cloudpickle.loads(cloudpickle.dumps(server.make_handler))())
    with pytest.raises(TypeError):
        bm.BatchMapAsyncServer()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="pass an instance of the BatchMapper subclass"):
        bm.BatchMapAsyncServer(Flatmap)
    with pytest.raises(TypeError, match="expected a function or a BatchMapper instance"):
        bm.BatchMapAsyncServer(42)
    with pytest.raises(TypeError, match="expected a 'map_stream' server"):
        handler_factory(server, "map_stream")


def test_start_is_captured_for_a_pipeline_vertex():
    server = bm.BatchMapAsyncServer(Flatmap())
    with capturing_servers() as started:
        server.start()
    assert started == [server]


def test_a_pynumaflow_batch_mapper_subclass_is_taken():
    import pynumaflow.batchmapper

    from bench.udfs.spec_handlers import batch_flatmap

    theirs = batch_flatmap(pynumaflow.batchmapper)()
    assert bm.BatchMapAsyncServer(theirs).make_handler() == theirs.handler
    # Its answers are pynumaflow's BatchResponse/Message objects: read as ours are.
    out = run(handler_factory(theirs, "batch_map")(), [datum(b"a,b", "p")])
    assert [(d.value, d.id) for d in out] == [(b"a", "p-0"), (b"b", "p-1")]


# -- request ids ------------------------------------------------------------------------


@given(st.lists(st.sampled_from(["", "a", "b", "c", "x-1", "0", "1"]), min_size=1, max_size=8))
def test_request_ids_are_the_ids_when_all_set_and_distinct_else_positions(ids: list[str]):
    got = request_ids([datum(b"", i) for i in ids])
    if all(ids) and len(set(ids)) == len(ids):
        assert got == ids
    else:
        assert got == [str(i) for i in range(len(ids))]
    assert len(set(got)) == len(got) == len(ids)  # always one distinct id per request


def test_the_handler_sees_the_request_ids_and_outputs_carry_them():
    seen: list[str] = []

    async def spy(datums: AsyncIterable[bm.Datum]) -> bm.BatchResponses:
        responses = bm.BatchResponses()
        async for d in datums:
            assert isinstance(d, bm.Datum)
            seen.append(d.id)
            responses.append(bm.BatchResponse.with_msgs(d.id, [bm.Message(d.value)]))
        return responses

    out = run(spy, [datum(b"a", "x"), datum(b"b", "y")])
    assert seen == ["x", "y"] and [d.id for d in out] == ["x-0", "y-0"]
    seen.clear()
    out = run(spy, [datum(b"a", "x"), datum(b"b", "x"), datum(b"c", "")])
    assert seen == ["0", "1", "2"] and [d.id for d in out] == ["0-0", "1-0", "2-0"]


# -- answers: every id exactly once ---------------------------------------------------------


def test_a_missing_id_fails_the_step_naming_it():
    def skip_second(datums: list[bm.Datum]) -> Any:
        return bm.BatchResponses(*[bm.BatchResponse.from_id(d.id) for d in datums if d.id != "b"])

    with pytest.raises(RemoteStepFailure) as info:
        run(answering(skip_second), [datum(b"1", "a"), datum(b"2", "b")], step="split")
    text = str(info.value)
    assert "step 'split'" in text and "no response for request id 'b'" in text
    assert "1 of the batch's 2 requests unanswered" in text


def test_an_id_not_in_the_batch_fails_the_step_naming_it():
    def stranger(datums: list[bm.Datum]) -> Any:
        return bm.BatchResponses(*[bm.BatchResponse.from_id(d.id) for d in datums]).items() + [
            bm.BatchResponse.from_id("zz")
        ]

    with pytest.raises(RemoteStepFailure) as info:
        run(answering(stranger), [datum(b"1", "a")], step="split")
    text = str(info.value)
    assert "step 'split'" in text and "answered request id 'zz', which is not in the batch" in text


def test_an_id_answered_twice_fails_the_step_naming_it():
    def twice(datums: list[bm.Datum]) -> Any:
        return bm.BatchResponses(*[bm.BatchResponse.from_id(d.id) for d in datums * 2])

    with pytest.raises(RemoteStepFailure) as info:
        run(answering(twice), [datum(b"1", "a"), datum(b"2", "b")], step="split")
    text = str(info.value)
    assert "step 'split'" in text and "answered request id 'a' twice" in text


def test_a_batch_failing_its_check_stops_before_the_next_batch():
    calls: list[int] = []

    def first_fails(datums: list[bm.Datum]) -> Any:
        calls.append(len(datums))
        return bm.BatchResponses()

    with pytest.raises(RemoteStepFailure, match="no response for request id"):
        run(answering(first_fails), [datum(b"v") for _ in range(5)], batch_size=2)
    assert calls == [2]


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        (lambda datums: None, "must return BatchResponses; it returned NoneType"),
        (lambda datums: 42, "must return BatchResponses; it returned int"),
        (lambda datums: [d.id for d in datums], "must return BatchResponse objects"),
        (
            lambda datums: [bm.BatchResponse.with_msgs(d.id, ["text"]) for d in datums],
            "messages must be Message objects",
        ),
    ],
)
def test_answers_that_are_not_responses_fail_the_step(answer: Any, text: str):
    with pytest.raises(RemoteStepFailure, match=text):
        run(answering(answer), [datum(b"1", "a")])


def test_outputs_follow_the_requests_order_not_the_responses():
    def backwards(datums: list[bm.Datum]) -> Any:
        return [bm.BatchResponse.with_msgs(d.id, [bm.Message(d.value)]) for d in datums[::-1]]

    out = run(answering(backwards), [datum(str(i).encode(), f"i{i}") for i in range(5)])
    assert [d.value for d in out] == [b"0", b"1", b"2", b"3", b"4"]


def test_dropped_messages_are_removed_and_their_index_counts():
    def drop_empty(datums: list[bm.Datum]) -> Any:
        return [
            bm.BatchResponse.with_msgs(
                d.id,
                [
                    bm.Message(p, keys=["w"]) if p else bm.Message.to_drop()
                    for p in d.value.split(b",")
                ],
            )
            for d in datums
        ]

    out = run(answering(drop_empty), [datum(b"x,,y,", "p")])
    assert [(d.value, d.id) for d in out] == [(b"x", "p-0"), (b"y", "p-2")]
    assert all(d.keys == ["w"] and DROP not in d.tags for d in out)
    # A response with no messages answers its request with nothing.
    assert (
        run(answering(lambda ds: [bm.BatchResponse.from_id(d.id) for d in ds]), [datum(b"a")]) == []
    )


def test_outputs_inherit_the_requests_times_and_headers():
    parent = datum(b"a,b", "p", seconds=5, keys=["k"], headers={"h": "1"})
    out = run(Flatmap().handler, [parent, datum(b"c", "q", seconds=6)])
    assert [(d.value, d.id, d.event_time, d.watermark) for d in out] == [
        (b"a", "p-0", at(5), at(4)),
        (b"b", "p-1", at(5), at(4)),
        (b"c", "q-0", at(6), at(5)),
    ]
    assert out[0].headers == {"h": "1"} and out[0].keys == []  # the example sets no keys
    assert all(type(d) is Datum for d in out)


# -- user code --------------------------------------------------------------------------


def test_a_user_exception_fails_the_step_with_its_type_and_the_batch():
    async def boom(datums: AsyncIterable[bm.Datum]) -> Any:
        async for d in datums:
            if d.value == b"bad":
                raise ZeroDivisionError("bad datum")
        return []

    with pytest.raises(RemoteStepFailure) as info:
        run(boom, [datum(b"ok", "a"), datum(b"bad", "b")], step="div")
    text = str(info.value)
    assert "step 'div'" in text and "ZeroDivisionError: bad datum" in text
    assert "batch of 2 datums (request ids 'a', 'b')" in text


def test_a_handler_that_awaits_and_a_plain_function_both_work():
    async def slow(datums: AsyncIterable[bm.Datum]) -> Any:
        out = []
        async for d in datums:
            await asyncio.sleep(0.001)
            out.append(bm.BatchResponse.with_msgs(d.id, [bm.Message(d.value * 2)]))
        return out

    assert [d.value for d in run(slow, [datum(b"a"), datum(b"b")])] == [b"aa", b"bb"]

    def sync(datums: Any) -> Any:  # not pynumaflow's (it needs async def); taken anyway
        return [bm.BatchResponse.from_id("0")]

    assert run(sync, [datum(b"a")]) == []


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 40), batch_size=st.integers(1, 12))
def test_batches_hold_at_most_batch_size_datums_in_order(n: int, batch_size: int):
    sizes: list[int] = []

    def record(datums: list[bm.Datum]) -> Any:
        sizes.append(len(datums))
        return [bm.BatchResponse.with_msgs(d.id, [bm.Message(d.value)]) for d in datums]

    datums = [datum(str(i).encode(), f"d{i}") for i in range(n)]
    out = run(answering(record), datums, batch_size=batch_size)
    full, rest = divmod(n, batch_size)
    assert sizes == [batch_size] * full + ([rest] if rest else [])
    assert [d.value for d in out] == [str(i).encode() for i in range(n)]


def test_the_runner_takes_datum_items_builds_its_handler_once_and_pickles_without_it():
    built: list[int] = []

    def factory() -> Any:
        built.append(1)
        return Flatmap().handler

    runner = BatchMapRunner("split", factory, 2)
    out = runner.run_chunk([datum(b"a,b", "p"), ("k", b"c"), b"d"])  # plain items convert
    assert [d.value for d in out] == [b"a", b"b", b"c", b"d"]
    assert [d.keys for d in out] == [[]] * 4
    runner.run_chunk([datum(b"x")])
    assert built == [1]
    assert cloudpickle.loads(cloudpickle.dumps(runner))._handler is None  # as Spark ships it
    with pytest.raises(RemoteStepFailure, match="to_datums"):
        runner.run_chunk([datum(b"a"), 7])


# -- the flow API and the pipeline vertex -----------------------------------------------------


def test_stream_batch_map_records_a_chunk_step():
    assert OPERATORS["batch_map"].applies == "chunk"
    flow = Dataflow()
    out: list = []
    stream = flow.input("inp", TestingInput([b"a,b"])).to_datums()
    stream.batch_map("split", Flatmap(), batch_size=7).output("out", TestingOutput(out))
    step = next(s for s in build_plan(flow).steps if s.kind == "batch_map")
    assert (step.step_id, step.args) == ("split", {"batch_size": 7})
    runner = BUILT_STEPS["batch_map"](step)
    assert isinstance(runner, BatchMapRunner) and runner.batch_size == 7


def test_dataflow_batch_map_method_and_checks():
    flow = Dataflow()
    flow.input("inp", TestingInput([b"a"]))
    flow.batch_map("split", bm.BatchMapAsyncServer(flatmap_function))
    flow.output("out", TestingOutput([]))
    step = next(s for s in build_plan(flow).steps if s.kind == "batch_map")
    assert step.args == {"batch_size": 500}
    stream = Dataflow().input("inp", TestingInput([b"a"]))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="batch_size must be a positive int"):
            stream.batch_map("s", flatmap_function, batch_size=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="step_id must be a non-empty str"):
        stream.batch_map("", flatmap_function)
    with pytest.raises(TypeError, match="expected a 'batch_map' server"):
        stream.batch_map("s", MapStreamAsyncServer(flatmap_function))
    for batch_udf in (Flatmap(), bm.BatchMapAsyncServer(Flatmap())):
        with pytest.raises(TypeError, match="is a batch map UDF; run it with stream.batch_map"):
            stream.map_stream("s", batch_udf)


PIPELINE = """
apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: batches
spec:
  {spec_limits}
  vertices:
    - name: in
      source:
        generator: {{rpu: 5, duration: 1s}}
    - name: flat
      udf:
        container: {{image: my/batch-map:v1}}
      {vertex_limits}
    - name: out
      sink: {{log: {{}}}}
  edges:
    - {{from: in, to: flat}}
    - {{from: flat, to: out}}
"""


@pytest.mark.parametrize(
    ("spec_limits", "vertex_limits", "expected"),
    [
        ("", "", 500),
        ("limits: {readBatchSize: 50}", "", 50),
        ("limits: {readBatchSize: 50}", "limits: {readBatchSize: 7}", 7),
    ],
)
def test_a_map_vertex_whose_script_starts_a_batch_map_server_runs_batch_map(
    spec_limits: str, vertex_limits: str, expected: int
):
    text = PIPELINE.format(spec_limits=spec_limits, vertex_limits=vertex_limits)
    flow = load(text, udfs={"flat": str(EXAMPLE)})
    [step] = [s for s in build_plan(flow).steps if s.step_id == "flat"]
    assert (step.kind, step.args) == ("batch_map", {"batch_size": expected})
    # A BatchMapper instance given from Python is a batch map too; a map stream is not.
    flow = load(text, udfs={"flat": Flatmap()})
    assert [s.kind for s in build_plan(flow).steps if s.step_id == "flat"] == ["batch_map"]
    flow = load(text, udfs={"flat": MapStreamAsyncServer(flatmap_function)})
    assert [s.kind for s in build_plan(flow).steps if s.step_id == "flat"] == ["map_stream"]


def test_a_batch_map_server_is_refused_by_a_reduce_vertex():
    group_by = (
        "\n        groupBy:\n          window: {fixed: {length: 60s}}"
        "\n          storage: {emptyDir: {}}"
    )
    text = PIPELINE.format(spec_limits="", vertex_limits="").replace(
        "container: {image: my/batch-map:v1}", "container: {image: my/batch-map:v1}" + group_by
    )
    with pytest.raises(
        ValueError, match="needs a reduce or reduce_stream UDF; its UDF is a batch_map"
    ):
        load(text, udfs={"flat": bm.BatchMapAsyncServer(flatmap_function)})
