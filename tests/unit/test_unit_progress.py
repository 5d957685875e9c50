"""Watching a run without Spark: the live display, the JSON lines and the Prometheus
endpoint, fed hand-made batches."""

from __future__ import annotations

import io
import json
import math
import os
import pty
import re
import sys
import time
import urllib.error
import urllib.request

import pytest
from rich.console import Console

from flowspark.dataflow import Dataflow
from flowspark.engine.observe import BatchProgress, ProgressHub, ProgressLog, batch_figures
from flowspark.engine.progress import LiveProgress, PrometheusMetrics, Tally, watch_run
from flowspark.plan.graph import build_plan
from flowspark.testing import TestingInput, TestingOutput
from flowspark.visualize import read_progress
from tests.http_clients import scrape_metrics
from tests.pseudo_terminals import read_in_background

STEPS = [("inp", "input"), ("count", "fold_window"), ("out", "output"), ("late", "output")]
WALL_S = 1_700_000_010.0


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch):
    """A terminal rich can redraw, whatever the environment running the tests says."""
    monkeypatch.setenv("TERM", "xterm-256color")
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)


def _batches() -> list[BatchProgress]:
    return [
        BatchProgress(0, True, 1400, {"inp": 100}, {}, {}, watermark_ms=None, state_keys=3),
        BatchProgress(1, True, 380, {"inp": 100}, {"out": 4}, {"count": 0}, 1_700_000_000_000, 6),
        BatchProgress(
            2, True, 250, {"inp": 50}, {"out": 2, "late": 1}, {"count": 1}, 1_700_000_001_500, 2
        ),
    ]


class Ticks:
    """A clock that moves by ``step`` seconds each time it is read."""

    def __init__(self, step: float = 0.5) -> None:
        self.now, self.step = 100.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def _flow() -> Dataflow:
    flow = Dataflow("watched")
    s = flow.input("inp", TestingInput([("a", 1)])).map("m", lambda x: x)
    s.reduce("sum", lambda a, b: a + b, lambda acc: True).output("out", TestingOutput([]))
    return flow


# --- the live display -------------------------------------------------------------------


def test_the_display_draws_every_step_with_its_figures():
    console = Console(record=True, width=100, force_terminal=True)
    display = LiveProgress(STEPS, "wc", console, clock=Ticks(), wall=lambda: WALL_S)
    for progress in _batches():
        display.on_batch(progress)
    console.print(display)
    frame = console.export_text()
    lines = frame.splitlines()
    assert lines[0].startswith("flowspark · wc · streaming · 3 batches done")
    assert "batch 2 · took 250 ms · watermark 2023-11-14 22:13:21 UTC (lag 8.50 s)" in lines[1]
    assert "2 keys in state" in lines[1]
    rows = {line.split()[0]: line.split()[1:] for line in lines[4:] if line.strip()}
    assert rows["inp"] == ["input", "250", "100"]  # out 250, 50 items in 0.5 s
    assert rows["count"] == ["fold_window", "1"]
    assert rows["out"] == ["output", "6", "4.0"]
    assert rows["late"] == ["output", "1", "2.0"]


def test_the_display_runs_live_in_a_pseudo_terminal():
    parent, child = pty.openpty()
    terminal = os.fdopen(child, "w", encoding="utf-8")
    drawn = bytearray()
    reader = read_in_background(parent, drawn)
    console = Console(file=terminal, width=100)
    assert console.is_terminal
    stdout = sys.stdout
    with LiveProgress(STEPS, "wc", console) as display:
        assert display.live
        assert sys.stdout is stdout  # stdout is not that terminal: left alone
        for progress in _batches():
            display.on_batch(progress)
            time.sleep(0.05)
    terminal.close()
    reader.join(5)
    os.close(parent)
    text = drawn.decode("utf-8", "replace")
    assert "\x1b[" in text  # drawn with the terminal's control sequences
    assert "3 batches done" in text and "fold_window" in text
    assert "waiting for the first batch" in text  # the frame before any batch


def test_a_display_forced_onto_a_file_prints_a_line_per_batch():
    out = io.StringIO()
    display = LiveProgress(STEPS, "wc", Console(file=out, width=300), wall=lambda: WALL_S)
    with display:
        assert not display.live
        for progress in _batches():
            display.on_batch(progress)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("flowspark: batch 0 · took 1.40 s · 3 keys in state · inp out 100")
    assert "count late 1" in lines[2] and "out in 6" in lines[2] and "late in 1" in lines[2]
    assert "\x1b" not in out.getvalue()


def test_an_output_written_on_the_executors_says_so_in_the_line_and_the_table():
    out = io.StringIO()
    display = LiveProgress(STEPS, "wc", Console(file=out, width=300), wall=lambda: WALL_S)
    progress = BatchProgress(0, True, 10, {"inp": 5}, {"out": 5}, written_on={"out": "executors"})
    with display:
        display.on_batch(progress)
    assert re.search(r" · out in 5 \([^)]*\) on executors · ", out.getvalue())
    table = io.StringIO()
    Console(file=table, width=200).print(display)
    assert "output (executors)" in table.getvalue()


def test_the_tally_sums_batches_and_keeps_the_last_rates():
    tally = Tally(STEPS)
    for progress in _batches():
        tally.add(progress, 2.0, wall_ms=1_700_000_003_000)
    assert (tally.rows["inp"].out, tally.rows["inp"].out_per_s) == (250, 25.0)
    assert (tally.rows["out"].in_, tally.rows["late"].in_, tally.rows["count"].late) == (6, 1, 1)
    assert (tally.batches, tally.state_keys, tally.watermark_lag_s) == (3, 2, 1.5)


def test_without_rich_one_line_says_so_and_the_run_goes_on(monkeypatch):
    monkeypatch.setitem(sys.modules, "rich", None)  # import rich raises ImportError
    err = io.StringIO()
    with watch_run(build_plan(_flow()), progress=True, stderr=err) as listeners:
        assert listeners == []
    assert err.getvalue().splitlines() == [
        "flowspark: no progress display: 'rich' is not installed (pip install rich)"
    ]


def test_the_display_is_on_by_default_only_on_a_terminal():
    err = io.StringIO()
    with watch_run(build_plan(_flow()), stderr=err) as listeners:
        assert listeners == []
    assert err.getvalue() == ""


# --- the JSON lines ---------------------------------------------------------------------


def test_progress_json_lines_carry_each_batch_and_read_back_as_the_runs_figures(tmp_path):
    path = tmp_path / "progress.jsonl"
    path.write_text("an earlier run's line\n")
    log = ProgressLog(str(path), spark=False, truncate=True)
    hub = ProgressHub([log], streamed=True)
    for n, progress in enumerate(_batches()):
        hub.batch_written(n, progress.items_read, progress.items_written, progress.late_items)
        spark = {"batchId": n, "durationMs": {"triggerExecution": progress.duration_ms}}
        if progress.state_keys is not None:
            spark["stateOperators"] = [{"numRowsTotal": progress.state_keys}]
        hub.spark_progress(spark)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["batch"] for line in lines] == [0, 1, 2]
    assert lines[2]["steps"]["out"]["in"] == 2 and lines[2]["steps"]["count"] == {"late": 1}
    assert lines[1]["duration_ms"] == 380 and lines[1]["state_keys"] == 6
    assert "batchId" not in lines[0]  # Spark's own progress only in the env log
    assert all(line["steps"]["inp"]["out_per_s"] > 0 for line in lines)
    figures = read_progress(path.read_text().splitlines())
    assert figures.batches == 3
    assert figures.steps["inp"] == {"out": 250}
    assert figures.steps["out"] == {"in": 6} and figures.steps["late"] == {"in": 1}
    assert figures.steps["count"] == {"late": 1}
    assert figures.duration_ms == 1400 + 380 + 250 and figures.state_keys == 2


def test_the_env_progress_log_keeps_sparks_progress_and_adds_the_figures(tmp_path):
    path = tmp_path / "env.jsonl"
    log = ProgressLog(str(path))
    spark = {"batchId": 4, "stateOperators": [{"numRowsTotal": 9}]}
    log.on_batch(BatchProgress(4, True, 90, {"inp": 3}, {"out": 3}, spark=spark))
    log.on_batch(BatchProgress(0, False, 70, {"inp": 1}, {"out": 1}))  # a batch job's
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert list(first)[:2] == ["batchId", "stateOperators"]
    assert first["stateOperators"][0]["numRowsTotal"] == 9
    assert (first["steps"]["inp"]["out"], first["steps"]["out"]["in"]) == (3, 3)
    assert first["steps"]["inp"]["out_per_s"] > 0 and first["duration_ms"] == 90
    assert second["batch"] == 0 and second["streamed"] is False and "batchId" not in second


def test_batch_figures_without_a_watermark_or_a_time():
    line = batch_figures(BatchProgress(0, False, None, {"a": 2}), wall_ms=5)
    assert line["steps"] == {"a": {"out": 2}}
    assert line["watermark_lag_ms"] is None and line["duration_ms"] is None


# --- the Prometheus endpoint ------------------------------------------------------------


def test_the_metrics_endpoint_serves_the_runs_figures_over_http():
    with PrometheusMetrics(0, steps=STEPS, wall=lambda: WALL_S) as metrics:
        assert metrics.url == f"http://127.0.0.1:{metrics.port}/metrics"
        before = scrape_metrics(metrics.url)
        assert before[("flowspark_items_read_total", "inp")] == 0
        assert before[("flowspark_late_items_total", "count")] == 0
        assert before[("flowspark_batches_total", "")] == 0
        assert math.isnan(before[("flowspark_watermark_lag_seconds", "")])  # until known
        for progress in _batches():
            metrics.on_batch(progress)
        after = scrape_metrics(metrics.url)
    assert after[("flowspark_items_read_total", "inp")] == 250
    assert after[("flowspark_items_written_total", "out")] == 6
    assert after[("flowspark_items_written_total", "late")] == 1
    assert after[("flowspark_late_items_total", "count")] == 1
    assert after[("flowspark_batches_total", "")] == 3
    assert after[("flowspark_batch_duration_seconds", "")] == 0.25
    assert after[("flowspark_watermark_lag_seconds", "")] == 8.5
    assert after[("flowspark_state_keys", "")] == 2
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(metrics.url, timeout=2)  # closed with the run


def test_a_reduce_streams_late_port_is_counted_from_the_start():
    """``reduce_stream`` has a late port (``.late``) as the bytewax window kinds do, so
    its late items are shown and served from 0, before any is late."""
    steps = [("inp", "input"), ("sums", "reduce_stream"), ("acc", "accumulate")]
    progress = BatchProgress(0, True, 100, {"inp": 10}, {}, {})
    out = io.StringIO()
    display = LiveProgress(steps, "rs", Console(file=out, width=300), wall=lambda: WALL_S)
    display.on_batch(progress)
    line = display.line()
    assert "sums late 0" in line and "acc" not in line  # accumulate has no late port
    console = Console(record=True, width=120, force_terminal=True)
    display = LiveProgress(steps, "rs", console, clock=Ticks(), wall=lambda: WALL_S)
    display.on_batch(progress)
    console.print(display)
    rows = {line.split()[0]: line.split()[1:] for line in console.export_text().splitlines()}
    assert rows["sums"] == ["reduce_stream", "0"] and rows["acc"] == ["accumulate"]
    with PrometheusMetrics(0, steps=steps) as metrics:
        served = scrape_metrics(metrics.url)
    assert served[("flowspark_late_items_total", "sums")] == 0
    assert ("flowspark_late_items_total", "acc") not in served


def test_two_endpoints_in_one_process_keep_their_own_figures():
    with PrometheusMetrics(0, steps=STEPS) as one, PrometheusMetrics(0, steps=STEPS) as two:
        one.on_batch(_batches()[0])
        assert scrape_metrics(one.url)[("flowspark_items_read_total", "inp")] == 100
        assert scrape_metrics(two.url)[("flowspark_items_read_total", "inp")] == 0


def test_watch_run_serves_metrics_and_says_where():
    err = io.StringIO()
    with watch_run(build_plan(_flow()), metrics_port=0, stderr=err) as listeners:
        (metrics,) = listeners
        assert isinstance(metrics, PrometheusMetrics)
        assert err.getvalue() == f"flowspark: metrics at {metrics.url}\n"
        assert scrape_metrics(metrics.url)[("flowspark_items_written_total", "out")] == 0


def test_a_live_inputs_backlog_is_shown_written_and_served():
    """A live input that knows its backlog (a stream's unread messages) has it in
    the display, the JSON line and the metrics."""
    from flowspark.engine.observe import batch_figures

    progress = BatchProgress(0, True, 100, {"inp": 10}, {"out": 10}, {}, backlog={"inp": 990})
    console = Console(record=True, width=100, force_terminal=True)
    display = LiveProgress(STEPS, "wc", console, clock=Ticks(), wall=lambda: WALL_S)
    display.on_batch(progress)
    console.print(display)
    rows = {line.split()[0]: line.split()[1:] for line in console.export_text().splitlines()[4:]}
    assert rows["inp"] == ["input", "10", "20.0", "990"]
    assert "inp out 10 (20.0/s) backlog 990" in display.line()
    assert batch_figures(progress, wall_ms=0)["steps"]["inp"] == {"out": 10, "backlog": 990}
    with PrometheusMetrics(0, steps=STEPS, wall=lambda: WALL_S) as metrics:
        metrics.on_batch(progress)
        assert scrape_metrics(metrics.url)[("flowspark_input_backlog", "inp")] == 990


def test_a_finite_inputs_share_read_is_a_bar():
    progress = BatchProgress(0, True, 100, {"inp": 10}, {}, {}, share_read={"inp": 0.25})
    console = Console(record=True, width=120, force_terminal=True)
    display = LiveProgress(STEPS, "wc", console, clock=Ticks(), wall=lambda: WALL_S)
    display.on_batch(progress)
    console.print(display)
    frame = console.export_text()
    assert "read" in frame.splitlines()[2]
    assert "███·········  25%" in frame  # 3 of 12
    assert "inp out 10 (20.0/s) 25% read" in display.line()


def test_a_numaflow_keyed_steps_handlers_are_shown():
    """Open handlers, rebuilds, WAL datums retained and the outbound watermark of a
    Numaflow keyed step, in the table and the one-line form."""
    steps = [("inp", "input"), ("sorter", "accumulate"), ("out", "output")]
    figures = {
        "sorter": {
            "handler_hosts": 2,
            "open_handlers": 100,
            "rebuilds": 0,
            "wal_datums": 1_234,
            "outbound_watermark_ms": 1_700_000_000_000,
        }
    }
    progress = BatchProgress(0, True, 100, {"inp": 10}, {"out": 10}, {}, handlers=figures)
    console = Console(record=True, width=160, force_terminal=True)
    display = LiveProgress(steps, "acc", console, clock=Ticks(), wall=lambda: WALL_S)
    display.on_batch(progress)
    console.print(display)
    lines = console.export_text().splitlines()
    assert lines[2].split()[-5:] == ["handlers", "rebuilds", "WAL", "out.", "watermark"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[4:] if line.strip()}
    assert rows["sorter"] == ["accumulate", "100", "0", "1,234", "2023-11-14", "22:13:20", "UTC"]
    assert rows["inp"] == ["input", "10", "20.0"]  # other steps leave those cells blank
    assert (
        "sorter handlers 100 rebuilds 0 WAL 1,234 out. watermark 2023-11-14 22:13:20 UTC"
        in display.line()
    )


def test_a_cycles_datums_run_are_its_in_figure_with_their_rate():
    """A Numaflow cycle (a keyed step) counts the datums its vertices ran, rounds
    included: shown as its ``in`` and rate, written to the JSON lines, summed back."""
    steps = [("in", "input"), ("spin.cycle", "cycle"), ("out", "output")]
    hub_lines: list[dict] = []
    batches = [
        BatchProgress(0, True, 90, {"in": 5}, {"out": 5}, {}, handled_items={"spin.cycle": 500}),
        BatchProgress(1, True, 90, {}, {}, {}, handled_items={"spin.cycle": 700}),
    ]
    console = Console(record=True, width=120, force_terminal=True)
    display = LiveProgress(steps, "spin", console, clock=Ticks(), wall=lambda: WALL_S)
    for progress in batches:
        display.on_batch(progress)
        hub_lines.append(batch_figures(progress, wall_ms=int(WALL_S * 1000), seconds=0.5))
    console.print(display)
    rows = {line.split()[0]: line.split()[1:] for line in console.export_text().splitlines()[4:]}
    assert rows["spin.cycle"] == ["cycle", "1,200", "1,400"]  # 700 run in 0.5 s
    assert "spin.cycle in 1,200 (1,400/s)" in display.line()
    assert hub_lines[1]["steps"]["spin.cycle"] == {"in": 700, "in_per_s": 1400.0}
    assert read_progress(json.dumps(line) for line in hub_lines).steps["spin.cycle"] == {"in": 1200}


def test_the_hub_hands_each_batchs_handled_counts_on():
    seen: list[BatchProgress] = []

    class Listener:
        def on_batch(self, progress: BatchProgress) -> None:
            seen.append(progress)

    hub = ProgressHub([Listener()], streamed=True)
    hub.batch_written(0, {"in": 1}, {}, {}, {"spin.cycle": 40})
    hub.spark_progress({"batchId": 0, "durationMs": {"triggerExecution": 12}})
    hub.batch_written(1, {"in": 2}, {}, {})  # a flow without a cycle
    hub.finish()
    assert [p.handled_items for p in seen] == [{"spin.cycle": 40}, {}]
    assert seen[0].duration_ms == 12 and seen[1].items_read == {"in": 2}


class _Report:
    def __init__(self, batch_id: int) -> None:
        self.batchId = batch_id
        self.json = json.dumps({"batchId": batch_id})


class _QueryReports:
    """A query's progress as Spark keeps it: the retained reports, the last one."""

    def __init__(self) -> None:
        self.reports: list[_Report] = []
        self.retained_reads = 0

    @property
    def lastProgress(self) -> _Report | None:
        return self.reports[-1] if self.reports else None

    @property
    def recentProgress(self) -> list[_Report]:
        self.retained_reads += 1
        return list(self.reports)


class _Batches:
    def __init__(self) -> None:
        self.ids: list[int] = []

    def spark_progress(self, progress: dict) -> None:
        self.ids.append(progress["batchId"])


def test_progress_polls_read_the_last_report_and_the_retained_ones_only_after_a_gap():
    from flowspark.engine.query import _NewProgress

    query, hub = _QueryReports(), _Batches()
    progress = _NewProgress(query)
    progress.hand_to(hub)  # no report yet
    for batch in range(3):  # one report between two polls: the last one is enough
        query.reports.append(_Report(batch))
        progress.hand_to(hub)
        progress.hand_to(hub)  # nothing new: nothing handed on twice
    assert (hub.ids, query.retained_reads) == ([0, 1, 2], 0)
    query.reports += [_Report(3), _Report(4), _Report(5)]  # three between two polls
    progress.hand_to(hub)
    assert (hub.ids, query.retained_reads) == ([0, 1, 2, 3, 4, 5], 1)


def test_a_restarted_querys_first_reports_are_handed_on_from_its_first_batch():
    from flowspark.engine.query import _NewProgress

    query, hub = _QueryReports(), _Batches()
    query.reports += [_Report(57), _Report(58)]  # resumed from a checkpoint at batch 57
    _NewProgress(query).hand_to(hub)
    assert hub.ids == [57, 58]
