"""User-defined sources without Spark: pynumaflow's types, the read -> datum path, the
offsets kept until a commit and acked then, pending, errors, the pipeline spec."""

from __future__ import annotations

import inspect
import pickle
from datetime import datetime, timedelta
from pathlib import Path

import cloudpickle
import pynumaflow.sourcer as pnf
import pytest

import flowspark.sourcer as fs
from flowspark.connectors.numaflow import SourcerInput, UdSourceError
from flowspark.pipeline import load
from flowspark.pipeline.errors import PipelineSpecError
from flowspark.pipeline.udfs import server_from_script
from flowspark.runtime.input_offsets import InputSpec
from flowspark.runtime.polling import DriverReadOffsets
from flowspark.shared.asynciter import NonBlockingIterator
from tests.pynumaflow_servers import parameter_names, server_settings

UDFS = Path(__file__).resolve().parents[2] / "examples" / "numaflow" / "udfs"


class Counting(fs.Sourcer):
    """Reads forward from 0; remembers what it was asked to ack."""

    def __init__(self, fail: str = "") -> None:
        self.next = 0
        self.acked: list[list[tuple[bytes, int]]] = []
        self.requests: list[tuple[int, int]] = []
        self.fail = fail

    async def read_handler(self, datum: fs.ReadRequest, output: NonBlockingIterator) -> None:
        self.requests.append((datum.num_records, datum.timeout_in_ms))
        if self.fail == "read":
            raise RuntimeError("boom")
        for _ in range(datum.num_records):
            offset = fs.Offset(str(self.next).encode(), 3)
            await output.put(fs.Message(b"v%d" % self.next, offset, datetime(2024, 1, 1)))
            self.next += 1

    async def ack_handler(self, ack_request: fs.AckRequest) -> None:
        if self.fail == "ack":
            raise KeyError(7)
        self.acked.append([(o.offset, o.partition_id) for o in ack_request.offsets])

    async def nack_handler(self, nack_request: fs.NackRequest) -> None:
        raise AssertionError("flowspark never nacks")

    async def pending_handler(self) -> fs.PendingResponse:
        return fs.PendingResponse(count=-1 if self.fail == "pending" else 42)

    async def active_partitions_handler(self) -> fs.PartitionsResponse:
        return fs.PartitionsResponse(partitions=[3])


def test_the_face_exports_pynumaflows_names_and_types_behave_alike():
    assert sorted(fs.__all__) == sorted(pnf.__all__)
    with pytest.raises(TypeError, match="Wrong data type: <class 'str'> for ReadRequest"):
        fs.ReadRequest(num_records="1", timeout_in_ms=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="for Pending.count"):
        fs.PendingResponse(count=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="for Partition.partitions"):
        fs.PartitionsResponse(partitions=(1,))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be bytes"):
        fs.Message("x", fs.Offset(b"1", 0), datetime(2024, 1, 1))  # type: ignore[arg-type]
    assert fs.get_default_partitions() == pnf.get_default_partitions()
    server = fs.SourceAsyncServer(Counting())
    assert server.sock_path == "unix:///var/run/numaflow/source.sock"
    assert server.kind == "source"
    their_parameters = list(inspect.signature(pnf.SourceAsyncServer).parameters)
    assert parameter_names(fs.SourceAsyncServer) == their_parameters
    assert server_settings(server) == server_settings(pnf.SourceAsyncServer(Counting()))


def test_a_read_becomes_datums_and_its_offsets_are_acked_once_committed():
    source = Counting()
    inp = SourcerInput(source, "in", read_batch_size=2, read_timeout=timedelta(seconds=2))
    part = inp.build_part("in", None)
    first = part.next_batch()
    assert [(d.value, d.id, d.keys) for d in first] == [
        (b"v0", "MA==-3", []),
        (b"v1", "MQ==-3", []),
    ]
    assert source.requests == [(2, 2000)]
    second = part.next_batch()
    assert part.snapshot() == 2 and len(second) == 2
    assert part.pending() == 42
    part.committed(1)
    assert source.acked == [[(b"0", 3), (b"1", 3)]]
    part.committed(1)  # again: nothing more
    part.committed(2)
    assert source.acked == [[(b"0", 3), (b"1", 3)], [(b"2", 3), (b"3", 3)]]


def test_the_poller_acks_a_batch_when_spark_plans_the_next_one():
    # The input as Spark's planning process sees it: pickled, read by DriverReadOffsets.
    inp = pickle.loads(cloudpickle.dumps(SourcerInput(Counting(), "in", read_batch_size=2)))
    spec = InputSpec(inp, 0, "in", b"")
    offsets = DriverReadOffsets(spec, per_batch_epochs=True, until_end=False)
    first = offsets.latest({}, 100)
    assert first["parts"]["in"]["n"] == 1
    assert inp.runner().sourcer.acked == []
    assert offsets.backlog(first) == 42
    offsets.latest(first, 100)  # Spark plans the next batch: the first one is committed
    assert inp.runner().sourcer.acked == [[(b"0", 3), (b"1", 3)]]


def test_handler_failures_are_one_line_errors_naming_the_vertex():
    part = SourcerInput(Counting(fail="read"), "in").build_part("in", None)
    with pytest.raises(UdSourceError) as err:
        part.next_batch()
    assert str(err.value) == 'user-defined source "in": read_handler failed: RuntimeError: boom'
    part = SourcerInput(Counting(fail="ack"), "in", read_batch_size=1).build_part("in", None)
    part.next_batch()
    with pytest.raises(UdSourceError, match='"in": ack_handler failed: KeyError: 7'):
        part.committed(1)
    assert SourcerInput(Counting(fail="pending"), "in").build_part("in", None).pending() is None


def test_bad_sourcers_and_messages_are_refused():
    with pytest.raises(TypeError, match="not the class"):
        SourcerInput(Counting, "in")
    with pytest.raises(TypeError, match="expected a Sourcer instance"):
        SourcerInput(object(), "in")

    class EmptyOffset(Counting):
        async def read_handler(self, datum, output):
            await output.put(fs.Message(b"x", fs.Offset(b"", 0), datetime(2024, 1, 1)))

    with pytest.raises(UdSourceError, match="empty or non-bytes offset"):
        SourcerInput(EmptyOffset(), "in").build_part("in", None).next_batch()


def test_a_pynumaflow_sourcer_is_accepted():
    class Native(pnf.Sourcer):
        async def read_handler(self, datum, output):
            await output.put(pnf.Message(b"p", pnf.Offset(b"9", 0), datetime(2024, 1, 1)))

        async def ack_handler(self, ack_request):
            pass

        async def nack_handler(self, nack_request):
            pass

        async def pending_handler(self):
            return pnf.PendingResponse(count=0)

        async def active_partitions_handler(self):
            return pnf.PartitionsResponse(partitions=[0])

    part = SourcerInput(Native(), "in").build_part("in", None)
    assert [d.id for d in part.next_batch()] == ["OQ==-0"]


def test_the_example_yaml_loads_with_its_script_as_the_udsource():
    assert server_from_script(UDFS / "simple_source.py", "in").kind == "source"
    flow = load(UDFS / "simple_source.yaml", udfs={"in": str(UDFS / "simple_source.py")})
    source = next(s for s in flow.steps if s.step_id == "in")
    inp = next(a for a in source.args.values() if isinstance(a, SourcerInput))
    assert (inp.vertex, inp.read_batch_size, inp.read_timeout) == ("in", 2, timedelta(seconds=1))


def test_a_udsource_vertex_needs_a_source_script():
    with pytest.raises(PipelineSpecError, match="--udf in=path/to/udf.py"):
        load(UDFS / "simple_source.yaml")
    with pytest.raises(PipelineSpecError, match='vertex "in" needs a source UDF'):
        load(UDFS / "simple_source.yaml", udfs={"in": str(UDFS / "batchmap_flatmap.py")})
