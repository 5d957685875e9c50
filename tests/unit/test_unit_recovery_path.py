"""A recovery directory is a local path or a ``file://`` URI; any other filesystem's
URI fails before Spark starts (it used to become a local folder named ``hdfs:``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowspark.cli import main
from flowspark.engine.query import recovery_path


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
    flow_file.write_text(
        "from flowspark.dataflow import Dataflow\n"
        "from flowspark.testing import TestingInput, TestingOutput\n"
        "flow = Dataflow()\n"
        "flow.input('inp', TestingInput([1]))\n"
        "flow.output('out', TestingOutput([]))\n"
    )
    assert main([f"{flow_file}:flow", "-r", uri]) == 2
    scheme = uri.split(":")[0]
    assert capsys.readouterr().err == (
        f"flowspark: ValueError: recovery directory {uri!r}: flowspark keeps its recovery "
        f"files on a local (or mounted shared) filesystem; {scheme}:// is not supported yet: "
        "give a path\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flow.py"]
