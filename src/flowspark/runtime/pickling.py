"""Pickling the user's functions for Spark's workers, keeping where their code lives.

cloudpickle ships a function defined in ``__main__``, a test module or any module
registered by value as its code object. Since 3.1.3 it rewrites every such code
object's file name to ``"<dynamic-code>"`` (to make payloads deterministic), so a
worker's traceback loses the user's file and source line. flowspark does not need
deterministic payloads, and its users need their tracebacks: :func:`dumps` pickles
code objects with :mod:`marshal`, which keeps every field (file name, first line,
line table) exactly as compiled, whatever cloudpickle's version does.

marshal's format is fixed within a Python minor version, and Spark already
requires the driver and its workers to run the same one.

>>> def double(x):
...     return x * 2
>>> import pickle
>>> again = pickle.loads(dumps(double))
>>> again(21), again.__code__.co_filename == double.__code__.co_filename
(42, True)
"""

from __future__ import annotations

import marshal
import types
from collections import ChainMap
from io import BytesIO
from typing import Any

import cloudpickle

__all__ = ["dumps"]


def _code_from_marshal(data: bytes) -> types.CodeType:
    """Rebuild a code object that :func:`_reduce_code` took apart."""
    code = marshal.loads(data)
    if not isinstance(code, types.CodeType):  # pragma: no cover - only marshal's own bytes
        raise TypeError(f"expected a code object, got {type(code).__name__}")
    return code


def _reduce_code(code: types.CodeType) -> tuple[Any, ...]:
    try:
        return _code_from_marshal, (marshal.dumps(code),)
    except ValueError:  # a hand-made code object holding unmarshallable constants
        return _CLOUDPICKLE_TABLE[types.CodeType](code)


_CLOUDPICKLE_TABLE = cloudpickle.Pickler.dispatch_table


class _Pickler(cloudpickle.Pickler):
    """cloudpickle's pickler, but code objects keep their file name and lines."""

    dispatch_table = ChainMap({types.CodeType: _reduce_code}, _CLOUDPICKLE_TABLE)


def dumps(obj: Any, protocol: int | None = None) -> bytes:
    """``cloudpickle.dumps(obj)``, with code objects pickled as compiled (see the module
    doc); loads with plain :func:`pickle.loads` wherever flowspark is importable."""
    with BytesIO() as file:
        _Pickler(file, protocol=protocol).dump(obj)
        return file.getvalue()
