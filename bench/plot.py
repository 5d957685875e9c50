"""Plot benchmark results: ``python bench/plot.py results.jsonl [...] -o bench.png``.

Reads the JSON lines ``bench/run.py`` prints (one per run; ``-`` or no file
reads stdin) and draws one subplot per job: items/s of each system
(flowspark, bytewax, pyspark, pynumaflow, as present) as grouped bars, one
group per ``n``. A flowspark run's ``mode`` (``batch job``/``stream``) makes
its own series. Repeats are drawn as their median with a min-max whisker.
``latency`` lines are drawn as p50 bars with a p99 tick, grouped by shape and
rate; ``http_ingest`` lines as acked requests/s per pipeline. Runs that were not
``ok`` are left out (and counted on stderr).

The title says the date and the machine (``platform.node()``, cores) unless
``--title`` is given. ``--per-job`` writes one PNG per job instead
(``bench-wordcount.png`` …, next to ``-o``). matplotlib is not a flowspark
dependency: ``pip install matplotlib`` (drawn with the Agg backend, no display).

>>> runs = [
...     {"job": "wordcount", "system": "bytewax", "n": 1000, "items_per_s": 50.0, "ok": True},
...     {"job": "wordcount", "system": "flowspark", "n": 1000, "items_per_s": 90.0,
...      "mode": "batch job", "ok": True},
... ]
>>> chart = group_runs(runs)["wordcount"]
>>> chart.groups, chart.series
(['1k'], ['flowspark (batch job)', 'bytewax'])
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, TextIO

SYSTEM_ORDER = ("flowspark", "bytewax", "pyspark", "pynumaflow")
COLORS = {
    "flowspark": "#e8590c",
    "bytewax": "#1971c2",
    "pyspark": "#5c940d",
    "pynumaflow": "#7048e8",
}


@dataclass
class Chart:
    """One job's subplot: ``values[(group, series)]`` holds every repeat's figure."""

    job: str
    metric: str
    ylabel: str
    groups: list[str] = field(default_factory=list)
    series: list[str] = field(default_factory=list)
    values: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    upper: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # latency p99

    def median(self, group: str, series: str) -> float | None:
        """The median of a bar's repeats (``None``: no run)."""
        runs = self.values.get((group, series))
        return statistics.median(runs) if runs else None


def short_number(value: float) -> str:
    """``1500000`` → ``'1.5M'``, ``100000`` → ``'100k'``, ``950`` → ``'950'``.

    >>> short_number(1_500_000), short_number(100_000), short_number(950), short_number(2.5)
    ('1.5M', '100k', '950', '2.5')
    """
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def read_runs(streams: Iterable[TextIO]) -> tuple[list[dict[str, Any]], int]:
    """Every JSON object line of ``streams``, and how many other non-blank lines there were."""
    runs: list[dict[str, Any]] = []
    other = 0
    for stream in streams:
        for line in stream:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                other += 1
                continue
            if isinstance(obj, dict):
                runs.append(obj)
            else:
                other += 1
    return runs, other


def _series(run: dict[str, Any]) -> str:
    system = str(run.get("system") or "flowspark")
    mode = run.get("mode")
    return f"{system} ({mode})" if mode else system


def _series_key(name: str) -> tuple[int, str]:
    system = name.split(" ", 1)[0]
    rank = SYSTEM_ORDER.index(system) if system in SYSTEM_ORDER else len(SYSTEM_ORDER)
    return rank, name


def _place(run: dict[str, Any]) -> tuple[str, str, str, float, Any, float | None] | None:
    """(metric, y label, group, value, sort key, p99) of one ok run; ``None`` to skip."""
    job = run.get("job")
    if job == "latency" or "p50_ms" in run:
        value = run.get("p50_ms")
        rate = run.get("rate") or 0
        group = f"{run.get('shape', 'live')} @ {short_number(rate)}/s"
        return (
            "p50_ms",
            "latency p50 ms (tick: p99)",
            group,
            value,
            (rate, group),
            run.get("p99_ms"),
        )
    if job == "http_ingest":
        pipeline = str(run.get("pipeline", "?"))
        return "acked_per_s", "acked requests/s", pipeline, run.get("acked_per_s"), pipeline, None
    n = run.get("n")
    if not isinstance(n, int | float):
        return None
    return "items_per_s", "items/s", short_number(n), run.get("items_per_s"), n, None


def group_runs(runs: Iterable[dict[str, Any]]) -> dict[str, Chart]:
    """Group ok runs by job, then by ``n`` (or shape/rate, or pipeline) and series.

    Groups are in increasing ``n``; series in the order flowspark, bytewax,
    pyspark, pynumaflow (a system's modes side by side). Runs that are not
    ``ok`` or have no figure are left out.

    >>> charts = group_runs([
    ...     {"job": "mapfilter", "system": "pyspark", "n": 10**6, "items_per_s": 3e5, "ok": True},
    ...     {"job": "mapfilter", "system": "bytewax", "n": 10**5, "items_per_s": 2e5, "ok": True},
    ...     {"job": "mapfilter", "system": "bytewax", "n": 10**5, "items_per_s": 4e5, "ok": True},
    ...     {"job": "mapfilter", "system": "bytewax", "n": 10**5, "ok": False},
    ... ])
    >>> c = charts["mapfilter"]
    >>> c.groups, c.series, c.values[("100k", "bytewax")], c.median("100k", "bytewax")
    (['100k', '1M'], ['bytewax', 'pyspark'], [200000.0, 400000.0], 300000.0)
    """
    charts: dict[str, Chart] = {}
    order: dict[str, dict[str, Any]] = {}
    for run in runs:
        if run.get("ok") is not True:
            continue
        placed = _place(run)
        if placed is None:
            continue
        metric, ylabel, group, value, sort_key, p99 = placed
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            continue
        job = str(run.get("job", "?"))
        chart = charts.setdefault(job, Chart(job, metric, ylabel))
        series = _series(run)
        order.setdefault(job, {}).setdefault(group, sort_key)
        if series not in chart.series:
            chart.series.append(series)
        chart.values.setdefault((group, series), []).append(float(value))
        if isinstance(p99, int | float):
            chart.upper.setdefault((group, series), []).append(float(p99))
    for job, chart in charts.items():
        chart.groups = sorted(order[job], key=lambda g, keys=order[job]: (keys[g], g))
        chart.series.sort(key=_series_key)
    return charts


def machine_title(today: date | None = None) -> str:
    """``flowspark benchmarks · 2025-01-31 · host (2 cores)``."""
    day = (today or date.today()).isoformat()
    host = platform.node() or "this machine"
    return f"flowspark benchmarks · {day} · {host} ({os.cpu_count()} cores)"


def _color(series: str, index: int) -> tuple[str, str | None]:
    system = series.split(" ", 1)[0]
    color = COLORS.get(system, f"C{index}")
    hatch = "//" if "(stream)" in series else None
    return color, hatch


def _draw(ax: Any, chart: Chart) -> None:
    from matplotlib import ticker

    width = 0.8 / max(len(chart.series), 1)
    values = [v for runs in chart.values.values() for v in runs]
    for k, series in enumerate(chart.series):
        color, hatch = _color(series, k)
        xs, heights, low, high, ticks = [], [], [], [], []
        for g, group in enumerate(chart.groups):
            runs = chart.values.get((group, series))
            if not runs:
                continue
            mid = statistics.median(runs)
            xs.append(g - 0.4 + width * (k + 0.5))
            heights.append(mid)
            low.append(mid - min(runs))
            high.append(max(runs) - mid)
            if chart.upper.get((group, series)):
                ticks.append((xs[-1], statistics.median(chart.upper[(group, series)])))
        if not xs:
            continue
        ax.bar(
            xs,
            heights,
            width * 0.92,
            label=series,
            color=color,
            hatch=hatch,
            edgecolor="white" if hatch is None else "#333333",
            linewidth=0.5,
            yerr=[low, high] if any(low) or any(high) else None,
            capsize=3,
        )
        for x, h in zip(xs, heights):
            ax.annotate(
                short_number(h),
                (x, h),
                textcoords="offset points",
                xytext=(0, 3),
                ha="center",
                fontsize=7,
            )
        if ticks:
            p99 = "p99" if not any(t.get_label() == "p99" for t in ax.collections) else None
            ax.scatter(*zip(*ticks), marker="_", s=200, color="black", zorder=3, label=p99)
            values += [y for _, y in ticks]
    ax.set_xticks(range(len(chart.groups)), chart.groups)
    ax.set_title(chart.job)
    ax.set_ylabel(chart.ylabel)
    if values and max(values) / min(values) > 50:
        ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: short_number(v)))
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)


def plot(charts: dict[str, Chart], title: str, out: Path, per_job: bool = False) -> list[Path]:
    """Draw ``charts`` to ``out`` (one figure) or one PNG per job; returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jobs = list(charts)
    written = []
    if per_job:
        for job in jobs:
            fig, ax = plt.subplots(figsize=(7, 4.5))
            _draw(ax, charts[job])
            fig.suptitle(title, fontsize=10)
            fig.tight_layout()
            path = out.with_name(f"{out.stem}-{job}{out.suffix or '.png'}")
            fig.savefig(path, dpi=120)
            plt.close(fig)
            written.append(path)
        return written
    cols = min(2, len(jobs))
    rows = math.ceil(len(jobs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7 * cols, 4.5 * rows), squeeze=False)
    for ax, job in zip(axes.flat, jobs):
        _draw(ax, charts[job])
    for ax in list(axes.flat)[len(jobs) :]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return [out]


def _open(names: list[str]) -> Iterator[TextIO]:
    for name in names or ["-"]:
        if name == "-":
            yield sys.stdin
        else:
            with open(name, encoding="utf-8") as f:
                yield f


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="JSON-lines files from bench/run.py (- is stdin)")
    ap.add_argument("-o", "--output", default="bench.png", help="PNG to write (default bench.png)")
    ap.add_argument("--title", help="the figure's title (default: date and machine)")
    ap.add_argument("--per-job", action="store_true", help="one PNG per job, named after -o")
    args = ap.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(
            "bench/plot.py needs matplotlib, which flowspark does not depend on: "
            "pip install matplotlib",
            file=sys.stderr,
        )
        return 2
    try:
        runs, other = read_runs(_open(args.files))
    except OSError as exc:
        print(f"bench/plot.py: {exc}", file=sys.stderr)
        return 1
    charts = group_runs(runs)
    skipped = len(runs) - sum(len(v) for c in charts.values() for v in c.values.values())
    if other or skipped:
        print(
            f"bench/plot.py: left out {skipped} run(s) not ok or without a figure"
            + (f" and {other} line(s) that are not JSON objects" if other else ""),
            file=sys.stderr,
        )
    if not charts:
        print("bench/plot.py: no ok runs to plot", file=sys.stderr)
        return 1
    for path in plot(charts, args.title or machine_title(), Path(args.output), args.per_job):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
