"""A class-data-sharing archive for the driver's JVM: Spark's classes mapped from one
file at start instead of found, parsed and verified in the jars every time.

A Spark driver loads ~12,000 classes before its first micro-batch. Java (13+) can
write the classes a run loaded to a *dynamic archive* when that JVM exits
(``-XX:ArchiveClassesAtExit``) and map it at the next start
(``-XX:SharedArchiveFile``). :func:`build` runs one small streamed, keyed flow
in a child process with the first flag and keeps the file; :func:`driver_flags`
gives every later driver the second. An archive is made for one Java, one
pyspark and one set of JVM flags (:func:`archive_path` names it by all three), so
a new Java or pyspark simply builds another. A JVM that cannot use the archive
(another Java, a changed jar) starts as it would without one: the flags ask for
sharing when possible (``-Xshare:auto``) and silence the JVM's CDS messages.

``$FLOWSPARK_CLASS_ARCHIVE=0`` turns it off; the archives live in
``$XDG_CACHE_HOME/flowspark/class-archives`` (``~/.cache`` by default).

>>> flags = driver_flags_for(Path("/tmp/none.jsa"), exists=True)
>>> flags[0]
'-XX:SharedArchiveFile=/tmp/none.jsa'
>>> driver_flags_for(Path("/tmp/none.jsa"), exists=False)
[]
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from flowspark.engine.java import find_java_home
from flowspark.engine.jvm_flags import JVM_FLAGS

__all__ = ["ARCHIVE_ENV", "archive_path", "build", "driver_flags", "driver_flags_for"]

ARCHIVE_ENV = "FLOWSPARK_CLASS_ARCHIVE"
"""``0``: no archive is used or built."""

QUIET = ("-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off")
"""Share when the archive fits this JVM, and say nothing either way."""


def enabled() -> bool:
    """Whether archives are used (``$FLOWSPARK_CLASS_ARCHIVE`` is not ``0``)."""
    return os.environ.get(ARCHIVE_ENV, "1").strip() not in ("0", "false", "no")


def _cache_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "flowspark" / "class-archives"


def _pyspark_fingerprint() -> str:
    """pyspark's version and its jars (where, names and sizes): the JVM's classpath,
    which an archive must match (another virtualenv's copy of the same jars does not)."""
    import pyspark  # noqa: PLC0415 pyspark: only when a JVM is about to start

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    listing = sorted(f"{p.name}:{p.stat().st_size}" for p in jars.glob("*.jar"))
    return f"{pyspark.__version__}|{jars}|{len(listing)}|{'|'.join(listing)}"


def _java_fingerprint(java_home: str) -> str:
    """The Java: its ``release`` file and its ``java``'s real path and size."""
    home = Path(java_home)
    release = home / "release"
    java = Path(os.path.realpath(home / "bin" / "java"))
    parts = [str(java), str(java.stat().st_size) if java.exists() else "-"]
    if release.exists():
        parts.append(release.read_text(errors="replace"))
    return "|".join(parts)


def archive_path(java_home: str, jvm_flags: Sequence[str]) -> Path:
    """Where the archive for this Java, this pyspark and these JVM flags lives."""
    key = "\n".join([_java_fingerprint(java_home), _pyspark_fingerprint(), *jvm_flags])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return _cache_dir() / f"driver-{digest}.jsa"


def driver_flags_for(path: Path, exists: bool) -> list[str]:
    """The driver's flags for the archive at ``path`` (none when it does not exist)."""
    if not exists:
        return []
    return [f"-XX:SharedArchiveFile={path}", *QUIET]


def driver_flags(java_home: str, jvm_flags: Sequence[str]) -> list[str]:
    """Flags that map this setup's archive into the driver's JVM, if it was built."""
    if not enabled():
        return []
    path = archive_path(java_home, jvm_flags)
    return driver_flags_for(path, path.is_file())


# The child's work: the embedded session with the archive flag, a flow that loads what a
# streamed keyed run loads (offsets, RocksDB state, transformWithState), a clean exit.
_CHILD = """
import sys
from flowspark.engine import session
session.ARCHIVE_AT_EXIT = sys.argv[1]
from flowspark.dataflow import Dataflow
from flowspark.engine.query import RunConfig, run_flow
from flowspark.testing import TestingInput, TestingOutput
import tempfile
flow = Dataflow()
flow.input("inp", TestingInput(range(100)))
flow.map(lambda x: (str(x % 3), x))
flow.stateful_map("sum", lambda: 0, lambda s, x: (s + x, s + x))
flow.output("out", TestingOutput([]))
with tempfile.TemporaryDirectory() as recovery:
    run_flow(flow, RunConfig(batch_job=False, recovery_dir=recovery + "/r"))
session.stop_session(wait_for_jvm=True)
"""


def build(timeout_s: float = 300.0) -> Path | None:
    """Build this setup's archive if it is missing; its path, or ``None`` when this
    Java cannot make one (or archives are off). Safe to run from several processes:
    each writes its own file and the first finished one is kept."""
    if not enabled():
        return None
    path = archive_path(find_java_home(), JVM_FLAGS)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.stem}.{os.getpid()}.partial")
    env = {**os.environ, ARCHIVE_ENV: "0", "FLOWSPARK_MASTER": "local[2]"}
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", _CHILD, str(partial)],
        env=env,
        timeout=timeout_s,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    if not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        return None  # e.g. a Java without a base archive: it writes nothing
    os.replace(partial, path)
    print(
        f"flowspark: class archive {path} ({path.stat().st_size >> 20} MB) "
        f"built in {time.monotonic() - started:.0f} s",
        file=sys.stderr,
    )
    return path


if __name__ == "__main__":  # python -m flowspark.engine.class_archive
    if build() is None and enabled():
        print("flowspark: this Java makes no class archive", file=sys.stderr)
