"""A class-data-sharing archive for the driver's JVM: Spark's classes mapped from one
file at start instead of found, parsed and verified in the jars every time.

A Spark driver loads ~12,000 classes before its first micro-batch. Java (13+) can
write the classes a run loaded to a *dynamic archive* when that JVM exits
(``-XX:ArchiveClassesAtExit``) and map it at the next start
(``-XX:SharedArchiveFile``). :func:`build` runs one small streamed, keyed flow
in a child process with the first flag and keeps the file; :func:`driver_flags`
gives every later driver the second. An archive is made for one Java, one pyspark
(its jars as the JVM checks them: names, sizes and times) and one set of JVM flags
(:func:`archive_path` names it by all three), so a new Java, pyspark or jar simply
builds another. A new archive is kept only once a driver started with it has mapped
it (:func:`probe`). A JVM that still cannot use it starts as it would without one:
the flags ask for sharing when possible (``-Xshare:auto``) and silence the JVM's
CDS messages.

``$FLOWSPARK_CLASS_ARCHIVE=0`` turns it off; the archives live in
``$XDG_CACHE_HOME/flowspark/class-archives`` (``~/.cache`` by default), and building
one removes those built more than :data:`KEEP_DAYS` days ago (:func:`prune`).

>>> flags = driver_flags_for(Path("/tmp/none.jsa"), exists=True)
>>> flags[0]
'-XX:SharedArchiveFile=/tmp/none.jsa'
>>> driver_flags_for(Path("/tmp/none.jsa"), exists=False)
[]
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from flowspark.engine.java import find_java_home
from flowspark.engine.jvm_flags import JVM_FLAGS

__all__ = [
    "ARCHIVE_ENV",
    "Probe",
    "archive_path",
    "build",
    "driver_flags",
    "driver_flags_for",
    "probe",
    "prune",
    "read_probe_log",
]

ARCHIVE_ENV = "FLOWSPARK_CLASS_ARCHIVE"
"""``0``: no archive is used or built."""

KEEP_DAYS = 30
"""Archives built longer ago than this are removed when another is built (one still in
use is simply built again, ~35 s, by its next ``python -m flowspark.engine.class_archive``)."""

QUIET = ("-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off")
"""Share when the archive fits this JVM, and say nothing either way."""


def enabled() -> bool:
    """Whether archives are used (``$FLOWSPARK_CLASS_ARCHIVE`` is not ``0``)."""
    return os.environ.get(ARCHIVE_ENV, "1").strip() not in ("0", "false", "no")


def _cache_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "flowspark" / "class-archives"


def _pyspark_fingerprint() -> str:
    """pyspark's version and its jars (where, names, sizes and times): the JVM's
    classpath, which an archive must match. The JVM checks each jar's size and time
    and maps nothing if one differs (another virtualenv's copy of the same jars, a
    reinstall), so a changed jar means another archive."""
    import pyspark  # noqa: PLC0415 pyspark: only when a JVM is about to start

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    stats = ((p.name, p.stat()) for p in jars.glob("*.jar"))
    listing = sorted(f"{name}:{st.st_size}:{int(st.st_mtime)}" for name, st in stats)
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


# A driver that starts and stops, its JVM logging where each class came from and what
# it made of the archive (the flags go last, after the ones that silence it).
_PROBE = """
from flowspark.engine.session import get_session, stop_session
get_session("local[1]")
stop_session(wait_for_jvm=True)
"""
_PROBE_LOG = "-Xlog:class+load=info,cds=info,cds+dynamic=info,class+path=info:file={log}"
_CLASS_LOAD = re.compile(r"\[class,load *\]")  # padded when other tags share the file
_REASON_WORDS = ("mismatch", "fail", "error", "disabl", "unable", "not ", "invalid")


@dataclass(frozen=True)
class Probe:
    """What one driver's JVM loaded: ``from_archive`` of ``loaded`` classes came from
    the dynamic archive; ``reasons``: the JVM's CDS lines that say why it did not map.

    >>> Probe(from_archive=12000, loaded=17000, reasons=()).mapped
    True
    """

    from_archive: int
    loaded: int
    reasons: tuple[str, ...]

    @property
    def mapped(self) -> bool:
        """Most of what the driver loaded came from the archive."""
        return self.from_archive > self.loaded // 2


def read_probe_log(lines: Sequence[str]) -> Probe:
    """A :class:`Probe` from a JVM's ``class+load`` and ``cds`` log lines.

    >>> read_probe_log([
    ...     "[0.1s][info][class,load] A source: shared objects file (top)",
    ...     "[0.1s][info][class,load ] B source: jrt:/java.base",
    ...     "[0.0s][info][cds] shared class paths mismatch",
    ... ])
    Probe(from_archive=1, loaded=2, reasons=('[0.0s][info][cds] shared class paths mismatch',))
    """
    loads = [line for line in lines if _CLASS_LOAD.search(line)]
    reasons = tuple(
        line
        for line in lines
        if not _CLASS_LOAD.search(line)
        and "optimized module handling" not in line  # said on every start
        and "full module graph" not in line
        and any(w in line.lower() for w in _REASON_WORDS)
    )
    from_archive = sum("source: shared objects file (top)" in line for line in loads)
    return Probe(from_archive=from_archive, loaded=len(loads), reasons=reasons)


def probe(timeout_s: float = 300.0) -> Probe:
    """Start and stop one driver (in a child process) with this setup's archive, and
    tell how much of it the JVM mapped. A driver that does not start (a damaged
    archive can crash the JVM) maps nothing; the end of its output is the reason."""
    with tempfile.TemporaryDirectory(prefix="flowspark-cds-") as tmp:
        log = Path(tmp) / "jvm.log"
        own = os.environ.get("FLOWSPARK_JAVA_OPTS", "")
        env = {**os.environ, "FLOWSPARK_JAVA_OPTS": f"{own} {_PROBE_LOG.format(log=log)}"}
        done = subprocess.run(
            [sys.executable, "-c", _PROBE],
            env=env,
            timeout=timeout_s,
            check=False,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            said = [line for line in done.stderr.splitlines() if line.strip()]
            return Probe(from_archive=0, loaded=0, reasons=tuple(said[-20:]))
        return read_probe_log(log.read_text(errors="replace").splitlines())


def _dump(path: Path, timeout_s: float) -> bool:
    """Run the child that writes the archive to ``path``; whether it wrote one."""
    partial = path.with_name(f"{path.stem}.{os.getpid()}.partial")
    env = {**os.environ, ARCHIVE_ENV: "0", "FLOWSPARK_MASTER": "local[2]"}
    subprocess.run(
        [sys.executable, "-c", _CHILD, str(partial)],
        env=env,
        timeout=timeout_s,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    if not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        return False  # e.g. a Java without a base archive: it writes nothing
    os.replace(partial, path)
    return True


def prune(keep: Path, days: float = KEEP_DAYS) -> list[Path]:
    """Remove the archives (and leftover partial files) beside ``keep`` built more than
    ``days`` days ago; ``keep`` stays whatever its age. Returns what was removed. A
    running driver that maps a removed file keeps its mapping."""
    cutoff = time.time() - days * 86400
    removed = []
    for path in [*keep.parent.glob("driver-*.jsa"), *keep.parent.glob("driver-*.partial")]:
        try:
            if path != keep and path.stat().st_mtime < cutoff:
                path.unlink()
                removed.append(path)
        except OSError:
            continue  # gone already, or not ours to remove
    return removed


def build(timeout_s: float = 300.0, attempts: int = 2) -> Path | None:
    """Build this setup's archive if it is missing; its path, or ``None`` when this
    Java cannot make one that it maps (or archives are off). Safe to run from several
    processes: each writes its own file and the first finished one is kept.

    A new archive is kept only once a driver has started with it and mapped it;
    one that does not map is built again (``attempts`` in all), then given up with
    the JVM's reasons on stderr: drivers then start without one."""
    if not enabled():
        return None
    path = archive_path(find_java_home(), JVM_FLAGS)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, attempts + 1):
        started = time.monotonic()
        if not _dump(path, timeout_s):
            return None
        took = time.monotonic() - started
        checked = probe(timeout_s)
        size = path.stat().st_size >> 20
        if checked.mapped:
            print(
                f"flowspark: class archive {path} ({size} MB) built in {took:.0f} s; a "
                f"driver mapped {checked.from_archive} of its {checked.loaded} classes",
                file=sys.stderr,
            )
            prune(path)
            return path
        path.unlink(missing_ok=True)
        print(
            f"flowspark: class archive {path} ({size} MB, attempt {attempt} of "
            f"{attempts}) was not mapped by a driver ({checked.from_archive} of "
            f"{checked.loaded} classes); the JVM said:",
            *(f"  {line}" for line in checked.reasons[:20] or ["nothing"]),
            sep="\n",
            file=sys.stderr,
        )
    return None


if __name__ == "__main__":  # python -m flowspark.engine.class_archive
    if build() is None and enabled():
        print("flowspark: no class archive; drivers start without one", file=sys.stderr)
