"""bytewax 0.21's testing helpers without Spark: ``TimeTestingGetter`` (with
``TTLCache``, as bytewax's own tests use it), ``ffwd_iter``, ``poll_next_batch`` and
what ``cluster_main`` refuses before anything runs (runs: tests/spark/test_operators021.py,
tests/recovery/test_cluster_main.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from flowspark.dataflow import Dataflow
from flowspark.operators import TTLCache
from flowspark.testing import TimeTestingGetter, cluster_main, ffwd_iter, poll_next_batch

START = datetime(2024, 5, 10, 10, 0, tzinfo=UTC)


def test_a_ttl_cache_fetches_again_once_the_getters_time_passes_its_ttl():
    clock = TimeTestingGetter(START)
    lookup = {"a": 1}
    cache = TTLCache(lookup.get, clock.get, ttl=timedelta(minutes=1))
    assert cache.get("a") == 1
    lookup["a"] = 3
    clock.advance(timedelta(seconds=59))
    assert cache.get("a") == 1  # still fresh
    clock.advance(timedelta(minutes=2))
    assert cache.get("a") == 3 and clock.get() == START + timedelta(minutes=2, seconds=59)


def test_ffwd_iter_skips_items_and_stops_at_the_end():
    it = iter(range(5))
    ffwd_iter(it, 2)
    assert next(it) == 2
    ffwd_iter(it, 10)
    assert next(it, "end") == "end"


class _Part:
    def __init__(self, batches: list[list[int]]) -> None:
        self.batches = batches

    def next_batch(self) -> list[int]:
        return self.batches.pop(0) if self.batches else []


def test_poll_next_batch_returns_the_first_batch_with_items():
    assert poll_next_batch(_Part([[], [], [7, 8]])) == [7, 8]


def test_poll_next_batch_gives_up_after_its_timeout():
    with pytest.raises(TimeoutError):
        poll_next_batch(_Part([]), timeout=timedelta(milliseconds=50))


@pytest.mark.parametrize(
    ("addresses", "proc_id", "workers", "message"),
    [
        (["a:1", "b:2"], 2, 1, "proc_id must be in 0..1 for 2 address(es); got 2"),
        (["a:1"], 1, 1, "proc_id must be in 0..0 for 1 address(es); got 1"),
        (["a:1", "b"], 1, 1, "an address is host:port; got 'b'"),
        (["a:1", "b:70000"], 0, 1, "an address is host:port; got 'b:70000'"),
        ([], 0, 0, "worker_count_per_proc must be an int >= 1; got 0"),
    ],
)
def test_cluster_main_refuses_what_spark_does_not_run_before_starting(
    addresses, proc_id, workers, message
):
    with pytest.raises(ValueError, match=re.escape(message)):
        cluster_main(Dataflow("c"), addresses, proc_id, worker_count_per_proc=workers)
