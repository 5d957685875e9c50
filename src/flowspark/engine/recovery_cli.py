"""``python -m flowspark.recovery inspect DIR [--check] [--json]``: print what a
recovery directory holds, for people (or as JSON), and check its files.

Exit status: 0 when all is well, 1 when ``--check`` found problems (one line each
on stderr, naming the file), 2 when ``DIR`` is not a recovery directory or cannot
be read (or for a bad flag), 32 (quietly) when standard output was closed
(``| head``). Reads files only; never starts Spark.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "commits").mkdir(), (d / "offsets").mkdir()
>>> _ = (d / "commits" / "0").write_text('v1\\n{"nextBatchWatermarkMs":0}')
>>> _ = (d / "offsets" / "0").write_text('v1\\n{"batchTimestampMs":0}\\n{"inputs":{},"t":1}')
>>> main(["inspect", str(d), "--check", "--json"])  # doctest: +ELLIPSIS
{
  "directory": ...
0
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from flowspark.connectors.stdio import silence_stdout
from flowspark.engine.errors import RECOVERY_CHOICES
from flowspark.engine.recovery_inspect import (
    Inspection,
    NotRecoveryDirectory,
    inspect_directory,
    ranges,
)
from flowspark.runtime.storage import StorageError
from flowspark.runtime.windowing import EOF_MS

__all__ = ["main", "render"]

PROG = "python -m flowspark.recovery"
_EXIT_PIPE = 32  # standard output closed (EPIPE), as flowspark.run and python -m json.tool


# -- for people -----------------------------------------------------------------------------


def _size(n: int) -> str:
    """``812 B``, ``1.2 MiB``."""
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _when(iso: str | None) -> str:
    """``2026-01-02 03:04:05 UTC, 5 min ago``."""
    if iso is None:
        return "unknown time"
    moment = datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    ago = time.time() - moment.timestamp()
    text = moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    if ago < 0:
        return text
    for unit, seconds in (("d", 86400), ("h", 3600), ("min", 60)):
        if ago >= seconds:
            return f"{text}, {int(ago // seconds)} {unit} ago"
    return f"{text}, {int(ago)} s ago"


def _watermark(ms: int) -> str:
    if ms >= EOF_MS - 86_400_000:
        return "end of input"
    if ms <= 0:
        return "none yet"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _render_batches(b: dict[str, Any]) -> list[str]:
    lines = []
    if b["query_id"]:
        lines.append(f"query id: {b['query_id']}")
    if b["last_committed"] is None:
        lines.append("last committed batch: none (a run on this directory starts fresh)")
    else:
        when = _when(b.get("committed_at"))
        lines.append(f"last committed batch: {b['last_committed']}, committed {when}")
        if "planned_at" in b:
            lines.append(f"  planned {_when(b['planned_at'])}")
        if "watermark_ms" in b:
            lines.append(f"  watermark: {_watermark(b['watermark_ms'])}")
    for kind in ("offsets", "commits"):
        span = b[kind]
        if span:
            lines.append(
                f"  {kind} logs: batches {span['first']}-{span['last']} ({span['count']} files)"
            )
    if b["pending"]:
        lines.append(
            f"  planned, not committed: batch {ranges(b['pending'])} (the next run replays it)"
        )
    return lines


def _render_inputs(i: dict[str, Any]) -> list[str]:
    if i["batch"] is None:
        return ["inputs: no offsets yet"]
    state = "" if i["committed"] else ", not committed"
    lines = [f"inputs (offsets/{i['batch']}{state}):"]
    if "unreadable" in i:
        lines.append(f"  offsets/{i['batch']} does not parse (see --check)")
    for source in i["sources"]:
        if source.get("kind") != "flowspark":
            lines.append(f"  source {source['index']}: {source.get('offsets') or 'no offsets'}")
            continue
        for inp in source["inputs"]:
            name = inp["step_id"] or f"input #{inp['entry']}"
            extra = []
            if "share_read" in inp:
                extra.append(f"{inp['share_read']:.0%} read")
            if "backlog" in inp:
                extra.append(f"{inp['backlog']:,} behind")
            lines.append(f"  {name}" + (f" ({', '.join(extra)})" if extra else ""))
            for part, pos in inp["parts"].items():
                lines.append(f"    part {part!r}: {_position(pos)}")
        ended = "yes, the end was announced" if source["ended"] else "no"
        lines.append(f"  every input ended: {ended}")
        if "watermark_ms" in source:
            lines.append(f"  flow watermark: {_watermark(source['watermark_ms'])}")
    for f in i.get("source_files", []):
        lines.append(f"  source metadata: {f['file']} ({_size(f['size'])})")
    return lines


def _position(pos: dict[str, Any]) -> str:
    if "offset" in pos:
        return f"offset {pos['offset']}"
    text = f"{pos['batches']} source batches read"
    if "snapshot" in pos:
        text += f", snapshot {pos['snapshot']}"
    if pos.get("ended"):
        text += ", ended"
    return text


def _render_outputs(outputs: list[dict[str, Any]], tokens: list[dict[str, Any]]) -> list[str]:
    lines = ["outputs:" if outputs else "outputs: none keeps a snapshot"]
    for o in outputs:
        if o["kind"] == "executors":
            lines.append(
                f"  {o['output']}: parts written on the executors, their snapshots in the "
                f"state stores  [{o['file']}]"
            )
            continue
        if "file" not in o:
            kind = o["kind"]
            lines.append(
                f"  {o['output']}: "
                + ("its snapshot is MISSING" if kind == "snapshot" else f"no snapshot ({kind})")
            )
            continue
        text = (
            f"  {o['output']}: {o['file']} ({_size(o['size'])}, written {_when(o['written_at'])})"
        )
        lines.append(text)
        if "unreadable" in o:
            lines.append(f"    unreadable: {o['unreadable']}")
        elif "batch" in o:
            prev = o.get("previous_batch")
            lines.append(
                f"    batch {o['batch']}, {o['parts']} part(s): {', '.join(o['states'])}"
                + (f"; previous generation: batch {prev}" if prev is not None else "")
            )
    if tokens:
        for t in tokens:
            token = t["token"] or "(empty)"
            lines.append(f"run token (output {t['output']}): {token}  [{t['file']}]")
    else:
        lines.append("run token: none (no output names its writes by it)")
    return lines


def _render_state(state: list[dict[str, Any]]) -> list[str]:
    if not state:
        return ["state stores: none (the flow keeps no keyed state)"]
    lines = ["state stores:"]
    for op in state:
        name = f" ({op['name']})" if op["name"] else ""
        version = op["latest_version"]
        after = f", latest version {version} (after batch {version - 1})" if version else ""
        stores = "" if op["stores"] in ([], ["default"]) else f", stores {', '.join(op['stores'])}"
        lines.append(
            f"  operator {op['operator']}{name}: {op['partitions']} partitions{stores}, "
            f"{op['files']} files, {_size(op['bytes'])}{after}"
        )
    return lines


def _render_lock(lock: dict[str, Any]) -> list[str]:
    if lock["file"] is None:
        return ["lock: free (no run has locked this directory yet)"]
    holder = lock.get("holder")
    who = holder["text"] if holder else "nobody named"
    if lock["kind"] == "lease":
        expires = lock.get("expires_at")
        until = f", until {_when(expires)}" if expires else ""
        if lock["held"]:
            return [f"lock: held by {who} (lease {lock['file']}{until})"]
        return [f"lock: free (lease {lock['file']} of {who} expired{until})"]
    if lock["held"] is None:
        return [f"lock: {lock['file']} names {who}; its flock cannot be seen from this machine"]
    if lock["held"]:
        return [f"lock: held by {who} ({lock['file']})"]
    last = f"; last held by {who}" if holder else ""
    return [f"lock: free ({lock['file']}{last})"]


def _render_others(others: list[dict[str, Any]]) -> list[str]:
    if not others:
        return ["other files: none"]
    lines = ["other files:"]
    for o in others:
        extra = []
        if o.get("kind"):
            extra.append(o["kind"])
        if o.get("synced") is not None:
            extra.append(f"{o['synced']:,} bytes synced")
        if o.get("start") is not None:
            extra.append(f"kept from byte {o['start']:,}")
        if "records" in o:
            extra.append(f"{o['records']:,} records")
        if o.get("note"):
            extra.append(o["note"])
        more = f"; {'; '.join(extra)}" if extra else ""
        lines.append(f"  {o['file']} ({_size(o['size'])}{more})")
    return lines


def render(facts: dict[str, Any]) -> str:
    """The facts of :func:`inspect_directory` as text for people."""
    lines = [f"recovery directory {facts['directory']}"]
    lines += _render_batches(facts["batches"])
    lines += _render_inputs(facts["inputs"])
    lines += _render_outputs(facts["outputs"], facts["run_tokens"])
    lines += _render_state(facts["state"])
    lines += _render_lock(facts["lock"])
    lines += _render_others(facts["other_files"])
    return "\n".join(lines)


# -- the command ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Look into a recovery directory.")
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser(
        "inspect",
        help="print what a recovery directory holds",
        description="Print what a recovery directory holds: the last committed batch, "
        "inputs and their offsets, outputs and their snapshots, state stores, the run "
        "token, the lock and other files. Reads files only; never starts Spark.",
    )
    inspect.add_argument("directory", help="a path, a file:// URI or s3a:// (...) URI")
    inspect.add_argument(
        "--check",
        action="store_true",
        help="verify every file it can; exit 1 with one line per problem",
    )
    inspect.add_argument("--json", action="store_true", help="print the facts as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flowspark.recovery inspect DIR [--check] [--json]``: 0 when all is
    well, 1 when ``--check`` found problems, 2 when ``DIR`` is not a recovery
    directory (or cannot be read), 32 when standard output was closed."""
    args = _parser().parse_args(argv)
    try:
        inspection = inspect_directory(args.directory, check=args.check)
    except (NotRecoveryDirectory, StorageError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    try:
        status = _report(args, inspection)
        sys.stdout.flush()  # a closed pipe fails here, not at exit
    except BrokenPipeError:  # | head has read what it wanted
        silence_stdout()
        return _EXIT_PIPE
    return status


def _report(args: argparse.Namespace, inspection: Inspection) -> int:
    """Print the facts (and with ``--check`` the problems); the exit status."""
    if args.json:
        print(json.dumps(inspection.facts, indent=2, default=str))
    else:
        print(render(inspection.facts))
    if not args.check:
        return 0
    for problem in inspection.problems:
        print(problem, file=sys.stderr)
    if not args.json:
        if inspection.facts["lock"]["held"]:
            print("check: a run holds this directory; its files change while it runs")
        count = len(inspection.problems)
        verdict = f"{count} problem(s): {RECOVERY_CHOICES}" if count else "every file is whole"
        print(f"check: {verdict}")
    return 1 if inspection.problems else 0
