"""Watching a run: one listener interface, fed per micro-batch (or per batch job).

Both paths report the same :class:`BatchProgress`: a streaming query once Spark
has finished each micro-batch (its query progress joined with what the sinks
saw), a batch job once, at its end. :class:`RunReport` is built by a listener
like any other (:class:`ReportBuilder`), and so are the ``$FLOWSPARK_PROGRESS_LOG``
file and ``--progress-json``'s (:class:`ProgressLog`, one :func:`batch_figures` line
per batch). The live display and the Prometheus endpoint are more listeners
(:mod:`flowspark.engine.progress`).

>>> seen = []
>>> class Printer:
...     def on_batch(self, progress):
...         seen.append((progress.batch_id, progress.items_written))
>>> hub = ProgressHub([Printer()], streamed=True)
>>> hub.batch_written(0, items_read={"inp": 3}, items_written={"out": 3}, late_items={})
>>> hub.spark_progress({"batchId": 0, "durationMs": {"triggerExecution": 120}})
>>> seen
[(0, {'out': 3})]
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol, runtime_checkable

from flowspark.runtime.windowing import EOF_MS

__all__ = [
    "BatchProgress",
    "RunListener",
    "RunReport",
    "ReportBuilder",
    "ProgressLog",
    "ProgressHub",
    "STEP_COUNTS",
    "batch_figures",
    "watermark_at_end",
    "watermark_lag_ms",
]


@dataclass(frozen=True)
class BatchProgress:
    """What one micro-batch (or the one batch job) did.

    ``items_read`` per input step, ``items_written`` per output step and
    ``late_items`` per window step count items, exactly. From Spark's query
    progress, when streamed: ``duration_ms`` (the trigger's execution; for a
    batch job the job's wall time), ``phases_ms`` (Spark's ``durationMs``),
    ``watermark_ms`` (the flow's clock; ``None`` before the first keyed step
    has one; the end of time once every input has ended), ``state_keys`` (rows
    in keyed state: one per state bucket or key), ``backlog`` per live input that
    knows it (a stream's messages not read yet, as of the batch's planning),
    ``share_read`` per finite input read in micro-batches (0..1, by offsets) and
    the raw progress ``spark`` (a dict), for anything else.
    """

    batch_id: int
    streamed: bool
    duration_ms: float | None
    items_read: dict[str, int] = field(default_factory=dict)
    items_written: dict[str, int] = field(default_factory=dict)
    late_items: dict[str, int] = field(default_factory=dict)
    watermark_ms: int | None = None
    state_keys: int | None = None
    phases_ms: dict[str, int] = field(default_factory=dict)
    spark: dict[str, Any] | None = None
    backlog: dict[str, int] = field(default_factory=dict)
    share_read: dict[str, float] = field(default_factory=dict)
    # Per Numaflow keyed step, from its handler hosts: open_handlers, rebuilds (since
    # the run started), wal_datums (retained) and outbound_watermark_ms.
    handlers: dict[str, dict[str, int]] = field(default_factory=dict)
    # Per keyed step that counts it, what it handled beyond its outputs: a Numaflow
    # cycle's datums run by its vertices, each round.
    handled_items: dict[str, int] = field(default_factory=dict)
    # Per output step in items_written: where its items were written, "driver" or
    # "executors" (Spark's tasks, for outputs that say writes_on = "executors").
    written_on: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class RunListener(Protocol):
    """Called once per finished micro-batch (or batch job), in batch order, on the
    thread that runs the flow. It must return quickly; what it raises ends the run."""

    def on_batch(self, progress: BatchProgress) -> None: ...


@dataclass
class RunReport:
    """What a finished run observed: micro-batches written, late items per window
    step, items read per input and written per output, whether it ran as a
    streaming query (else as one batch job), and which input aborted it."""

    batches: int = 0
    late_counts: dict[str, int] = field(default_factory=dict)
    streamed: bool = True
    items_read: dict[str, int] = field(default_factory=dict)
    items_written: dict[str, int] = field(default_factory=dict)
    # The input step that stopped the run with ``AbortExecution`` (None: none did).
    aborted: str | None = None


def _add(total: dict[str, int], more: dict[str, int]) -> None:
    for name, count in more.items():
        total[name] = total.get(name, 0) + count


class ReportBuilder:
    """The listener that builds a run's :class:`RunReport`."""

    def __init__(self, streamed: bool) -> None:
        self.report = RunReport(streamed=streamed)

    def on_batch(self, progress: BatchProgress) -> None:
        report = self.report
        report.batches += 1
        _add(report.late_counts, progress.late_items)
        _add(report.items_read, progress.items_read)
        _add(report.items_written, progress.items_written)


def watermark_at_end(watermark_ms: int | None) -> bool:
    """Whether the flow's clock was moved to the end of time: every input has ended."""
    return watermark_ms is not None and watermark_ms >= EOF_MS - 1000


def watermark_lag_ms(watermark_ms: int | None, wall_ms: int) -> int | None:
    """How far the flow's watermark is behind the wall clock at ``wall_ms`` (never below
    0: at the end of input it is past every wall time), ``None`` without one.

    >>> watermark_lag_ms(9_000, 10_000), watermark_lag_ms(EOF_MS - 1, 10_000)
    (1000, 0)
    """
    return None if watermark_ms is None else max(0, wall_ms - watermark_ms)


# A progress line's counts per step, under its ``steps``: the BatchProgress field each
# comes from and its key there (an input's items read are its ``out``, an output's items
# written its ``in``). The one definition of them: batch_figures writes them and
# flowspark.visualize.read_progress (``visualize --from``) sums them.
STEP_COUNTS: tuple[tuple[str, str], ...] = (
    ("items_read", "out"),
    ("items_written", "in"),
    ("late_items", "late"),
    ("handled_items", "in"),
)


def batch_figures(
    progress: BatchProgress, wall_ms: int, seconds: float | None = None
) -> dict[str, Any]:
    """One batch's figures as a JSON object (a line of ``--progress-json``).

    ``steps`` holds each input's ``out`` (items it read; a live input that knows
    it: its ``backlog``), each output's ``in`` (items written to it, and ``on``:
    where, ``"driver"`` or ``"executors"``) and each
    window step's ``late`` (:data:`STEP_COUNTS`); with ``seconds`` (the
    time this batch's items took to come through: since the last batch ended)
    their rates ``out_per_s``/``in_per_s`` too. ``wall_ms`` is the time of the
    report, ``duration_ms`` the batch's, ``watermark_lag_ms`` how far the flow's
    watermark is behind ``wall_ms`` and ``state_keys`` the rows in keyed state.
    :func:`flowspark.visualize.read_progress` (``visualize --from``) sums these lines.

    >>> p = BatchProgress(2, True, 120, {"inp": 50}, {"out": 4}, {"w": 1}, watermark_ms=9_000)
    >>> batch_figures(p, wall_ms=10_000, seconds=2.0)["steps"]
    {'inp': {'out': 50, 'out_per_s': 25.0}, 'out': {'in': 4, 'in_per_s': 2.0}, 'w': {'late': 1}}
    >>> from dataclasses import replace
    >>> batch_figures(replace(p, written_on={"out": "executors"}), wall_ms=0)["steps"]["out"]
    {'in': 4, 'on': 'executors'}
    >>> batch_figures(p, wall_ms=10_000)["watermark_lag_ms"]
    1000
    """
    steps: dict[str, dict[str, Any]] = {}
    for name, key in STEP_COUNTS:
        counts: dict[str, int] = getattr(progress, name)
        for step_id, count in counts.items():
            figures = steps.setdefault(step_id, {})
            figures[key] = count
            if seconds and key != "late":
                figures[f"{key}_per_s"] = round(count / seconds, 1)
    for step_id, count in progress.backlog.items():
        steps.setdefault(step_id, {})["backlog"] = count
    for step_id, share in progress.share_read.items():
        steps.setdefault(step_id, {})["read"] = share
    for step_id, handlers in progress.handlers.items():
        steps.setdefault(step_id, {}).update(handlers)
    for step_id, where in progress.written_on.items():
        steps.setdefault(step_id, {})["on"] = where
    return {
        "batch": progress.batch_id,
        "streamed": progress.streamed,
        "wall_ms": wall_ms,
        "duration_ms": progress.duration_ms,
        "watermark_ms": progress.watermark_ms,
        "watermark_lag_ms": watermark_lag_ms(progress.watermark_ms, wall_ms),
        "state_keys": progress.state_keys,
        "steps": steps,
    }


class ProgressLog:
    """Appends one JSON line per micro-batch (or batch job) to a file: its
    :func:`batch_figures`, after Spark's own query progress (its keys, e.g.
    ``batchId``, ``durationMs``, ``stateOperators``) when ``spark`` and the batch has
    one. ``$FLOWSPARK_PROGRESS_LOG`` is such a log; ``--progress-json`` one without
    Spark's part, started afresh (``truncate``)."""

    def __init__(self, path: str, spark: bool = True, truncate: bool = False) -> None:
        self.path = path
        self.spark = spark
        if truncate:
            open(path, "w").close()
        self._last = time.monotonic()

    def on_batch(self, progress: BatchProgress) -> None:
        now = time.monotonic()
        seconds, self._last = now - self._last, now
        line = dict(progress.spark or {}) if self.spark else {}
        line.update(batch_figures(progress, time.time_ns() // 1_000_000, seconds))
        with open(self.path, "a") as f:
            f.write(json.dumps(line) + "\n")


def _watermark_ms(spark: dict[str, Any]) -> int | None:
    text = (spark.get("eventTime") or {}).get("watermark")
    if not text:
        return None
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    ms = int(moment.timestamp() * 1000)
    return ms or None  # Spark's watermark starts at 0: none yet


def _end_offset_figures(spark: dict[str, Any], name: str, kind: type) -> dict[str, Any]:
    """A figure per input that the source noted in its end offsets (``backlog``: a live
    input's unread items; ``read``: a finite input's share read)."""
    for source in spark.get("sources") or []:
        end = source.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if isinstance(end, dict) and isinstance(end.get(name), dict):
            return {str(k): kind(v) for k, v in end[name].items()}
    return {}


def _state_keys(spark: dict[str, Any]) -> int | None:
    operators = spark.get("stateOperators") or []
    return sum(op.get("numRowsTotal", 0) for op in operators) if operators else None


class _Counts(NamedTuple):
    """What the sinks counted in one batch, until Spark's progress for it comes."""

    items_read: dict[str, int]
    items_written: dict[str, int]
    late_items: dict[str, int]
    handled_items: dict[str, int]
    written_on: dict[str, str]

    def progress(
        self, batch_id: int, streamed: bool, duration_ms: float | None, **more: Any
    ) -> BatchProgress:
        return BatchProgress(
            batch_id,
            streamed,
            duration_ms,
            self.items_read,
            self.items_written,
            self.late_items,
            handled_items=self.handled_items,
            written_on=self.written_on,
            **more,
        )


class ProgressHub:
    """Joins what the sinks saw of a batch with Spark's progress of it and hands the
    result to every listener, in batch order.

    The sinks report from Spark's ``foreachBatch`` (:meth:`batch_written`); the
    thread awaiting the query reports Spark's progress (:meth:`spark_progress`);
    :meth:`finish` reports batches whose progress never came. A batch job
    reports once, through :meth:`job_done`.
    """

    def __init__(
        self,
        listeners: Sequence[RunListener],
        streamed: bool,
        handler_figures: Callable[[], dict[str, dict[str, int]]] | None = None,
    ) -> None:
        self.listeners = list(listeners)
        self.streamed = streamed
        self.handler_figures = handler_figures
        self._written: dict[int, _Counts] = {}
        self._lock = threading.Lock()
        self._started = time.perf_counter()

    def batch_written(
        self,
        batch_id: int,
        items_read: dict[str, int],
        items_written: dict[str, int],
        late_items: dict[str, int],
        handled_items: dict[str, int] | None = None,
        written_on: dict[str, str] | None = None,
    ) -> None:
        counts = _Counts(
            items_read, items_written, late_items, handled_items or {}, written_on or {}
        )
        with self._lock:
            self._written[batch_id] = counts

    def spark_progress(self, spark: dict[str, Any]) -> None:
        """One micro-batch's query progress (Spark's JSON as a dict)."""
        batch_id = int(spark["batchId"])
        with self._lock:
            written = self._written.pop(batch_id, None)
            earlier = sorted(b for b in self._written if b < batch_id)
            flushed = [(b, self._written.pop(b)) for b in earlier]
        for b, counts in flushed:  # written, but Spark's progress for it was missed
            self._emit(counts.progress(b, self.streamed, None))
        if written is None:  # not a batch the sinks saw (Spark's idle progress)
            return
        phases = {k: int(v) for k, v in (spark.get("durationMs") or {}).items()}
        self._emit(
            written.progress(
                batch_id,
                self.streamed,
                phases.get("triggerExecution"),
                watermark_ms=_watermark_ms(spark),
                state_keys=_state_keys(spark),
                phases_ms=phases,
                spark=spark,
                backlog=_end_offset_figures(spark, "backlog", int),
                share_read=_end_offset_figures(spark, "read", float),
                handlers=self.handler_figures() if self.handler_figures else {},
            )
        )

    def finish(self) -> None:
        """Report the batches written whose Spark progress never arrived."""
        with self._lock:
            rest = sorted(self._written.items())
            self._written.clear()
        for batch_id, counts in rest:
            self._emit(counts.progress(batch_id, self.streamed, None))

    def job_done(self) -> None:
        """A batch job ended: its one batch, timed from this hub's creation."""
        elapsed = (time.perf_counter() - self._started) * 1000
        with self._lock:
            rest = sorted(self._written.items())
            self._written.clear()
        for batch_id, counts in rest:
            self._emit(counts.progress(batch_id, False, elapsed))

    def _emit(self, progress: BatchProgress) -> None:
        for listener in self.listeners:
            listener.on_batch(progress)
