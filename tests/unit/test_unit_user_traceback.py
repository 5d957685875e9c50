"""A failing user function's traceback: its file and lines survive the trip to a
worker (`pickling`), and only the user's frames are shown (`user_traceback`)."""

from __future__ import annotations

import pickle
import sys
import textwrap
import types
from pathlib import Path

import cloudpickle
import pytest

from flowspark.runtime import pickling
from flowspark.runtime.errors import WORKER_TRACEBACK, find_step_error, step_failure
from flowspark.runtime.numaflow.run import HandlerRun
from flowspark.runtime.user_traceback import FRAME_LIMIT, Frame, Part, capture, render

USER_SOURCE = textwrap.dedent(
    """\
    def shout(s):
        return s.upper()


    def twice(s):
        try:
            return shout(s)
        except AttributeError as exc:
            raise ValueError("cannot shout") from exc
    """
)


@pytest.fixture
def user_module(tmp_path: Path) -> types.ModuleType:
    """A module from a real file, pickled by value as a flow file or __main__ is."""
    path = tmp_path / "userflow.py"
    path.write_text(USER_SOURCE)
    module = types.ModuleType("userflow")
    module.__file__ = str(path)
    exec(compile(USER_SOURCE, str(path), "exec"), module.__dict__)
    sys.modules["userflow"] = module
    cloudpickle.register_pickle_by_value(module)
    yield module
    cloudpickle.unregister_pickle_by_value(module)
    del sys.modules["userflow"]


def _shipped(fn):
    """``fn`` as a worker gets it: pickled by value, loaded where its module is unknown."""
    data = pickling.dumps(fn)
    saved = sys.modules.pop(fn.__module__)
    try:
        return pickle.loads(data)
    finally:
        sys.modules[fn.__module__] = saved


def test_code_shipped_by_value_keeps_its_file_and_lines(user_module):
    shout = _shipped(user_module.shout)
    assert shout is not user_module.shout
    assert shout.__code__.co_filename == user_module.__file__
    assert shout.__code__.co_firstlineno == 1
    assert shout("a") == "A"


def test_closures_classes_and_nested_code_keep_their_file():
    base = 10

    class Adder:
        def add(self, x):
            return (lambda y: y + base)(x)

    again = pickle.loads(pickling.dumps(Adder))
    assert again().add(1) == 11
    nested = [c for c in again.add.__code__.co_consts if isinstance(c, types.CodeType)]
    assert nested and nested[0].co_filename == __file__


def test_worker_traceback_names_the_users_file_line_and_source(user_module):
    shout = _shipped(user_module.shout)
    try:
        HandlerRun(lambda datums, output: shout(42))  # called through HandlerRun
    except AttributeError as exc:
        text = render(capture(exc))
    assert text.startswith("Traceback (most recent call last):\n")
    assert text.endswith(
        f'  File "{user_module.__file__}", line 2, in shout\n'
        "    return s.upper()\n"
        "AttributeError: 'int' object has no attribute 'upper'"
    )
    assert "numaflow/run.py" not in text  # HandlerRun's frames are gone


def test_the_whole_chain_is_shown_oldest_first(user_module):
    try:
        user_module.twice(1)
    except ValueError as exc:
        text = render(capture(exc))
    first, second = text.split("The above exception was the direct cause")
    assert "line 2, in shout" in first and "AttributeError" in first
    assert "line 9, in twice" in second and second.rstrip().endswith("cannot shout")
    assert __file__ not in text.split("Traceback")[1]  # the test's own frame, not the user's


def test_a_source_line_the_worker_lacked_is_read_on_the_driver(user_module):
    parts = (Part((Frame(user_module.__file__, 2, "shout", ""),), 0, "AttributeError: x", ""),)
    assert "    return s.upper()" in render(parts)
    missing = (Part((Frame("/nowhere/flow.py", 2, "shout", ""),), 0, "AttributeError: x", ""),)
    assert render(missing).splitlines()[1:] == [
        '  File "/nowhere/flow.py", line 2, in shout',
        "AttributeError: x",
    ]


def test_a_deep_recursion_keeps_its_innermost_frames():
    def down(n):
        return down(n - 1) if n else 1 / 0

    try:
        down(FRAME_LIMIT + 25)
    except ZeroDivisionError as exc:
        [part] = capture(exc)
    assert len(part.frames) == FRAME_LIMIT
    assert part.omitted == 27  # the test's frame and the outer calls
    assert "[27 earlier frames not shown]" in render((part,))


def test_a_step_failure_carries_the_user_frames_to_the_driver(user_module):
    shout = _shipped(user_module.shout)
    try:
        HandlerRun(lambda datums, output: shout(42))
    except AttributeError as exc:
        failure = step_failure("loud", shout, 42, exc)
    error = find_step_error(f"org.apache.spark.SparkException: ... {failure} ...")
    [note] = error.__cause__.__notes__
    assert note.startswith(WORKER_TRACEBACK)
    assert f'File "{user_module.__file__}", line 2, in shout\n    return s.upper()' in note
    assert "numaflow/run.py" not in note and "errors.py" not in note
