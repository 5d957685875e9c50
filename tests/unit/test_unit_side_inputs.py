"""Side inputs without Spark: schedules, the manager's retrievals and files, a UDF
script run whole in a process of its own, and the pipeline's refusals."""

from __future__ import annotations

import os
import textwrap
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flowspark.api.udf.types import Datum
from flowspark.pipeline.build import load
from flowspark.pipeline.errors import PipelineSpecError
from flowspark.runtime.errors import RemoteStepFailure
from flowspark.runtime.numaflow.framing import HostLost
from flowspark.runtime.numaflow.script_host import ScriptProcess
from flowspark.runtime.numaflow.side_inputs import Schedule, SideInputManager, write_side_input
from flowspark.sideinput import Response, SideInput, SideInputServer

START = datetime(2026, 3, 7, 23, 59, 58, tzinfo=UTC)


# -- schedules ------------------------------------------------------------------------


def test_six_fields_put_seconds_first_as_numaflows_cron_does():
    schedule = Schedule.parse("*/5 * * * * *")
    assert schedule.next_after(START) == START + timedelta(seconds=2)


def test_five_fields_are_minutes_first():
    assert Schedule.parse("*/15 * * * *").next_after(START) == datetime(2026, 3, 8, tzinfo=UTC)


def test_a_schedule_fires_in_its_time_zone():
    # 09:00 in Los Angeles on 2026-03-08 is 16:00 UTC (PDT began at 02:00 that day).
    schedule = Schedule.parse("0 0 9 * * *", "America/Los_Angeles")
    assert schedule.next_after(START) == datetime(2026, 3, 8, 16, tzinfo=UTC)


def test_an_interval_counts_from_the_moment_given():
    assert Schedule.every(1.5).next_after(START) == START + timedelta(seconds=1.5)


@pytest.mark.parametrize(
    ("text", "zone", "message"),
    [
        ("not cron", None, "'not cron' is not a cron schedule"),
        ("* * * * *", "Nowhere/Town", "'Nowhere/Town' is not a known time zone"),
    ],
)
def test_a_bad_schedule_is_refused(text, zone, message):
    with pytest.raises(ValueError, match=message):
        Schedule.parse(text, zone)


def test_an_interval_must_be_positive():
    with pytest.raises(ValueError, match="> 0 s"):
        Schedule.every(0)


# -- the files ------------------------------------------------------------------------


def test_a_value_is_written_whole_and_only_when_it_changes(tmp_path):
    assert write_side_input(tmp_path, "ticker", b"v1")
    assert not write_side_input(tmp_path, "ticker", b"v1")
    assert write_side_input(tmp_path, "ticker", b"v2")
    assert [p.name for p in tmp_path.iterdir()] == ["ticker"]  # no temporary file left
    assert (tmp_path / "ticker").read_bytes() == b"v2"


# -- the manager ----------------------------------------------------------------------


class EveryOther(SideInput):
    """Broadcasts "v1", "v3" … on odd calls; raises on the fourth."""

    def __init__(self) -> None:
        self.calls = 0

    def retrieve_handler(self) -> Response:
        self.calls += 1
        if self.calls == 4:
            raise ConnectionError("the config store is down")
        if self.calls % 2 == 0:
            return Response.no_broadcast_message()
        return Response.broadcast_message(f"v{self.calls}".encode())


def test_the_manager_writes_broadcasts_to_every_directory_and_keeps_the_rest(tmp_path, caplog):
    dirs = [tmp_path / "a", tmp_path / "b"]
    server = SideInputServer(EveryOther())
    manager = SideInputManager("ticker", server.retrieve, Schedule.every(60), dirs)
    assert manager.retrieve_once()
    assert [(d / "ticker").read_bytes() for d in dirs] == [b"v1", b"v1"]
    assert manager.has_value.is_set()
    assert not manager.retrieve_once()  # no_broadcast: the files keep v1
    assert [(d / "ticker").read_bytes() for d in dirs] == [b"v1", b"v1"]
    assert manager.retrieve_once()
    assert not manager.retrieve_once()  # raised: logged, not retried
    assert "side input ticker: retrieval failed" in caplog.text
    assert "ConnectionError: the config store is down" in caplog.text
    assert [(d / "ticker").read_bytes() for d in dirs] == [b"v3", b"v3"]
    assert (manager.retrievals, manager.broadcasts) == (4, 2)


def test_the_manager_retrieves_at_start_and_then_on_its_schedule(tmp_path):
    seen = threading.Semaphore(0)

    def retrieve() -> Response:
        seen.release()
        return Response.broadcast_message(b"x")

    manager = SideInputManager("t", retrieve, Schedule.every(0.05), [tmp_path])
    manager.start()
    try:
        assert all(seen.acquire(timeout=5) for _ in range(3))
    finally:
        manager.stop()
    assert manager.has_value.is_set()


# -- a UDF script in a process of its own -----------------------------------------------

UDF = textwrap.dedent(
    """
    import os
    import threading
    from flowspark.mapper import MapServer, Mapper, Message, Messages
    from flowspark.sideinput import SIDE_INPUT_DIR_PATH

    class Upper(Mapper):
        def handler(self, keys, datum):
            if datum.value == b"boom":
                raise ValueError("cannot map boom")
            with open(os.path.join(SIDE_INPUT_DIR_PATH, "suffix")) as f:
                suffix = f.read().encode()
            return Messages(Message(datum.value.upper() + suffix, keys=keys))

    if __name__ == "__main__":
        print("starting in", SIDE_INPUT_DIR_PATH, flush=True)
        server = threading.Thread(target=MapServer(Upper()).start, daemon=True)
        server.start()
        server.join()
    """
)


def _datum(value: bytes) -> Datum:
    now = datetime.now(UTC)
    return Datum(["k"], value, now, now, id="d1")


def test_a_udf_script_runs_whole_and_serves_its_map_from_its_own_process(tmp_path):
    script = tmp_path / "udf.py"
    script.write_text(UDF)
    side = tmp_path / "side"
    write_side_input(side, "suffix", b"-v1")
    process = ScriptProcess(script, "upper")
    process.start({"FLOWSPARK_SIDE_INPUT_DIR": str(side)})
    try:
        assert process.kind() == "map"
        handler = process.handler()
        (message,) = handler(["k"], _datum(b"ab"))
        assert (message.value, message.keys) == (b"AB-v1", ["k"])
        write_side_input(side, "suffix", b"-v2")  # the script reads the new value
        assert [m.value for m in handler(["k"], _datum(b"c"))] == [b"C-v2"]
        with pytest.raises(RemoteStepFailure) as failure:
            handler(["k"], _datum(b"boom"))
        text = str(failure.value)
        assert "step 'upper' failed on item" in text
        assert "ValueError: cannot map boom" in text
    finally:
        process.stop()
    assert process.process is not None and process.process.returncode is not None
    with pytest.raises(HostLost, match='vertex "upper": its UDF process is gone'):
        handler(["k"], _datum(b"ab"))


def test_a_script_that_fails_before_it_serves_says_so(tmp_path):
    script = tmp_path / "udf.py"
    script.write_text("raise SystemExit(3)\n")
    process = ScriptProcess(script, "v")
    process.start({})
    try:
        with pytest.raises(RuntimeError, match="exited with code 3 before it started"):
            process.kind()
    finally:
        process.stop()


# -- the pipeline ---------------------------------------------------------------------

PIPELINE = textwrap.dedent(
    """
    apiVersion: numaflow.numaproj.io/v1alpha1
    kind: Pipeline
    metadata: {{name: p}}
    spec:
      sideInputs:
        - name: ticker
          container: {{image: ticker-image}}
          trigger: {{schedule: "@every 1s"}}
      vertices:
        - {{name: in, source: {{generator: {{rpu: 1, duration: 1s}}}}}}
        - {{name: m, udf: {{container: {{image: m-image}}}}{m}}}
        - {{name: out, sink: {{log: {{}}}}{out}}}
      edges: [{{from: in, to: m}}, {{from: m, to: out}}]
    """
)


def _pipeline(tmp_path: Path, m: str = ", sideInputs: [ticker]", out: str = "") -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE.format(m=m, out=out))
    return path


def _side_input_script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "ticker.py"
    path.write_text(body)
    return path


TICKER = (
    "from flowspark.sideinput import Response, SideInputServer\n"
    "SideInputServer(lambda: Response.broadcast_message(b'x')).start()\n"
)


def test_a_side_input_without_a_handler_asks_for_one(tmp_path):
    (tmp_path / "m.py").write_text("")
    with pytest.raises(PipelineSpecError) as error:
        load(_pipeline(tmp_path), udfs={"m": tmp_path / "m.py"})
    assert str(error.value) == (
        "side input \"ticker\": its container image 'ticker-image' cannot run on flowspark; "
        "give its Python handler with --udf ticker=path/to/side_input.py or the annotation "
        "flowspark.io/udf.ticker: path/to/side_input.py"
    )


def test_a_sink_that_lists_side_inputs_is_refused(tmp_path):
    path = _pipeline(tmp_path, m="", out=", sideInputs: [ticker]")
    with pytest.raises(PipelineSpecError) as error:
        load(path, udfs={"ticker": _side_input_script(tmp_path, TICKER)})
    assert str(error.value) == (
        'vertex "out": flowspark gives side inputs to map UDF vertices that are not on a '
        "cycle; this one is a sink vertex"
    )


def test_a_map_vertex_on_a_cycle_that_lists_side_inputs_is_refused(tmp_path):
    path = _pipeline(tmp_path)
    to_self = "{from: m, to: out}, {from: m, to: m}"
    path.write_text(path.read_text().replace("{from: m, to: out}", to_self))
    (tmp_path / "m.py").write_text("")
    with pytest.raises(PipelineSpecError, match='vertex "m": .* this one is on a cycle'):
        load(path, udfs={"ticker": _side_input_script(tmp_path, TICKER), "m": tmp_path / "m.py"})


def test_a_side_input_script_must_start_a_side_input_server(tmp_path):
    script = _side_input_script(
        tmp_path, "from flowspark.mapper import MapServer\nMapServer(lambda k, d: []).start()\n"
    )
    (tmp_path / "m.py").write_text("")
    with pytest.raises(PipelineSpecError, match='side input "ticker": its UDF must be a Side'):
        load(_pipeline(tmp_path), udfs={"ticker": script, "m": tmp_path / "m.py"})


def test_a_map_vertex_that_lists_side_inputs_needs_its_udf_as_a_file(tmp_path):
    with pytest.raises(PipelineSpecError, match='vertex "m" reads side inputs, so its UDF runs'):
        load(
            _pipeline(tmp_path),
            udfs={"ticker": _side_input_script(tmp_path, TICKER), "m": lambda keys, datum: []},
        )


def test_a_loaded_pipeline_starts_nothing_until_it_runs(tmp_path):
    (tmp_path / "m.py").write_text("")
    flow = load(
        _pipeline(tmp_path),
        udfs={"ticker": _side_input_script(tmp_path, TICKER), "m": str(tmp_path / "m.py")},
    )
    (service,) = [s for s in flow.services if type(s).__name__ == "SideInputService"]
    assert [v.process.process for v in service.vertices] == [None]
    assert os.path.basename(service.vertices[0].process.script) == "m.py"
