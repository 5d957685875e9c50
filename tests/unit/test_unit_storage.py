"""The storage layer (``flowspark.runtime.storage``): local paths and filesystem URIs,
and the parts of flowspark that go through it (file inputs, sink snapshots, the
recovery directory check), against local files and a real S3-compatible server
(moto's ``moto_server`` on loopback)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowspark.connectors.files import CSVInput, DirInput, DirOutput, FileInput, FileOutput
from flowspark.engine.query import check_recovery_storage
from flowspark.engine.sink import _PartitionedWriter
from flowspark.runtime.storage import Location, StorageError, read_bytes, write_bytes_atomic
from tests.s3_server import S3Server


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with S3Server(tmp_path_factory.mktemp("moto")) as server:
        server.make_bucket("flows")
        yield server


def read_all(inp, part, pieces=1):
    end = inp.end_offset(part)
    return [x for s in inp.splits(part, 0, end, pieces) for b in s.read() for x in b]


# -- locations ----------------------------------------------------------------------


def test_plain_paths_and_file_uris_are_local(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Location.parse("rec").local_path == tmp_path / "rec"
    assert Location.parse(f"file://{tmp_path}/rec").local_path == tmp_path / "rec"
    assert Location.parse("file://localhost/var/rec").path == "/var/rec"
    with pytest.raises(StorageError, match="names a path on this machine"):
        Location.parse("file://otherhost/var/rec")


@pytest.mark.parametrize(
    ("uri", "scheme", "path"),
    [
        ("s3a://bucket/a/b/", "s3a", "bucket/a/b"),
        ("s3://bucket", "s3", "bucket"),
        ("gs://bucket/x", "gs", "bucket/x"),
        ("hdfs://nn:8020/ckpt", "hdfs", "/ckpt"),
        ("abfs://container@account.dfs.core.windows.net/dir", "abfs", "/dir"),
    ],
)
def test_remote_uris_keep_their_scheme_and_give_the_filesystem_path(uri, scheme, path):
    where = Location.parse(uri)
    assert (where.scheme, where.path, where.is_local) == (scheme, path, False)
    assert where.for_spark() == uri.rstrip("/")


def test_unknown_schemes_and_bucketless_uris_are_refused():
    with pytest.raises(StorageError, match="no filesystem for ftp://"):
        Location.parse("ftp://host/x")
    with pytest.raises(StorageError, match="no bucket"):
        Location.parse("s3a:///x")


def test_children_keep_the_query_and_the_spec_round_trips():
    where = Location.parse("s3a://k:s@bucket/dir?endpoint_override=h:1&scheme=http")
    child = where.child("sub", "f.txt")
    assert child.path == "bucket/dir/sub/f.txt"
    assert Location.parse(child.spec) == child
    assert dict(child.options) == {"endpoint_override": "h:1", "scheme": "http"}
    assert "k:s" not in child.shown and child.shown.startswith("s3a://***@bucket/")


def test_local_atomic_write_replaces_and_leaves_no_temporary(tmp_path):
    where = Location.parse(tmp_path / "d" / "state.bin")
    assert read_bytes(where) is None
    write_bytes_atomic(where, b"one")
    write_bytes_atomic(where, b"two")
    assert read_bytes(where) == b"two"
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["state.bin"]


# -- the same operations on S3 -------------------------------------------------------


def test_s3_write_read_size_list_and_seek(s3):
    root = Location.parse(s3.uri("flows", "basics"))
    write_bytes_atomic(root.child("a.txt"), b"one\ntwo\n")
    write_bytes_atomic(root.child("sub", "b.txt"), b"x\n")
    assert read_bytes(root.child("a.txt")) == b"one\ntwo\n"
    assert read_bytes(root.child("missing")) is None
    assert root.child("a.txt").size() == 8
    assert root.is_dir() and root.child("a.txt").is_file()
    assert root.files() == ["a.txt"]
    assert root.files("**/*.txt") == ["a.txt", "sub/b.txt"]
    assert root.files("sub/*") == ["sub/b.txt"]
    with root.child("a.txt").open_read() as f:
        f.seek(4)
        assert f.readline() == b"two\n"


def test_a_bucket_that_does_not_exist_is_reported_not_created(s3):
    where = Location.parse(s3.uri("no-such-bucket", "x"))
    assert not where.exists()
    with pytest.raises(StorageError, match="cannot write it"):
        write_bytes_atomic(where, b"x")


def test_listing_agrees_with_a_local_directory(s3, tmp_path):
    names = ["a.txt", "b.log", "sub/c.txt", "sub/deeper/d.txt", "e"]
    remote = Location.parse(s3.uri("flows", "listing"))
    for name in names:
        write_bytes_atomic(remote.child(name), name.encode())
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(name.encode())
    local = Location.parse(tmp_path)
    for pattern in ["*", "*.txt", "**/*.txt", "sub/*", "**/*", "nothing*"]:
        assert remote.files(pattern) == local.files(pattern), pattern


# -- file inputs read through the layer ----------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    lines=st.lists(st.text(alphabet="ab \r\té", max_size=12), max_size=30),
    trailing=st.booleans(),
    pieces=st.integers(1, 4),
)
def test_file_input_reads_the_same_lines_from_s3_as_from_a_local_file(
    s3, tmp_path_factory, lines, trailing, pieces
):
    content = "\n".join(lines) + ("\n" if trailing and lines else "")
    data = content.encode("utf-8")
    local = tmp_path_factory.mktemp("lines") / "f.txt"
    local.write_bytes(data)
    remote = Location.parse(s3.uri("flows", f"lines/{abs(hash(content))}.txt"))
    write_bytes_atomic(remote, data)
    expected = read_all(FileInput(local, batch_size=3), str(local), pieces)
    inp = FileInput(remote.spec, batch_size=3)
    [part] = inp.list_parts()
    assert read_all(inp, part, pieces) == expected
    assert inp.end_offset(part) == len(data)
    assert inp.offset_after(part, 0, len(data), 1) == FileInput(local, 3).offset_after(
        str(local), 0, len(data), 1
    )


def test_dir_and_csv_inputs_on_s3(s3):
    root = Location.parse(s3.uri("flows", "logs"))
    write_bytes_atomic(root.child("1.txt"), b"a\nb\n")
    write_bytes_atomic(root.child("2.txt"), b"c\n")
    write_bytes_atomic(root.child("skip.csv"), b"x,y\n1,2\n3,4\n")
    inp = DirInput(root.spec, glob_pat="*.txt")
    parts = inp.list_parts()
    assert parts == ["1.txt", "2.txt"]
    assert [read_all(inp, p) for p in parts] == [["a", "b"], ["c"]]
    csv_inp = CSVInput(root.child("skip.csv").spec)
    [part] = csv_inp.list_parts()
    assert read_all(csv_inp, part) == [{"x": "1", "y": "2"}, {"x": "3", "y": "4"}]


def test_missing_remote_inputs_fail_when_listed(s3):
    with pytest.raises(ValueError, match="does not exist"):
        DirInput(s3.uri("flows", "nothing-here")).list_parts()
    with pytest.raises(ValueError, match="does not exist or is not a file"):
        FileInput(s3.uri("flows", "nothing.txt")).list_parts()


def test_file_outputs_refuse_storage_that_cannot_truncate():
    with pytest.raises(ValueError, match="FileOutput: s3a://bucket/out.txt: file outputs"):
        FileOutput("s3a://bucket/out.txt")
    assert FileOutput("file:///tmp/out.txt").path == Path("/tmp/out.txt")


def _segments(folder: Location) -> dict[str, str]:
    return {name: read_bytes(folder.child(name)).decode() for name in folder.files("*")}


def test_a_dir_output_on_an_object_store_writes_each_part_once_per_write(s3, tmp_path):
    """Each write of a part is one object, named by the part's count of writes; a
    replayed batch (resumed from the count before it) removes what its interrupted
    attempt wrote and writes the same names again."""
    out = DirOutput(s3.uri("flows", "dir-out"), 2, assign_file=int)
    state = tmp_path / "out.pickle"
    writer = _PartitionedWriter(out, state)
    for batch in range(3):
        writer.begin(batch)
        writer.write([(str(batch % 2), f"b{batch}-x"), (str(batch % 2), f"b{batch}-y")])
        writer.commit(batch)
    writer.begin(3)
    writer.write([("1", "lost-a"), ("0", "lost-b"), ("1", "lost-c")])  # not committed
    writer.close()
    root = Location.parse(s3.uri("flows", "dir-out"))
    assert _segments(root.child("part_1")) == {
        "000000000000": "b1-x\nb1-y\n",
        "000000000001": "lost-a\nlost-c\n",
    }
    writer = _PartitionedWriter(out, state)  # a restart replays batch 3
    writer.begin(3)
    writer.write([("0", "b3")])
    writer.commit(3)
    writer.close()
    assert _segments(root.child("part_0")) == {
        "000000000000": "b0-x\nb0-y\n",
        "000000000001": "b2-x\nb2-y\n",
        "000000000002": "b3\n",
    }
    assert _segments(root.child("part_1")) == {"000000000000": "b1-x\nb1-y\n"}


def test_a_dir_output_folder_cut_after_the_run_wrote_it_fails_naming_it(s3, tmp_path):
    out = DirOutput(s3.uri("flows", "cut-out"), 1)
    state = tmp_path / "out.pickle"
    writer = _PartitionedWriter(out, state)
    for batch in range(2):
        writer.begin(batch)
        writer.write([("k", f"v{batch}")])
        writer.commit(batch)
    writer.close()
    Location.parse(s3.uri("flows", "cut-out/part_0/000000000000")).delete_file()
    writer = _PartitionedWriter(out, state)
    with pytest.raises(ValueError, match="cut-out/part_0 holds 1 objects, but the recovery"):
        writer.begin(2)


# -- sink snapshots and the recovery directory ----------------------------------------


def test_sink_snapshots_live_in_a_remote_recovery_directory(s3, tmp_path):
    """A partitioned output's generations are saved on S3 and a restarted writer
    resumes from them: a replay of the last batch rewinds to the one before."""
    out = tmp_path / "out.txt"
    state = Location.parse(s3.uri("flows", "rec/flowspark-sinks/out.pickle"))
    writer = _PartitionedWriter(FileOutput(out), state)
    for batch in range(3):
        writer.begin(batch)
        writer.write([f"b{batch}"])
        writer.commit(batch)
    writer.close()
    saved = pickle.loads(read_bytes(state))
    assert saved["last"][0] == 2 and saved["prev"][0] == 1
    writer = _PartitionedWriter(FileOutput(out), state)  # a restart replays batch 2
    writer.begin(2)
    writer.write(["b2"])
    writer.commit(2)
    writer.close()
    assert out.read_text() == "b0\nb1\nb2\n"


def test_a_remote_recovery_directory_is_checked_and_needs_no_shared_flag(s3):
    rec = s3.uri("flows", "rec-check")
    assert check_recovery_storage(rec, "spark://h:7077").scheme == "s3a"
    write_bytes_atomic(Location.parse(s3.uri("flows", "a-file")), b"x")
    with pytest.raises(ValueError, match="a file is there, not a directory"):
        check_recovery_storage(s3.uri("flows", "a-file"), "local[2]")
    with pytest.raises(ValueError, match="bucket 'no-bucket' does not exist"):
        check_recovery_storage(s3.uri("no-bucket", "rec"), "local[2]")
