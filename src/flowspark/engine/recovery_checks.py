"""The checks ``python -m flowspark.recovery inspect DIR --check`` adds (see
:mod:`flowspark.engine.recovery_inspect`): each yields its problems as ``(name, what)``,
the damaged file's name in the directory and what is wrong with it.

The files are checked as a run checks them (:mod:`flowspark.engine.recovery_damage`,
:mod:`flowspark.engine.recovery_check`), and then some: an offsets file's lines, an SST
table's footer, the state versions the next run loads, the run tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from flowspark.engine.recovery_damage import log_file_problem, state_file_problem
from flowspark.engine.recovery_facts import ranges
from flowspark.engine.recovery_files import sst_problem, state_file_version
from flowspark.engine.recovery_listing import ListedFile, Listing

__all__ = [
    "Problem",
    "check_log_file",
    "check_missing_snapshot",
    "check_run_token",
    "check_snapshot_batches",
    "check_state_chains",
    "check_state_file",
]

Problem = tuple[str, str]  # the file's name in the directory, what is wrong with it


def check_log_file(listing: Listing, kind: str, batch: int) -> Iterator[Problem]:
    """An offsets or commit log file is whole (as the run checks it, see
    :func:`~flowspark.engine.recovery_damage.log_file_problem`), and an offsets
    file has the batch's metadata and its sources' offsets."""
    name = f"{kind}/{batch}"
    label = "offsets log" if kind == "offsets" else "commit log"
    why = log_file_problem(listing.where.child(name))
    if why is None and kind == "offsets":
        values = (listing.parsed(name) or ("", []))[1]
        if not values or not isinstance(values[0], dict):
            why = "it has no batch metadata line (cut short?)"
        elif len(values) < 2:
            why = "it has no source offsets (cut short?)"
    if why is not None:
        yield name, f"the {label} file of batch {batch}: {why}"


def check_snapshot_batches(
    name: str, last: Any, prev: Any, last_commit: int | None
) -> Iterator[Problem]:
    """A snapshot is of the last committed batch ``C``, or of ``C + 1`` (written, not
    committed yet) with the one before it of ``C``: what a run resumes from (see
    :mod:`flowspark.engine.recovery_check`)."""
    committed = -1 if last_commit is None else last_commit
    said = f"the last committed batch is {committed}" if committed >= 0 else "no batch is committed"
    if last is None:
        if committed >= 0:
            yield name, f"a sink snapshot that holds no batch, but {said}"
    elif last[0] > committed + 1 or last[0] < committed:
        yield name, f"a sink snapshot of batch {last[0]}, but {said}"
    elif last[0] == committed + 1 and (prev[0] if prev is not None else -1) != committed:
        held = f"batch {prev[0]}" if prev is not None else "nothing"
        yield name, f"a sink snapshot of batch {last[0]} after {held}, but {said}"


def check_missing_snapshot(name: str, step: str, last_commit: int | None) -> Iterator[Problem]:
    """Output ``step`` has no snapshot file ``name``: a problem once a batch is committed."""
    if last_commit is None:
        return
    yield (
        name,
        f"the sink snapshot of output {step!r} is missing, but batches up to "
        f"{last_commit} are committed",
    )


def check_run_token(name: str, output: str, token: str) -> Iterator[Problem]:
    """A run token is 4 to 128 letters, digits, ``_`` or ``-``."""
    if not re.fullmatch(r"[0-9A-Za-z_-]{4,128}", token):
        yield name, f"the run token of output {output!r} is empty or damaged"


def check_state_file(listing: Listing, f: ListedFile, base: str) -> Iterator[Problem]:
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
        with listing.open(f.name) as stream:
            why = sst_problem(stream, f.size)
    else:
        why = state_file_problem(listing.where.child(f.name))
    if why is not None:
        of = f" (batch {version[0] - 1})" if version is not None and version[0] > 0 else ""
        yield f.name, f"a keyed-state file{of}: {why}"


def check_state_chains(
    operators: dict[str, dict[str, Any]],
    stores: dict[tuple[str, str, str], Any],
    last_commit: int | None,
) -> Iterator[Problem]:
    """The state the next run loads (version = last commit + 1) is there: a
    snapshot at or below it and every version's changes after that snapshot."""
    if last_commit is None:
        return
    need = last_commit + 1
    for op_id, op in operators.items():
        declared = op.get("declared_partitions")
        if declared is not None and op["partitions"]:
            for part in sorted(set(range(declared)) - op["partitions"]):
                yield (
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
            yield (
                where,
                f"the keyed state lacks version(s) {ranges(missing)}, which the "
                f"last committed batch {last_commit} needs",
            )
