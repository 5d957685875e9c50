"""`flowspark.shared.processes.pid_alive`: an exited child is gone, even unreaped."""

from __future__ import annotations

import subprocess
import sys
import time

from flowspark.shared.processes import _zombie, pid_alive


def test_a_running_child_is_alive_and_an_exited_one_is_not_even_before_it_is_reaped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    assert pid_alive(child.pid)
    assert child.stdin is not None
    child.stdin.close()  # it exits; nobody waits for it: a zombie
    deadline = time.monotonic() + 30
    while not _zombie(child.pid):
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    assert not pid_alive(child.pid)  # and reaped by this call
    assert not _zombie(child.pid)


def test_a_pid_nobody_has_is_not_alive() -> None:
    assert not pid_alive(2**22 + 12345)  # above Linux's default pid_max
