"""Run a command as if on another machine that shares only some directories.

    unshare --mount --propagation private python tests/private_mounts.py \\
        --hide /tmp --hide /work/project --share /tmp/x/shared -- CMD ARGS...

In the new mount namespace (root only) every ``--hide`` directory becomes an empty
private tmpfs, then every ``--share`` directory (which may lie inside a hidden one)
is bound back at its own path, so the command sees the driver's files there and
nowhere else under the hidden trees. Then it becomes ``CMD``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hide", action="append", default=[])
    parser.add_argument("--share", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    # Keep a handle on each shared directory before the tmpfs hides it.
    # Outside every hidden tree (they are tmpfs'ed over next).
    keep = tempfile.mkdtemp(prefix="flowspark-keep-", dir=next(
        d for d in ("/run", "/var/tmp", "/") if os.access(d, os.W_OK)
    ))  # fmt: skip
    kept = []
    for i, shared in enumerate(args.share):
        handle = os.path.join(keep, str(i))
        os.mkdir(handle)
        _mount("--bind", shared, handle)
        kept.append((handle, shared))
    for hidden in args.hide:
        _mount("-t", "tmpfs", "tmpfs", hidden)
    for handle, shared in kept:
        os.makedirs(shared, exist_ok=True)
        _mount("--bind", handle, shared)
        _mount("--make-private", shared)
    for handle, _ in kept:
        subprocess.run(["umount", handle], check=True)
        os.rmdir(handle)
    os.rmdir(keep)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
