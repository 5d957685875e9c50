"""``python -m flowspark.testing -p N``'s process handling, with stand-in processes for
``flowspark.run`` (real processes, no Spark): the first failure is the exit status and
the others are stopped as Ctrl-C stops them. (A real two-process run:
tests/recovery/test_cluster_main.py.)"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from flowspark import testing_cli

STAND_IN = """
import signal, sys, time
from pathlib import Path

args = sys.argv[1:]
proc_id = args[args.index("-i") + 1]
seen = Path(args[0])
ready = seen.with_name("ready")
if proc_id == "1":
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:  # process 0 takes Ctrl-C now
        time.sleep(0.01)
    sys.exit(3)  # fails, as a worker whose port is taken would
# As flowspark.run does while its query runs: Ctrl-C is this process's own to handle,
# even when it was started with SIGINT ignored (a background job of a script).
signal.signal(signal.SIGINT, signal.default_int_handler)
ready.touch()
try:
    time.sleep(120)  # process 0 waits for the others' workers
except KeyboardInterrupt:
    seen.write_text("interrupted")
    sys.exit(130)
"""


def test_the_first_failure_is_the_status_and_the_others_are_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stand_in = tmp_path / "run.py"
    stand_in.write_text(STAND_IN)
    monkeypatch.setattr(testing_cli, "RUN_COMMAND", [sys.executable, str(stand_in)])
    seen = tmp_path / "seen"
    started = time.monotonic()
    assert testing_cli.main([str(seen), "-p", "2"]) == 3
    assert time.monotonic() - started < 60  # not the 120 s process 0 would have waited
    assert seen.read_text() == "interrupted"
    assert "process 1 exited with 3" in capsys.readouterr().err


def test_no_processes_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        testing_cli.main(["flow.py", "-p", "0"])
    assert exit_info.value.code == 2
    assert "argument -p/--processes: must be a whole number >= 1" in capsys.readouterr().err
