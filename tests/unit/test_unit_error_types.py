"""A user function's error keeps its type: ``StepError[T]`` is a StepError and a T."""

from __future__ import annotations

import copy
import errno
import pickle
import threading

import pytest

from flowspark.runtime.errors import StepError, find_step_error, step_failure, user_error


def divide(x):
    return 1 / x


def raised(fn, *args) -> BaseException:
    """The exception ``fn(*args)`` raises (with its traceback)."""
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - the tests look at any exception
        return exc
    raise AssertionError("did not raise")


def remote(exc: BaseException, step_id="st", fn=divide, item="it") -> BaseException:
    """``exc`` raised in a (pretend) worker, sent and decoded as the driver does."""
    try:
        raise exc
    except BaseException as raised:
        failure = step_failure(step_id, fn, item, raised)
    error = find_step_error("PythonException: " + str(failure))
    assert error is not None
    return error


class CustomInit(Exception):
    """A user exception whose ``__init__`` does not take ``args`` back."""

    inits = 0

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        type(self).inits += 1
        self.code = code


class AppIOError(OSError):
    pass


class Locked(Exception):
    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.lock = threading.Lock()
        self.kept = "yes"


class NoSubclasses(Exception):
    def __init_subclass__(cls, **kwargs):
        raise TypeError("NoSubclasses is final")


class WithItem(Exception):
    def __init__(self, item):
        super().__init__(f"bad item {item!r}")
        self.item = item


# -- in the same process (sinks, custom inputs) -------------------------------------------


def test_type_error_is_both_a_step_error_and_a_type_error():
    exc = TypeError("Dataflow requires a `(key, value)` 2-tuple")
    err = user_error("sm", divide, 7, exc)
    assert isinstance(err, StepError)
    assert isinstance(err, TypeError)
    assert str(err) == (
        "step 'sm' (divide) failed on item 7: TypeError: Dataflow requires a `(key, value)` 2-tuple"
    )
    assert (err.step_id, err.function, err.item) == ("sm", "divide", "7")
    assert err.__cause__ is exc
    with pytest.raises(TypeError, match="step 'sm'.*item 7"):
        raise err


def test_zero_division_is_caught_by_its_own_type():
    exc = raised(divide, 0)
    with pytest.raises(ZeroDivisionError) as info:
        raise user_error("invert", divide, 0, exc)
    err = info.value
    assert isinstance(err, StepError)
    assert type(err).__name__ == "StepError[ZeroDivisionError]"
    assert str(err) == (
        "step 'invert' (divide) failed on item 0: ZeroDivisionError: division by zero"
    )
    assert err.__cause__ is exc
    assert err.__cause__.__traceback__ is not None


def test_combined_class_is_made_once_per_class():
    a = user_error("a", divide, 1, ValueError("x"))
    b = user_error("b", "f", 2, ValueError("y"))
    assert type(a) is type(b)
    assert type(a) is not type(user_error("c", "f", 3, KeyError("z")))


def test_user_exception_with_a_custom_init_keeps_its_attributes_without_init():
    exc = CustomInit(404, "missing")
    inits = CustomInit.inits
    err = user_error("fetch", "get", "url", exc)
    assert CustomInit.inits == inits  # the user's __init__ is not called again
    assert isinstance(err, CustomInit)
    assert isinstance(err, StepError)
    assert err.code == 404
    assert str(err) == "step 'fetch' (get) failed on item 'url': CustomInit: 404: missing"


def test_os_error_subclass_keeps_errno_and_filename():
    exc = AppIOError(errno.ENOENT, "No such file", "/nope")
    err = user_error("read", "open", "/nope", exc)
    assert isinstance(err, AppIOError)
    assert isinstance(err, OSError)
    assert (err.errno, err.strerror, err.filename) == (errno.ENOENT, "No such file", "/nope")
    assert str(err).startswith("step 'read' (open) failed on item '/nope': AppIOError: ")
    builtin = user_error("read", "open", "/x", FileNotFoundError(errno.ENOENT, "gone", "/x"))
    assert isinstance(builtin, FileNotFoundError)
    assert builtin.errno == errno.ENOENT


def test_builtin_fields_and_str_of_special_classes():
    key = user_error("s", "f", 1, KeyError("k"))
    assert isinstance(key, KeyError)
    assert str(key) == "step 's' (f) failed on item 1: KeyError: 'k'"
    stop = user_error("s", "f", 1, StopIteration(5))
    assert isinstance(stop, StopIteration)
    assert stop.value == 5
    group = user_error("s", "f", 1, ExceptionGroup("two", [ValueError(1), KeyError(2)]))
    assert isinstance(group, ExceptionGroup)
    assert len(group.exceptions) == 2
    assert "step 's'" in str(group)


def test_keyboard_interrupt_like_base_exceptions_are_not_wrapped():
    for exc in (KeyboardInterrupt(), SystemExit(3)):
        err = user_error("s", "f", 1, exc)
        assert err is exc
        assert not isinstance(err, StepError)
        assert any("step 's' (f) failed on item 1" in note for note in err.__notes__)


def test_a_class_that_refuses_subclasses_is_raised_itself_with_a_note():
    exc = NoSubclasses("no")
    err = user_error("s", "f", [1, 2], exc)
    assert err is exc
    assert err.__notes__ == ["step 's' (f) failed on item [1, 2]: NoSubclasses: no"]
    assert (err.step_id, err.function, err.item) == ("s", "f", "[1, 2]")


def test_an_instance_that_cannot_be_made_without_init_falls_back_to_the_original():
    exc = MemoryError("out of memory")
    err = user_error("s", "f", 1, exc)
    assert err is exc
    assert "step 's' (f) failed on item 1" in err.__notes__[0]


def test_the_users_own_attributes_win_over_flowspark_ones():
    err = user_error("s", "f", "x", WithItem("x"))
    assert isinstance(err, WithItem)
    assert err.item == "x"  # the user's value, not the repr "'x'"
    assert err.step_id == "s"


def test_a_step_error_is_wrapped_again_for_the_outer_step():
    inner = user_error("inner", "f", 1, ValueError("v"))
    outer = user_error("outer", "g", 2, inner)
    assert isinstance(outer, ValueError)
    assert outer.step_id == "outer"
    assert str(outer).startswith("step 'outer' (g) failed on item 2: StepError[ValueError]: ")


def test_item_repr_is_truncated():
    err = user_error("s", "f", "y" * 10_000, ValueError("v"))
    assert len(str(err)) < 300


def test_user_notes_are_kept_but_not_shared():
    exc = ValueError("v")
    exc.add_note("user note")
    err = user_error("s", "f", 1, exc)
    assert err.__notes__ == ["user note"]
    err.add_note("later")
    assert exc.__notes__ == ["user note"]


def test_plain_step_error_still_works():
    err = StepError("s", "f", "1", "ValueError: v")
    assert str(err) == "step 's' (f) failed on item 1: ValueError: v"
    assert err.step_id == "s"


@pytest.mark.parametrize(
    "exc",
    [ZeroDivisionError("z"), CustomInit(1, "x"), AppIOError(errno.EIO, "io", "/f"), KeyError("k")],
    ids=["zero", "custom-init", "os-error", "key-error"],
)
def test_combined_errors_pickle_and_copy(exc):
    err = user_error("s", "f", 1, exc)
    for back in (pickle.loads(pickle.dumps(err)), copy.copy(err)):
        assert type(back) is type(err)
        assert str(back) == str(err)
        assert (back.step_id, back.function, back.item) == ("s", "f", "1")
    assert pickle.loads(pickle.dumps(StepError("s", "f", "1", "E: e"))).step_id == "s"


# -- from a worker ------------------------------------------------------------------------


def test_a_worker_failure_keeps_its_type():
    err = remote(raised(divide, 0), step_id="invert", item=0)
    assert isinstance(err, ZeroDivisionError)
    assert isinstance(err, StepError)
    assert str(err) == (
        "step 'invert' (divide) failed on item 0: ZeroDivisionError: division by zero"
    )
    assert type(err.__cause__) is ZeroDivisionError
    [note] = err.__cause__.__notes__
    assert note.startswith("Traceback in the Spark worker:")
    assert "return 1 / x" in note
    assert not getattr(err, "__notes__", [])  # the worker traceback is on the cause only


def test_a_worker_failure_with_a_custom_init_keeps_its_type_and_attributes():
    err = remote(CustomInit(500, "server"))
    assert isinstance(err, CustomInit)
    assert err.code == 500
    assert type(err.__cause__) is CustomInit
    assert err.__cause__.code == 500


def test_an_unpicklable_worker_exception_keeps_its_type_and_picklable_attributes():
    err = remote(Locked("locked"))
    assert isinstance(err, Locked)
    assert err.kept == "yes"
    assert not hasattr(err, "lock")
    assert "Locked: locked" in str(err)


def test_a_worker_os_error_keeps_errno():
    err = remote(AppIOError(errno.EACCES, "denied", "/secret"))
    assert isinstance(err, AppIOError)
    assert err.errno == errno.EACCES
    assert err.filename == "/secret"


def test_a_worker_exception_whose_class_is_unknown_is_a_plain_step_error():
    def local_class():
        class Lost(Exception):
            lock = threading.Lock()  # pickled by value, and a lock does not pickle

        return Lost

    err = remote(local_class()("gone"))
    assert type(err) is StepError
    assert type(err.__cause__) is RuntimeError
    assert "Lost: gone" in str(err)


def test_a_worker_exception_that_refuses_subclasses_is_the_original_with_notes():
    err = remote(NoSubclasses("no"), step_id="st", item="it")
    assert type(err) is NoSubclasses
    assert err.__notes__[0] == "step 'st' (divide) failed on item 'it': NoSubclasses: no"
    assert err.__notes__[1].startswith("Traceback in the Spark worker:")
    assert err.step_id == "st"
