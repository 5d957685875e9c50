"""A recovery directory is a local path or a ``file://`` URI; any other filesystem's
URI fails before Spark starts (it used to become a local folder named ``hdfs:``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowspark.cli import main
from flowspark.engine.query import check_recovery_storage, recovery_path

FLOW = (
    "from flowspark.dataflow import Dataflow\n"
    "from flowspark.testing import TestingInput, TestingOutput\n"
    "flow = Dataflow()\n"
    "flow.input('inp', TestingInput([1]))\n"
    "flow.output('out', TestingOutput([]))\n"
)


def test_paths_and_file_uris_are_local_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert recovery_path("rec") == tmp_path / "rec"
    assert recovery_path(f"file://{tmp_path}/rec") == tmp_path / "rec"
    assert recovery_path("file://localhost/var/rec") == Path("/var/rec")


@pytest.mark.parametrize("uri", ["hdfs://namenode:8020/ckpt", "s3a://bucket/ckpt"])
def test_other_filesystems_fail_before_spark_starts_and_create_nothing(
    uri, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    flow_file = tmp_path / "flow.py"
    flow_file.write_text(FLOW)
    assert main([f"{flow_file}:flow", "-r", uri]) == 2
    scheme = uri.split(":")[0]
    assert capsys.readouterr().err == (
        f"flowspark: ValueError: recovery directory {uri!r}: flowspark keeps its recovery "
        f"files on a local (or mounted shared) filesystem; {scheme}:// is not supported yet: "
        "give a path\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flow.py"]


def test_a_local_path_on_a_cluster_needs_to_be_declared_shared():
    assert check_recovery_storage("/r", "local[1]") == Path("/r")
    assert check_recovery_storage("file:///r", "spark://h:7077", shared=True) == Path("/r")
    with pytest.raises(ValueError, match="put it on storage that every worker mounts"):
        check_recovery_storage("/r", "spark://h:7077")


def test_a_local_recovery_path_on_a_cluster_fails_before_spark_starts(
    tmp_path, monkeypatch, capsys
):
    """No executor would see the driver's folder: refused in one line (exit 2), with
    no Spark started and nothing created, unless declared shared."""
    # As in a fresh process: no session running yet (a run joins a running one).
    monkeypatch.setattr("flowspark.engine.session.session_master", lambda: None)
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
