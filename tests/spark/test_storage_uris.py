"""Storage by URI on local Spark: file inputs that the executors open on S3 (a real
S3-compatible server on loopback), a directory output there written by the parts'
tasks, a recovery directory given as a ``file://`` URI, and a recovery URI that
Spark's JVM cannot write, refused before the query."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from flowspark.connectors.files import DirInput, DirOutput, FileInput
from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, run_flow
from flowspark.runtime.storage import Location, read_bytes, write_bytes_atomic
from flowspark.testing import TestingInput, TestingOutput
from tests.s3_server import S3Server


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with S3Server(tmp_path_factory.mktemp("moto")) as server:
        server.make_bucket("data")
        yield server


def test_executors_read_s3_files_in_several_parts_and_micro_batches(s3, tmp_path: Path):
    """3 files (one larger than a micro-batch's share) read by the executors through
    pyarrow; the words equal those of the same files read from a local directory."""
    root = Location.parse(s3.uri("data", "words"))
    local = tmp_path / "words"
    local.mkdir()
    contents = {}
    for i, count in enumerate([5, 2000, 1]):
        data = "".join(f"w{i}_{k % 7} x{k % 3}\n" for k in range(count)).encode()
        write_bytes_atomic(root.child(f"part-{i}.txt"), data)
        (local / f"part-{i}.txt").write_bytes(data)
        contents[i] = data.decode()

    def words(inp, **config) -> Counter:
        flow = Dataflow()
        out: list = []
        flow.input("inp", inp).flat_map(str.split).output("out", TestingOutput(out))
        run_flow(flow, RunConfig(**config))
        return Counter(out)

    expected = words(DirInput(local, "*.txt"))
    assert sum(expected.values()) == 2 * 2006
    # Streamed, with a (local) recovery directory, at most 500 lines a micro-batch.
    streamed = dict(recovery_dir=str(tmp_path / "rec"), bounded=True, max_batch_items=500)
    assert words(DirInput(root.spec, "*.txt"), **streamed) == expected
    one_file = FileInput(root.child("part-1.txt").spec, batch_size=100)
    assert words(one_file) == Counter(contents[1].split())  # as one batch job


@pytest.mark.parametrize("writes_on", ["driver", "executors"])
def test_a_dir_output_on_s3_holds_each_parts_lines_once_in_order(s3, tmp_path, writes_on):
    """A part on S3 is a folder of objects, one per micro-batch that wrote to it: read
    in name order, each holds its keys' lines as the local directory's file does."""
    items = [(f"k{i % 5}", f"line{i}") for i in range(400)]

    def run(where: str, recovery: Path) -> None:
        flow = Dataflow()
        flow.input("inp", TestingInput(items, batch_size=30))
        flow.output("out", DirOutput(where, 2, writes_on=writes_on))  # type: ignore[arg-type]
        run_flow(flow, RunConfig(recovery_dir=str(recovery), max_batch_items=90))

    root = Location.parse(s3.uri("data", f"out-{writes_on}"))
    run(root.spec, tmp_path / "rec")
    run(str(tmp_path / "local"), tmp_path / "rec-local")
    for part in ("part_0", "part_1"):
        names = root.child(part).files("*")
        assert len(names) > 1  # several micro-batches wrote to it
        on_s3 = b"".join(read_bytes(root.child(part, name)) or b"" for name in names)
        assert on_s3.decode() == (tmp_path / "local" / part).read_text()


def test_a_file_uri_recovery_directory_resumes_without_duplicates(tmp_path: Path):
    src = tmp_path / "in.txt"
    src.write_text("a\nb\n")
    rec = f"file://{tmp_path}/rec"

    def run() -> list:
        flow = Dataflow()
        out: list = []
        flow.input("inp", FileInput(src)).output("out", TestingOutput(out))
        run_flow(flow, RunConfig(recovery_dir=rec, bounded=True))
        return out

    assert run() == ["a", "b"]
    with open(src, "a") as f:
        f.write("c\n")
    assert run() == ["c"]  # the checkpoint was found through the URI
    assert (tmp_path / "rec" / "offsets").is_dir()
    assert not (tmp_path / "file:").exists()


def test_a_recovery_uri_spark_cannot_write_fails_before_the_query(s3, tmp_path: Path):
    """pyarrow reaches the bucket, but this Spark has no Hadoop filesystem for s3a://
    (no hadoop-aws jar): one line naming the fix, and nothing written there."""
    rec = Location.parse(s3.uri("data", "rec"))
    flow = Dataflow()
    flow.input("inp", FileInput(Path(__file__))).output("out", TestingOutput([]))
    with pytest.raises(ValueError) as caught:
        run_flow(flow, RunConfig(recovery_dir=rec.spec, bounded=True))
    message = str(caught.value)
    assert message.count("\n") == 0, message
    assert "Spark cannot write its checkpoint there" in message
    assert "hadoop-aws" in message
    assert rec.files("**/*") == []
