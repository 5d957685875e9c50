"""``bench/plot.py``: how bench result lines are grouped into charts (no drawing needed).

``bench/`` is a folder of scripts, not a package, so the module is loaded from its path.
"""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLOT_PY = Path(__file__).resolve().parents[2] / "bench" / "plot.py"


def _load_plot():
    spec = importlib.util.spec_from_file_location("flowspark_bench_plot", PLOT_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


plot = _load_plot()


def run(job: str, system: str, n: int, items_per_s: float | None, ok: bool = True, **extra):
    return {"job": job, "system": system, "n": n, "items_per_s": items_per_s, "ok": ok, **extra}


def test_runs_are_grouped_by_job_then_n_then_system_in_a_fixed_order():
    charts = plot.group_runs(
        [
            run("wordcount", "pyspark", 10**6, 2.2e5),
            run("wordcount", "bytewax", 10**7, 3.2e5),
            run("wordcount", "bytewax", 10**6, 3.3e5),
            run("wordcount", "flowspark", 10**6, 5.6e5, mode="batch job"),
            run("wordcount", "flowspark", 10**6, 5.9e5, mode="batch job"),
            run("wordcount", "flowspark", 10**6, 2.7e5, mode="stream"),
            run("mapfilter", "pynumaflow", 100, 10.0),
        ]
    )
    assert list(charts) == ["wordcount", "mapfilter"]
    chart = charts["wordcount"]
    assert chart.metric == "items_per_s" and chart.ylabel == "items/s"
    assert chart.groups == ["1M", "10M"]  # by n, not by text
    assert chart.series == ["flowspark (batch job)", "flowspark (stream)", "bytewax", "pyspark"]
    assert chart.values[("1M", "flowspark (batch job)")] == [5.6e5, 5.9e5]
    assert chart.median("1M", "flowspark (batch job)") == pytest.approx(5.75e5)
    assert chart.median("10M", "pyspark") is None
    assert charts["mapfilter"].groups == ["100"]


def test_failed_runs_and_runs_without_a_figure_are_left_out():
    charts = plot.group_runs(
        [
            run("reorder", "bytewax", 10**5, None, ok=False, error="timeout"),
            run("reorder", "bytewax", 10**5, 9e4, ok=False),
            run("reorder", "pynumaflow", 10**5, 5.2e3),
            run("reorder", "flowspark", 10**5, 0.0),
            {"job": "reorder", "system": "flowspark", "ok": True},  # no n
        ]
    )
    assert charts["reorder"].series == ["pynumaflow"]
    assert plot.group_runs([run("x", "bytewax", 1, 5.0, ok=False)]) == {}


def test_latency_runs_are_grouped_by_shape_and_rate_with_their_p99():
    lines = [
        {
            "job": "latency",
            "system": system,
            "n": rate * 60,
            "items_per_s": rate,
            "ok": True,
            "shape": shape,
            "rate": rate,
            "p50_ms": p50,
            "p99_ms": p99,
        }
        for system, shape, rate, p50, p99 in [
            ("flowspark", "stateless", 50000, 164.0, 354.0),
            ("bytewax", "keyed", 5000, 0.12, 1.4),
            ("flowspark", "keyed", 5000, 618.0, 1863.0),
        ]
    ]
    chart = plot.group_runs(lines)["latency"]
    assert chart.metric == "p50_ms"
    assert chart.groups == ["keyed @ 5k/s", "stateless @ 50k/s"]
    assert chart.series == ["flowspark", "bytewax"]
    assert chart.values[("keyed @ 5k/s", "flowspark")] == [618.0]
    assert chart.upper[("keyed @ 5k/s", "bytewax")] == [1.4]


def test_http_ingest_runs_are_grouped_by_pipeline():
    line = {"job": "http_ingest", "pipeline": "map", "acked_per_s": 13351, "ok": True}
    chart = plot.group_runs([line])["http_ingest"]
    assert (chart.metric, chart.groups, chart.series) == ("acked_per_s", ["map"], ["flowspark"])


def test_reading_lines_skips_blank_and_counts_what_is_not_a_json_object():
    text = "\n".join(
        [json.dumps(run("a", "bytewax", 1, 2.0)), "", "Spark says hi", "[1]", json.dumps({})]
    )
    runs, other = plot.read_runs([io.StringIO(text)])
    assert len(runs) == 2 and other == 2


def test_short_numbers():
    assert [plot.short_number(v) for v in (5, 1000, 12_345, 2.5e6, 3e9)] == [
        "5",
        "1k",
        "12.3k",
        "2.5M",
        "3G",
    ]


def test_the_title_names_the_date_and_the_machine():
    from datetime import date

    title = plot.machine_title(date(2026, 1, 2))
    assert title.startswith("flowspark benchmarks · 2026-01-02 · ") and "cores)" in title


def test_without_matplotlib_the_script_says_how_to_get_it(tmp_path):
    results = tmp_path / "r.jsonl"
    results.write_text(json.dumps(run("a", "bytewax", 1, 2.0)) + "\n")
    code = textwrap.dedent(
        f"""
        import runpy, sys

        class NoMatplotlib:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "matplotlib":
                    raise ImportError(name)

        sys.meta_path.insert(0, NoMatplotlib())
        sys.argv = ["plot.py", {str(results)!r}, "-o", {str(tmp_path / "x.png")!r}]
        runpy.run_path({str(PLOT_PY)!r}, run_name="__main__")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2
    assert "needs matplotlib" in done.stderr and "pip install matplotlib" in done.stderr
    assert not (tmp_path / "x.png").exists()


def test_a_png_is_drawn_when_matplotlib_is_there(tmp_path):
    pytest.importorskip("matplotlib")
    results = tmp_path / "r.jsonl"
    results.write_text(
        "\n".join(
            json.dumps(line)
            for line in [
                run("wordcount", "flowspark", 10**6, 5.6e5, mode="batch job"),
                run("wordcount", "bytewax", 10**6, 3.3e5),
                run("mapfilter", "pyspark", 10**7, 3.5e6),
            ]
        )
    )
    out = tmp_path / "bench.png"
    assert plot.main([str(results), "-o", str(out), "--title", "test"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
