"""Numaflow's source watermark of each part of an input read in the planning process
(see :class:`~flowspark.api.inputs.SourceWatermark`); pure Python, no pyspark."""

from __future__ import annotations

from typing import Any

from flowspark.api.inputs import SourceWatermark
from flowspark.runtime.codec import WHOLE_INPUT_MS
from flowspark.runtime.input_offsets import wall_time
from flowspark.shared.times import duration_ms, naive_as_utc_to_ms, seconds_to_ms

__all__ = ["MIN_WATERMARK", "NO_WATERMARK_MS", "PartMarks"]

# A part's watermark before it has read anything: Numaflow's -1 ms.
MIN_WATERMARK = -1
# The time of rows while the flow has no watermark yet (see engine/source.py's partitions()).
NO_WATERMARK_MS = WHOLE_INPUT_MS + 1


class PartMarks:
    """Numaflow's source watermark of each part of one input (see
    :class:`~flowspark.api.inputs.SourceWatermark`); times in ms on the input
    path's wall clock."""

    def __init__(self, policy: SourceWatermark) -> None:
        self.policy = policy
        self.delay_ms = duration_ms(policy.max_delay)
        self.wm: dict[str, int] = {}
        # Per micro-batch: the watermark when it began and the least event time read
        # in it so far. The datums of one micro-batch are read in one or more pulls;
        # the batch's watermark is (the least of ALL of them) - max delay, so that no
        # datum of the batch is behind the watermark it is handed with (unless late
        # on its own source), as if the micro-batch were one Numaflow read batch.
        self.base: dict[str, int] = {}
        self.batch_least: dict[str, int] = {}
        self.started: dict[str, int] = {}
        self.last_data: dict[str, int] = {}
        self.last_step: dict[str, int] = {}

    def open(self, part: str, wm: int) -> None:
        now = seconds_to_ms(wall_time())
        self.wm[part] = self.base[part] = wm
        self.started[part] = self.last_data[part] = self.last_step[part] = now

    def read(self, part: str, items: list[Any], step_id: str) -> None:
        """A pull: the part's watermark is the least event time of its micro-batch so
        far - max delay (never below where the micro-batch began)."""
        try:
            least = min(naive_as_utc_to_ms(item.event_time) for item in items)
        except (AttributeError, TypeError, ValueError) as exc:
            raise TypeError(
                f"input {step_id!r} has a source watermark, so its items must be datums "
                f"with an event_time; got {type(items[0]).__name__}: {exc}"
            ) from None
        least = min(least, self.batch_least.get(part, least))
        self.batch_least[part] = least
        self.wm[part] = max(self.base[part], least - self.delay_ms)
        self.last_data[part] = seconds_to_ms(wall_time())

    def seal(self) -> None:
        """A micro-batch's offsets were handed out: the next pulls make the next one."""
        self.base.update(self.wm)
        self.batch_least.clear()

    def idle_step(self, part: str) -> bool:
        """Move an idle part's watermark (Numaflow's idleSource rule); whether it moved."""
        policy = self.policy
        if policy.idle_threshold is None:
            return False
        now = seconds_to_ms(wall_time())
        if now - self.last_data[part] < duration_ms(policy.idle_threshold):
            return False
        if now - self.last_step[part] < duration_ms(policy.idle_step):
            return False
        self.last_step[part] = now
        before = self.wm[part]
        if before == MIN_WATERMARK:
            delay = policy.init_source_delay
            if delay is not None and now - self.started[part] >= duration_ms(delay):
                self.wm[part] = now
        elif policy.idle_increment is not None:
            self.wm[part] = max(before, min(before + duration_ms(policy.idle_increment), now))
        if part not in self.batch_least:  # no datum in this micro-batch yet
            self.base[part] = self.wm[part]
        return self.wm[part] != before

    def next_idle_step(self) -> float:
        """The wall time (s) of the next possible idle step of any part."""
        policy = self.policy
        assert policy.idle_threshold is not None
        due = [
            max(
                self.last_data[p] + duration_ms(policy.idle_threshold),
                t + duration_ms(policy.idle_step),
            )
            for p, t in self.last_step.items()
        ]
        return min(due) / 1000 if due else wall_time()
