"""``python -m flowspark.recovery inspect`` on a recovery directory a real run wrote: a
FileInput -> keyed count -> FileOutput flow through the CLI (``-r``), looked at while it
holds the lock and after it ended; ``--check`` passes, then names a truncated file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FLOW = """
import time

from flowspark.connectors.files import FileInput, FileOutput
from flowspark.dataflow import Dataflow

flow = Dataflow()
s = flow.input("inp", FileInput({data!r}, batch_size=250))
s = s.map("key", lambda line: (line[-1], time.sleep(0.002) or 1))
s = s.stateful_map("count", lambda: 0, lambda n, one: (n + one, n + one))
s.map("show", lambda kv: f"{{kv[0]}} {{kv[1]}}").output("out", FileOutput({out!r}))
"""


def inspect(rec: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowspark.recovery", "inspect", str(rec), *args],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.slow
def test_inspect_reports_what_a_real_run_left_and_check_names_a_truncated_file(tmp_path):
    data, out, rec = tmp_path / "d.txt", tmp_path / "out.txt", tmp_path / "rec"
    data.write_text("".join(f"item-{i:04d}\n" for i in range(2000)))
    (tmp_path / "flow.py").write_text(FLOW.format(data=str(data), out=str(out)))
    run = subprocess.Popen(
        [sys.executable, "-m", "flowspark.run", f"{tmp_path / 'flow.py'}:flow", "--bounded",
         "--master", "local[2]", "--max-batch-items", "500", "-r", str(rec)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        held = None
        deadline = time.monotonic() + 90
        while held is None and run.poll() is None and time.monotonic() < deadline:
            if rec.is_dir():
                lines = inspect(rec).stdout.splitlines()
                held = next((x for x in lines if x.startswith("lock: held by ")), None)
            time.sleep(0.2)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 0, err[-3000:]
    # While it ran, the run held the lock, named by its pid.
    assert held is not None and f"pid {run.pid}, started " in held

    facts = json.loads(inspect(rec, "--json").stdout)
    last = facts["batches"]["last_committed"]
    assert last >= 4  # 2,000 lines, 500 a batch, then the end
    assert facts["batches"]["pending"] == []
    [source] = facts["inputs"]["sources"]
    [inp] = source["inputs"]
    assert (inp["step_id"], inp["share_read"], source["ended"]) == ("inp", 1.0, True)
    assert inp["parts"] == {str(data): {"offset": data.stat().st_size}}
    [output] = facts["outputs"]
    assert (output["output"], output["batch"], output["file"]) == (
        "out",
        last,
        "flowspark-sinks/out.pickle",
    )
    assert output["states"] == [str(out.stat().st_size)]  # the file output's length
    [operator] = facts["state"]
    assert operator["partitions"] >= 1 and operator["bytes"] > 0
    assert operator["latest_version"] == last + 1
    assert (facts["lock"]["file"], facts["lock"]["held"]) == ("flowspark.lock", False)

    text = inspect(rec)
    assert text.returncode == 0
    assert f"last committed batch: {last}, committed " in text.stdout
    assert "  inp (100% read)" in text.stdout.splitlines()
    assert "lock: free (flowspark.lock" in text.stdout

    whole = inspect(rec, "--check")
    assert (whole.returncode, whole.stderr) == (0, ""), whole.stderr
    assert whole.stdout.splitlines()[-1] == "check: every file is whole"

    changelogs = sorted(
        (rec / "state").rglob("*.changelog"), key=lambda p: int(p.stem.split("_")[0])
    )
    newest = changelogs[-1]
    newest.write_bytes(newest.read_bytes()[:-5])
    damaged = inspect(rec, "--check")
    assert damaged.returncode == 1
    [problem] = damaged.stderr.splitlines()
    assert problem.startswith(f"{newest}: a keyed-state file (batch {last}): ")

    offsets = rec / "offsets" / str(last)
    offsets.write_bytes(offsets.read_bytes()[:-3])
    damaged = inspect(rec, "--check")
    assert damaged.returncode == 1
    assert sorted(line.split(": ")[0] for line in damaged.stderr.splitlines()) == sorted(
        [str(newest), str(offsets)]
    )
