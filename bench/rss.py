"""Peak resident memory of a process tree, sampled from outside (by ``run.py``).

A run's child process (``harness.py``) starts other processes: Spark's JVM, the
JVM's Python worker daemon and workers, flowspark's source-planning worker, the
pynumaflow server child. :class:`TreeRssSampler` polls the child and all its
descendants every :data:`SAMPLE_SECONDS` in a background thread, sums their
resident set sizes at each sample and keeps the largest sum.

The sum counts pages shared between processes (e.g. a forked worker and its
parent) once per process, so it is an upper bound of the memory the tree holds;
a process that lives shorter than one sampling interval may be missed. A child
that shares its parent's address space is not counted: the JVM starts every
command (Hadoop's ``chmod`` of each new checkpoint file, two per micro-batch) with
``posix_spawn``, whose child runs in the JVM's own memory until it execs, and
reads as a second process with the JVM's whole RSS (``kcmp(2)`` tells).

Needs ``psutil`` in the interpreter running ``run.py`` (the child's interpreter,
e.g. the bytewax venv, does not need it); without it the peak is ``None``.
"""

from __future__ import annotations

import ctypes
import threading
from types import TracebackType
from typing import Any

try:
    import psutil
except ImportError:  # pragma: no cover - reported as a null peak
    psutil = None

__all__ = ["SAMPLE_SECONDS", "TreeRssSampler", "available"]

SAMPLE_SECONDS = 0.1
MB = 1024 * 1024


def available() -> bool:
    """Whether peaks can be measured (psutil importable)."""
    return psutil is not None


_SYS_KCMP = 312  # x86-64
_KCMP_VM = 1


def _same_memory(pid: int, other: int) -> bool:
    """Whether two processes share one address space (``kcmp(2)``; ``False`` where it
    cannot tell)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.syscall(_SYS_KCMP, pid, other, _KCMP_VM, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def tree_rss(root: Any) -> int:
    """Sum of RSS (bytes) of ``root`` (a ``psutil.Process``) and its live descendants,
    each address space once."""
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:  # root has exited
        return 0
    total = 0
    for proc in procs:
        try:
            parent = proc.ppid()
            if proc is not root and _same_memory(proc.pid, parent):
                continue  # spawned, not exec'd yet: its parent's memory
            total += proc.memory_info().rss
        except psutil.Error:  # exited between listing and reading
            continue
    return total


class TreeRssSampler:
    """``with TreeRssSampler(pid) as s: ...`` then ``s.peak_mb``.

    Samples once at entry and every :data:`SAMPLE_SECONDS` while inside (not at
    exit: by then the child has usually been reaped and its pid may be reused).
    """

    def __init__(self, pid: int, interval: float = SAMPLE_SECONDS) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_bytes = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._root: Any = None

    @property
    def peak_mb(self) -> float | None:
        """The largest summed RSS seen, in MiB (``None`` if nothing could be sampled)."""
        if psutil is None or self.samples == 0:
            return None
        return round(self.peak_bytes / MB, 1)

    def sample(self) -> None:
        """Take one sample now."""
        if self._root is None:
            return
        self.peak_bytes = max(self.peak_bytes, tree_rss(self._root))
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> TreeRssSampler:
        if psutil is not None:
            try:
                self._root = psutil.Process(self.pid)
            except psutil.Error:
                self._root = None
            self.sample()
            self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
