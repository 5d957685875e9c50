"""Inputs and outputs on local Spark: files, stdout, custom bytewax-style connectors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowspark.connectors.files import CSVInput, DirInput, DirOutput, FileInput, FileOutput
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.inputs import DynamicInput, PartitionedInput, StatefulSource, StatelessSource
from flowspark.outputs import DynamicOutput, StatelessSink
from flowspark.recovery import RecoveryConfig
from flowspark.testing import TestingInput, TestingOutput, run_main


def _collect(inp, **kwargs) -> list:
    flow = Dataflow()
    flow.input("inp", inp)
    out: list = []
    flow.output("out", TestingOutput(out))
    run_main(flow, **kwargs)
    return out


def test_file_input_reads_lines_without_newlines(tmp_path: Path):
    path = tmp_path / "in.txt"
    path.write_text("a\nb b\n\nlast")
    assert _collect(FileInput(path)) == ["a", "b b", "", "last"]


def test_file_input_missing_file_fails_before_spark_runs(tmp_path: Path):
    with pytest.raises(ValueError, match="does not exist"):
        _collect(FileInput(tmp_path / "missing.txt"))


def test_dir_input_reads_every_matching_file(tmp_path: Path):
    (tmp_path / "a.txt").write_text("a1\na2\n")
    (tmp_path / "b.txt").write_text("b1\n")
    (tmp_path / "skip.csv").write_text("no\n")
    assert sorted(_collect(DirInput(tmp_path, glob_pat="*.txt"))) == ["a1", "a2", "b1"]


def test_dir_input_rejects_missing_directory(tmp_path: Path):
    with pytest.raises(ValueError, match="does not exist"):
        DirInput(tmp_path / "nope")
    with pytest.raises(ValueError, match="is not a directory"):
        (tmp_path / "f").write_text("x")
        DirInput(tmp_path / "f")


def test_csv_input_yields_dicts_by_header(tmp_path: Path):
    path = tmp_path / "in.csv"
    path.write_text('index,text\n0,"hello, world"\n1,"two\nlines"\n')
    assert _collect(CSVInput(path)) == [
        {"index": "0", "text": "hello, world"},
        {"index": "1", "text": "two\nlines"},
    ]


def test_csv_input_passes_fmtparams(tmp_path: Path):
    path = tmp_path / "in.csv"
    path.write_text("a;b\n1;2\n")
    assert _collect(CSVInput(path, delimiter=";")) == [{"a": "1", "b": "2"}]


def test_file_output_writes_lines_and_truncates_on_fresh_start(tmp_path: Path):
    out_path = tmp_path / "out.txt"
    out_path.write_text("stale\n")
    flow = Dataflow()
    flow.input("inp", TestingInput(["x", "y", ("key", "z"), 3]))
    flow.output("out", FileOutput(out_path))
    run_main(flow)
    assert out_path.read_text() == "x\ny\nz\n3\n"


def test_dir_output_routes_by_key(tmp_path: Path):
    flow = Dataflow()
    flow.input("inp", TestingInput([("a", "1"), ("b", "2"), ("a", "3")]))
    flow.output(
        "out",
        DirOutput(tmp_path, 2, file_namer=lambda i, n: f"f{i}of{n}", assign_file=lambda k: ord(k)),
    )
    run_main(flow)
    assert (tmp_path / "f1of2").read_text() == "1\n3\n"  # ord("a") = 97 -> 1
    assert (tmp_path / "f0of2").read_text() == "2\n"


def test_std_output_prints_in_order(capsys):
    flow = Dataflow()
    flow.input("inp", TestingInput(range(50), batch_size=5))
    flow.output("out", StdOutput())
    run_main(flow)
    assert capsys.readouterr().out.split() == [str(i) for i in range(50)]


class _CountdownSource(StatefulSource):
    def __init__(self, start: int, stop: int) -> None:
        self.i, self.stop = start, stop

    def next_batch(self) -> list[Any]:
        if self.i >= self.stop:
            raise StopIteration()
        batch = list(range(self.i, min(self.stop, self.i + 3)))
        self.i += len(batch)
        return batch

    def snapshot(self) -> int:
        return self.i


class _CountdownInput(PartitionedInput):
    """A bytewax-style custom input: two parts, resumable from snapshots."""

    def __init__(self, stop: int) -> None:
        self.stop = stop

    def list_parts(self) -> list[str]:
        return ["low", "high"]

    def build_part(self, for_part: str, resume_state: Any) -> StatefulSource:
        base = 0 if for_part == "low" else 1000
        start = base if resume_state is None else resume_state
        return _CountdownSource(start, base + self.stop)


def test_custom_partitioned_input_and_resume(tmp_path: Path):
    recovery = RecoveryConfig(tmp_path / "ck")
    first = _collect(_CountdownInput(10), recovery_config=recovery)
    assert sorted(first) == list(range(10)) + list(range(1000, 1010))
    # A rerun on the same recovery directory resumes after what was committed.
    assert _collect(_CountdownInput(10), recovery_config=recovery) == []


class _Ticker(StatelessSource):
    def __init__(self) -> None:
        self.n = 0

    def next_batch(self) -> list[Any]:
        if self.n >= 4:
            raise StopIteration()
        self.n += 1
        return [f"tick{self.n}"]


class _TickerInput(DynamicInput):
    def build(self, worker_index: int, worker_count: int) -> StatelessSource:
        return _Ticker()


def test_custom_dynamic_input():
    assert _collect(_TickerInput()) == ["tick1", "tick2", "tick3", "tick4"]


class _UpperSink(StatelessSink):
    def __init__(self, ls: list) -> None:
        self.ls = ls

    def write_batch(self, items: list[Any]) -> None:
        self.ls.extend(str(i).upper() for i in items)


class _UpperOutput(DynamicOutput):
    def __init__(self, ls: list) -> None:
        self.ls = ls

    def build(self, worker_index: int, worker_count: int) -> StatelessSink:
        return _UpperSink(self.ls)


def test_custom_dynamic_output():
    got: list = []
    flow = Dataflow()
    flow.input("inp", TestingInput(["a", "b"]))
    flow.output("out", _UpperOutput(got))
    run_main(flow)
    assert got == ["A", "B"]


def test_rerun_with_recovery_reads_only_appended_files(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "1.txt").write_text("a\nb\n")
    recovery = RecoveryConfig(tmp_path / "ck")
    assert sorted(_collect(DirInput(data), recovery_config=recovery)) == ["a", "b"]
    (data / "2.txt").write_text("c\n")
    assert _collect(DirInput(data), recovery_config=recovery) == ["c"]
