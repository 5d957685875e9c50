"""``python -m flowspark.recovery inspect DIR [--check] [--json]`` on hand-built
recovery directories (no Spark): each section of the report, each damage ``--check``
names, and the exit codes."""

from __future__ import annotations

import base64
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from flowspark.engine.recovery_cli import main
from flowspark.engine.recovery_inspect import inspect_directory
from flowspark.engine.recovery_lock import LEASE_NAME, FileLock
from flowspark.runtime.storage import Location
from tests.s3_server import S3Server

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_795_000_000_000  # a batch time (ms)
SST_MAGIC = struct.pack("<Q", 0x88E241B785F4CFF7)


def _lz4(payload: bytes) -> bytes:
    """Spark's LZ4 block stream: one raw block, then the empty end block."""
    size = struct.pack("<ii", len(payload), len(payload))
    return b"LZ4Block\x10" + size + bytes(4) + payload + b"LZ4Block\x10" + bytes(12)


def _zip() -> bytes:
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"ck-{os.getpid()}.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("CURRENT", "MANIFEST-000005\n")
        archive.writestr("metadata", '{"sstFiles":[]}' * 20)
    data = path.read_bytes()
    path.unlink()
    return data


def _journal_record(event_id: str, payload: bytes) -> bytes:
    meta = event_id.encode()
    body = struct.pack("<qIHH", T0, len(meta), 0, 0) + meta + payload
    return struct.pack("<II", len(body), zlib.crc32(body)) + body


def _offsets(batch: int) -> str:
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": T0 + batch, "conf": {}}
    state = base64.b64encode(pickle.dumps(7 * (batch + 1))).decode()
    source = {
        "inputs": {
            "0": {"parts": {"d.txt": 100 * (batch + 1)}},
            "1": {"parts": {"p": {"n": batch + 1, "state": state}}, "eof": []},
        },
        "t": T0 + batch,
        "steps": {"0": "lines", "1": "paced"},
        "read": {"lines": 0.5},
    }
    return f"v1\n{json.dumps(meta)}\n{json.dumps(source)}"


def build(root: Path) -> Path:
    """A recovery directory after batch 2 (batch 3 planned, not committed): logs, a
    file output's snapshot, a broker output's run token, keyed state in two
    partitions (RocksDB with changelogs), an HTTP source's journal."""
    (root / "metadata").parent.mkdir(parents=True, exist_ok=True)
    (root / "metadata").write_text('{"id":"q-1"}')
    for kind in ("offsets", "commits"):
        (root / kind).mkdir()
    for batch in range(4):
        (root / "offsets" / str(batch)).write_text(_offsets(batch))
    for batch in range(3):
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    sinks = root / "flowspark-sinks"
    sinks.mkdir()
    (sinks / "out.pickle").write_bytes(pickle.dumps({"prev": (1, [10]), "last": (2, [20])}))
    (sinks / "js.token").write_text("a1b2c3d4e5f6")
    meta = root / "state" / "0" / "_metadata" / "v2"
    meta.mkdir(parents=True)
    info = {
        "operatorInfo": {"operatorId": 0, "operatorName": "transformWithStateInPySparkExec"},
        "stateStoreInfo": [{"storeName": "default", "numPartitions": 2}],
    }
    (meta / "0").write_text(f"v2\n{json.dumps(info)}")
    for part in ("0", "1"):
        store = root / "state" / "0" / part
        (store / "SSTs").mkdir(parents=True)
        (store / "1.zip").write_bytes(_zip())
        for version in (1, 2, 3):
            (store / f"{version}.changelog").write_bytes(_lz4(b"changes" * 9))
        (store / "SSTs" / "000008-ab.sst").write_bytes(b"t" * 200 + SST_MAGIC)
    journals = root / "numaflow-http"
    journals.mkdir()
    journal = b"FSPKHTJ1" + _journal_record("e1", b"one") + _journal_record("e2", b"two")
    (journals / "in.journal").write_bytes(journal + b"\x07torn")
    size = len(journal)
    (journals / "in.journal.synced").write_bytes(struct.pack("<QQ", size, ~size & (1 << 64) - 1))
    return root


def run(capsys, *args: str) -> tuple[int, str, list[str]]:
    code = main(["inspect", *args])
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


# -- what it reports ---------------------------------------------------------------------


def test_the_report_has_every_section(tmp_path, capsys):
    rec = build(tmp_path / "rec")
    code, out, err = run(capsys, str(rec))
    assert (code, err) == (0, [])
    lines = out.splitlines()
    assert lines[0] == f"recovery directory {rec}"
    assert "query id: q-1" in lines
    assert any(line.startswith("last committed batch: 2, committed ") for line in lines)
    assert "  planned 2026-11-18 11:06:40 UTC" in out
    assert "  planned, not committed: batch 3 (the next run replays it)" in lines
    # inputs of the last committed batch
    assert "inputs (offsets/2):" in lines
    assert "  lines (50% read)" in lines
    assert "    part 'd.txt': offset 300" in lines
    assert "    part 'p': 3 source batches read, snapshot 21" in lines
    # outputs, the run token
    assert any(line.startswith("  out: flowspark-sinks/out.pickle (") for line in lines)
    assert "    batch 2, 1 part(s): 20; previous generation: batch 1" in lines
    assert "run token (output js): a1b2c3d4e5f6  [flowspark-sinks/js.token]" in lines
    # state stores
    [state] = [line for line in lines if line.startswith("  operator 0")]
    assert state.startswith(
        "  operator 0 (transformWithStateInPySparkExec): 2 partitions, 11 files"
    )
    assert state.endswith("latest version 3 (after batch 2)")
    assert "lock: free (no run has locked this directory yet)" in lines
    # other files: the journal, with its synced length
    [journal] = [line for line in lines if "numaflow-http/in.journal" in line]
    assert "HTTP source journal" in journal and "bytes synced" in journal


def test_json_holds_the_same_facts(tmp_path, capsys):
    rec = build(tmp_path / "rec")
    code, out, _ = run(capsys, str(rec), "--json")
    facts = json.loads(out)
    assert code == 0
    assert facts["batches"]["last_committed"] == 2
    assert facts["batches"]["pending"] == [3]
    assert facts["batches"]["offsets"] == {"first": 0, "last": 3, "count": 4}
    [source] = facts["inputs"]["sources"]
    lines, paced = source["inputs"]
    assert (lines["step_id"], lines["parts"], lines["share_read"]) == (
        "lines",
        {"d.txt": {"offset": 300}},
        0.5,
    )
    assert paced["parts"]["p"] == {"batches": 3, "ended": False, "snapshot": "21"}
    [out_facts] = facts["outputs"]
    assert (out_facts["output"], out_facts["batch"], out_facts["previous_batch"]) == ("out", 2, 1)
    assert facts["run_tokens"] == [
        {"file": "flowspark-sinks/js.token", "output": "js", "token": "a1b2c3d4e5f6"}
    ]
    [op] = facts["state"]
    assert (op["partitions"], op["files"], op["latest_version"]) == (2, 11, 3)
    assert op["bytes"] == sum(
        p.stat().st_size for p in (rec / "state" / "0").rglob("*") if p.is_file()
    )
    assert facts["lock"] == {"file": None, "held": False}
    [journal] = facts["other_files"]
    assert journal["file"] == "numaflow-http/in.journal"
    assert "problems" not in facts  # only with --check


def test_an_output_whose_parts_the_executors_write_is_named_by_its_mark(tmp_path, capsys):
    """Its snapshots are Spark state: the directory holds only a mark that says so."""
    rec = build(tmp_path / "rec")
    (rec / "flowspark-sinks" / "files.executors").write_text("parts written on the executors\n")
    code, out, err = run(capsys, str(rec), "--check")
    assert (code, err) == (0, [])
    assert any(
        line.startswith("  files: parts written on the executors") for line in out.splitlines()
    )
    code, out, _ = run(capsys, str(rec), "--json")
    facts = json.loads(out)
    assert {"output": "files", "kind": "executors", "file": "flowspark-sinks/files.executors"} in (
        facts["outputs"]
    )
    assert all(f["file"] != "flowspark-sinks/files.executors" for f in facts["other_files"])


def test_a_whole_directory_checks_out(tmp_path, capsys):
    rec = build(tmp_path / "rec")
    code, out, err = run(capsys, str(rec), "--check")
    assert (code, err) == (0, [])
    assert out.splitlines()[-1] == "check: every file is whole"
    code, out, err = run(capsys, str(rec), "--check", "--json")
    assert (code, err, json.loads(out)["problems"]) == (0, [], [])
    journal = json.loads(out)["other_files"][0]
    assert journal["records"] == 2  # the torn tail past the synced length is no problem


def test_a_journal_whose_delivered_prefix_was_dropped_checks_out_from_its_start(tmp_path, capsys):
    # The HTTP server dropped the first record (zeros where it was, as after a
    # punched hole) and wrote the first kept byte to in.journal.start.
    rec = build(tmp_path / "rec")
    journals = rec / "numaflow-http"
    data = (journals / "in.journal").read_bytes()
    first_end = 8 + len(_journal_record("e1", b"one"))
    (journals / "in.journal").write_bytes(b"FSPKHTJ1" + bytes(first_end - 8) + data[first_end:])
    pack = struct.Struct("<QQ").pack
    (journals / "in.journal.start").write_bytes(pack(first_end, ~first_end & (1 << 64) - 1))
    code, out, err = run(capsys, str(rec), "--check")
    assert (code, err) == (0, [])
    [journal] = [line for line in out.splitlines() if "numaflow-http/in.journal" in line]
    assert f"kept from byte {first_end:,}" in journal and "1 records" in journal
    assert not any("in.journal.start" in line for line in out.splitlines())
    (journals / "in.journal.start").unlink()  # without it, the zeros are damage
    code, _, err = run(capsys, str(rec), "--check")
    assert code == 1 and "HTTP source journal is damaged" in err[0]


def _cut(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _snapshot(last: int, prev: int | None) -> Callable[[Path], None]:
    def write(rec: Path) -> None:
        generations = {"prev": (prev, [1]) if prev is not None else None, "last": (last, [2])}
        (rec / "flowspark-sinks" / "out.pickle").write_bytes(pickle.dumps(generations))

    return write


def _delete_snapshot_listed(rec: Path) -> None:
    (rec / "flowspark-sinks" / "outputs.json").write_text('{"out": "snapshot", "js": "token"}')
    (rec / "flowspark-sinks" / "out.pickle").unlink()


def _delete_snapshot_mid_write(rec: Path) -> None:
    (rec / "flowspark-sinks" / "out.pickle").rename(rec / "flowspark-sinks" / "out.pickle.tmp")
    _cut(rec / "flowspark-sinks" / "out.pickle.tmp", 10)


DAMAGE: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "truncated offsets file": (
        lambda rec: _cut(rec / "offsets" / "2", len(_offsets(2)) - 5),
        "offsets/2",
        "the offsets log file of batch 2: line 3 is not whole JSON",
    ),
    "offsets file cut at a line end": (
        lambda rec: (rec / "offsets" / "1").write_text(_offsets(1).rsplit("\n", 1)[0]),
        "offsets/1",
        "no source offsets",
    ),
    "empty offsets file": (
        lambda rec: _cut(rec / "offsets" / "3", 0),
        "offsets/3",
        "it is empty",
    ),
    "commit without offsets": (
        lambda rec: (rec / "offsets" / "1").unlink(),
        "commits/1",
        "batch 1 is committed but its offsets log file offsets/1 is missing",
    ),
    "truncated commit file": (
        lambda rec: _cut(rec / "commits" / "2", 6),
        "commits/2",
        "the commit log file of batch 2",
    ),
    "missing snapshot": (
        _delete_snapshot_listed,
        "flowspark-sinks/out.pickle",
        "the sink snapshot of output 'out' is missing, but batches up to 2 are committed",
    ),
    "snapshot lost mid-write": (
        _delete_snapshot_mid_write,
        "flowspark-sinks/out.pickle",
        "is missing",
    ),
    "truncated snapshot": (
        lambda rec: _cut(rec / "flowspark-sinks" / "out.pickle", 20),
        "flowspark-sinks/out.pickle",
        "a sink snapshot that cannot be read",
    ),
    "snapshot newer than the last commit": (
        _snapshot(5, 4),
        "flowspark-sinks/out.pickle",
        "a sink snapshot of batch 5, but the last committed batch is 2",
    ),
    "snapshot older than the last commit": (
        _snapshot(1, 0),
        "flowspark-sinks/out.pickle",
        "a sink snapshot of batch 1, but the last committed batch is 2",
    ),
    "snapshot of an uncommitted batch without the committed one": (
        _snapshot(3, 1),
        "flowspark-sinks/out.pickle",
        "a sink snapshot of batch 3 after batch 1",
    ),
    "empty state file": (
        lambda rec: _cut(rec / "state" / "0" / "1" / "3.changelog", 0),
        "state/0/1/3.changelog",
        "a keyed-state file (batch 2): it is empty",
    ),
    "truncated changelog": (
        lambda rec: _cut(rec / "state" / "0" / "0" / "2.changelog", 40),
        "state/0/0/2.changelog",
        "a keyed-state file (batch 1): it is cut short",
    ),
    "truncated checkpoint zip": (
        lambda rec: _cut(rec / "state" / "0" / "0" / "1.zip", 60),
        "state/0/0/1.zip",
        "not a whole zip file",
    ),
    "truncated table": (
        lambda rec: _cut(rec / "state" / "0" / "1" / "SSTs" / "000008-ab.sst", 150),
        "state/0/1/SSTs/000008-ab.sst",
        "no table footer",
    ),
    "state version missing": (
        lambda rec: (rec / "state" / "0" / "0" / "2.changelog").unlink(),
        "state/0/0",
        "the keyed state lacks version(s) 2, which the last committed batch 2 needs",
    ),
    "state partition missing": (
        lambda rec: shutil.rmtree(rec / "state" / "0" / "1"),
        "state/0/1",
        "the keyed state of partition 1 is missing",
    ),
    "damaged journal": (
        lambda rec: _flip(rec / "numaflow-http" / "in.journal", 30),
        "numaflow-http/in.journal",
        "valid records end at byte 8, but",
    ),
    "damaged run token": (
        lambda rec: (rec / "flowspark-sinks" / "js.token").write_text(""),
        "flowspark-sinks/js.token",
        "the run token of output 'js' is empty or damaged",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_check_names_each_damaged_file(tmp_path, capsys, damage):
    rec = build(tmp_path / "rec")
    spoil, name, says = DAMAGE[damage]
    spoil(rec)
    code, out, err = run(capsys, str(rec), "--check")
    assert code == 1
    assert len(err) == 1, err  # one line per problem, and only this one
    assert err[0].startswith(f"{rec}/{name}: "), err
    assert says in err[0]
    assert out.splitlines()[-1].startswith("check: 1 problem(s): restore the whole directory")
    code, _, err = run(capsys, str(rec))  # without --check: a report, exit 0
    assert (code, err) == (0, [])


def test_a_snapshot_is_read_without_running_its_code(tmp_path, capsys):
    rec = build(tmp_path / "rec")
    flag = tmp_path / "ran"
    states = [_Explosive(str(flag)), _Plain()]
    generations = {"prev": None, "last": (2, states)}
    (rec / "flowspark-sinks" / "out.pickle").write_bytes(pickle.dumps(generations))
    code, out, _ = run(capsys, str(rec), "--check")
    assert code == 0
    assert not flag.exists()
    # stand-ins name what the pickle calls or builds
    assert f"batch 2, 2 part(s): <pathlib.Path.touch>, <{__name__}._Plain>" in out


class _Plain:
    """A user's class: its module need not be importable to inspect a snapshot."""

    def __init__(self) -> None:
        self.offset = 1


class _Explosive:
    """Unpickling it would create a file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def test_a_directory_from_before_steps_were_kept_names_its_only_input(tmp_path, capsys):
    rec = build(tmp_path / "rec")
    source = {"inputs": {"0": {"parts": {"d.txt": 300}}}, "t": T0, "read": {"lines": 1.0}}
    (rec / "offsets" / "2").write_text(f'v1\n{{"batchTimestampMs": {T0}}}\n{json.dumps(source)}')
    code, out, _ = run(capsys, str(rec))
    assert code == 0
    assert "  lines (100% read)" in out.splitlines()


# -- the lock ----------------------------------------------------------------------------------


def test_the_lock_shows_the_run_holding_it_then_free(tmp_path, capsys):
    rec = build(tmp_path / "rec")
    lock = FileLock(Location.parse(str(rec)))
    try:
        code, out, _ = run(capsys, str(rec), "--check")
        [line] = [line for line in out.splitlines() if line.startswith("lock:")]
        assert line.startswith("lock: held by host ")
        assert f"pid {os.getpid()}, started " in line and line.endswith("(flowspark.lock)")
        assert code == 0  # a lock file is no damage
        assert "check: a run holds this directory; its files change while it runs" in out
        facts = inspect_directory(str(rec)).facts["lock"]
        assert (facts["held"], facts["held_by_pids"]) == (True, [os.getpid()])
    finally:
        lock.release()
    _, out, _ = run(capsys, str(rec))
    assert "lock: free (flowspark.lock)" in out.splitlines()


def test_a_lease_shows_its_holder_until_it_expires(tmp_path, capsys):
    rec = build(tmp_path / "rec")
    holder = {"host": "elsewhere", "pid": 42, "started": time.time() - 60, "boot": "b"}
    lease = {**holder, "token": "t", "expires": time.time() + 30}
    (rec / LEASE_NAME).write_text(json.dumps(lease))
    _, out, _ = run(capsys, str(rec))
    [line] = [line for line in out.splitlines() if line.startswith("lock:")]
    assert line.startswith("lock: held by host elsewhere, pid 42, started ")
    assert "(lease flowspark.lease, until " in line
    (rec / LEASE_NAME).write_text(json.dumps({**lease, "expires": time.time() - 1}))
    _, out, _ = run(capsys, str(rec))
    assert "lock: free (lease flowspark.lease of host elsewhere, pid 42" in out


# -- what it reads, and what it refuses -----------------------------------------------------------


def test_a_file_uri_reads_the_same_directory(tmp_path, capsys):
    rec = build(tmp_path / "rec")
    _, by_path, _ = run(capsys, str(rec), "--json")
    code, by_uri, _ = run(capsys, f"file://{rec}", "--json")
    assert code == 0
    assert json.loads(by_uri) == json.loads(by_path)


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("missing", "no such directory"),
        ("a-file", "a file, not a recovery directory"),
        ("empty", "not a recovery directory"),
        ("unrelated", "not a recovery directory"),
        ("ftp://host/rec", "no filesystem for ftp://"),
    ],
)
def test_a_path_that_is_not_a_recovery_directory_exits_2(tmp_path, capsys, where, says):
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "unrelated").mkdir()
    (tmp_path / "unrelated" / "notes.txt").write_text("x")
    path = where if "://" in where else str(tmp_path / where)
    code, out, err = run(capsys, path, "--check")
    assert (code, out) == (2, "")
    assert len(err) == 1 and says in err[0] and err[0].startswith("python -m flowspark.recovery:")


def test_python_dash_m_runs_it(tmp_path):
    rec = build(tmp_path / "rec")
    whole = subprocess.run(
        [sys.executable, "-m", "flowspark.recovery", "inspect", str(rec), "--check"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    assert "last committed batch: 2" in whole.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "flowspark.recovery", "inspect", str(tmp_path / "nope")],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith("nope: no such directory")
    no_spark = subprocess.run(
        [sys.executable, "-c", "import sys; from flowspark.engine.recovery_cli import main; "
         "main(['inspect', sys.argv[1]]); print('pyspark' in sys.modules)", str(rec)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert no_spark.stdout.splitlines()[-1] == "False"  # inspect never imports Spark


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with S3Server(tmp_path_factory.mktemp("moto")) as server:
        server.make_bucket("recs")
        yield server


def test_an_s3a_directory_is_read_through_the_storage_layer(tmp_path, capsys, s3):
    rec = build(tmp_path / "rec")
    uri = s3.uri("recs", "rec1")
    where = Location.parse(uri)
    fs = where.filesystem()
    for path in rec.rglob("*"):
        if path.is_file():
            with fs.open_output_stream(f"{where.path}/{path.relative_to(rec)}") as f:
                f.write(path.read_bytes())
    code, out, err = run(capsys, uri, "--check")
    assert (code, err) == (0, [])
    assert "last committed batch: 2, committed " in out
    assert "secret" not in out  # the URI's keys are not shown
    with fs.open_output_stream(f"{where.path}/offsets/2") as f:
        f.write(_offsets(2)[:-5].encode())
    code, _, err = run(capsys, uri, "--check")
    assert code == 1
    assert err == [f"{where.shown}/offsets/2: the offsets log file of batch 2: line 3 is not "
                   "whole JSON (the file was cut short or changed)"]  # fmt: skip
