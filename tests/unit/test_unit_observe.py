"""The observation seam without Spark: the hub joins sink counts with Spark's progress."""

from __future__ import annotations

import pytest

from flowspark.engine.compat import check_pyspark
from flowspark.engine.observe import (
    BatchProgress,
    ProgressHub,
    ProgressLog,
    ReportBuilder,
    RunListener,
)


class Collector:
    def __init__(self) -> None:
        self.seen: list[BatchProgress] = []

    def on_batch(self, progress: BatchProgress) -> None:
        self.seen.append(progress)


def _spark(batch_id: int, watermark: str | None = None, state_rows: int | None = None) -> dict:
    progress = {"batchId": batch_id, "durationMs": {"triggerExecution": 100 + batch_id}}
    if watermark:
        progress["eventTime"] = {"watermark": watermark}
    if state_rows is not None:
        progress["stateOperators"] = [{"numRowsTotal": state_rows}, {"numRowsTotal": 1}]
    return progress


def test_a_batch_is_reported_once_its_spark_progress_arrives_with_both_sides_joined():
    collector = Collector()
    hub = ProgressHub([collector], streamed=True)
    hub.batch_written(0, {"inp": 5}, {"out": 2}, {"w": 1})
    assert collector.seen == []
    hub.spark_progress(_spark(0, "1970-01-01T00:00:01.500Z", state_rows=3))
    (progress,) = collector.seen
    assert (progress.batch_id, progress.items_read, progress.items_written) == (
        0,
        {"inp": 5},
        {"out": 2},
    )
    assert progress.late_items == {"w": 1}
    assert progress.duration_ms == 100
    assert progress.watermark_ms == 1500
    assert progress.state_keys == 4
    assert progress.spark is not None and progress.spark["batchId"] == 0


def test_idle_progress_is_ignored_and_missed_progress_is_reported_in_order():
    collector = Collector()
    hub = ProgressHub([collector], streamed=True)
    hub.spark_progress(_spark(7))  # Spark's idle report: no batch the sinks saw
    hub.batch_written(1, {}, {"out": 1}, {})
    hub.batch_written(2, {}, {"out": 2}, {})
    hub.batch_written(3, {}, {"out": 3}, {})
    hub.spark_progress(_spark(2))  # batch 1's progress was missed
    assert [p.batch_id for p in collector.seen] == [1, 2]
    assert collector.seen[0].duration_ms is None and collector.seen[1].duration_ms == 102
    hub.finish()  # batch 3 never got progress (the query ended)
    assert [p.batch_id for p in collector.seen] == [1, 2, 3]


def test_a_batch_job_reports_its_one_batch_with_its_wall_time():
    builder = ReportBuilder(streamed=False)
    hub = ProgressHub([builder], streamed=False)
    hub.batch_written(0, {"a": 2, "b": 3}, {"out": 5}, {"w": 2})
    hub.job_done()
    report = builder.report
    assert (report.batches, report.streamed) == (1, False)
    assert report.items_read == {"a": 2, "b": 3}
    assert report.items_written == {"out": 5}
    assert report.late_counts == {"w": 2}


def test_the_report_sums_every_batch():
    builder = ReportBuilder(streamed=True)
    for n in range(3):
        builder.on_batch(BatchProgress(n, True, 1.0, {"inp": 2}, {"out": n}, {"w": 1}))
    assert builder.report.items_read == {"inp": 6}
    assert builder.report.items_written == {"out": 3}
    assert builder.report.late_counts == {"w": 3}
    assert builder.report.batches == 3


def test_the_progress_log_appends_spark_progress_as_json_lines(tmp_path):
    path = tmp_path / "progress.jsonl"
    hub = ProgressHub([ProgressLog(str(path))], streamed=True)
    for n in range(2):
        hub.batch_written(n, {}, {}, {})
        hub.spark_progress(_spark(n))
    assert [line[:13] for line in path.read_text().splitlines()] == [
        '{"batchId": 0',
        '{"batchId": 1',
    ]


def test_listeners_are_a_protocol():
    assert isinstance(Collector(), RunListener)
    assert not isinstance(object(), RunListener)


def test_pyspark_versions_outside_the_written_series_warn_or_fail():
    check_pyspark("4.3.1")
    with pytest.warns(RuntimeWarning, match="written against PySpark 4.3; found 4.4.0"):
        check_pyspark("4.4.0")
    with pytest.raises(RuntimeError, match="needs PySpark 4.x"):
        check_pyspark("5.0.0")
