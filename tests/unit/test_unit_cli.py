"""`locate_dataflow`: how ``python -m flowspark.run IMPORT_STR`` finds the flow."""

from __future__ import annotations

import itertools
import sys
import textwrap
from pathlib import Path

import pytest

from flowspark.cli import locate_dataflow
from flowspark.dataflow import Dataflow

MODULE_SOURCE = textwrap.dedent(
    """
    from flowspark.dataflow import Dataflow

    flow = Dataflow("default")
    other = Dataflow("other")
    not_a_flow = 42
    config = "x"

    def make(name="made", *, size=1):
        f = Dataflow(f"{name}-{size}")
        return f

    def make_list(items):
        return Dataflow("list-" + ",".join(map(str, items)))

    def make_number():
        return 7
    """
)

_counter = itertools.count()


@pytest.fixture
def module_name(isolated: Path) -> str:
    """A fresh importable module (unique name, so no import cache interferes)."""
    name = f"fs_cli_flows_{next(_counter)}"
    (isolated / f"{name}.py").write_text(MODULE_SOURCE)
    return name


# What follows ``MODULE:`` in the import string (``None``: no colon) and the flow it names.
@pytest.mark.parametrize(
    ("attribute", "flow_id"),
    [
        ("other", "other"),
        (None, "default"),
        ("", "default"),
        ("make()", "made-1"),
        ("make('wc', size=3)", "wc-3"),
        ("make('a:b')", "a:b-1"),
        ("make_list([1, 'two'])", "list-1,two"),
    ],
)
def test_an_attribute_or_a_factory_call_names_the_flow(module_name, attribute, flow_id):
    target = module_name if attribute is None else f"{module_name}:{attribute}"
    flow = locate_dataflow(target)
    assert isinstance(flow, Dataflow)
    assert flow.flow_id == flow_id


def test_file_path_with_attribute(isolated):
    path = isolated / "sub" / "my_flow_file.py"
    path.parent.mkdir()
    path.write_text(MODULE_SOURCE)
    assert locate_dataflow(f"{path}:other").flow_id == "other"


def test_file_path_defaults_to_flow(isolated):
    path = isolated / "another_flow_file.py"
    path.write_text(MODULE_SOURCE)
    assert locate_dataflow(str(path)).flow_id == "default"


def test_relative_file_path(isolated):
    (isolated / "sub").mkdir()
    (isolated / "sub" / "relative_flow_file.py").write_text(MODULE_SOURCE)
    assert locate_dataflow("sub/relative_flow_file.py:make(size=2)").flow_id == "made-2"


def test_missing_file_exits_with_a_clear_message(isolated):
    with pytest.raises(SystemExit, match="no such file: missing.py"):
        locate_dataflow("missing.py:flow")


def test_missing_module_exits_with_a_clear_message(isolated):
    with pytest.raises(SystemExit, match="could not import module 'fs_no_such_module_xyz'"):
        locate_dataflow("fs_no_such_module_xyz:flow")


# What follows ``MODULE:`` and what the exit message says (``{module}``: the module).
@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        ("make(config)", "must be literals"),
        ("nope()", "has no function 'nope'"),
        ("nope", "'{module}' has no attribute 'nope'"),
        ("not_a_flow", "is an int, not a Dataflow"),
        ("make_number()", "not a Dataflow"),
        ("flow.steps", "cannot understand 'flow.steps'"),
        ("make(", "flowspark.run"),
    ],
)
def test_an_attribute_that_names_no_flow_exits_with_a_clear_message(
    module_name, attribute, message
):
    with pytest.raises(SystemExit, match=message.format(module=module_name)):
        locate_dataflow(f"{module_name}:{attribute}")


def test_missing_dependency_of_the_module_is_not_masked(isolated):
    (isolated / "fs_cli_uses_dep.py").write_text("import fs_cli_missing_dependency_q\n")
    with pytest.raises(ModuleNotFoundError, match="fs_cli_missing_dependency_q"):
        locate_dataflow("fs_cli_uses_dep:flow")


def test_missing_dependency_named_like_a_prefix_is_not_masked(isolated):
    (isolated / "fs_cli_app.py").write_text("import fs_cli\n")
    with pytest.raises(ModuleNotFoundError, match="fs_cli"):
        locate_dataflow("fs_cli_app:flow")


# --- watching a run: the flags (no Spark) ----------------------------------------------


def test_watching_flags_default_to_auto_progress_and_nothing_else():
    from flowspark.cli import _parser

    args = _parser().parse_args(["flow.py"])
    assert (args.progress, args.progress_json, args.metrics_port, args.ui) == (
        None,
        None,
        None,
        False,
    )
    assert args.metrics_host == "127.0.0.1"


def test_watching_flags_parse():
    from flowspark.cli import _parser

    args = _parser().parse_args(
        ["flow.py", "--no-progress", "--progress-json", "p.jsonl", "--metrics-port", "9108"]
        + ["--metrics-host", "0.0.0.0", "--ui"]
    )
    assert (args.progress, args.progress_json, args.metrics_port) == (False, "p.jsonl", 9108)
    assert (args.metrics_host, args.ui) == ("0.0.0.0", True)
    assert _parser().parse_args(["flow.py", "--progress"]).progress is True


def _fails_before_spark(capsys, argv: list[str], message: str) -> None:
    """``main(argv)`` exits 2 with one line on stderr holding ``message``."""
    from flowspark.cli import main

    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("flowspark.run: ") and message in lines[0], lines


def test_a_metrics_port_out_of_range_exits_before_spark_starts(module_name):
    from flowspark.cli import main

    with pytest.raises(SystemExit) as exited:  # argparse: one line, status 2
        main([module_name, "--metrics-port", "70000"])
    assert exited.value.code == 2


def test_metrics_without_prometheus_client_exit_with_a_clear_message(
    module_name, monkeypatch, capsys
):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # importing it fails
    argv = [module_name, "--metrics-port", "9108"]
    _fails_before_spark(capsys, argv, "--metrics-port needs prometheus_client")


def test_a_metrics_port_in_use_exits_before_spark_starts(module_name, capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = [module_name, "--metrics-port", str(port)]
        _fails_before_spark(capsys, argv, f"cannot listen on 127.0.0.1:{port}")


def test_a_progress_json_in_a_missing_directory_exits_before_spark_starts(module_name, capsys):
    argv = [module_name, "--progress-json", "no/such/dir/p.jsonl"]
    _fails_before_spark(capsys, argv, "--progress-json: no such directory")


def test_a_parallelism_below_one_exits_before_spark_starts(module_name, capsys):
    from flowspark.cli import main

    with pytest.raises(SystemExit) as exited:  # argparse: one line, status 2
        main([module_name, "--parallelism", "0"])
    assert exited.value.code == 2
    assert "--parallelism: must be a whole number >= 1; got '0'" in capsys.readouterr().err


def test_a_parallelism_from_the_environment_that_is_no_number_exits(
    module_name, monkeypatch, capsys
):
    monkeypatch.setenv("FLOWSPARK_PARALLELISM", "four")
    _fails_before_spark(capsys, [module_name], "FLOWSPARK_PARALLELISM must be a whole number")
