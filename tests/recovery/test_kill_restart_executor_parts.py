"""File outputs through ten kill -9s of the whole run at random points and a last run
to the end: a partitioned output written by Spark's tasks (``DirOutput(...,
writes_on="executors")``) and a ``FileOutput`` written by the driver, beside it in the
same flow. Every line once, each part holding what an uninterrupted run's does.

A part on the executors keeps its snapshot as its key's state in Spark's checkpoint,
committed with the batch; the driver's output keeps its snapshots in the recovery
directory. Either way a replayed micro-batch rebuilds the part from the snapshot
before it, which truncates the file back to where that batch began. Which input
file's lines a micro-batch holds depends on where the batches were cut, so a part's
lines from different input files interleave differently from run to run; the lines
of one input file keep its order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.recovery.cli_runs import kill_campaign, output_lines
from tests.warm_cli import warm_run

FLOW = """
from flowspark.connectors.files import DirInput, DirOutput, FileOutput
from flowspark.dataflow import Dataflow

flow = Dataflow()
lines = flow.input("lines", DirInput({data!r}, glob_pat="*.txt", batch_size=40))
keyed = lines.map(lambda line: (line.split("-")[1], line.upper()))
keyed.output("out", DirOutput({out!r}, 3, writes_on="executors"))
keyed.output("one", FileOutput({one!r}))
"""

FILES, LINES_PER_FILE = 4, 1500
KILLS = 10


def _write_input(data: Path) -> None:
    data.mkdir()
    for f in range(FILES):
        lines = [f"file{f}-line{i}" for i in range(LINES_PER_FILE)]
        (data / f"{f}.txt").write_text("\n".join(lines) + "\n")


def _written(out: Path) -> int:
    if not out.exists():
        return 0
    return sum(len(path.read_bytes().splitlines()) for path in out.iterdir())


def _files(out: Path) -> dict[str, list[str]]:
    return {path.name: output_lines(path) for path in sorted(out.iterdir())}


def _in_input_order(lines: list[str]) -> bool:
    """Whether each input file's lines (``FILE<f>-LINE<i>``) come in their file's order."""
    last: dict[str, int] = {}
    for line in lines:
        name, number = line.split("-LINE")
        if last.get(name, -1) >= int(number):
            return False
        last[name] = int(number)
    return True


@pytest.mark.slow
def test_ten_kills_at_random_points_then_a_run_to_the_end_write_each_file_once(
    tmp_path: Path,
):
    data = tmp_path / "data"
    _write_input(data)
    reference, out = tmp_path / "reference", tmp_path / "out"
    reference_flow = tmp_path / "reference.py"
    reference_flow.write_text(
        FLOW.format(data=str(data), out=str(reference / "dir"), one=str(reference / "one.txt"))
    )
    code, err = warm_run(reference_flow, tmp_path / "reference-rec", "--bounded", "-s", "0")
    assert code == 0, err[-3000:]
    flow_file = tmp_path / "flow.py"
    flow = FLOW.format(data=str(data), out=str(out / "dir"), one=str(out / "one.txt"))
    flow_file.write_text(flow)
    total = FILES * LINES_PER_FILE

    points = kill_campaign(
        flow_file,
        tmp_path / "rec",
        lambda: _written(out / "dir"),
        total,
        KILLS,
        31,
        "--bounded",
        "-s",
        "0",
    )
    assert len(points) == KILLS and all(point < total for point in points)
    got, expected = _files(out / "dir"), _files(reference / "dir")
    assert set(got) == set(expected) == {"part_0", "part_1", "part_2"}
    got["one.txt"] = output_lines(out / "one.txt")
    expected["one.txt"] = output_lines(reference / "one.txt")
    for name, lines in got.items():
        assert sorted(lines) == sorted(expected[name]), f"{name}, killed at {points}"
        assert len(set(lines)) == len(lines), f"{name}: a line twice, killed at {points}"
        assert _in_input_order(lines), f"{name}: out of order, killed at {points}"
    assert len(got["one.txt"]) == total
