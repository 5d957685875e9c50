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
import traceback
from dataclasses import dataclass
from functools import cache

__all__ = ["Frame", "Part", "capture", "render", "is_internal"]

# Frames kept per exception (the innermost); a deep recursion shows its end.
FRAME_LIMIT = 40
# Exceptions kept along a chain of causes and contexts.
CHAIN_LIMIT = 8
# Characters kept of each exception's own lines (``Type: message`` and its notes).
ERROR_LIMIT = 4_000
_CAUSE = "The above exception was the direct cause of the following exception:"
_CONTEXT = "During handling of the above exception, another exception occurred:"
_INTERNAL_PACKAGES = ("flowspark", "pyspark", "py4j", "cloudpickle", "asyncio")


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
