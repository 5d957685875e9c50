"""Watching a run: the progress JSON lines, the Prometheus endpoint and the CLI's live
display, on real runs (a keyed window step over known input)."""

from __future__ import annotations

import importlib.util
import json
import os
import pty
import re
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from flowspark.engine.cluster import free_port
from flowspark.engine.observe import BatchProgress
from flowspark.engine.progress import PrometheusMetrics, watched_steps
from flowspark.engine.query import RunConfig, run_flow
from flowspark.plan.graph import build_plan
from tests.http_clients import scrape_metrics
from tests.pseudo_terminals import read_in_background

# 300 items over hours 0..9 for keys k0..k2 (windows of 5 h: 50 items per key and
# window), 100 per micro-batch, then hour 1 once per key: late by then.
WINDOWED_FLOW = textwrap.dedent(
    """
    from tests.hourly_counts import hourly_counts

    ITEMS = [(f"k{i % 3}", i // 30) for i in range(300)] + [("k0", 1), ("k1", 1), ("k2", 1)]
    out, late = [], []
    flow = hourly_counts("watched", ITEMS, 100, out, late)
    """
)


class Probe:
    """Scrapes the run's endpoint once per batch (after the endpoint has counted it)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.seen: list[BatchProgress] = []
        self.scrapes: list[dict[tuple[str, str], float]] = []

    def on_batch(self, progress: BatchProgress) -> None:
        self.seen.append(progress)
        self.scrapes.append(scrape_metrics(self.url))


@pytest.fixture(scope="module")
def watched(tmp_path_factory) -> dict[str, Any]:
    """One streamed run with every watcher on; what they saw."""
    folder = tmp_path_factory.mktemp("watched")
    path = folder / "watched_flow.py"
    path.write_text(WINDOWED_FLOW)
    spec = importlib.util.spec_from_file_location("watched_flow", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    port = free_port()
    probe = Probe(f"http://127.0.0.1:{port}/metrics")
    progress_json = folder / "progress.jsonl"
    steps = watched_steps(build_plan(module.flow))
    with PrometheusMetrics(0, steps=steps) as own:
        report = run_flow(
            module.flow,
            RunConfig(
                epoch_interval=timedelta(0),
                progress=False,
                progress_json=str(progress_json),
                metrics_port=port,
                listeners=[probe, own],
            ),
        )
        after = scrape_metrics(own.url)
    return {
        "flow_file": path,
        "module": module,
        "report": report,
        "probe": probe,
        "lines": [json.loads(line) for line in progress_json.read_text().splitlines()],
        "progress_json": progress_json,
        "after": after,
    }


def test_the_run_itself(watched):
    module = watched["module"]
    assert sorted(module.out) == [(k, 50) for k in ("k0", "k0", "k1", "k1", "k2", "k2")]
    assert len(module.late) == 3
    assert watched["report"].late_counts == {"count": 3}


def test_the_progress_json_has_one_line_per_batch_and_the_right_totals(watched):
    lines = watched["lines"]
    assert len(lines) == watched["report"].batches >= 4
    assert [line["batch"] for line in lines] == sorted({line["batch"] for line in lines})
    totals: dict[str, dict[str, int]] = {}
    for line in lines:
        for step_id, figures in line["steps"].items():
            for key in ("in", "out", "late"):
                if key in figures:
                    counts = totals.setdefault(step_id, {})
                    counts[key] = counts.get(key, 0) + figures[key]
    assert totals == {
        "inp": {"out": 303},
        "count": {"late": 3},
        "out": {"in": 6},
        "late": {"in": 3},
    }
    assert all(line["streamed"] and line["duration_ms"] > 0 for line in lines)
    assert any(line["state_keys"] for line in lines)  # keyed state while windows are open
    first, *middle, last = lines
    assert first["watermark_ms"] is None  # before the keyed step's first batch
    assert all(0 <= line["watermark_lag_ms"] < 120_000 for line in middle)
    assert last["watermark_ms"] > last["wall_ms"] and last["watermark_lag_ms"] == 0  # the end


def test_a_finite_inputs_share_read_grows_to_all_of_it(watched):
    """Read over micro-batches, a finite input says how much of it is read (the live
    display's bar): 100 items per batch of 303."""
    shares = [line["steps"]["inp"]["read"] for line in watched["lines"] if "inp" in line["steps"]]
    assert shares[:4] == [round(n / 303, 4) for n in (100, 200, 300)] + [1.0]
    assert shares[4:] == [1.0] * (len(shares) - 4)  # the end's announcement, if apart


def test_visualize_draws_the_runs_figures_from_the_progress_json(watched):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "flowspark.visualize",
            str(watched["flow_file"]),
            "--from",
            str(watched["progress_json"]),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    labels = {
        line.split()[0].split("(")[0].split("[")[0]: line
        for line in result.stdout.splitlines()
        if line.strip().startswith("s_") and "<br/>" in line
    }
    assert "out 303" in labels["s_inp"]
    assert "late 3" in labels["s_count"]
    assert "in 6" in labels["s_out"] and "in 3" in labels["s_late"]
    assert f"{len(watched['lines'])} micro-batches" in result.stdout


def test_the_metrics_endpoint_serves_each_batch_during_the_run(watched):
    probe = watched["probe"]
    assert len(probe.scrapes) == len(probe.seen) == watched["report"].batches
    read = 0
    for n, (progress, scraped) in enumerate(zip(probe.seen, probe.scrapes), 1):
        read += progress.items_read.get("inp", 0)
        assert scraped[("flowspark_items_read_total", "inp")] == read
        assert scraped[("flowspark_batches_total", "")] == n
    last = probe.scrapes[-1]
    assert last[("flowspark_items_written_total", "out")] == 6
    assert last[("flowspark_items_written_total", "late")] == 3
    assert last[("flowspark_late_items_total", "count")] == 3
    assert last[("flowspark_batch_duration_seconds", "")] > 0
    assert last[("flowspark_watermark_lag_seconds", "")] >= 0
    with pytest.raises(urllib.error.URLError):  # RunConfig's endpoint ends with the run
        urllib.request.urlopen(probe.url, timeout=2)


def test_an_endpoint_of_ones_own_serves_the_totals_after_the_run(watched):
    after = watched["after"]
    assert after[("flowspark_items_read_total", "inp")] == 303
    assert after[("flowspark_items_written_total", "out")] == 6
    assert after[("flowspark_late_items_total", "count")] == 3
    assert after[("flowspark_batches_total", "")] == watched["report"].batches


# --- the CLI: progress on stderr (a terminal), never on stdout -------------------------

PRINTING_FLOW = textwrap.dedent(
    """
    from flowspark.connectors.stdio import StdOutput
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingInput

    flow = Dataflow("printing")
    flow.input("inp", TestingInput(range(200))).map("double", lambda x: 2 * x).output(
        "out", StdOutput()
    )
    """
)


def _run_cli(tmp_path: Path, *flags: str) -> tuple[int, str, str]:
    """``python -m flowspark.run`` with stderr on a pseudo-terminal and stdout to a file."""
    flow_file = tmp_path / "printing_flow.py"
    flow_file.write_text(PRINTING_FLOW)
    stdout_file = tmp_path / "stdout.txt"
    parent, child = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    env.pop("NO_COLOR", None)
    cmd = [sys.executable, "-m", "flowspark.run", str(flow_file), "--bounded"]
    cmd += ["--master", "local[2]", *flags]
    with stdout_file.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=child, stdin=subprocess.DEVNULL, env=env)
    os.close(child)
    drawn = bytearray()
    reader = read_in_background(parent, drawn)
    try:
        code = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(30)
    os.close(parent)
    return code, stdout_file.read_text(), drawn.decode("utf-8", "replace")


def test_the_cli_shows_progress_on_stderr_and_keeps_stdout_clean(tmp_path):
    code, stdout, stderr = _run_cli(tmp_path, "--progress")
    assert code == 0, stderr
    assert stdout.splitlines() == [str(2 * x) for x in range(200)]  # nothing else
    assert "\x1b[" in stderr  # a live display: it redraws with control sequences
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", stderr)
    assert "flowspark · printing · batch job · 1 batch done" in text
    rows = [line.split() for line in text.splitlines()]
    assert [r for r in rows if r[:1] == ["inp"]][-1][:3] == ["inp", "input", "200"]
    assert [r for r in rows if r[:1] == ["out"]][-1][:3] == ["out", "output", "200"]


def test_no_progress_shows_nothing_even_on_a_terminal(tmp_path):
    code, stdout, stderr = _run_cli(tmp_path, "--no-progress")
    assert code == 0, stderr
    assert stdout.splitlines() == [str(2 * x) for x in range(200)]
    assert "flowspark ·" not in stderr and "batch" not in stderr
