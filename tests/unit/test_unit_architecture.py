"""The layers of ``src/flowspark`` (see ARCHITECTURE.md), checked from the source.

Every ``flowspark`` import counts, at module level or inside a function: the
import graph has no cycle, no module imports from a layer above its own, the
bytewax/pynumaflow import faces only re-export, Numaflow's folders sit inside the
runtime and connectors layers (the bytewax core imports Numaflow's runtime only
to dispatch), and the API builds a flow with every operator while ``pyspark``
cannot be imported.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flowspark.api.steps import OPERATORS
from tests.no_pyspark import BLOCK_PYSPARK

SRC = Path(__file__).resolve().parents[2] / "src" / "flowspark"

# Lowest first; a module may import its own layer and the layers below it.
LAYERS = ["shared", "api", "plan", "runtime", "connectors", "engine", "pipeline", "top"]
# Entry points big enough for a package of their own: their modules are in the top layer.
TOP_PACKAGES = ["visualize", "operators"]
# Top-level modules that exist so that bytewax / pynumaflow imports carry over.
FACES = [
    "dataflow",
    "window",
    "inputs",
    "outputs",
    "recovery",
    "mapper",
    "mapstreamer",
    "batchmapper",
    "reducer",
    "reducestreamer",
    "accumulator",
    "sinker",
    "sourcetransformer",
    "sourcer",
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py")}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``name`` refers to (a name imported from a module is that module)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """``module -> flowspark modules it imports`` (anywhere in its code)."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                names = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] != "flowspark":
                    continue
                target = _resolve(name, modules)
                if target and target != module:
                    graph[module].add(target)
    return graph


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in TOP_PACKAGES:
        return "top"
    if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS):
        return parts[1]
    return "top"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_module_imports_from_a_layer_above_its_own():
    upward = [
        f"{module} ({layer_of(module)}) -> {target} ({layer_of(target)})"
        for module, targets in import_graph().items()
        for target in targets
        if LAYERS.index(layer_of(target)) > LAYERS.index(layer_of(module))
    ]
    assert upward == []


def test_every_layer_folder_exists():
    for layer in LAYERS[:-1]:
        assert (SRC / layer / "__init__.py").is_file(), layer


def test_every_package_is_a_layer_or_a_top_package():
    packages = {p.parent.name for p in SRC.glob("*/__init__.py")}
    assert packages <= set(LAYERS) | set(TOP_PACKAGES)
    assert layer_of("flowspark.visualize.svg") == layer_of("flowspark.cli") == "top"


# Numaflow's folders sit inside the runtime and connectors layers.
NUMAFLOW_FOLDERS = {
    "runtime/numaflow": "runtime",
    "connectors/numaflow": "connectors",
    "connectors/numaflow/http": "connectors",
}
# The bytewax core (``runtime/*.py``) imports from ``runtime/numaflow/`` only where a
# shared dispatch must name Numaflow's kinds.
CORE_TO_NUMAFLOW = {
    ("flowspark.runtime.logics", "flowspark.runtime.numaflow.keyed"),  # keyed kinds
    ("flowspark.runtime.logics", "flowspark.runtime.numaflow.cycle"),  # the cycle kind
    ("flowspark.runtime.stage", "flowspark.runtime.numaflow.datums"),  # built steps
    # old pickles in recovery directories name this module
    ("flowspark.runtime.udf_keyed", "flowspark.runtime.numaflow.keyed"),
}


@pytest.mark.parametrize("folder", sorted(NUMAFLOW_FOLDERS))
def test_the_numaflow_folders_sit_in_their_layers(folder: str):
    assert (SRC / folder / "__init__.py").is_file(), folder
    module = "flowspark." + folder.replace("/", ".")
    assert layer_of(module) == NUMAFLOW_FOLDERS[folder]


def test_the_bytewax_core_imports_numaflow_only_to_dispatch():
    core = {m for m in _modules() if m.startswith("flowspark.runtime.") and m.count(".") == 2}
    core.discard("flowspark.runtime.numaflow")
    found = {
        (module, target)
        for module, targets in import_graph().items()
        if module in core
        for target in targets
        if target.startswith("flowspark.runtime.numaflow")
    }
    assert found <= CORE_TO_NUMAFLOW, sorted(found - CORE_TO_NUMAFLOW)


def test_the_operators_package_builds_on_the_api_only():
    # bytewax 0.21's operators are a top-level package (a face with code of its own):
    # they record steps through the api layer, nothing from the layers that run them.
    graph = import_graph()
    used = {
        target
        for module, targets in graph.items()
        if module.startswith("flowspark.operators")
        for target in targets
        if not target.startswith("flowspark.operators")
    }
    assert used and {layer_of(t) for t in used} <= {"shared", "api"}, sorted(used)


@pytest.mark.parametrize("face", FACES)
def test_import_faces_only_re_export(face: str):
    tree = ast.parse((SRC / f"{face}.py").read_text())
    for statement in tree.body:
        is_doc = isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        is_import = isinstance(statement, ast.ImportFrom | ast.Import)
        is_all = isinstance(statement, ast.Assign) and [
            getattr(t, "id", None) for t in statement.targets
        ] == ["__all__"]
        # ``python -m flowspark.recovery``: a face may hand its command line to a module
        # below (an import and one call, nothing else).
        is_main = (
            isinstance(statement, ast.If)
            and ast.unparse(statement.test) == "__name__ == '__main__'"
            and not statement.orelse
            and len(statement.body) == 2
            and isinstance(statement.body[0], ast.ImportFrom)
            and isinstance(statement.body[1], ast.Raise | ast.Expr)
        )
        assert is_doc or is_import or is_all or is_main, f"{face}.py line {statement.lineno}"


_BLOCKED_PYSPARK_FLOW = (
    BLOCK_PYSPARK
    + """
from datetime import timedelta

from flowspark.accumulator import Accumulator
from flowspark.batchmapper import BatchResponse
from flowspark.api.steps import OPERATORS
from flowspark.connectors.files import FileOutput
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.mapstreamer import Message
from flowspark.plan.graph import build_plan
from flowspark.testing import TestingInput, TestingOutput
from flowspark.window import EventClockConfig, SessionWindow, SystemClockConfig, TumblingWindow


async def stream(keys, datum):
    yield Message(datum.value, keys=keys)


async def batch(datums):
    return [BatchResponse.from_id(datum.id) async for datum in datums]


async def reduce_stream(keys, datums, output, md):
    async for datum in datums:
        await output.put(Message(datum.value, keys=keys))


class Sorter(Accumulator):
    async def handler(self, datums, output):
        async for datum in datums:
            await output.put(Message(datum.value, keys=datum.keys))


flow = Dataflow("every_operator")
s = flow.input("inp", TestingInput([("a", 1)]))
s = s.map("map", lambda x: x).filter("filter", lambda x: True)
s = s.filter_map("filter_map", lambda x: x).flat_map("flat_map", lambda x: [x])
s = s.inspect("inspect", print).inspect_epoch("inspect_epoch", lambda e, x: None)
s = s.inspect_worker("inspect_worker", lambda w, x: None).redistribute("redistribute")
trues, falses = s.branch("branch", lambda x: True)
s = trues.merge(falses, step_id="merge")
s.reduce("reduce", lambda a, b: a + b, lambda acc: True).output("o1", TestingOutput([]))
s.stateful_map("stateful_map", lambda: 0, lambda st, v: (st, v)).output("o2", StdOutput())
s.batch("batch", 2, timedelta(seconds=1)).output("o3", TestingOutput([]))
event = EventClockConfig(lambda v: v, wait_for_system_duration=timedelta(0))
window = TumblingWindow(length=timedelta(seconds=1))
s.reduce_window("reduce_window", SystemClockConfig(), window, lambda a, b: a).output(
    "o4", TestingOutput([])
)
s.fold_window("fold_window", event, SessionWindow(gap=timedelta(1)), list, lambda a, v: a).output(
    "o5", TestingOutput([])
)
s.collect_window("collect_window", event, window).output("o6", FileOutput("/dev/null"))
d = s.to_datums("to_datums").route("route", tags=["x"]).map_stream("map_stream", stream)
d = d.batch_map("batch_map", batch)
d.reduce_stream("reduce_stream", reduce_stream, timedelta(seconds=1)).output(
    "o7", TestingOutput([])
)
d.accumulate("accumulate", Sorter, timedelta(seconds=1)).output("o8", TestingOutput([]))
from flowspark.runtime.numaflow.cycle import CycleRunner, EnterCycle, PerItemStep

spin = CycleRunner({"c": PerItemStep("c", lambda x: [x])}, [("c", "c", None)], frozenset())
d.map("enter", EnterCycle("c")).cycle("cycle", spin).output("o9", TestingOutput([]))
# bytewax 0.21's operators build the same kinds, and the ones only they use.
import flowspark.operators as op
from flowspark.testing import TestingSource

t = op.input("inp21", flow, TestingSource([("a", 1)]))
t = op.inspect_debug("inspect_debug", op.flat_map_batch("flat_map_batch", t, list))
op.output("o9", op.count_final("count_final", t, lambda x: x[0]), TestingOutput([]))
import flowspark.operators.windowing as win

sessions = win.SessionWindower(timedelta(1))
windowed = win.count_window("count_window", t, win.SystemClock(), sessions, str)
op.output("o10", windowed.down, TestingOutput([]))
plan = build_plan(flow)
kinds = {step.kind for step in plan.steps}
missing = set(OPERATORS) - kinds
assert not missing, missing
assert "pyspark" not in sys.modules
print("built", len(plan.steps), "steps of", len(kinds), "kinds without pyspark")
"""
)


def test_the_api_builds_a_flow_with_every_operator_without_pyspark():
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_BLOCKED_PYSPARK_FLOW)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"of {len(OPERATORS)} kinds without pyspark" in result.stdout
