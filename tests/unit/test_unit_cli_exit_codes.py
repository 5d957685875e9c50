"""Bad input to ``python -m flowspark.run`` (and ``flowspark.visualize``): exit 2 before
Spark starts, with at most three lines on stderr naming the file and line, the step or
the flag, and no frames of runpy, importlib or flowspark; ``--verbose`` adds the whole
traceback. Also the pieces that make those lines (no Spark).

Each command runs with a stand-in ``pyspark`` package first on its path that fails on
import, so a one-line message proves Spark was never started.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from datetime import timedelta
from pathlib import Path

import pytest

from flowspark.cli import LoadError, _report_step_error, describe_load_error
from flowspark.dataflow import Dataflow
from flowspark.runtime.errors import StepError, user_error
from flowspark.runtime.user_traceback import code_location, error_line, user_location
from flowspark.testing import TestingInput, TestingOutput
from tests.pipeline_yaml import in_udf_out

PIPELINE = in_udf_out("up", "container: {image: my-udf}")

GOOD_FLOW = """\
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingInput

flow = Dataflow()
flow.input("inp", TestingInput(range(3))).output("out", StdOutput())
number = 5


def make(n):
    return flow
"""

RAISES_FLOW = """\
from flowspark.dataflow import Dataflow


def helper():
    return x + 1


flow = Dataflow()
n = helper()
"""

DUPLICATE_FLOW = """\
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingInput

flow = Dataflow()
s = flow.input("inp", TestingInput(range(3)))
s = s.map("double", lambda x: x * 2)
s = s.map("double", lambda x: x * 3)
s.output("out", StdOutput())
"""

UDF_MAP = """\
from flowspark.mapper import Messages, Message, MapServer


def handler(keys, datum):
    return Messages(Message(datum.value, keys=keys))


if __name__ == "__main__":
    MapServer(handler).start()
"""

FILES = {
    "good.yaml": PIPELINE,
    "bad.yaml": "apiVersion: x\nkind: [\n",
    "typo_kind.yaml": PIPELINE.replace("      udf:\n", "      udff:\n"),
    "missing_edge.yaml": PIPELINE + "    - from: up\n      to: nowhere\n",
    "good.py": GOOD_FLOW,
    "syntax.py": 'from flowspark.dataflow import Dataflow\n\nflow = Dataflow(\nflow.input("x"\n',
    "raises.py": RAISES_FLOW,
    "duplicate.py": DUPLICATE_FLOW,
    "needs_dep.py": "import fs_no_such_dependency_q\n",
    "udf.py": UDF_MAP,
    "udf_raises.py": "raise RuntimeError('no config')\n",
}

# (case, argv, what stderr names): every one exits 2 before Spark starts.
CASES = [
    ("bad YAML", ["bad.yaml"], "bad.yaml: invalid YAML"),
    (
        "unknown vertex kind",
        ["typo_kind.yaml"],
        "typo_kind.yaml: spec.vertices[1]: unknown field 'udff'",
    ),
    (
        "missing edge target",
        ["missing_edge.yaml"],
        'missing_edge.yaml: invalid edge: no vertex named "nowhere"',
    ),
    (
        "--udf on a flow file",
        ["good.py", "--udf", "up=udf.py"],
        "--udf and --secret apply to pipeline YAML files",
    ),
    ("missing attribute", ["good.py:nope"], "'good.py' has no attribute 'nope'"),
    ("attribute not a Dataflow", ["good.py:number"], "'good.py:number' is an int, not a Dataflow"),
    (
        "factory with non-literal args",
        ["good.py:make(number)"],
        "factory arguments in 'make(number)' must be literals",
    ),
    ("unparsable attribute", ["good.py:make("], "cannot parse 'make('"),
    ("nonexistent file", ["absent.py"], "no such file: absent.py"),
    ("nonexistent pipeline", ["absent.yaml"], "no such file: absent.yaml"),
    (
        "nonexistent module",
        ["fs_no_such_module_q"],
        "could not import module 'fs_no_such_module_q'",
    ),
    ("--http-port out of range", ["good.yaml", "--http-port", "99999"], "argument --http-port"),
    (
        "--progress-json in no directory",
        ["good.py", "--progress-json", "no/dir/p.jsonl"],
        "--progress-json: no such directory",
    ),
    ("-i without -a", ["good.py", "-i", "1"], "-i/--process-id needs -a/--addresses"),
    (
        "-a with a bad address",
        ["good.py", "-a", "127.0.0.1:2101;nowhere", "-i", "0"],
        "an address is host:port; got 'nowhere'",
    ),
    (
        "-i outside -a",
        ["good.py", "-a", "127.0.0.1:2101;127.0.0.1:2102", "-i", "2"],
        "-i/--process-id must be in 0..1; got 2",
    ),
    (
        "-a with --master",
        ["good.py", "-a", "127.0.0.1:2101", "-i", "0", "--master", "local[2]"],
        "-a/--addresses makes its own cluster",
    ),
    (
        "-w against --parallelism",
        ["good.py", "-w", "2", "--parallelism", "3"],
        "-w and --parallelism say different things",
    ),
    ("unknown flag", ["good.py", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    ("no target", [], "the following arguments are required: IMPORT_STR"),
]

# (flag, value, what argparse says after "argument "): a bad value for a flag of good.py's
# run, named "FLAG VALUE" in CASES.
BAD_VALUES = [
    ("--parallelism", "-2", "--parallelism: must be a whole number >= 1; got '-2'"),
    ("--parallelism", "four", "--parallelism"),
    ("--metrics-port", "70000", "--metrics-port: must be a port number 0..65535"),
    ("--metrics-port", "http", "--metrics-port"),
    ("--max-batch-items", "0", "--max-batch-items: must be a whole number >= 1; got '0'"),
    ("--max-batch-items", "-5", "--max-batch-items"),
    ("--trigger-interval", "-1", "--trigger-interval: must be a number of seconds >= 0"),
    ("-s", "nan", "-s/--snapshot-interval"),
    ("-w", "0", "-w/--workers-per-process"),
]
CASES += [
    (f"{flag} {value}", ["good.py", flag, value], f"argument {says}")
    for flag, value, says in BAD_VALUES
]

# (NAME=FILE, what stderr names): a bad --udf for good.yaml's vertex "up", named
# "--udf NAME=FILE" in CASES.
BAD_UDFS = [
    ("up=absent.py", "UDF file"),
    ("nope=udf.py", "--udf names no vertex of the pipeline: nope"),
    ("up", "--udf takes NAME=VALUE; got 'up'"),
    ("up=udf_raises.py", "RuntimeError: no config (at udf_raises.py:1)"),
]
CASES += [(f"--udf {pair}", ["good.yaml", "--udf", pair], says) for pair, says in BAD_UDFS]

# (flow file, line, the error): a flow file that fails as it loads (a syntax error, a
# raise at import, a missing dependency, a step id used twice), named "FILE:LINE: ERROR".
FAILING_FLOWS = [
    ("syntax.py", 4, "SyntaxError: "),
    ("raises.py", 5, "NameError: name 'x' is not defined"),
    ("needs_dep.py", 1, "ModuleNotFoundError: No module named 'fs_no_such_dependency_q'"),
    ("duplicate.py", 8, "ValueError: step id 'double' is used twice"),
]
CASES += [
    (f"{name}:{line}", [name], f"{name}:{line}: {error}") for name, line, error in FAILING_FLOWS
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The bad (and good) files, and a stand-in ``pyspark`` that fails on import."""
    where = tmp_path_factory.mktemp("bad_inputs")
    for name, text in FILES.items():
        (where / name).write_text(text)
    stand_in = where / "no_spark" / "pyspark"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("raise ImportError('Spark must not start')\n")
    return where


def _run(folder: Path, module: str, *argv: str) -> subprocess.CompletedProcess:
    path = [str(folder / "no_spark"), *sys.path[1:]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    env.pop("FLOWSPARK_PARALLELISM", None)
    return subprocess.run(
        [sys.executable, "-m", module, *argv],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=120,
    )


def _assert_short(stderr: str) -> list[str]:
    lines = stderr.strip().splitlines()
    assert 1 <= len(lines) <= 3, stderr
    for internal in ("Traceback", "runpy", "importlib", "/flowspark/", "Spark must not start"):
        assert internal not in stderr, stderr
    return lines


@pytest.mark.parametrize(("argv", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_input_exits_2_with_one_line_naming_it(folder, argv, names):
    done = _run(folder, "flowspark.run", *argv)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = _assert_short(done.stderr)
    assert lines[0].startswith("flowspark.run: "), lines
    assert names in done.stderr, done.stderr


def test_the_table_covers_at_least_fifteen_bad_inputs():
    assert len(CASES) >= 15


def test_a_pipeline_file_is_named_once(folder):
    done = _run(folder, "flowspark.run", "bad.yaml")
    assert "bad.yaml: bad.yaml" not in done.stderr
    assert done.stderr.count("bad.yaml") == 1, done.stderr


def test_verbose_shows_the_whole_traceback(folder):
    done = _run(folder, "flowspark.run", "raises.py", "--verbose")
    assert done.returncode == 2
    assert done.stderr.startswith("Traceback (most recent call last):")
    assert 'raises.py", line 9, in <module>' in done.stderr
    assert 'raises.py", line 5, in helper' in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == "flowspark.run: raises.py:5: NameError: name 'x' is not defined"


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["raises.py"], "flowspark.visualize: raises.py:5: NameError: name 'x' is not defined"),
        (["duplicate.py"], "flowspark.visualize: duplicate.py:8: ValueError: step id 'double'"),
        (["syntax.py"], "flowspark.visualize: syntax.py:4: SyntaxError: "),
        (["bad.yaml"], "flowspark.visualize: bad.yaml: invalid YAML"),
        (["good.py:number"], "flowspark.visualize: 'good.py:number' is an int, not a Dataflow"),
        (["good.py", "--frobnicate"], "flowspark.visualize: unrecognized arguments: --frobnicate"),
    ],
    ids=["raising", "duplicate", "syntax", "bad-yaml", "not-a-flow", "unknown-flag"],
)
def test_visualize_uses_the_same_codes_and_lines(folder, argv, line):
    done = _run(folder, "flowspark.visualize", *argv)
    assert done.returncode == 2, done.stderr
    lines = _assert_short(done.stderr)
    assert lines[0].startswith(line), lines


def test_a_recovery_inspect_of_no_directory_exits_2(folder):
    done = _run(folder, "flowspark.recovery", "inspect", "absent")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


# -- the pieces (in this process) ----------------------------------------------------------


def _raised(code: str, filename: str) -> BaseException:
    try:
        exec(compile(code, filename, "exec"), {})
    except Exception as exc:
        return exc
    raise AssertionError("nothing raised")


def test_the_users_frame_is_the_innermost_one_of_theirs(tmp_path):
    path = tmp_path / "flow.py"
    path.write_text("import json\n\n\ndef load():\n    return json.loads('{')\n\n\nload()\n")
    exc = _raised(path.read_text(), str(path))
    assert user_location(exc) == (str(path), 5)  # not json's own frames
    assert error_line(exc).startswith("JSONDecodeError: Expecting property name")


def test_a_syntax_error_is_placed_by_its_own_file_and_line():
    exc = _raised("x = 1\nif x\n", "flow.py")
    assert user_location(exc) == ("flow.py", 2)
    assert describe_load_error(exc) == "flowspark.run: flow.py:2: SyntaxError: expected ':'"


def test_a_load_error_is_a_system_exit_with_its_one_line():
    error = LoadError("no such file: x.py")
    assert isinstance(error, SystemExit)
    assert error.code == "flowspark.run: no such file: x.py"
    assert describe_load_error(error, "flowspark.visualize") == (
        "flowspark.visualize: no such file: x.py"
    )


def test_a_failing_step_prints_the_users_innermost_frame_and_one_line(capsys):
    def invert(x):
        return 1 / x

    try:
        invert(0)
    except ZeroDivisionError as exc:
        error = user_error("invert", invert, 0, exc)
    assert isinstance(error, StepError)
    _report_step_error(error, verbose=False)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith(f'  File "{__file__}", line ') and lines[0].endswith("in invert")
    assert lines[1] == "    return 1 / x"
    assert lines[2] == (
        "flowspark: step 'invert' (test_a_failing_step_prints_the_users_innermost_frame_and_"
        "one_line.<locals>.invert) failed on item 0: ZeroDivisionError: division by zero"
    )


def test_wrappers_of_ours_are_named_by_the_users_handler():
    from flowspark.api.udf.servers import handler_factory
    from flowspark.reducestreamer import ReduceStreamer

    class Summer(ReduceStreamer):
        async def handler(self, keys, datums, output, md):
            async for _ in datums:
                pass

    factory = handler_factory(Summer, "reduce_stream")
    error = user_error("sum", factory, None, ValueError("bad init"))
    assert "<locals>.Summer)" in str(error) and "_Handler" not in str(error)
    assert code_location(factory)[0] == __file__


def test_a_keyed_failure_without_a_datum_names_the_key_only():
    from flowspark.runtime.numaflow.keyed import KeyedDatum

    error = user_error("sum", "handler", KeyedDatum("k", None), ValueError("bad init"))
    assert str(error) == "step 'sum' (handler) failed on key 'k': ValueError: bad init"
    assert "datum None" not in str(error)


def test_late_items_are_warned_about_at_the_users_clock():
    from flowspark.engine.errors import warn_late_items
    from flowspark.engine.query import LateItemsWarning
    from flowspark.window import EventClockConfig, TumblingWindow

    def event_time(item):
        return item[1]

    clock = EventClockConfig(event_time)
    flow = Dataflow()
    windows = flow.input("inp", TestingInput([])).collect_window(
        "win", clock, TumblingWindow(length=timedelta(seconds=10))
    )
    windows.output("out", TestingOutput([]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_late_items(flow.steps, "win", 2, LateItemsWarning)
    [warning] = caught
    assert warning.category is LateItemsWarning
    assert str(warning.message).startswith("window step 'win' dropped 2 late item(s)")
    assert (warning.filename, warning.lineno) == code_location(event_time)


def test_late_items_without_a_function_of_the_users_are_warned_about_at_the_caller():
    from flowspark.engine.errors import warn_late_items
    from flowspark.engine.query import LateItemsWarning
    from flowspark.window import SystemClockConfig, TumblingWindow

    flow = Dataflow()
    windows = flow.input("inp", TestingInput([])).collect_window(
        "win", SystemClockConfig(), TumblingWindow(length=timedelta(seconds=10))
    )
    windows.output("out", TestingOutput([]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_late_items(flow.steps, "win", 1, LateItemsWarning)
    assert [w.filename for w in caught] == [__file__]  # this call, not flowspark's code


@pytest.fixture
def good_flow(tmp_path, monkeypatch):
    """A flow file for ``main`` in this process (``sys.path`` and ``sys.modules`` restored)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    path = tmp_path / "fs_exit_codes_flow.py"
    path.write_text(GOOD_FLOW)
    yield str(path)
    sys.modules.pop(path.stem, None)


def _main_with_run_failing(
    monkeypatch, capsys, target: str, error: BaseException, closed: bool = False
):
    from flowspark import cli
    from flowspark.connectors import stdio

    def run_flow(flow, config):
        raise error

    monkeypatch.setattr("flowspark.engine.query.run_flow", run_flow)
    monkeypatch.setattr(stdio, "_closed", closed)  # as StdOutput's sink remembers it
    monkeypatch.setattr(stdio, "silence_stdout", lambda: None)
    monkeypatch.setattr(cli, "silence_stdout", lambda: None)
    code = cli.main([target, "--no-progress"])
    return code, capsys.readouterr().err.splitlines()


def test_ctrl_c_exits_130(good_flow, monkeypatch, capsys):
    code, err = _main_with_run_failing(monkeypatch, capsys, good_flow, KeyboardInterrupt())
    assert (code, err) == (130, ["flowspark: stopped (Ctrl-C)"])


def test_spark_stopping_the_query_exits_1_in_two_lines(good_flow, monkeypatch, capsys):
    from flowspark.engine.errors import FlowRunError

    summary = "\n".join(["[STREAM_FAILED] Query [id = 1, runId = 2] terminated"] + ["..."] * 11)
    error = FlowRunError(f"Spark stopped the flow: {summary}")
    code, err = _main_with_run_failing(monkeypatch, capsys, good_flow, error)
    assert code == 1
    assert err == [
        "flowspark: Spark stopped the flow: [STREAM_FAILED] Query terminated",
        "(--verbose shows all of Spark's message and its log)",
    ]


def test_a_sink_writing_into_a_closed_stdout_exits_32_quietly(good_flow, monkeypatch, capsys):
    error = user_error("out", "write_batch", ["a"], BrokenPipeError(32, "Broken pipe"))
    code, err = _main_with_run_failing(monkeypatch, capsys, good_flow, error, closed=True)
    assert (code, err) == (32, [])


def test_a_broken_pipe_elsewhere_is_a_failing_step(good_flow, monkeypatch, capsys):
    error = user_error("post", "send", ["a"], BrokenPipeError(32, "Broken pipe"))
    code, err = _main_with_run_failing(monkeypatch, capsys, good_flow, error)
    assert (code, err[-1:]) == (1, [f"flowspark: {error}"])
    assert str(error).startswith("step 'post' (send) failed on item ['a']: BrokenPipeError")


CLOSED_PIPE = textwrap.dedent(
    """
    import os, sys
    from flowspark.connectors.stdio import StdOutput, stdout_closed

    read, write = os.pipe()
    os.close(read)  # nobody reads: as after ``| head -1`` has what it wanted
    os.dup2(write, 1)
    sink = StdOutput().build(0, 1)
    try:
        sink.write_batch(["a line"] * 10_000)
    except BrokenPipeError:
        assert stdout_closed()
        print("more", flush=True)  # goes to /dev/null now
        sys.stderr.write("stopped\\n")
    """
)


def test_printing_into_a_closed_pipe_stops_quietly():
    done = subprocess.run(
        [sys.executable, "-c", CLOSED_PIPE], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, "stopped\n")
