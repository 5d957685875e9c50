"""The observation seam: listeners see every micro-batch (or the one batch job) of a
run, and the run's report is built from what they see."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowspark.dataflow import Dataflow
from flowspark.engine.observe import BatchProgress
from flowspark.engine.query import RunConfig, run_flow
from tests.hourly_counts import hourly_counts


class Collector:
    def __init__(self) -> None:
        self.seen: list[BatchProgress] = []

    def on_batch(self, progress: BatchProgress) -> None:
        self.seen.append(progress)


def _flow(out: list, late: list, batch_size: int) -> Dataflow:
    # Hours 0..9 in order, then hour 1 again: late once the watermark passed 5 h. (The
    # event clock's watermark also moves with system time between micro-batches:
    # hours keep that drift from closing a window early.)
    items = [("k", t) for t in [*range(10), 1]]
    return hourly_counts("flow", items, batch_size, out, late)


@pytest.mark.parametrize(
    ("config", "streamed"),
    [
        (RunConfig(), False),
        (RunConfig(epoch_interval=timedelta(0)), True),
    ],
    ids=["batch-job", "stream"],
)
def test_listeners_see_every_batch_and_the_report_is_built_from_them(config, streamed, tmp_path):
    out, late = [], []
    collector = Collector()
    config.listeners = [collector]
    report = run_flow(_flow(out, late, batch_size=4 if streamed else 100), config)

    assert sorted(out) == [("k", 5), ("k", 5)]
    assert len(late) == 1
    seen = collector.seen
    assert [p.batch_id for p in seen] == sorted({p.batch_id for p in seen})
    assert all(p.streamed is streamed for p in seen)
    assert report.streamed is streamed
    assert report.batches == len(seen)
    total = lambda field: sum(
        getattr(p, field).get(name, 0) for p in seen for name in getattr(p, field)
    )  # noqa: E731
    assert total("items_read") == 11 == report.items_read["inp"]
    assert report.items_written == {"out": 2, "late": 1}
    assert sum(sum(p.items_written.values()) for p in seen) == 3
    assert report.late_counts == {"count": 1}
    assert all(p.duration_ms is not None and p.duration_ms > 0 for p in seen)
    if streamed:
        assert len(seen) >= 3  # 11 items in batches of 4, then the end of input
        assert all(p.spark is not None and "triggerExecution" in p.phases_ms for p in seen)
        assert any(p.state_keys for p in seen)  # keyed state rows while windows are open
        assert seen[-1].watermark_ms is not None
    else:
        assert len(seen) == 1 and seen[0].spark is None
