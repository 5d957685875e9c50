"""The facts ``python -m flowspark.recovery inspect`` shows, JSON-ready, from what a
recovery directory's files hold (see :mod:`flowspark.engine.recovery_inspect`): the
sources' offsets, the sink snapshots' batches, the state operators, the lock's holder.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import time
from datetime import UTC, datetime
from typing import Any

from flowspark.engine.recovery_files import peek_pickle
from flowspark.engine.recovery_listing import Listing
from flowspark.engine.recovery_lock import Holder

__all__ = [
    "iso_time",
    "lock_file_facts",
    "ranges",
    "shorten",
    "snapshot_generations",
    "source_facts",
    "span",
    "state_facts",
]


def span(numbers: list[int]) -> dict[str, int] | None:
    if not numbers:
        return None
    return {"first": numbers[0], "last": numbers[-1], "count": len(numbers)}


def ranges(numbers: list[int]) -> str:
    """Numbers as runs.

    >>> ranges([1, 2, 3, 7])
    '1-3, 7'
    """
    out: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)


def shorten(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def iso_time(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def snapshot_generations(value: Any) -> tuple[Any, Any]:
    """``(last, prev)`` of a sink snapshot file's ``{"prev": (batch, states) | None,
    "last": ...}``; ``ValueError`` when it is not that."""
    if not (isinstance(value, dict) and set(value) == {"prev", "last"}):
        raise ValueError("not a flowspark sink snapshot")
    for generation in value.values():
        if generation is not None and not (
            isinstance(generation, tuple)
            and len(generation) == 2
            and isinstance(generation[0], int)
        ):
            raise ValueError("not a flowspark sink snapshot")
    return value["last"], value["prev"]


def source_facts(index: int, value: Any) -> dict[str, Any]:
    """One source's offsets: flowspark's (see ``engine/source.py``) read out, another
    source's as they are."""
    if value is None:
        return {"index": index, "offsets": None}
    if not (isinstance(value, dict) and isinstance(value.get("inputs"), dict)):
        return {"index": index, "kind": "other", "offsets": shorten(json.dumps(value), 300)}
    read = value.get("read") or {}
    backlog = value.get("backlog") or {}
    steps = value.get("steps") or {}
    named = set(read) | set(backlog)
    if not steps and len(value["inputs"]) == 1 and len(named) == 1:
        steps = {entry: named.pop() for entry in value["inputs"]}  # before "steps" was kept
    inputs = []
    for entry, offsets in value["inputs"].items():
        step = steps.get(entry)
        facts: dict[str, Any] = {"entry": entry, "step_id": step, "parts": {}}
        if step in read:
            facts["share_read"] = read[step]
        if step in backlog:
            facts["backlog"] = backlog[step]
        eof = set(offsets.get("eof") or [])
        for part, position in (offsets.get("parts") or {}).items():
            facts["parts"][part] = _part_facts(position, part in eof)
        inputs.append(facts)
    facts = {"index": index, "kind": "flowspark", "inputs": inputs, "time_ms": value.get("t")}
    facts["ended"] = bool(value.get("eof"))
    if "wm" in value:
        facts["watermark_ms"] = value["wm"]
    return facts


def _part_facts(position: Any, ended: bool) -> dict[str, Any]:
    """A part's position: an offset (a seekable input), or batches read and the
    source's snapshot (a bytewax-style input read in the planning process)."""
    if not isinstance(position, dict):
        return {"offset": position}
    facts: dict[str, Any] = {"batches": position.get("n"), "ended": ended}
    state = position.get("state")
    if state:
        try:
            facts["snapshot"] = shorten(repr(peek_pickle(base64.b64decode(state))))
        except Exception:  # noqa: BLE001 - a damaged snapshot is shown as such
            facts["snapshot"] = "(unreadable)"
    if "wm" in position:
        facts["watermark_ms"] = position["wm"]
    return facts


def state_facts(op: dict[str, Any]) -> dict[str, Any]:
    return {
        "operator": op["operator"],
        "name": op.get("name"),
        "partitions": len(op["partitions"]),
        "stores": sorted(op["stores"]),
        "files": op["files"],
        "bytes": op["bytes"],
        "latest_version": op.get("latest_version"),
    }


def lock_file_facts(listing: Listing, name: str, kind: str) -> dict[str, Any]:
    """A lock file's facts: who it names and whether a run holds it (a ``flock``
    file's lock or a lease that has not expired), only looked at, never taken."""
    facts: dict[str, Any] = {"file": name, "kind": kind, "holder": None}
    text = listing.read(name)[:4096]
    record: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        record = json.loads(text) if text.strip() else {}
    holder = None
    with contextlib.suppress(KeyError, TypeError, ValueError):  # nobody named in it
        holder = Holder.from_dict(record)
        facts["holder"] = {
            "host": holder.host,
            "pid": holder.pid,
            "started_at": iso_time(holder.started),
            "text": holder.describe(),
        }
    gone = holder is not None and holder.is_gone()
    if kind == "lease":
        expires = record.get("expires")
        facts["expires_at"] = iso_time(expires) if isinstance(expires, int | float) else None
        live = isinstance(expires, int | float) and expires > time.time()
        facts["held"] = holder is not None and live and not gone
        return facts
    pids = None
    if listing.where.is_local:
        pids = _flock_holders(os.path.join(listing.where.path, name))
    if pids is not None:
        facts["held"], facts["held_by_pids"] = bool(pids), pids
    elif holder is not None and holder.host != socket.gethostname():
        facts["held"] = None  # another machine's flock: this one cannot see it
    else:
        facts["held"] = holder is not None and not gone
    return facts


def _flock_holders(path: str) -> list[int] | None:
    """Pids holding a lock on the file at ``path``, from Linux's ``/proc/locks``
    (``None`` where there is none); the lock is only looked at, never taken."""
    try:
        st = os.stat(path)
        with open("/proc/locks") as f:
            table = f.read()
    except OSError:
        return None
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for line in table.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] != "->" and fields[5] == where:
            with contextlib.suppress(ValueError):
                pids.append(int(fields[4]))
    return pids
