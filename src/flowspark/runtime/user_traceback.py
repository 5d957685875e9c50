"""The user's part of a traceback: frames of their code, none of flowspark's or Spark's.

A step's function fails inside a Spark worker; the driver shows the traceback.
:func:`capture` (in the worker) keeps each frame's file, line and function, and
drops the frames of flowspark, PySpark, Py4J, cloudpickle and asyncio, which only
say how the function was called. :func:`render` (on the driver) prints it as Python
would, taking each source line from the driver's own copy of the file when the
worker had none (a cluster's executor, a Spark Connect server).

>>> def shout(s):
...     return s.upper()
>>> try:
...     shout(42)
... except AttributeError as exc:
...     print(render(capture(exc)))  # doctest: +ELLIPSIS
Traceback (most recent call last):
  File "<doctest ...>", line 2, in shout
    return s.upper()
AttributeError: 'int' object has no attribute 'upper'
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import sysconfig
import traceback
from dataclasses import dataclass
from functools import cache

__all__ = [
    "Frame",
    "Part",
    "capture",
    "render",
    "is_internal",
    "user_location",
    "code_location",
    "error_line",
    "shown_path",
    "WRAPPED",
]

# Frames kept per exception (the innermost); a deep recursion shows its end.
FRAME_LIMIT = 40
# Exceptions kept along a chain of causes and contexts.
CHAIN_LIMIT = 8
# Characters kept of each exception's own lines (``Type: message`` and its notes).
ERROR_LIMIT = 4_000
_CAUSE = "The above exception was the direct cause of the following exception:"
_CONTEXT = "During handling of the above exception, another exception occurred:"
_INTERNAL_PACKAGES = ("flowspark", "pyspark", "py4j", "cloudpickle", "asyncio")
# Characters kept of the one line :func:`error_line` makes.
LINE_LIMIT = 500
# Attributes under which flowspark's wrappers keep the user's callable: a handler
# class built per key, a shared handler, a Reducer's factory, ``functools.partial``.
WRAPPED = ("handler_class", "handler", "factory", "func", "__wrapped__")


@dataclass(frozen=True)
class Frame:
    """One frame: where it ran and, if the worker could read it, its source line."""

    file: str
    line: int
    name: str
    source: str


@dataclass(frozen=True)
class Part:
    """One exception of a chain: its user frames, its ``Type: message`` lines, and the
    sentence that links it to the next one (``""`` for the last)."""

    frames: tuple[Frame, ...]
    omitted: int
    error: str
    link: str


@cache
def _internal_roots() -> tuple[str, ...]:
    roots = []
    for name in _INTERNAL_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or []) if spec else []:
            roots.append(os.path.realpath(location) + os.sep)
    return tuple(roots)


def is_internal(filename: str) -> bool:
    """Whether a frame's file belongs to flowspark or the machinery that calls users."""
    if filename.startswith("<"):
        return False  # <stdin>, <doctest ...>, a notebook cell: the user's
    return os.path.realpath(filename).startswith(_internal_roots())


def _frames(exc: BaseException) -> tuple[tuple[Frame, ...], int]:
    frames = []
    for summary in traceback.extract_tb(exc.__traceback__):
        if not is_internal(summary.filename):
            source = (summary.line or "").strip()
            frames.append(Frame(summary.filename, summary.lineno or 0, summary.name, source))
    kept = frames[-FRAME_LIMIT:]
    return tuple(kept), len(frames) - len(kept)


def capture(exc: BaseException) -> tuple[Part, ...]:
    """``exc`` and the exceptions it was raised from or while handling, oldest first."""
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    link = ""
    while current is not None and id(current) not in seen and len(chain) < CHAIN_LIMIT:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, _CONTEXT
        else:
            current = None
    parts = []
    for error, link in reversed(chain):
        frames, omitted = _frames(error)
        text = "".join(traceback.format_exception_only(type(error), error)).rstrip("\n")
        if len(text) > ERROR_LIMIT:
            text = text[: ERROR_LIMIT - 3] + "..."
        parts.append(Part(frames, omitted, text, link))
    return tuple(parts)


def render(parts: tuple[Part, ...]) -> str:
    """The traceback as Python prints it; a source line the worker could not read is
    read here (``""`` if this machine has no such file either)."""
    blocks = []
    for part in parts:
        lines = []
        if part.frames:
            lines.append("Traceback (most recent call last):")
        if part.omitted:
            lines.append(f"  [{part.omitted} earlier frames not shown]")
        for frame in part.frames:
            lines.append(f'  File "{frame.file}", line {frame.line}, in {frame.name}')
            source = frame.source or linecache.getline(frame.file, frame.line).strip()
            if source:
                lines.append(f"    {source}")
        lines.append(part.error)
        if part.link:
            lines += ["", part.link, ""]
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


@cache
def _library_roots() -> tuple[str, ...]:
    """Python's own library and the folders installed packages live in."""
    paths = sysconfig.get_paths()
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple(sorted({os.path.realpath(paths[n]) + os.sep for n in names if n in paths}))


def _is_library(filename: str) -> bool:
    if filename.startswith("<frozen "):  # importlib, runpy
        return True
    if filename.startswith("<"):
        return False
    return os.path.realpath(filename).startswith(_library_roots())


def user_location(exc: BaseException) -> tuple[str, int] | None:
    """Where in the user's code ``exc`` was raised, as ``(file, line)``: a
    ``SyntaxError``'s own file and line; else the innermost frame that is neither
    flowspark's (see :func:`is_internal`) nor Python's library (importlib, runpy) nor
    an installed package's; else the innermost that is not flowspark's or Python's;
    ``None`` without such a frame.

    >>> try:
    ...     compile("x = (", "flow.py", "exec")
    ... except SyntaxError as exc:
    ...     user_location(exc)
    ('flow.py', 1)
    """
    filename = getattr(exc, "filename", None) if isinstance(exc, SyntaxError) else None
    if isinstance(filename, str) and filename and not filename.startswith("<"):
        return filename, getattr(exc, "lineno", None) or 0
    fallback = None
    for summary in reversed(traceback.extract_tb(exc.__traceback__)):
        if is_internal(summary.filename) or summary.filename.startswith("<frozen "):
            continue
        where = (summary.filename, summary.lineno or 0)
        if not _is_library(summary.filename):
            return where
        fallback = fallback or where
    return fallback


def code_location(fn: object) -> tuple[str, int] | None:
    """Where a function of the user's is defined, as ``(file, first line)``: a
    function or method, a handler class's ``handler``, a callable object's
    ``__call__``, or what one of flowspark's wrappers holds (see ``WRAPPED``);
    ``None`` for a builtin or flowspark's own function.

    >>> def get_time(item):
    ...     return item
    >>> code_location(get_time)[1]
    1
    >>> code_location(len) is None
    True
    """
    for _ in range(5):  # wrappers of wrappers, not forever
        code = getattr(fn, "__code__", None)
        if code is not None:
            filename = code.co_filename
            return None if is_internal(filename) else (filename, code.co_firstlineno)
        inner = next((getattr(fn, a) for a in WRAPPED if getattr(fn, a, None) is not None), None)
        if inner is None and isinstance(fn, type):
            inner = getattr(fn, "handler", None)  # a pynumaflow handler class
        elif inner is None and callable(fn):
            inner = type(fn).__call__  # a callable object's method
        if inner is None:
            return None
        fn = inner
    return None


def shown_path(filename: str) -> str:
    """``filename`` relative to the working directory when it is inside it."""
    if filename.startswith("<"):
        return filename
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive
        return filename
    return filename if relative.startswith(os.pardir) else relative


def error_line(exc: BaseException) -> str:
    """``Type: message`` on one line (a ``SyntaxError`` without its file and line,
    which :func:`user_location` gives), cut to ``LINE_LIMIT`` characters.

    >>> error_line(ValueError("two\\nlines"))
    'ValueError: two lines'
    """
    try:
        message = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
    except Exception:  # a broken __str__ must not hide the error
        message = ""
    message = " ".join(str(message).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text if len(text) <= LINE_LIMIT else text[: LINE_LIMIT - 3] + "..."
