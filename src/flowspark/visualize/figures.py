"""A run's figures on the picture: ``visualize --from`` sums a progress file.

The file is what ``python -m flowspark.run --progress-json`` (or
``$FLOWSPARK_PROGRESS_LOG``) writes: one JSON line per micro-batch, as
:func:`flowspark.engine.observe.batch_figures` makes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flowspark.engine.observe import STEP_COUNTS

__all__ = ["Figures", "as_figures", "read_progress"]

# The counts a line has per step (under ``steps``), as the engine writes them.
_COUNTS = tuple(dict.fromkeys(key for _, key in STEP_COUNTS))


@dataclass
class Figures:
    """A run's counts, summed over its micro-batches (see :func:`read_progress`).

    ``steps`` maps a step id to its ``in``/``out``/``late`` sums (and, when the
    figures are given as a mapping, a ``state_keys`` of its own).

    >>> Figures({"split": {"in": 1000, "out": 5980}}).label("split")
    'in 1,000 · out 5,980'
    """

    steps: dict[str, dict[str, int]] = field(default_factory=dict)
    batches: int = 0
    duration_ms: float = 0.0
    watermark_lag_ms: float | None = None
    state_keys: int | None = None

    def label(self, step_id: str) -> str:
        """The figures of ``step_id`` as a label line ('' when there are none)."""
        counts = self.steps.get(step_id) or {}
        names = (("in", "in"), ("out", "out"), ("late", "late"), ("state_keys", "keys"))
        return " · ".join(f"{word} {counts[k]:,}" for k, word in names if k in counts)

    def summary(self) -> str:
        """One line on the whole run ('' when nothing was read).

        >>> Figures(batches=3, duration_ms=1500, watermark_lag_ms=50).summary()
        '3 micro-batches · 1.5 s in batches · watermark lag 50 ms'
        """
        parts = []
        if self.batches:
            parts.append(f"{self.batches:,} micro-batch{'es' if self.batches != 1 else ''}")
        if self.duration_ms:
            seconds = self.duration_ms / 1000
            shown = f"{seconds:,.0f}" if seconds >= 100 else f"{seconds:.3g}"
            parts.append(f"{shown} s in batches")
        if self.watermark_lag_ms is not None:
            parts.append(f"watermark lag {self.watermark_lag_ms:,.0f} ms")
        if self.state_keys is not None:
            parts.append(f"{self.state_keys:,} keys in state")
        return " · ".join(parts)


def read_progress(lines: Iterable[str]) -> Figures:
    """Sum a progress file's JSON lines (one object per micro-batch) into :class:`Figures`.

    A line is what :func:`~flowspark.engine.observe.batch_figures` writes, e.g.
    ``{"batch": 3, "duration_ms": 120, "watermark_lag_ms": 50, "state_keys": 5,
    "steps": {"count": {"in": 10, "out": 8, "late": 0}}}``; every key is optional
    and others (rates, backlogs, Spark's own progress) are left alone. The steps'
    counts (``in``/``out``/``late``: :data:`~flowspark.engine.observe.STEP_COUNTS`)
    and ``duration_ms`` are summed, ``state_keys`` and ``watermark_lag_ms`` are the
    last value seen. Blank lines are skipped; anything else that is not a JSON
    object raises ``ValueError`` naming the line.

    >>> figures = read_progress([
    ...     '{"batch": 0, "steps": {"w": {"in": 10, "late": 1}}, "state_keys": 4}',
    ...     '{"batch": 1, "steps": {"w": {"in": 5, "in_per_s": 2.5}}, "duration_ms": 80}',
    ... ])
    >>> figures.steps["w"], figures.batches, figures.duration_ms, figures.state_keys
    ({'in': 15, 'late': 1}, 2, 80.0, 4)
    """
    figures = Figures()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {number}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"line {number}: expected a JSON object; got {type(obj).__name__}")
        try:
            _add_batch(figures, obj)
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"line {number}: {exc}") from None
    return figures


def _add_batch(figures: Figures, obj: dict[str, Any]) -> None:
    figures.batches += 1
    for step_id, counts in (obj.get("steps") or {}).items():
        if not isinstance(counts, dict):
            raise ValueError(f"steps[{step_id!r}] must be an object")
        for key in _COUNTS:
            if counts.get(key) is not None:
                _bump(figures, step_id, key, counts[key])
    if obj.get("duration_ms") is not None:
        figures.duration_ms += float(obj["duration_ms"])
    if obj.get("watermark_lag_ms") is not None:
        figures.watermark_lag_ms = float(obj["watermark_lag_ms"])
    if obj.get("state_keys") is not None:
        figures.state_keys = int(obj["state_keys"])


def _bump(figures: Figures, step_id: str, key: str, count: Any) -> None:
    if isinstance(count, bool) or not isinstance(count, int | float):
        raise ValueError(f"{step_id!r} {key}: expected a number; got {count!r}")
    counts = figures.steps.setdefault(str(step_id), {})
    counts[key] = counts.get(key, 0) + int(count)


def as_figures(figures: Figures | Mapping[str, Mapping[str, int]] | None) -> Figures:
    """``figures`` as :class:`Figures`: none, or a mapping of step ids to their counts."""
    if figures is None:
        return Figures()
    if isinstance(figures, Figures):
        return figures
    return Figures({k: dict(v) for k, v in figures.items()})
