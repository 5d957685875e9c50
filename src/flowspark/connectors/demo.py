"""bytewax 0.21's demo connector (``bytewax.connectors.demo``): ``RandomMetricSource``.

It emits ``(metric_name, value)`` every ``interval``, ``count`` times (default: for
ever), each value from ``next_random()`` (default: an int in 0..9). It resumes from
its snapshot, the number emitted and the time of the next: a restarted run goes on
with the count where the last one committed.

>>> from datetime import timedelta
>>> from flowspark.testing import poll_next_batch
>>> source = RandomMetricSource("cpu", timedelta(0), count=2, next_random=lambda: 0.5)
>>> part = source.build_part("demo.inp", "cpu", None)
>>> poll_next_batch(part), poll_next_batch(part), part.snapshot()[1]
([('cpu', 0.5)], [('cpu', 0.5)], 2)
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from flowspark.api.sources import FixedPartitionedSource, StatefulSourcePartition

__all__ = ["RandomMetricSource"]

_State = tuple[datetime, int]  # (when the next value is due, values emitted)


def _random_digit() -> float:
    return random.randrange(0, 10)


class _MetricPartition(StatefulSourcePartition[tuple[str, float], _State]):
    def __init__(
        self,
        name: str,
        interval: timedelta,
        count: int,
        next_random: Callable[[], float],
        state: _State,
    ) -> None:
        self.name, self.interval, self.count, self.next_random = name, interval, count, next_random
        self.due, self.emitted = state

    def next_batch(self) -> list[tuple[str, float]]:
        if self.emitted >= self.count:
            raise StopIteration()
        self.due += self.interval
        self.emitted += 1
        return [(self.name, self.next_random())]

    def next_awake(self) -> datetime | None:
        return self.due

    def snapshot(self) -> _State:
        return (self.due, self.emitted)


class RandomMetricSource(FixedPartitionedSource[tuple[str, float], _State]):
    """Random values of one metric, ``(metric_name, value)``, one every ``interval``
    (default 0.7 s), ``count`` of them (default: no end). For several metrics, make
    several inputs and ``merge`` them, as bytewax's documentation says."""

    def __init__(
        self,
        metric_name: str,
        interval: timedelta = timedelta(seconds=0.7),
        count: int = sys.maxsize,
        next_random: Callable[[], float] = _random_digit,
    ) -> None:
        self.metric_name = metric_name
        self.interval = interval
        self.count = count
        self.next_random = next_random

    def list_parts(self) -> list[str]:
        return [self.metric_name]

    def build_part(
        self, step_id: str, for_part: str, resume_state: _State | None
    ) -> _MetricPartition:
        state = resume_state if resume_state is not None else (datetime.now(UTC), 0)
        return _MetricPartition(for_part, self.interval, self.count, self.next_random, state)
