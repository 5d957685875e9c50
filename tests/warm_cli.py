"""CLI runs that need no process of their own (a restart after a SIGKILL, a reference
run, a pipeline run stopped with Ctrl-C) on a CLI that is already up.

A restart reads everything it resumes from on disk (the recovery directory, the
broker, the input files): nothing of the killed run's process can reach it, which is
what a fresh process would guarantee. So it need not start a JVM of its own. Each
pytest process keeps one child, started on first use, that runs
``flowspark.cli.main(argv)`` for each call on its one Spark session: a run then skips
the JVM's start and the session's warm-up (3–4 s of CPU on two cores), and a keyed
one Spark's first keyed micro-batch too. The run that is killed still starts as a
process of its own.

What a call changes is put back as a fresh process would have it: the environment it
asked for (the driver's only: Spark's Python workers keep the one they started with),
the working directory, the root logger's handlers, the modules imported from the
flow's folder and the entries it put on ``sys.path`` (a later flow with a module of
the same name gets its own). Only flows whose steps use nothing beside the flow file
or the UDF files they name belong here: Spark's pooled Python workers would keep such
a module from one run to the next. Spark's own log lines, and what Python workers
print, are not kept: a test of what a run prints there runs it as a process.
:meth:`WarmRun.interrupt` is Ctrl-C: the run stops its query and exits 130, and the
child waits for the next call. A call that does not end in time kills the child; the
next call starts another.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

# The child: one JSON line in (argv, env, cwd, stdout and stderr files), one JSON line
# out (the exit status). Its own stdout carries only those answers. Ctrl-C reaches a
# call only while it runs.
_RUNNER = """
import contextlib, json, logging, os, signal, sys, traceback

from flowspark.cli import main

answers = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # nothing else may write on the answers' pipe
signal.signal(signal.SIGINT, signal.SIG_IGN)
for line in sys.stdin:
    call = json.loads(line)
    modules, path, cwd, env = set(sys.modules), list(sys.path), os.getcwd(), dict(os.environ)
    handlers = list(logging.root.handlers)
    os.environ.update(call["env"])
    os.chdir(call["cwd"])
    with open(call["stdout"], "w", buffering=1) as out, open(call["stderr"], "w") as err, \\
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            code = main(call["argv"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except KeyboardInterrupt:
            code = 130
        except BaseException:
            traceback.print_exc()
            code = 99
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    added = [p for p in sys.path if p not in path]
    for name in set(sys.modules) - modules:
        file = getattr(sys.modules[name], "__file__", None) or ""
        if any(file.startswith(p + os.sep) for p in added):
            del sys.modules[name]
    sys.path[:] = path
    logging.root.handlers[:] = handlers  # not one bound to this call's closed stderr
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    answers.write(json.dumps({"code": code}) + "\\n")
    answers.flush()
"""

_child: subprocess.Popen | None = None
_current: WarmRun | None = None  # the call under way, if any


def _runner() -> subprocess.Popen:
    global _child
    if _child is None or _child.poll() is not None:
        _child = subprocess.Popen(
            [sys.executable, "-c", _RUNNER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        atexit.register(_stop, _child)
    return _child


def _stop(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.stdin.close()  # type: ignore[union-attr]
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


class WarmRun:
    """``python -m flowspark.run ARGV`` under way on the warm child (one at a time)."""

    def __init__(
        self, argv: list[str], env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        global _current
        assert _current is None or _current.poll() is not None, "one warm run at a time"
        _current = self
        self.argv = argv
        self._child = _runner()
        captured = Path(tempfile.mkdtemp(prefix="warm-cli-"))
        atexit.register(shutil.rmtree, captured, True)
        self.stdout_path, self.stderr_path = captured / "stdout", captured / "stderr"
        self.returncode: int | None = None
        call = {
            "argv": argv,
            "env": dict(env or {}),
            "cwd": str(cwd or os.getcwd()),
            "stdout": str(self.stdout_path),
            "stderr": str(self.stderr_path),
        }
        self._child.stdin.write(json.dumps(call) + "\n")  # type: ignore[union-attr]
        self._child.stdin.flush()  # type: ignore[union-attr]

    def lines(self) -> list[str]:
        """What the run printed so far, whole lines only."""
        text = self.stdout_path.read_text() if self.stdout_path.exists() else ""
        return text.split("\n")[:-1]

    def stderr(self) -> str:
        """What the run wrote to standard error so far (flowspark's lines, not Spark's)."""
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""

    def poll(self) -> int | None:
        """The exit status, once the run has ended."""
        if self.returncode is None:
            self._take_answer(0.0)
        return self.returncode

    def wait(self, timeout: float = 300.0) -> int:
        """The exit status; a run still going after ``timeout`` s kills the child and
        fails the test."""
        if self.returncode is None and not self._take_answer(timeout):
            os.killpg(self._child.pid, signal.SIGKILL)
            self._child.wait()
            self._fail(f"no answer in {timeout:.0f} s")
        return self.returncode  # type: ignore[return-value]

    def interrupt(self, timeout: float = 60.0) -> int:
        """Stop the run as Ctrl-C does; its exit status."""
        if self.poll() is None:
            os.kill(self._child.pid, signal.SIGINT)
        return self.wait(timeout)

    def _take_answer(self, timeout: float) -> bool:
        """Read the child's answer if it comes within ``timeout`` s: whether it came."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._child.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
            if not selector.select(timeout):
                return False
        line = self._child.stdout.readline()  # type: ignore[union-attr]
        if not line:  # the pipe closed: the child is gone
            self._child.wait()
            self._fail("the runner died")
        self.returncode = json.loads(line)["code"]
        return True

    def _fail(self, why: str) -> None:
        global _child
        _child = None
        raise AssertionError(f"{' '.join(self.argv)}: {why}; {self.stderr()[-3000:]}")


def warm_run(flow_file: Path, recovery: Path, *args: str) -> tuple[int, str]:
    """``python -m flowspark.run FLOW_FILE:flow --master local[2] -r RECOVERY ARGS`` on
    the warm child, to its end: its exit status and what it wrote to standard error."""
    run = WarmRun([f"{flow_file}:flow", "--master", "local[2]", "-r", str(recovery), *args])
    return run.wait(), run.stderr()
