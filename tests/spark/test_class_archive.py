"""The driver's class archive, built and mapped by real JVMs (each in a child process).

``./scripts/test.sh`` builds this machine's archive before the tests (as
``./scripts/example.sh`` does after its run); here it is built if still missing."""

from __future__ import annotations

import os
import subprocess
import sys

from flowspark.engine.class_archive import ARCHIVE_ENV, archive_path, probe
from flowspark.engine.java import find_java_home
from flowspark.engine.jvm_flags import JVM_FLAGS

_START_AND_STOP = (
    "from flowspark.engine.session import get_session, stop_session\n"
    "get_session('local[1]')\n"
    "stop_session()\n"
)


def _python(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """This Python with ``args``; it must exit 0."""
    done = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_the_archive_is_built_once_and_mapped_by_every_driver() -> None:
    env = {k: v for k, v in os.environ.items() if k != ARCHIVE_ENV}
    for _ in range(2):  # the second time finds it built
        built = _python(["-m", "flowspark.engine.class_archive"], env)
    assert "built in" not in built.stderr
    assert "no class archive" not in built.stderr, built.stderr
    path = archive_path(find_java_home(), JVM_FLAGS)
    assert path.stat().st_size > 10 << 20  # Spark's classes, not an empty shell
    assert not list(path.parent.glob(f"{path.stem}.*.partial"))

    # Most of what a driver loads comes from the dynamic archive ("top" layer).
    started = probe()
    assert started.mapped, (started.from_archive, started.loaded, started.reasons[:20])
    assert started.loaded > 10_000  # a driver's JVM, logged from its first class


def test_a_driver_says_nothing_about_class_sharing() -> None:
    env = {k: v for k, v in os.environ.items() if k != ARCHIVE_ENV}
    _python(["-m", "flowspark.engine.class_archive"], env)
    started = _python(["-c", _START_AND_STOP], env)
    assert "cds" not in started.stderr.lower()  # the JVM's messages are silenced
