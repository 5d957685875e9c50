"""Side inputs on Spark: pynumaflow's simple_sideinput example (its side input, its UDF
and Numaflow's pipeline.yaml unchanged) run as a pipeline, and a value retrieved on the
schedule reaching the UDF while the run goes on."""

from __future__ import annotations

import re
from pathlib import Path

from tests.flowspark_run import run_until
from tests.numaflow_log import log_records

ROOT = Path(__file__).resolve().parents[2]
UDFS = ROOT / "examples" / "numaflow" / "udfs"
VALUE = re.compile(r"an example: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+")


def _run_until(yaml: Path, enough) -> list[str]:
    """Run the pipeline with the example's side input and UDF until ``enough(lines)``;
    its stdout lines."""
    udfs = [
        "--udf", f"myticker={UDFS / 'simple_sideinput.py'}",
        "--udf", f"si-log={UDFS / 'sideinput_udf.py'}",
    ]  # fmt: skip
    # A process of its own: the UDF prints in Spark's Python workers, whose output is
    # the run's (a warm child's workers print elsewhere).
    return run_until([str(yaml), *udfs], enough, warm=False).lines


def _payloads(lines: list[str]) -> list[str]:
    return [record["payload"] for record in log_records(lines)]


def test_pynumaflows_simple_sideinput_runs_from_its_yaml_and_prints_what_numaflow_prints():
    lines = _run_until(UDFS / "simple_sideinput.yaml", lambda ls: len(_payloads(ls)) >= 3)
    # The UDF's own prints, from its __main__: the side-input file's path (its directory
    # is SIDE_INPUT_DIR_PATH, one per vertex), then the value it read at start.
    assert any(line.endswith("/si-log/myticker") for line in lines), lines
    read = [line.removeprefix("Data value variable set to: ") for line in lines]
    read = [value for value, line in zip(read, lines) if value != line]
    assert len(read) == 1 and VALUE.fullmatch(read[0]), lines
    # The generator's datums (one a second) each come out as the side input's value:
    # the schedule fires every 2 minutes, so the first retrieval's value holds.
    assert set(_payloads(lines)) == {read[0]}


def test_a_value_retrieved_on_the_schedule_reaches_the_udf_while_the_run_goes_on(tmp_path):
    # The example's pipeline with a schedule every 2 seconds (cron, seconds first): the
    # side input broadcasts every other retrieval, so the value changes every 4 s.
    example = (UDFS / "simple_sideinput.yaml").read_text()
    yaml = tmp_path / "fast.yaml"
    yaml.write_text(example.replace('schedule: "0 */2 * * * *"', 'schedule: "*/2 * * * * *"'))
    assert yaml.read_text() != example

    def three_values(lines: list[str]) -> bool:
        return len(dict.fromkeys(_payloads(lines))) >= 3

    lines = _run_until(yaml, three_values)
    values = list(dict.fromkeys(_payloads(lines)))
    assert all(VALUE.fullmatch(v) for v in values), values
    assert values == sorted(values)  # each new value is a later retrieval's, none goes back
    read = [line.removeprefix("Data value variable set to: ") for line in lines]
    read = [value for value, line in zip(read, lines) if value != line]
    # Every value the sink saw was read by the UDF from its file first.
    assert set(values) <= set(read)
