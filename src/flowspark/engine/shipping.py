"""Ship the user's own modules to a cluster's executors.

On a cluster, executors do not share the driver's ``sys.path``: a step that reaches
a helper module through a global name (``helpers.double(x)``), or imports one when
it runs, fails there with ``ModuleNotFoundError``. Before the run, flowspark zips
every module the driver has loaded from outside installed packages and the
standard library (the whole top-level package for a module of a package) and adds
the zip to the session (``SparkContext.addPyFile``): the executors put it on their
path. Installed packages are expected on the workers; a missing one fails with its
name and a hint (:func:`missing_module_hint`).
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
import uuid
import zipfile
from pathlib import Path
from types import ModuleType

import cloudpickle

from flowspark.engine.compat import is_connect

__all__ = ["is_installed", "missing_module_hint", "ship_user_modules", "user_module_roots"]


def is_installed(path: str) -> bool:
    """Whether a module file belongs to an installed package or the standard library."""
    real = os.path.realpath(path)
    if "site-packages" in real or "dist-packages" in real:
        return True
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    return real.startswith(stdlib + os.sep)


def _top_level_file(module: ModuleType) -> tuple[str, Path] | None:
    """``(top-level name, its file or package directory)`` of a user module."""
    name, file = module.__name__, getattr(module, "__file__", None)
    if not file or name == "__main__" or name.split(".")[0] == "flowspark" or is_installed(file):
        return None
    path = Path(file).resolve()
    depth = name.count(".") + (path.stem == "__init__")
    top = path.parent if path.stem == "__init__" else path
    for _ in range(depth):
        top = top.parent
    return name.split(".")[0], top


def user_module_roots(modules: dict[str, ModuleType] | None = None) -> dict[str, Path]:
    """Each top-level user module or package the process has loaded, and its path.

    >>> import json
    >>> user_module_roots({"json": json})
    {}
    """
    roots: dict[str, Path] = {}
    for module in list((modules if modules is not None else sys.modules).values()):
        if module is None:
            continue
        found = _top_level_file(module)
        if found is not None and found[1].exists():
            roots.setdefault(*found)
    return roots


def _zip(roots: dict[str, Path], folder: Path) -> Path:
    target = folder / f"flowspark-user-modules-{uuid.uuid4().hex[:8]}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for top, path in sorted(roots.items()):
            if path.is_dir():
                for file in sorted(path.rglob("*.py")):
                    zf.write(file, str(Path(top) / file.relative_to(path)))
            else:
                zf.write(path, path.name)
    return target


def ship_user_modules(spark: object, folder: Path) -> list[str]:
    """Add a zip of the user's modules to ``spark``'s session; the names shipped."""
    roots = user_module_roots()
    if not roots:
        return []
    if is_connect(spark):
        # Spark Connect: the session's artifacts did not reach every Python process
        # of a streaming query (a window step's global module was not importable on
        # the server), so the modules travel inside the pickled steps instead.
        for name, module in list(sys.modules.items()):
            if module is not None and name.split(".")[0] in roots:
                cloudpickle.register_pickle_by_value(module)
    else:
        spark.sparkContext.addPyFile(str(_zip(roots, folder)))  # type: ignore[attr-defined]
    return sorted(roots)


_MISSING = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")


def missing_module_hint(text: str) -> str | None:
    """One line for a worker that could not import a module, if ``text`` says so.

    >>> print(missing_module_hint("... ModuleNotFoundError: No module named 'numpy' ..."))
    a worker cannot import module 'numpy': install it on every worker (flowspark ships ...
    """
    match = _MISSING.search(text)
    if match is None:
        return None
    return (
        f"a worker cannot import module {match.group(1)!r}: install it on every worker "
        "(flowspark ships only your own modules, not installed packages)"
    )
