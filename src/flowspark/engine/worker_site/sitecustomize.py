"""Run at start-up by every Python process Spark starts for flowspark.

This folder is first on those processes' ``PYTHONPATH`` (see ``engine/session.py``).
Spark puts ``pyspark.zip`` and py4j's zip first on their path; Python cannot cache
bytecode for modules imported from a zip, so every new process (each query's
source runner, transformWithState planner, the worker daemons) recompiled pyspark:
≈ 0.5 s of CPU each, measured. When the zips belong to the installed pyspark (and
its py4j), the same code is imported from the installed packages instead, whose
bytecode is cached. Any other path entry is left alone.
"""

import contextlib
import os
import sys


def _installed_copy(entry: str) -> bool:
    """Whether ``entry`` is a zip of Spark's ``python/lib`` whose code is installed too."""
    lib = os.path.dirname(entry)
    name = os.path.basename(entry)
    pyspark_dir = os.path.dirname(os.path.dirname(lib))
    in_spark_lib = lib.endswith(os.path.join("python", "lib"))
    if os.path.basename(pyspark_dir) != "pyspark" or not in_spark_lib:
        return False
    if name == "pyspark.zip":
        return os.path.isfile(os.path.join(pyspark_dir, "__init__.py"))
    if name.startswith("py4j-") and name.endswith("-src.zip"):
        version = name[len("py4j-") : -len("-src.zip")]
        site = os.path.dirname(pyspark_dir)
        return os.path.isdir(os.path.join(site, f"py4j-{version}.dist-info"))
    return False


with contextlib.suppress(Exception):  # never stop a Spark worker from starting
    sys.path[:] = [p for p in sys.path if not (p.endswith(".zip") and _installed_copy(p))]
