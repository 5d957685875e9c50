"""Whether a process is alive, by pid.

>>> import os
>>> pid_alive(os.getpid())
True
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["pid_alive"]


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` runs (one of another user's counts). A process
    that has exited but is not yet reaped (a zombie) has stopped: it does not count,
    and when it is this process's child it is reaped here."""
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False  # our child, just exited: reaped now
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether ``pid`` is a zombie (Linux's ``/proc``; elsewhere: not known, ``False``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # "pid (comm) state ...": comm may hold spaces and parentheses.
            return stat.read().rpartition(b")")[2].split()[0] == b"Z"
    except (OSError, IndexError):
        return False
