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

This module goes through the directory section by section; the listing and reads are
:mod:`flowspark.engine.recovery_listing`'s, the facts drawn from a file's contents
:mod:`flowspark.engine.recovery_facts`'s, the checks
:mod:`flowspark.engine.recovery_checks`'s; :mod:`flowspark.engine.recovery_cli`
renders them.

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

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from flowspark.engine.recovery_checks import (
    Problem,
    check_log_file,
    check_missing_snapshot,
    check_run_token,
    check_snapshot_batches,
    check_state_chains,
    check_state_file,
)
from flowspark.engine.recovery_facts import (
    iso_time,
    lock_file_facts,
    ranges,
    shorten,
    snapshot_generations,
    source_facts,
    span,
    state_facts,
)
from flowspark.engine.recovery_files import (
    LogFileError,
    journal_problem,
    journal_synced,
    numbered_files,
    parse_log,
    peek_pickle,
    state_file_version,
)
from flowspark.engine.recovery_listing import ListedFile, Listing, listing_order
from flowspark.engine.recovery_lock import LEASE_NAME, LOCK_NAME
from flowspark.runtime.storage import Location, StorageError

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


@dataclass
class Inspection:
    """What :func:`inspect_directory` found: ``facts`` (JSON-ready; shown by
    :func:`flowspark.engine.recovery_cli.render`) and ``problems`` (one line each,
    naming the file; all of them only with ``check``)."""

    facts: dict[str, Any]
    problems: list[str] = field(default_factory=list)


# -- gathering the facts -------------------------------------------------------------------


class _Inspector:
    """Reads a :class:`~flowspark.engine.recovery_listing.Listing` section by section;
    ``check`` verifies every file (:mod:`flowspark.engine.recovery_checks`)."""

    def __init__(self, directory: Listing, check: bool) -> None:
        self.dir = directory
        self.check = check
        self.problems: list[str] = []
        self.claimed: set[str] = set()
        self.last_commit: int | None = None

    def problem(self, name: str, what: str) -> None:
        self.problems.append(f"{self.dir.shown(name)}: {what}")

    def report(self, problems: Iterable[Problem]) -> None:
        for name, what in problems:
            self.problem(name, what)

    # -- batches ---------------------------------------------------------------------

    def batches(self) -> dict[str, Any]:
        offsets = self._numbered("offsets")
        commits = self._numbered("commits")
        facts: dict[str, Any] = {
            "query_id": self._query_id(),
            "offsets": span(offsets),
            "commits": span(commits),
            "last_committed": None,
        }
        if self.check:
            for batch in offsets:
                self.report(check_log_file(self.dir, "offsets", batch))
            for batch in commits:
                self.report(check_log_file(self.dir, "commits", batch))
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
            facts["committed_at"] = iso_time(commit.mtime)
            meta = self._offsets_metadata(last) if last in offsets else {}
            if isinstance(meta.get("batchTimestampMs"), int):
                facts["planned_at"] = iso_time(meta["batchTimestampMs"] / 1000)
            if isinstance(meta.get("batchWatermarkMs"), int):
                facts["watermark_ms"] = meta["batchWatermarkMs"]
        facts["pending"] = [b for b in offsets if self.last_commit is None or b > self.last_commit]
        return facts

    def _numbered(self, folder: str) -> list[int]:
        """The batches of Spark's log ``folder`` (``offsets``, ``commits``), in order."""
        names = [f.name[len(folder) + 1 :] for f in self.dir.under(f"{folder}/")]
        found = numbered_files(names)
        self.claimed.update(f"{folder}/{name}" for _, name in found)
        return [batch for batch, _ in found]

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
        parsed = self.dir.parsed(f"offsets/{batch}")
        if parsed and parsed[1] and isinstance(parsed[1][0], dict):
            return parsed[1][0]
        return {}

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
        parsed = self.dir.parsed(f"offsets/{batch}")
        if parsed is None:
            facts["unreadable"] = f"offsets/{batch}"
            return facts
        for index, value in enumerate(parsed[1][1:]):
            facts["sources"].append(source_facts(index, value))
        return facts

    # -- outputs and run tokens -------------------------------------------------------

    def outputs(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Each output's snapshot (``<output>.pickle``), run token (``<output>.token``)
        or mark that its parts are written on the executors (``<output>.executors``:
        their snapshots are Spark state)."""
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
            elif base.endswith(".executors") and "/" not in base:  # parts in Spark state
                self.claimed.add(f.name)
                step = base.removesuffix(".executors")
                outputs[step] = {"output": step, "kind": "executors", "file": f.name}
        for step, entry in outputs.items():
            if entry["kind"] == "snapshot" and "file" not in entry and self.check:
                name = f"{SINKS}/{step}.pickle"
                self.report(check_missing_snapshot(name, step, self.last_commit))
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

    def _snapshot(self, f: ListedFile) -> dict[str, Any]:
        facts: dict[str, Any] = {"file": f.name, "size": f.size, "written_at": iso_time(f.mtime)}
        if f.size > _PEEK_LIMIT and not self.check:
            return facts
        try:
            last, prev = snapshot_generations(peek_pickle(self.dir.read(f.name)))
        except Exception as exc:  # noqa: BLE001 - any damage: say what it is
            facts["unreadable"] = f"{type(exc).__name__}: {exc}"
            self.problem(f.name, f"a sink snapshot that cannot be read ({facts['unreadable']})")
            return facts
        if last is not None:
            facts["batch"], states = last[0], last[1]
            facts["parts"] = len(states)
            facts["states"] = [shorten(repr(s)) for s in states[:8]]
        if prev is not None:
            facts["previous_batch"] = prev[0]
        if self.check:
            self.report(check_snapshot_batches(f.name, last, prev, self.last_commit))
        return facts

    def _token(self, f: ListedFile, output: str) -> dict[str, Any]:
        text = self.dir.read(f.name).decode("utf-8", "replace").strip()
        if self.check:
            self.report(check_run_token(f.name, output, text))
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
                self.report(check_state_file(self.dir, f, parts[-1]))
        for (op_id, _, _), versions in stores.items():
            if versions:
                op = operators[op_id]
                op["latest_version"] = max(op.get("latest_version", 0), max(versions))
        if self.check:
            self.report(check_state_chains(operators, stores, self.last_commit))
        return [state_facts(op) for op in operators.values()]

    def _operator_metadata(self, f: ListedFile, op: dict[str, Any]) -> None:
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

    # -- lock ------------------------------------------------------------------------

    def lock(self) -> dict[str, Any]:
        """Whether a run holds the directory: its ``flock`` file or lease (see
        :mod:`flowspark.engine.recovery_lock`), only looked at, never taken."""
        facts: dict[str, Any] = {"file": None, "held": False}
        for name, kind in ((LOCK_NAME, "flock"), (LEASE_NAME, "lease")):
            if name in self.dir.files:
                self.claimed.add(name)
                facts.update(lock_file_facts(self.dir, name, kind))
        return facts

    # -- other files -------------------------------------------------------------------

    def others(self) -> list[dict[str, Any]]:
        found = []
        for f in sorted(self.dir.files.values(), key=listing_order):
            if f.name in self.claimed:
                continue
            facts: dict[str, Any] = {"file": f.name, "size": f.size}
            base = f.name.rsplit("/", 1)[-1]
            if f.name.startswith(f"{JOURNALS}/") and base.endswith(".journal"):
                facts.update(self._journal(f))
            elif base.endswith((".journal.synced", ".journal.start", ".journal.committed")):
                continue  # shown with its journal
            elif ".journal.torn." in base:
                facts["note"] = "a torn journal tail the HTTP server cut off (kept for reference)"
            elif base.endswith(".tmp") or base.startswith("."):
                facts["note"] = "left by an interrupted write"
            found.append(facts)
        return found

    def _journal(self, f: ListedFile) -> dict[str, Any]:
        synced_name = f.name + ".synced"
        synced_bytes = self.dir.read(synced_name) if synced_name in self.dir.files else None
        synced = journal_synced(synced_bytes)
        facts: dict[str, Any] = {"kind": "HTTP source journal", "synced": synced}
        start_name = f.name + ".start"
        start = journal_synced(self.dir.read(start_name)) if start_name in self.dir.files else None
        if start is not None:
            facts["start"] = start  # the bytes before were delivered and dropped
        if self.check:
            with self.dir.open(f.name) as stream:
                records, why = journal_problem(stream, f.size, synced, start)
            facts["records"] = records
            if why is not None:
                self.problem(f.name, f"HTTP source journal is {why}")
        return facts


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
    directory = Listing(location)
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
