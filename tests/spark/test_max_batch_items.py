"""``--max-batch-items N`` reads at most N items of each input into one micro-batch:
whole files cut at a line, bytewax-style parts cut within a source batch. (JetStream:
tests/spark/test_jetstream.py; a replay after kill -9:
tests/recovery/test_kill_restart_inputs.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from flowspark.connectors.files import FileInput
from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, run_flow
from flowspark.inputs import PartitionedInput, StatefulSource
from flowspark.testing import TestingOutput


class _Batches(StatefulSource):
    """Source batches of 70 items: 0, 1, 2, ... up to ``total``."""

    def __init__(self, total: int, resume: int | None) -> None:
        self.total, self.at = total, resume or 0

    def next_batch(self):
        if self.at >= self.total:
            raise StopIteration
        batch = list(range(self.at, min(self.total, self.at + 70)))
        self.at += len(batch)
        return batch

    def snapshot(self):
        return self.at


class _Parts(PartitionedInput):
    def __init__(self, total: int) -> None:
        self.total = total

    def list_parts(self):
        return ["only"]

    def build_part(self, for_part, resume_state):
        return _Batches(self.total, resume_state)


def _per_batch(flow: Dataflow, tmp_path: Path, cap: int) -> list[int]:
    log = tmp_path / "progress.jsonl"
    run_flow(flow, RunConfig(max_batch_items=cap, progress_json=str(log)))
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [line["steps"]["inp"]["out"] for line in lines if line["steps"].get("inp")]


def test_a_file_is_read_n_lines_per_micro_batch(tmp_path: Path) -> None:
    data = tmp_path / "lines.txt"
    data.write_text("".join(f"{i}\n" for i in range(1000)))
    out: list = []
    flow = Dataflow()
    flow.input("inp", FileInput(data)).output("out", TestingOutput(out))
    assert _per_batch(flow, tmp_path, cap=100) == [100] * 10
    assert out == [str(i) for i in range(1000)]


def test_source_batches_of_a_bytewax_part_are_cut_to_the_cap(tmp_path: Path) -> None:
    out: list = []
    flow = Dataflow()
    flow.input("inp", _Parts(500)).output("out", TestingOutput(out))
    assert _per_batch(flow, tmp_path, cap=100) == [100] * 5
    assert out == list(range(500))
