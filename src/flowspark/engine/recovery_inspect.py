"""What a recovery directory holds, and whether its files are whole (the facts behind
``python -m flowspark.recovery inspect DIR``, see :mod:`flowspark.engine.recovery_cli`).

A recovery directory is Spark's checkpoint plus flowspark's own files. This reads
them in pure Python (no Spark, fast) and finds:

* the last committed batch and its time (``commits/N``, ``offsets/N``);
* the inputs and their offsets (the last committed batch's ``offsets/N``);
* the outputs and their snapshots (``flowspark-sinks/``), and the run tokens;
* the state stores and their sizes (``state/<operator>/<partition>/…``);
* whether a run holds the directory's lock;
* every other file (the HTTP source's ``numaflow-http/<vertex>.journal`` …).

With ``check`` it also verifies every file it can, one problem line per damaged
file, naming it. The directory is a path, a ``file://`` URI or another URI
:mod:`flowspark.runtime.storage` lists and reads (``s3a://``, …).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "commits").mkdir(), (d / "offsets").mkdir()
>>> _ = (d / "commits" / "0").write_text('v1\\n{"nextBatchWatermarkMs":0}')
>>> _ = (d / "offsets" / "0").write_text('v1\\n{"batchTimestampMs":0}\\n{"inputs":{},"t":1}')
>>> inspection = inspect_directory(str(d), check=True)
>>> inspection.facts["batches"]["last_committed"], inspection.problems
(0, [])
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from flowspark.engine.recovery_damage import log_file_problem, state_file_problem
from flowspark.engine.recovery_files import (
    LogFileError,
    journal_problem,
    journal_synced,
    parse_log,
    peek_pickle,
    sst_problem,
    state_file_version,
)
from flowspark.engine.recovery_lock import LEASE_NAME, LOCK_NAME, Holder
from flowspark.runtime.storage import Location, StorageError, read_bytes

__all__ = ["Inspection", "NotRecoveryDirectory", "inspect_directory", "ranges"]

SINKS = "flowspark-sinks"
JOURNALS = "numaflow-http"
# What makes a directory a recovery directory: any of these at its top.
_MARKS = (
    "metadata",
    LOCK_NAME,
    LEASE_NAME,
    *(f"{d}/" for d in ("offsets", "commits", "state", "sources", SINKS, JOURNALS)),
)
# A snapshot pickle larger than this is not unpickled by a plain inspect (--check does).
_PEEK_LIMIT = 16 << 20


class NotRecoveryDirectory(ValueError):
    """The path is not a recovery directory (missing, a file, or holds none of its files)."""


@dataclass(frozen=True)
class _File:
    name: str  # relative to the directory, ``/``-separated
    size: int
    mtime: float | None  # seconds since the epoch


@dataclass
class Inspection:
    """What :func:`inspect_directory` found: ``facts`` (JSON-ready; shown by
    :func:`flowspark.engine.recovery_cli.render`) and ``problems`` (one line each,
    naming the file; all of them only with ``check``)."""

    facts: dict[str, Any]
    problems: list[str] = field(default_factory=list)


# -- the directory's files ------------------------------------------------------------------


class _Directory:
    """One listing of every file below a recovery directory, and reads of them."""

    def __init__(self, where: Location) -> None:
        self.where = where
        self.files = {f.name: f for f in self._list()}

    def _list(self) -> list[_File]:
        if self.where.is_local:
            root = self.where.path
            found = []
            for folder, _, names in os.walk(root):
                for name in names:
                    path = os.path.join(folder, name)
                    with contextlib.suppress(OSError):  # removed while listed
                        st = os.stat(path)
                        rel = os.path.relpath(path, root).replace(os.sep, "/")
                        found.append(_File(rel, st.st_size, st.st_mtime))
            return found
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self.where.path, recursive=True, allow_not_found=True)
        try:
            infos = self.where.filesystem().get_file_info(selector)
        except Exception as exc:
            raise StorageError(f"{self.where.shown}: cannot list it: {exc}") from exc
        base = self.where.path.rstrip("/") + "/"
        return [
            _File(info.path[len(base) :], int(info.size or 0), _timestamp(info.mtime))
            for info in infos
            if info.type == pafs.FileType.File and info.path.startswith(base)
        ]

    def shown(self, name: str) -> str:
        """The file's path or URI, for messages."""
        return self.where.child(name).shown

    def read(self, name: str) -> bytes:
        return read_bytes(self.where.child(name)) or b""

    @contextlib.contextmanager
    def open(self, name: str) -> Iterator[IO[bytes]]:
        with self.where.child(name).open_read() as f:
            yield f

    def under(self, prefix: str) -> list[_File]:
        return sorted((f for n, f in self.files.items() if n.startswith(prefix)), key=_order)


def _order(f: _File) -> tuple[Any, ...]:
    """Files in name order, numbers by value (``offsets/2`` before ``offsets/10``)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[/.]", f.name))


def _timestamp(value: Any) -> float | None:
    return value.timestamp() if isinstance(value, datetime) else None


# -- gathering the facts -------------------------------------------------------------------


class _Inspector:
    """Reads a :class:`_Directory` section by section; ``check`` verifies every file."""

    def __init__(self, directory: _Directory, check: bool) -> None:
        self.dir = directory
        self.check = check
        self.problems: list[str] = []
        self.claimed: set[str] = set()
        self.last_commit: int | None = None

    def problem(self, name: str, what: str) -> None:
        self.problems.append(f"{self.dir.shown(name)}: {what}")

    def parsed(self, name: str) -> tuple[str, list[Any]] | None:
        """A parsed Spark log file, or ``None`` when it does not parse."""
        with contextlib.suppress(LogFileError):
            return parse_log(self.dir.read(name))
        return None

    # -- batches ---------------------------------------------------------------------

    def batches(self) -> dict[str, Any]:
        offsets = self._numbered("offsets")
        commits = self._numbered("commits")
        facts: dict[str, Any] = {
            "query_id": self._query_id(),
            "offsets": _span(offsets),
            "commits": _span(commits),
            "last_committed": None,
        }
        if self.check:
            for batch in offsets:
                self._check_log("offsets", batch)
            for batch in commits:
                self._check_log("commits", batch)
                if batch not in offsets:
                    self.problem(
                        f"commits/{batch}",
                        f"batch {batch} is committed but its offsets log file "
                        f"offsets/{batch} is missing",
                    )
        if commits:
            self.last_commit = last = max(commits)
            commit = self.dir.files[f"commits/{last}"]
            facts["last_committed"] = last
            facts["committed_at"] = _iso(commit.mtime)
            meta = self._offsets_metadata(last) if last in offsets else {}
            if isinstance(meta.get("batchTimestampMs"), int):
                facts["planned_at"] = _iso(meta["batchTimestampMs"] / 1000)
            if isinstance(meta.get("batchWatermarkMs"), int):
                facts["watermark_ms"] = meta["batchWatermarkMs"]
        facts["pending"] = [b for b in offsets if self.last_commit is None or b > self.last_commit]
        return facts

    def _numbered(self, folder: str) -> list[int]:
        numbers = []
        for f in self.dir.under(f"{folder}/"):
            rest = f.name[len(folder) + 1 :]
            if rest.isdigit():
                numbers.append(int(rest))
                self.claimed.add(f.name)
        return sorted(numbers)

    def _query_id(self) -> str | None:
        if "metadata" not in self.dir.files:
            return None
        self.claimed.add("metadata")
        try:
            return str(json.loads(self.dir.read("metadata"))["id"])
        except (ValueError, KeyError, TypeError):
            if self.check:
                self.problem("metadata", "the query's metadata is not JSON with an id")
            return None

    def _offsets_metadata(self, batch: int) -> dict[str, Any]:
        parsed = self.parsed(f"offsets/{batch}")
        if parsed and parsed[1] and isinstance(parsed[1][0], dict):
            return parsed[1][0]
        return {}

    def _check_log(self, kind: str, batch: int) -> None:
        """An offsets or commit log file is whole (as the run checks it, see
        :func:`~flowspark.engine.recovery_damage.log_file_problem`), and an offsets
        file has the batch's metadata and its sources' offsets."""
        name = f"{kind}/{batch}"
        label = "offsets log" if kind == "offsets" else "commit log"
        why = log_file_problem(self.dir.where.child(name))
        if why is None and kind == "offsets":
            values = (self.parsed(name) or ("", []))[1]
            if not values or not isinstance(values[0], dict):
                why = "it has no batch metadata line (cut short?)"
            elif len(values) < 2:
                why = "it has no source offsets (cut short?)"
        if why is not None:
            self.problem(name, f"the {label} file of batch {batch}: {why}")

    # -- inputs ----------------------------------------------------------------------

    def inputs(self, batches: dict[str, Any]) -> dict[str, Any]:
        batch = batches["last_committed"]
        committed = batch is not None
        if batch is None and batches["pending"]:
            batch = batches["pending"][-1]
        facts: dict[str, Any] = {"batch": batch, "committed": committed, "sources": []}
        for f in self.dir.under("sources/"):
            self.claimed.add(f.name)
            facts.setdefault("source_files", []).append({"file": f.name, "size": f.size})
        if batch is None or f"offsets/{batch}" not in self.dir.files:
            return facts
        parsed = self.parsed(f"offsets/{batch}")
        if parsed is None:
            facts["unreadable"] = f"offsets/{batch}"
            return facts
        for index, value in enumerate(parsed[1][1:]):
            facts["sources"].append(_source_facts(index, value))
        return facts

    # -- outputs and run tokens -------------------------------------------------------

    def outputs(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Each output's snapshot (``<output>.pickle``) and run token (``<output>.token``)."""
        outputs = {name: {"output": name, "kind": kind} for name, kind in self._manifest().items()}
        tokens = []
        for f in self.dir.under(f"{SINKS}/"):
            base = f.name[len(SINKS) + 1 :]
            if base.endswith(".pickle") and "/" not in base:
                self.claimed.add(f.name)
                step = base.removesuffix(".pickle")
                entry = outputs.setdefault(step, {"output": step, "kind": "snapshot"})
                entry.update(self._snapshot(f))
            elif base.endswith(".pickle.tmp"):  # a write cut short: the snapshot was there
                step = base.removesuffix(".pickle.tmp")
                outputs.setdefault(step, {"output": step, "kind": "snapshot"})
            elif base.endswith(".token") and "/" not in base:
                self.claimed.add(f.name)
                tokens.append(self._token(f, base.removesuffix(".token")))
        for step, entry in outputs.items():
            if entry["kind"] == "snapshot" and "file" not in entry and self.check:
                self._missing_snapshot(step)
        return list(outputs.values()), tokens

    def _manifest(self) -> dict[str, str]:
        """``flowspark-sinks/outputs.json``, when the run wrote one: ``{step id: kind}``
        with kind ``snapshot`` (a partitioned output), ``token`` or ``none``."""
        name = f"{SINKS}/outputs.json"
        if name not in self.dir.files:
            return {}
        self.claimed.add(name)
        try:
            manifest = json.loads(self.dir.read(name))
            return {str(k): str(v) for k, v in manifest.items()}
        except (ValueError, AttributeError):
            self.problem(name, "the list of outputs is not a JSON object")
            return {}

    def _snapshot(self, f: _File) -> dict[str, Any]:
        facts: dict[str, Any] = {"file": f.name, "size": f.size, "written_at": _iso(f.mtime)}
        if f.size > _PEEK_LIMIT and not self.check:
            return facts
        try:
            last, prev = _generations(peek_pickle(self.dir.read(f.name)))
        except Exception as exc:  # noqa: BLE001 - any damage: say what it is
            facts["unreadable"] = f"{type(exc).__name__}: {exc}"
            self.problem(f.name, f"a sink snapshot that cannot be read ({facts['unreadable']})")
            return facts
        if last is not None:
            facts["batch"], states = last[0], last[1]
            facts["parts"] = len(states)
            facts["states"] = [_short(repr(s)) for s in states[:8]]
        if prev is not None:
            facts["previous_batch"] = prev[0]
        if self.check:
            self._check_snapshot_batches(f.name, last, prev)
        return facts

    def _check_snapshot_batches(self, name: str, last: Any, prev: Any) -> None:
        """A snapshot is of the last committed batch ``C``, or of ``C + 1`` (written, not
        committed yet) with the one before it of ``C``: what a run resumes from (see
        :mod:`flowspark.engine.recovery_check`)."""
        committed = -1 if self.last_commit is None else self.last_commit
        said = (
            f"the last committed batch is {committed}"
            if committed >= 0
            else "no batch is committed"
        )
        if last is None:
            if committed >= 0:
                self.problem(name, f"a sink snapshot that holds no batch, but {said}")
        elif last[0] > committed + 1 or last[0] < committed:
            self.problem(name, f"a sink snapshot of batch {last[0]}, but {said}")
        elif last[0] == committed + 1 and (prev[0] if prev is not None else -1) != committed:
            held = f"batch {prev[0]}" if prev is not None else "nothing"
            self.problem(name, f"a sink snapshot of batch {last[0]} after {held}, but {said}")

    def _missing_snapshot(self, step: str) -> None:
        if self.last_commit is None:
            return
        self.problem(
            f"{SINKS}/{step}.pickle",
            f"the sink snapshot of output {step!r} is missing, but batches up to "
            f"{self.last_commit} are committed",
        )

    def _token(self, f: _File, output: str) -> dict[str, Any]:
        text = self.dir.read(f.name).decode("utf-8", "replace").strip()
        if self.check and not re.fullmatch(r"[0-9A-Za-z_-]{4,128}", text):
            self.problem(f.name, f"the run token of output {output!r} is empty or damaged")
        return {"file": f.name, "output": output, "token": text}

    # -- state stores ----------------------------------------------------------------

    def state(self) -> list[dict[str, Any]]:
        operators: dict[str, dict[str, Any]] = {}
        stores: dict[tuple[str, str, str], dict[int, set[str]]] = {}
        for f in self.dir.under("state/"):
            self.claimed.add(f.name)
            parts = f.name.split("/")
            if len(parts) < 3:
                continue
            op = operators.setdefault(
                parts[1],
                {
                    "operator": parts[1],
                    "partitions": set(),
                    "files": 0,
                    "bytes": 0,
                    "stores": set(),
                },
            )
            op["files"] += 1
            op["bytes"] += f.size
            if parts[2].startswith("_"):  # the operator's metadata and state schemas
                if parts[2] == "_metadata":
                    self._operator_metadata(f, op)
                continue
            if not parts[2].isdigit() or len(parts) < 4:
                continue
            op["partitions"].add(int(parts[2]))
            store = "default"
            if len(parts) > 4 and parts[3] not in ("SSTs", "logs", "archive"):
                store = parts[3]
            op["stores"].add(store)
            versions = stores.setdefault((parts[1], parts[2], store), {})
            found = state_file_version(parts[-1])
            if found is not None and (len(parts) == 4 or parts[3] == store):
                versions.setdefault(found[0], set()).add(found[1])
            if self.check:
                self._check_state_file(f, parts[-1])
        for (op_id, _, _), versions in stores.items():
            if versions:
                op = operators[op_id]
                op["latest_version"] = max(op.get("latest_version", 0), max(versions))
        if self.check:
            self._check_state_chains(operators, stores)
        return [_state_facts(op) for op in operators.values()]

    def _operator_metadata(self, f: _File, op: dict[str, Any]) -> None:
        try:
            _, values = parse_log(self.dir.read(f.name))
        except LogFileError as exc:
            if self.check:
                self.problem(f.name, f"state operator metadata {exc}")
            return
        for value in values:
            if not isinstance(value, dict):
                continue
            info = value.get("operatorInfo") or {}
            if info.get("operatorName"):
                op["name"] = info["operatorName"]
            for store in value.get("stateStoreInfo") or []:
                if isinstance(store.get("numPartitions"), int):
                    op["declared_partitions"] = store["numPartitions"]

    def _check_state_file(self, f: _File, base: str) -> None:
        """A state-store file is not empty and, where its format tells, whole: the
        LZ4 block stream of a changelog, delta or snapshot file and a RocksDB
        checkpoint's zip (as the run checks them, see
        :func:`~flowspark.engine.recovery_damage.state_file_problem`), and an SST
        table's footer."""
        version = state_file_version(base)
        is_sst = base.endswith(".sst")
        if version is None and not is_sst:
            return
        if f.size == 0:
            why: str | None = "it is empty"
        elif is_sst:
            with self.dir.open(f.name) as stream:
                why = sst_problem(stream, f.size)
        else:
            why = state_file_problem(self.dir.where.child(f.name))
        if why is not None:
            of = f" (batch {version[0] - 1})" if version is not None and version[0] > 0 else ""
            self.problem(f.name, f"a keyed-state file{of}: {why}")

    def _check_state_chains(
        self, operators: dict[str, dict[str, Any]], stores: dict[tuple[str, str, str], Any]
    ) -> None:
        """The state the next run loads (version = last commit + 1) is there: a
        snapshot at or below it and every version's changes after that snapshot."""
        if self.last_commit is None:
            return
        need = self.last_commit + 1
        for op_id, op in operators.items():
            declared = op.get("declared_partitions")
            if declared is not None and op["partitions"]:
                for part in sorted(set(range(declared)) - op["partitions"]):
                    self.problem(
                        f"state/{op_id}/{part}",
                        f"the keyed state of partition {part} is missing (operator {op_id} "
                        f"has {declared} partitions)",
                    )
        for (op_id, part, store), versions in sorted(stores.items()):
            if not versions:
                continue
            full = [v for v, kinds in versions.items() if v <= need and kinds & {"snapshot", "zip"}]
            base = max(full, default=0)
            missing = [v for v in range(base + 1, need + 1) if v not in versions]
            if missing:
                where = f"state/{op_id}/{part}" + (f"/{store}" if store != "default" else "")
                self.problem(
                    where,
                    f"the keyed state lacks version(s) {ranges(missing)}, which the "
                    f"last committed batch {self.last_commit} needs",
                )

    # -- lock ------------------------------------------------------------------------

    def lock(self) -> dict[str, Any]:
        """Whether a run holds the directory: its ``flock`` file or lease (see
        :mod:`flowspark.engine.recovery_lock`), only looked at, never taken."""
        facts: dict[str, Any] = {"file": None, "held": False}
        for name, kind in ((LOCK_NAME, "flock"), (LEASE_NAME, "lease")):
            if name in self.dir.files:
                self.claimed.add(name)
                facts.update(self._lock_file(name, kind))
        return facts

    def _lock_file(self, name: str, kind: str) -> dict[str, Any]:
        facts: dict[str, Any] = {"file": name, "kind": kind, "holder": None}
        text = self.dir.read(name)[:4096]
        record: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            record = json.loads(text) if text.strip() else {}
        holder = None
        with contextlib.suppress(KeyError, TypeError, ValueError):  # nobody named in it
            holder = Holder.from_dict(record)
            facts["holder"] = {
                "host": holder.host,
                "pid": holder.pid,
                "started_at": _iso(holder.started),
                "text": holder.describe(),
            }
        gone = holder is not None and holder.is_gone()
        if kind == "lease":
            expires = record.get("expires")
            facts["expires_at"] = _iso(expires) if isinstance(expires, int | float) else None
            live = isinstance(expires, int | float) and expires > time.time()
            facts["held"] = holder is not None and live and not gone
            return facts
        pids = None
        if self.dir.where.is_local:
            pids = _flock_holders(os.path.join(self.dir.where.path, name))
        if pids is not None:
            facts["held"], facts["held_by_pids"] = bool(pids), pids
        elif holder is not None and holder.host != socket.gethostname():
            facts["held"] = None  # another machine's flock: this one cannot see it
        else:
            facts["held"] = holder is not None and not gone
        return facts

    # -- other files -------------------------------------------------------------------

    def others(self) -> list[dict[str, Any]]:
        found = []
        for f in sorted(self.dir.files.values(), key=_order):
            if f.name in self.claimed:
                continue
            facts: dict[str, Any] = {"file": f.name, "size": f.size}
            base = f.name.rsplit("/", 1)[-1]
            if f.name.startswith(f"{JOURNALS}/") and base.endswith(".journal"):
                facts.update(self._journal(f))
            elif base.endswith(".journal.synced"):
                continue  # shown with its journal
            elif ".journal.torn." in base:
                facts["note"] = "a torn journal tail the HTTP server cut off (kept for reference)"
            elif base.endswith(".tmp") or base.startswith("."):
                facts["note"] = "left by an interrupted write"
            found.append(facts)
        return found

    def _journal(self, f: _File) -> dict[str, Any]:
        synced_name = f.name + ".synced"
        synced_bytes = self.dir.read(synced_name) if synced_name in self.dir.files else None
        synced = journal_synced(synced_bytes)
        facts: dict[str, Any] = {"kind": "HTTP source journal", "synced": synced}
        if self.check:
            with self.dir.open(f.name) as stream:
                records, why = journal_problem(stream, f.size, synced)
            facts["records"] = records
            if why is not None:
                self.problem(f.name, f"HTTP source journal is {why}")
        return facts


def _span(numbers: list[int]) -> dict[str, int] | None:
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


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _generations(value: Any) -> tuple[Any, Any]:
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


def _source_facts(index: int, value: Any) -> dict[str, Any]:
    """One source's offsets: flowspark's (see ``engine/source.py``) read out, another
    source's as they are."""
    if value is None:
        return {"index": index, "offsets": None}
    if not (isinstance(value, dict) and isinstance(value.get("inputs"), dict)):
        return {"index": index, "kind": "other", "offsets": _short(json.dumps(value), 300)}
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
            facts["snapshot"] = _short(repr(peek_pickle(base64.b64decode(state))))
        except Exception:  # noqa: BLE001 - a damaged snapshot is shown as such
            facts["snapshot"] = "(unreadable)"
    if "wm" in position:
        facts["watermark_ms"] = position["wm"]
    return facts


def _state_facts(op: dict[str, Any]) -> dict[str, Any]:
    return {
        "operator": op["operator"],
        "name": op.get("name"),
        "partitions": len(op["partitions"]),
        "stores": sorted(op["stores"]),
        "files": op["files"],
        "bytes": op["bytes"],
        "latest_version": op.get("latest_version"),
    }


# -- the lock --------------------------------------------------------------------------------


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


# -- the whole directory ----------------------------------------------------------------------


def inspect_directory(where: str, check: bool = False) -> Inspection:
    """What the recovery directory ``where`` (a path or URI) holds; with ``check``,
    every file it can verify is verified. Raises :class:`NotRecoveryDirectory`."""
    try:
        location = Location.parse(where)
    except StorageError as exc:
        raise NotRecoveryDirectory(str(exc)) from None
    if location.is_local:
        if not os.path.exists(location.path):
            raise NotRecoveryDirectory(f"{location.shown}: no such directory")
        if not os.path.isdir(location.path):
            raise NotRecoveryDirectory(f"{location.shown}: a file, not a recovery directory")
    directory = _Directory(location)
    if not any(n.startswith(_MARKS) for n in directory.files):
        raise NotRecoveryDirectory(
            f"{location.shown}: not a recovery directory (no offsets, commits, state or "
            "flowspark files in it)"
        )
    inspector = _Inspector(directory, check)
    batches = inspector.batches()
    outputs, tokens = inspector.outputs()
    facts: dict[str, Any] = {
        "directory": location.shown,
        "batches": batches,
        "inputs": inspector.inputs(batches),
        "outputs": outputs,
        "run_tokens": tokens,
        "state": inspector.state(),
        "lock": inspector.lock(),
    }
    facts["other_files"] = inspector.others()  # the files no section above claimed
    if check:
        facts["problems"] = inspector.problems
    return Inspection(facts, inspector.problems)
