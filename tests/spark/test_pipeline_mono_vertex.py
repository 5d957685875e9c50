"""Numaflow's MonoVertex examples run from their YAML with ``python -m flowspark.run``:
the images swapped for Python handlers with ``--udf FIELD=file.py``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.flowspark_run import run_until
from tests.numaflow_log import log_records

ROOT = Path(__file__).resolve().parents[2]
UDFS = ROOT / "examples" / "numaflow" / "udfs"
MONO = ROOT / "examples" / "numaflow" / "monovertex"


def _run_until(
    yaml_name: str, udfs: dict[str, str], enough: Callable[[list[str]], bool]
) -> tuple[list[str], str]:
    """Run the MonoVertex ``yaml_name`` until its stdout lines are ``enough``, then stop it
    as Ctrl-C does; its stdout lines and stderr."""
    udf_args = [arg for field, name in udfs.items() for arg in ("--udf", f"{field}={UDFS / name}")]
    run = run_until([str(MONO / yaml_name), *udf_args], enough)
    assert run.returncode == 130, run.stderr[-3000:]  # stopped as Ctrl-C stops a run
    return run.lines, run.stderr


RS_EXAMPLE = {
    "udsource": "counter_source.py",  # numaflow-rs simple-source
    "transformer": "now_transformer.py",  # numaflow-rs source-transformer-now
    "udsink": "print_sink.py",  # numaflow-rs sink-log
    "fallback": "fallback_log_sink.py",  # numaflow-go fb-sink-log
}


def test_the_builtin_mono_vertex_prints_the_generators_messages_with_the_log_sink():
    # 20-simple-mono-vertex-builtin: generator (5 a second) -> log; no handler to give.
    lines, stderr = _run_until(
        "20-simple-mono-vertex-builtin.yaml", {}, lambda ls: len(log_records(ls)) >= 6
    )
    records = log_records(lines)
    assert len(records) >= 6
    assert all(r["keys"] == "" and r["payload"].startswith("{") for r in records)
    assert "Traceback" not in stderr


def _counts_up_from_zero(lines: list[str], n: int) -> bool:
    values = [line for line in lines if line.isdigit()]
    return len(values) >= n


def test_the_mono_vertex_example_reads_transforms_maps_and_sinks_every_message_once():
    # 21-simple-mono-vertex: udsource -> transformer (now) -> map-cat (a builtin here)
    # -> udsink, with a fallback sink the primary sink never needs.
    lines, _ = _run_until(
        "21-simple-mono-vertex.yaml", RS_EXAMPLE, lambda ls: _counts_up_from_zero(ls, 1200)
    )
    values = [int(line) for line in lines if line.isdigit()]
    assert sorted(values) == list(range(len(values)))  # each count once, none lost
    assert not any("under maintenance" in line for line in lines)


def test_the_bypass_example_routes_untagged_messages_to_the_primary_sink():
    # 23-mono-vertex-bypass: map-cat tags nothing, so `sink: not [drop]` holds for
    # every message and each goes to the primary sink; fallback and onSuccess stay idle.
    handlers = {k: v for k, v in RS_EXAMPLE.items() if k != "transformer"}
    handlers["onSuccess"] = "fallback_log_sink.py"
    lines, _ = _run_until(
        "23-mono-vertex-bypass.yaml", handlers, lambda ls: _counts_up_from_zero(ls, 600)
    )
    values = [int(line) for line in lines if line.isdigit()]
    assert sorted(values) == list(range(len(values)))
    assert not any("under maintenance" in line for line in lines)


def test_bypass_sends_tagged_messages_straight_to_the_fallback_sink():
    # The map tags odd numbers "corrupted": the bypass writes them with the fallback
    # (log) sink; the even ones reach the primary sink, which prints them.
    handlers = {
        "udsource": "counter_source.py",
        "udf": "tag_parity.py",
        "udsink": "print_sink.py",
    }

    def enough(ls: list[str]) -> bool:
        return _counts_up_from_zero(ls, 300) and len(log_records(ls)) >= 300

    lines, _ = _run_until("bypass-to-fallback.yaml", handlers, enough)
    evens = [int(line) for line in lines if line.isdigit()]
    odds = [int(r["payload"]) for r in log_records(lines)]
    assert evens and all(n % 2 == 0 for n in evens)
    assert odds and all(n % 2 == 1 for n in odds)
    every = sorted(evens + odds)
    assert every == list(range(len(every)))  # nothing lost, nothing twice
