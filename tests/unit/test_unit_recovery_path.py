"""A recovery directory is a local path or a filesystem URI; one that is unknown or
cannot be reached fails before Spark starts (``hdfs://`` used to become a local
folder named ``hdfs:``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowspark.cli import main
from flowspark.engine.query import check_recovery_storage, recovery_location
from flowspark.pipeline import PipelineSpecError, load

FLOW = (
    "from flowspark.dataflow import Dataflow\n"
    "from flowspark.testing import TestingInput, TestingOutput\n"
    "flow = Dataflow()\n"
    "flow.input('inp', TestingInput([1]))\n"
    "flow.output('out', TestingOutput([]))\n"
)


def test_paths_and_file_uris_are_local_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert recovery_location("rec").local_path == tmp_path / "rec"
    assert recovery_location(f"file://{tmp_path}/rec").local_path == tmp_path / "rec"
    assert recovery_location("file://localhost/var/rec").local_path == Path("/var/rec")


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("ftp://host/ckpt", "ftp://host/ckpt: no filesystem for ftp:// (flowspark reads"),
        ("hdfs://namenode:8020/ckpt", "hdfs://namenode:8020: pyarrow cannot open this"),
        ("s3a://bucket/ckpt", "s3a://bucket/ckpt: cannot reach it: "),
    ],
)
def test_unknown_or_unreachable_filesystems_fail_before_spark_starts(
    uri, reason, tmp_path, monkeypatch, capsys
):
    """An unknown scheme, a filesystem pyarrow cannot open here (HDFS without its
    client) and an S3 endpoint that refuses connections: one line, exit 2, nothing
    created (it used to become a local folder named ``hdfs:``)."""
    monkeypatch.setattr("flowspark.engine.query.session_master", lambda: None)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "flowspark")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "flowspark")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.py").write_text(FLOW)
    assert main(["flow.py:flow", "-r", uri]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("flowspark: ValueError: recovery directory"), err
    assert reason in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flow.py"]


def test_a_remote_recovery_directory_needs_no_shared_flag():
    """A URI is storage every worker reaches: no --shared-recovery needed (only
    reachability is checked, here a bucket that does not exist yet is fine)."""
    where = check_recovery_storage("file:///r", "local[2]")
    assert where.is_local and where.path == "/r"
    assert recovery_location("s3a://bucket/ckpt").for_spark() == "s3a://bucket/ckpt"
    assert recovery_location("/tmp/x").for_spark() == "/tmp/x"


def test_an_http_source_refuses_a_remote_recovery_directory():
    """Its journal needs appends, fsync and locks on this machine: refused when the
    pipeline is built, before anything listens or runs."""
    spec = Path(__file__).parents[1] / "data" / "numaflow" / "2-http-pipeline.yaml"
    with pytest.raises(PipelineSpecError, match="journals events on this machine's disk"):
        load(str(spec), state_dir="s3a://bucket/rec/numaflow-http")


def test_a_local_path_on_a_cluster_needs_to_be_declared_shared():
    assert check_recovery_storage("/r", "local[1]").local_path == Path("/r")
    where = check_recovery_storage("file:///r", "spark://h:7077", shared=True)
    assert where.local_path == Path("/r")
    with pytest.raises(ValueError, match="put it on storage that every worker mounts"):
        check_recovery_storage("/r", "spark://h:7077")


def test_a_local_recovery_path_on_a_cluster_fails_before_spark_starts(
    tmp_path, monkeypatch, capsys
):
    """No executor would see the driver's folder: refused in one line (exit 2), with
    no Spark started and nothing created, unless declared shared."""
    # As in a fresh process: no session running yet (a run joins a running one).
    monkeypatch.setattr("flowspark.engine.query.session_master", lambda: None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.py").write_text(FLOW)
    args = ["flow.py:flow", "-r", "rec", "--master", "spark://127.0.0.1:9"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "flowspark: ValueError: recovery directory 'rec' is a path on this machine, but the "
        "run goes to spark://127.0.0.1:9"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flow.py"]
