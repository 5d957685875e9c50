"""Watching a run live: a terminal display, a Prometheus endpoint, a JSON-lines file.

Each is a :class:`~flowspark.engine.observe.RunListener` fed by the run's
``ProgressHub`` once per micro-batch (or once for a batch job), so they show the
same figures: items read per input, written per output and late per window
step (with their rates), the batch's duration, the flow's watermark and how far
it is behind the wall clock, and the rows of keyed state. :func:`watch_run`
builds the ones a :class:`~flowspark.engine.query.RunConfig` asks for
(``progress``, ``progress_json``, ``metrics_port``); ``python -m flowspark.run``
sets them from ``--progress``, ``--progress-json`` and ``--metrics-port``.

The display (:class:`LiveProgress`) needs ``rich`` and the endpoint
(:class:`PrometheusMetrics`) ``prometheus_client``; both are imported only when
used. Everything goes to stderr, never to stdout, where ``StdOutput`` writes.

>>> from flowspark.engine.observe import BatchProgress
>>> tally = Tally([("inp", "input"), ("w", "fold_window"), ("out", "output")])
>>> tally.add(BatchProgress(0, True, 800, {"inp": 40}, {"out": 2}, {"w": 1}), 2.0)
>>> tally.rows["inp"].out, tally.rows["inp"].out_per_s, tally.rows["w"].late
(40, 20.0, 1)
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from flowspark.api.steps import OPERATORS
from flowspark.engine.compat import is_connect
from flowspark.engine.observe import (
    BatchProgress,
    ProgressLog,
    RunListener,
    watermark_at_end,
    watermark_lag_ms,
)

__all__ = [
    "LiveProgress",
    "PrometheusMetrics",
    "StepRow",
    "Tally",
    "spark_ui_line",
    "watch_run",
    "watched_steps",
]

_SHOWN_FAMILIES = ("input", "keyed", "output")


def _counts_late(kind: str) -> bool:
    """Whether a step of ``kind`` has a late port: its late items are shown, from 0.

    >>> _counts_late("fold_window"), _counts_late("reduce_stream"), _counts_late("reduce")
    (True, True, False)
    """
    op = OPERATORS.get(kind)
    return op is not None and op.late_port


def watched_steps(plan: Any) -> list[tuple[str, str]]:
    """``(step id, kind)`` of the steps with figures, in flow order: the inputs,
    the keyed steps (those with a late port count late items) and the outputs.

    >>> from flowspark.dataflow import Dataflow
    >>> from flowspark.plan.graph import build_plan
    >>> from flowspark.testing import TestingInput, TestingOutput
    >>> flow = Dataflow("doc")
    >>> s = flow.input("inp", TestingInput([("a", 1)])).map("m", lambda x: x)
    >>> s = s.reduce("sum", lambda a, b: a + b, lambda acc: True).output("out", TestingOutput([]))
    >>> watched_steps(build_plan(flow))
    [('inp', 'input'), ('sum', 'reduce'), ('out', 'output')]
    """
    return [
        (step.step_id, step.kind) for step in plan.steps if step.operator.family in _SHOWN_FAMILIES
    ]


@dataclass
class StepRow:
    """One step's figures: totals so far and the last batch's rates (items per second)."""

    step_id: str
    kind: str
    in_: int = 0
    out: int = 0
    late: int = 0
    in_per_s: float | None = None
    out_per_s: float | None = None
    backlog: int | None = None  # a live input's items not read yet
    read: float | None = None  # a finite input's share read (0..1)
    # A Numaflow keyed step's handlers (see BatchProgress.handlers): open handlers,
    # rebuilds since the run began, WAL datums retained, outbound watermark (ms).
    handlers: dict[str, int] | None = None
    on: str | None = None  # an output's: where its items were written last


@dataclass
class Tally:
    """What a run's batches added up to, for a display: one :class:`StepRow` per step
    (in the order given; steps first seen in a batch are added at the end) and the
    last batch's figures."""

    steps: Sequence[tuple[str, str]] = ()
    rows: dict[str, StepRow] = field(default_factory=dict)
    batches: int = 0
    last: BatchProgress | None = None
    watermark_lag_s: float | None = None
    state_keys: int | None = None

    def __post_init__(self) -> None:
        for step_id, kind in self.steps:
            self.rows[step_id] = StepRow(step_id, kind)

    def _row(self, step_id: str, kind: str) -> StepRow:
        if step_id not in self.rows:
            self.rows[step_id] = StepRow(step_id, kind)
        return self.rows[step_id]

    def add(
        self, progress: BatchProgress, seconds: float | None, wall_ms: int | None = None
    ) -> None:
        """Count one batch whose items took ``seconds`` to come through (for rates),
        reported at ``wall_ms`` (default: now; for the watermark's lag)."""
        if wall_ms is None:
            wall_ms = time.time_ns() // 1_000_000
        for row in self.rows.values():
            row.in_per_s = row.out_per_s = 0.0 if seconds else None
        for step_id, count in progress.items_read.items():
            row = self._row(step_id, "input")
            row.out += count
            row.out_per_s = count / seconds if seconds else None
        for step_id, count in progress.items_written.items():
            row = self._row(step_id, "output")
            row.in_ += count
            row.in_per_s = count / seconds if seconds else None
            row.on = progress.written_on.get(step_id, row.on)
        for step_id, count in progress.late_items.items():
            self._row(step_id, "window").late += count
        for step_id, count in progress.handled_items.items():  # a cycle's datums run
            row = self._row(step_id, "keyed")
            row.in_ += count
            row.in_per_s = count / seconds if seconds else None
        for step_id, count in progress.backlog.items():
            self._row(step_id, "input").backlog = count
        for step_id, share in progress.share_read.items():
            self._row(step_id, "input").read = share
        for step_id, figures in progress.handlers.items():
            self._row(step_id, "keyed").handlers = dict(figures)
        self.batches += 1
        self.last = progress
        lag_ms = watermark_lag_ms(progress.watermark_ms, wall_ms)
        if lag_ms is not None:
            self.watermark_lag_s = lag_ms / 1000
        if progress.state_keys is not None:
            self.state_keys = progress.state_keys


def _seconds(value: float) -> str:
    """A duration for people.

    >>> [_seconds(s) for s in (0.0123, 1.5, 42, 200, 7300, 200000)]
    ['12 ms', '1.50 s', '42.0 s', '3 min 20 s', '2 h 1 min', '2 d 7 h']
    """
    sign, value = ("-", -value) if value < 0 else ("", value)
    if value < 1:
        text = f"{value * 1000:.0f} ms"
    elif value < 10:
        text = f"{value:.2f} s"
    elif value < 60:
        text = f"{value:.1f} s"
    elif value < 3600:
        text = f"{int(value // 60)} min {int(value % 60)} s"
    elif value < 86400:
        text = f"{int(value // 3600)} h {int(value % 3600 // 60)} min"
    else:
        text = f"{int(value // 86400)} d {int(value % 86400 // 3600)} h"
    return sign + text


def _rate(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _facts(tally: Tally) -> list[str]:
    """The last batch's figures, as short phrases."""
    last = tally.last
    if last is None:
        return []
    facts = [f"batch {last.batch_id}"]
    if last.duration_ms is not None:
        facts.append(f"took {_seconds(last.duration_ms / 1000)}")
    if watermark_at_end(last.watermark_ms):
        facts.append("watermark at the end of input")
    elif last.watermark_ms is not None and tally.watermark_lag_s is not None:
        lag = _seconds(tally.watermark_lag_s)
        facts.append(f"watermark {_when(last.watermark_ms)} (lag {lag})")
    if tally.state_keys is not None:
        facts.append(f"{tally.state_keys:,} keys in state")
    return facts


class LiveProgress:
    """A live table of a run on a ``rich`` console (stderr): one row per input,
    keyed step and output, redrawn after every batch.

    On a terminal it is a ``rich.live.Live`` display (redrawn twice a second for
    the clock, its figures changing per batch). Elsewhere (``--progress`` onto a
    file or a pipe) it prints one line per batch instead. ``rich`` must be
    importable (see :func:`watch_run`). ``clock`` and ``wall`` (seconds) are for
    tests.
    """

    def __init__(
        self,
        steps: Sequence[tuple[str, str]],
        title: str = "",
        console: Any = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        from rich.console import Console  # noqa: PLC0415 rich: live display only

        self.console = console if console is not None else Console(file=sys.stderr)
        self.title = title
        self.tally = Tally(steps)
        self._clock = clock
        self._wall = wall
        self._started = self._last = clock()
        self._lock = threading.Lock()
        self._live: Any = None

    @property
    def live(self) -> bool:
        """Whether the console is a terminal a display can redraw."""
        return bool(self.console.is_terminal and not self.console.is_dumb_terminal)

    def start(self) -> LiveProgress:
        """Start drawing (on a terminal; elsewhere lines come per batch)."""
        from rich.live import Live  # noqa: PLC0415 rich: live display only

        self._started = self._last = self._clock()
        if self.live and self._live is None:
            self._live = Live(
                self,
                console=self.console,
                refresh_per_second=2,
                # A terminal shared with stdout: print the flow's output above the table.
                redirect_stdout=_stdout_shares(self.console.file),
                redirect_stderr=True,
            )
            self._live.start(refresh=True)
        return self

    def stop(self) -> None:
        """Draw the last frame and stop (it stays on the screen)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __enter__(self) -> LiveProgress:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def on_batch(self, progress: BatchProgress) -> None:
        now = self._clock()
        wall_ms = int(self._wall() * 1000)
        with self._lock:
            self.tally.add(progress, now - self._last, wall_ms)
            self._last = now
        if self._live is not None:
            self._live.refresh()
        elif not self.live:
            self.console.print(self.line(), highlight=False, soft_wrap=True)

    def line(self) -> str:
        """The last batch as one line (what a non-terminal gets per batch)."""
        with self._lock:
            tally = self.tally
            parts = _facts(tally)
            for row in tally.rows.values():
                figures = []
                if row.kind == "input" or row.out:
                    figures.append(f"out {row.out:,}" + _per_s(row.out_per_s))
                if row.backlog is not None:
                    figures.append(f"backlog {row.backlog:,}")
                if row.read is not None:
                    figures.append(f"{row.read:.0%} read")
                if row.kind == "output" or row.in_:
                    figures.append(f"in {row.in_:,}" + _per_s(row.in_per_s))
                if row.on == "executors":
                    figures.append("on executors")
                if _counts_late(row.kind) or row.late:
                    figures.append(f"late {row.late:,}")
                if row.handlers is not None:
                    figures.append(_handler_phrase(row.handlers))
                if figures:
                    parts.append(f"{row.step_id} {' '.join(figures)}")
        return "flowspark: " + " · ".join(parts)

    def __rich__(self) -> Any:
        from rich import box  # noqa: PLC0415 rich: live display only
        from rich.console import Group  # noqa: PLC0415 rich: live display only
        from rich.table import Table  # noqa: PLC0415 rich: live display only
        from rich.text import Text  # noqa: PLC0415 rich: live display only

        with self._lock:
            tally = self.tally
            elapsed = _seconds(self._clock() - self._started)
            last = tally.last
            mode = "" if last is None else ("streaming" if last.streamed else "batch job")
            head = [p for p in ("flowspark", self.title, mode) if p]
            done = f"{tally.batches:,} batch{'es' if tally.batches != 1 else ''} done"
            header = Text(" · ".join([*head, done, elapsed]), style="bold")
            facts = _facts(tally) or ["waiting for the first batch"]
            table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
            table.add_column("step")
            table.add_column("kind", style="dim")
            backlog = any(row.backlog is not None for row in tally.rows.values())
            read = any(row.read is not None for row in tally.rows.values())
            for name in ("in", "in/s", "out", "out/s", "late"):
                table.add_column(name, justify="right")
            if backlog:
                table.add_column("backlog", justify="right")
            if read:
                table.add_column("read")
            handlers = any(row.handlers is not None for row in tally.rows.values())
            if handlers:
                for name in ("handlers", "rebuilds", "WAL", "out. watermark"):
                    table.add_column(name, justify="right")
            for row in tally.rows.values():
                window = _counts_late(row.kind) or row.late
                takes = row.kind == "output" or row.in_  # a cycle's datums run: its in
                cells = [
                    row.step_id,
                    row.kind if row.on != "executors" else f"{row.kind} (executors)",
                    f"{row.in_:,}" if takes else "",
                    _rate(row.in_per_s) if takes else "",
                    f"{row.out:,}" if row.kind == "input" else "",
                    _rate(row.out_per_s) if row.kind == "input" else "",
                    f"{row.late:,}" if window else "",
                ]
                if backlog:
                    cells.append(f"{row.backlog:,}" if row.backlog is not None else "")
                if read:
                    cells.append(_bar(row.read) if row.read is not None else "")
                if handlers:
                    cells.extend(_handler_cells(row.handlers))
                table.add_row(*cells)
        return Group(header, Text(" · ".join(facts)), table)


def _handler_cells(figures: dict[str, int] | None) -> list[str]:
    """A keyed step's handler figures as table cells (blank for other steps)."""
    if figures is None:
        return ["", "", "", ""]
    mark = figures.get("outbound_watermark_ms")
    return [
        f"{figures.get('open_handlers', 0):,}",
        f"{figures.get('rebuilds', 0):,}",
        f"{figures.get('wal_datums', 0):,}",
        _when(mark) if mark is not None and mark > 0 else "none yet",
    ]


def _handler_phrase(figures: dict[str, int]) -> str:
    """A keyed step's handler figures for the one-line form.

    >>> _handler_phrase({"open_handlers": 3, "rebuilds": 0, "wal_datums": 1200,
    ...                  "outbound_watermark_ms": 0})
    'handlers 3 rebuilds 0 WAL 1,200 out. watermark none yet'
    """
    opened, rebuilds, wal, mark = _handler_cells(figures)
    return f"handlers {opened} rebuilds {rebuilds} WAL {wal} out. watermark {mark}"


def _bar(share: float, width: int = 12) -> str:
    """A finite input's share read as a text bar.

    >>> _bar(0.5)
    '██████······  50%'
    """
    filled = round(max(0.0, min(1.0, share)) * width)
    return "█" * filled + "·" * (width - filled) + f" {share:4.0%}"


def _per_s(value: float | None) -> str:
    return "" if value is None else f" ({_rate(value)}/s)"


def _stdout_shares(stderr: Any) -> bool:
    """Whether stdout is the same terminal as ``stderr`` (then the flow's output must
    pass through the display, else it would tear the table)."""
    try:
        out, err = sys.stdout.fileno(), stderr.fileno()
        return os.isatty(out) and os.isatty(err) and os.ttyname(out) == os.ttyname(err)
    except (AttributeError, OSError, ValueError):
        return False


class PrometheusMetrics:
    """A run's figures on a Prometheus text endpoint (``prometheus_client``'s
    ``start_http_server``, with a registry of its own).

    Counters ``flowspark_items_read_total``, ``flowspark_items_written_total``,
    ``flowspark_late_items_total`` (label ``step``) and ``flowspark_batches_total``;
    gauges ``flowspark_batch_duration_seconds``, ``flowspark_watermark_lag_seconds``
    and ``flowspark_state_keys`` (``NaN`` until known), and
    ``flowspark_input_backlog`` (label ``step``) for live inputs that know theirs.
    ``port=0`` picks a free port (see :attr:`port`). Serves until :meth:`close` (it
    is a context manager).
    """

    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        steps: Sequence[tuple[str, str]] = (),
        wall: Callable[[], float] = time.time,
    ) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server  # noqa: PLC0415 optional: metrics extra

        self.registry = CollectorRegistry()
        r = self.registry
        self.items_read = Counter(
            "flowspark_items_read", "Items read, per input step.", ["step"], registry=r
        )
        self.items_written = Counter(
            "flowspark_items_written", "Items written, per output step.", ["step"], registry=r
        )
        self.late_items = Counter(
            "flowspark_late_items", "Late items, per window step.", ["step"], registry=r
        )
        self.batches = Counter(
            "flowspark_batches", "Micro-batches (or batch jobs) finished.", registry=r
        )
        self.batch_duration = Gauge(
            "flowspark_batch_duration_seconds", "The last micro-batch's duration.", registry=r
        )
        self.watermark_lag = Gauge(
            "flowspark_watermark_lag_seconds",
            "How far the flow's watermark is behind the wall clock.",
            registry=r,
        )
        self.state_keys = Gauge(
            "flowspark_state_keys", "Rows in keyed state (keys or key buckets).", registry=r
        )
        self.backlog = Gauge(
            "flowspark_input_backlog",
            "Items a live input holds that the run has not read yet, per input step.",
            ["step"],
            registry=r,
        )
        for gauge in (self.batch_duration, self.watermark_lag, self.state_keys):
            gauge.set(float("nan"))
        for step_id, kind in steps:  # every step's series from the start, at 0
            if kind == "input":
                self.items_read.labels(step=step_id)
            elif kind == "output":
                self.items_written.labels(step=step_id)
            elif _counts_late(kind):
                self.late_items.labels(step=step_id)
        self._wall = wall
        self.server, self._thread = start_http_server(port, addr=host, registry=r)
        self.host = host
        self.port: int = self.server.server_address[1]

    @property
    def url(self) -> str:
        """Where the metrics are served."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def on_batch(self, progress: BatchProgress) -> None:
        for step_id, count in progress.items_read.items():
            self.items_read.labels(step=step_id).inc(count)
        for step_id, count in progress.items_written.items():
            self.items_written.labels(step=step_id).inc(count)
        for step_id, count in progress.late_items.items():
            self.late_items.labels(step=step_id).inc(count)
        self.batches.inc()
        if progress.duration_ms is not None:
            self.batch_duration.set(progress.duration_ms / 1000)
        lag_ms = watermark_lag_ms(progress.watermark_ms, int(self._wall() * 1000))
        if lag_ms is not None:
            self.watermark_lag.set(lag_ms / 1000)
        if progress.state_keys is not None:
            self.state_keys.set(progress.state_keys)
        for step_id, count in progress.backlog.items():
            self.backlog.labels(step=step_id).set(count)

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)

    def __enter__(self) -> PrometheusMetrics:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def spark_ui_line(spark: Any) -> str:
    """Where the session's Spark UI is, as one line for stderr."""
    if is_connect(spark):
        return "flowspark: the Spark UI is the Connect server's (spark.ui.enabled there)"
    url = spark.sparkContext.uiWebUrl
    if not url:
        return "flowspark: no Spark UI (spark.ui.enabled is false; FLOWSPARK_UI=true enables it)"
    return f"flowspark: Spark UI at {url}"


def _rich_missing() -> bool:
    try:
        import rich  # noqa: F401, PLC0415 rich: live display only
    except ImportError:
        return True
    return False


@contextlib.contextmanager
def watch_run(
    plan: Any,
    *,
    title: str = "",
    progress: bool | None = None,
    progress_json: str | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    stderr: TextIO | None = None,
) -> Iterator[list[RunListener]]:
    """The listeners that watch a run of ``plan``, live while the block runs.

    ``progress``: the live display on ``stderr`` (``None``: when ``stderr`` is a
    terminal); without ``rich`` one line says so and the run goes on without it.
    ``progress_json``: a file of :func:`~flowspark.engine.observe.batch_figures`
    lines, started afresh. ``metrics_port``: a :class:`PrometheusMetrics` endpoint
    on ``metrics_host`` (its address goes to ``stderr``).

    >>> from flowspark.dataflow import Dataflow
    >>> from flowspark.plan.graph import build_plan
    >>> from flowspark.testing import TestingInput, TestingOutput
    >>> flow = Dataflow("doc")
    >>> _ = flow.input("inp", TestingInput([1])).output("out", TestingOutput([]))
    >>> with watch_run(build_plan(flow), progress=False) as listeners:
    ...     listeners
    []
    """
    err = stderr if stderr is not None else sys.stderr
    steps = watched_steps(plan)
    with contextlib.ExitStack() as stack:
        listeners: list[RunListener] = []
        if progress_json:
            listeners.append(ProgressLog(progress_json, spark=False, truncate=True))
        if metrics_port is not None:
            metrics = stack.enter_context(PrometheusMetrics(metrics_port, metrics_host, steps))
            print(f"flowspark: metrics at {metrics.url}", file=err, flush=True)
            listeners.append(metrics)
        if progress is None:
            progress = _isatty(err)
        if progress:
            if _rich_missing():
                print(
                    "flowspark: no progress display: 'rich' is not installed (pip install rich)",
                    file=err,
                    flush=True,
                )
            else:
                from rich.console import Console  # noqa: PLC0415 rich: live display only

                display = LiveProgress(steps, title, Console(file=err))
                listeners.append(stack.enter_context(display))
        yield listeners


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
