"""Partitioned outputs written on the executors, without Spark: the plan makes them
keyed steps (keyed by part), the level before routes their items to parts, the
logic rebuilds a part from its snapshot for each write, and the driver keeps no
snapshot file of its own for them."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from flowspark.connectors.files import DirOutput, FileOutput
from flowspark.dataflow import Dataflow
from flowspark.engine.errors import RecoveryDirectoryError
from flowspark.engine.recovery_check import check_recovery_directory
from flowspark.engine.sink import SINKS_DIR, BatchDispatcher
from flowspark.outputs import PartitionedOutput, StatefulSink
from flowspark.plan.graph import build_plan, is_keyed
from flowspark.runtime.codec import KEY_SEPARATOR, decode_ordered
from flowspark.runtime.compile import compile_flow
from flowspark.runtime.errors import RemoteStepFailure, find_step_error
from flowspark.runtime.keyed import KeyedCall
from flowspark.runtime.parts import PartRoute, PartWriteLogic
from flowspark.runtime.stage import StageContext
from flowspark.runtime.storage import Location
from flowspark.runtime.task import leaving_rows
from flowspark.testing import TestingInput, TestingOutput
from tests.unit.test_unit_recovery_check import lay_out


class Log(StatefulSink):
    """A part that records what happens to it in ``events``."""

    def __init__(self, events: list, name: str, resume: Any) -> None:
        self.events, self.name, self.at = events, name, resume or 0
        events.append(("build", name, resume))

    def write_batch(self, values: list) -> None:
        if "boom" in values:
            raise OSError(5, "Input/output error")
        self.events.append(("write", self.name, list(values)))
        self.at += len(values)

    def snapshot(self) -> int:
        return self.at

    def close(self) -> None:
        self.events.append(("close", self.name))


class Logged(PartitionedOutput):
    writes_on = "executors"

    def __init__(self, events: list, parts: tuple[str, ...] = ("p0", "p1")) -> None:
        self.events, self.parts = events, parts

    def list_parts(self) -> list[str]:
        return list(self.parts)

    def part_fn(self, item_key: str) -> int:
        if item_key == "bad":
            raise KeyError(item_key)
        return len(item_key)

    def build_part(self, for_part: str, resume_state: Any) -> Log:
        return Log(self.events, for_part, resume_state)


def _flow(output: Any) -> Dataflow:
    flow = Dataflow()
    flow.input("inp", TestingInput([("a", 1)])).map(lambda kv: kv).output("out", output)
    return flow


def test_an_output_whose_parts_the_executors_write_is_a_keyed_step_one_level_up(tmp_path):
    on_driver = build_plan(_flow(FileOutput(tmp_path / "a.txt")))
    on_executors = build_plan(_flow(FileOutput(tmp_path / "a.txt", writes_on="executors")))
    assert on_driver.levels == [0, 0, 0] and not on_driver.stateful
    assert on_executors.levels == [0, 0, 1] and on_executors.stateful
    assert is_keyed(on_executors.step(2)) and not is_keyed(on_driver.step(2))
    compiled = compile_flow(on_executors, key_partitions=2)
    (level,) = compiled.levels
    assert level.keyed and level.entries == frozenset({2}) and not level.uses_wal


def test_the_level_before_routes_items_to_their_parts_as_keyed_rows():
    events: list = []
    compiled = compile_flow(build_plan(_flow(Logged(events))), key_partitions=2)
    reading = pickle.loads(compiled.inputs[0].program)
    assert list(reading.part_routes) == [2] and reading.executor_sinks == {}
    leaving = reading.run(0, [("a", 1), ("bb", 2), ("c", 3), "xyz"], StageContext())
    rows = list(leaving_rows(reading, leaving, spread=1))
    keyed = {key: decode_ordered(data)[1] for _, key, data in rows}
    assert set(keyed) == {f"2{KEY_SEPARATOR}p1", f"2{KEY_SEPARATOR}p0"}
    assert events == []  # nothing is built or written before the exchange
    level = pickle.loads(compiled.levels[0].program)
    assert level.nodes[2].sink_port is None  # the driver gets no items for it


def test_a_route_gathers_each_items_part_by_part_fn_modulo_the_parts_in_order():
    route = PartRoute("out", Logged([], parts=("p0", "p1", "p2")))
    groups = route.group([("", 0), ("a", 1), ("bb", 2), ("ccc", 3), ("a", 4)], {})
    assert groups == {"p0": [("", 0), ("ccc", 3)], "p1": [("a", 1), ("a", 4)], "p2": [("bb", 2)]}
    assert route.group([7], groups)["p1"][-1] == 7  # a plain item is keyed by its str()


def test_a_part_fn_that_raises_names_the_output_and_the_item():
    with pytest.raises(RemoteStepFailure) as info:
        PartRoute("out", Logged([])).group([("ok", 1), ("bad", 2)], {})
    error = find_step_error(str(info.value))
    assert isinstance(error, KeyError)
    assert str(error).startswith("step 'out' (Logged.part_fn) failed on item ('bad', 2)")


def test_an_output_without_parts_fails_when_the_flow_is_compiled():
    with pytest.raises(ValueError, match=r"^output 'out': Logged.list_parts\(\) returned no"):
        compile_flow(build_plan(_flow(Logged([], parts=()))), key_partitions=2)


def test_each_write_builds_the_part_from_the_last_snapshot_and_closes_it():
    events: list = []
    logic = PartWriteLogic("out", Logged(events))
    first = logic.on_values(KeyedCall("p0", None, 0, [("k", "a"), ("k", "b")]))
    second = logic.on_values(KeyedCall("p0", first.state, 0, [("k", "c")]))
    again = logic.on_values(KeyedCall("p0", first.state, 0, [("k", "c")]))  # a replay
    assert (first.state, second.state, again.state) == ((2,), (3,), (3,))
    assert (first.written, second.written) == (2, 1)
    assert events == [
        ("build", "p0", None), ("write", "p0", ["a", "b"]), ("close", "p0"),
        ("build", "p0", 2), ("write", "p0", ["c"]), ("close", "p0"),
        ("build", "p0", 2), ("write", "p0", ["c"]), ("close", "p0"),
    ]  # fmt: skip
    assert first.emitted == []  # the output's stream leads nowhere
    logic.use_slots(frozenset({0}))
    assert logic.on_values(KeyedCall("p0", None, 0, [("k", "a")])).emitted == [("k", "a")]


def test_a_failed_write_closes_the_part_and_names_the_step_and_the_values():
    events: list = []
    logic = PartWriteLogic("out", Logged(events))
    with pytest.raises(RemoteStepFailure) as info:
        logic.on_values(KeyedCall("p1", (4,), 0, [("k", "x"), ("k", "boom")]))
    error = find_step_error(str(info.value))
    assert isinstance(error, OSError) and error.errno == 5
    assert str(error).startswith("step 'out' (write_batch) failed on item ['x', 'boom']")
    assert events == [("build", "p1", 4), ("close", "p1")]


def test_the_driver_keeps_no_snapshot_for_parts_written_on_the_executors_only_a_mark(
    tmp_path,
):
    plan = build_plan(_flow(DirOutput(tmp_path / "out", 2, writes_on="executors")))
    dispatcher = BatchDispatcher(plan, str(tmp_path / "sinks"))
    for writer in dispatcher.writers.values():
        writer.begin(0)
        writer.commit(0)
    dispatcher.close()
    assert sorted(p.name for p in (tmp_path / "sinks").iterdir()) == ["out.executors"]
    assert dispatcher.run_tokens == {}


def test_a_directory_whose_committed_batches_the_driver_wrote_is_refused(tmp_path):
    out = DirOutput(tmp_path / "out", 2, writes_on="executors")
    plan = build_plan(_flow(out))
    driver_wrote = lay_out(tmp_path / "rec", [0, 1], (0, 1))
    with pytest.raises(RecoveryDirectoryError, match="'out' writes its parts on the executors"):
        check_recovery_directory(Location.parse(str(driver_wrote)), plan)
    fresh = lay_out(tmp_path / "fresh", [0, 1], None)
    assert check_recovery_directory(Location.parse(str(fresh)), plan) == 1
    assert (driver_wrote / SINKS_DIR / "out.pickle").exists()


def test_a_directory_whose_committed_batches_the_executors_wrote_is_refused_on_the_driver(
    tmp_path,
):
    on_driver = build_plan(_flow(DirOutput(tmp_path / "out", 2)))
    on_executors = build_plan(_flow(DirOutput(tmp_path / "out", 2, writes_on="executors")))
    executors_wrote = lay_out(tmp_path / "rec", [0, 1], None)
    BatchDispatcher(on_executors, str(executors_wrote / SINKS_DIR)).close()  # the mark
    where = Location.parse(str(executors_wrote))
    assert check_recovery_directory(where, on_executors) == 1
    with pytest.raises(RecoveryDirectoryError, match="'out' writes its parts on the driver, but"):
        check_recovery_directory(where, on_driver)


def test_a_driver_output_is_not_keyed_whatever_its_family():
    flow = Dataflow()
    flow.input("inp", TestingInput([1])).output("out", TestingOutput([]))
    assert not build_plan(flow).stateful


def test_a_part_written_on_the_executors_resumes_a_file_where_its_snapshot_says(tmp_path):
    logic = PartWriteLogic("out", FileOutput(tmp_path / "f.txt", writes_on="executors"))
    name = str(tmp_path / "f.txt")
    first = logic.on_values(KeyedCall(name, None, 0, ["a", "b"]))
    logic.on_values(KeyedCall(name, first.state, 0, ["c"]))
    assert Path(name).read_text() == "a\nb\nc\n"
    logic.on_values(KeyedCall(name, first.state, 0, ["C"]))  # the last batch replayed
    assert Path(name).read_text() == "a\nb\nC\n"
