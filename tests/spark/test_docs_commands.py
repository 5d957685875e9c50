"""The command blocks of README.md and docs/*.md, run as written.

Each test runs the blocks whose marker names it (``<!-- run-by: THIS_FILE::test -->``,
see tests/docs_blocks.py), taking their text from the docs, in a scratch directory
where ``examples/`` and ``tests/`` are the repository's. ``python -m MODULE …`` and
``python FILE`` lines run in this process (on the shared ``local[2]`` session, so
no Spark starts per line); a Python block runs as a script, or, when its first line
is ``# NAME.py``, is saved as that file for the shell lines that follow.
"""

from __future__ import annotations

import io
import json
import runpy
import shlex
import subprocess
import sys
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.docs_blocks import ROOT, Block, blocks_for
from tests.numaflow_log import log_records

pytestmark = pytest.mark.spark


@dataclass
class Ran:
    """One shell line's outcome: its words, exit status and what it printed."""

    argv: list[str]
    code: int
    out: str
    err: str


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch directory where the docs' relative paths resolve as in a checkout."""
    for name in ("examples", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _logical_lines(text: str) -> list[str]:
    """Lines joined at trailing backslashes; blank and comment-only lines dropped."""
    lines, pending = [], ""
    for raw in text.splitlines():
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        line = (pending + raw).strip()
        pending = ""
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def _words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|<>&;")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def _python(argv: list[str], stdin: str | None) -> int:
    """``python -m MODULE ARGS`` or ``python FILE ARGS``, in this process."""
    saved_argv, saved_stdin = sys.argv[:], sys.stdin
    try:
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        if argv[1] == "-m":
            sys.argv = [argv[2], *argv[3:]]
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        else:
            sys.argv = argv[1:]
            runpy.run_path(argv[1], run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, sys.stdin = saved_argv, saved_stdin
    return 0


def run_shell(block: Block, capfd: pytest.CaptureFixture) -> list[Ran]:
    """Each command line of a bash block; the ones a test can run in-process only."""
    assert block.lang == "bash", f"{block.where}: not a bash block"
    done = []
    for line in _logical_lines(block.text):
        words = _words(line)
        stdin = None
        if "|" in words:  # printf FMT | python …
            cut = words.index("|")
            left, words = words[:cut], words[cut + 1 :]
            assert left[0] == "printf" and len(left) == 2, f"{block.where}: {line!r}"
            stdin = subprocess.run(left, capture_output=True, text=True, check=True).stdout
        operators = {"|", "<", ">", "&", ";", "&&", "||", ">>"}
        assert words[0] == "python" and not operators & set(words), (
            f"{block.where}: no in-process way to run {line!r}: "
            "mark the block (see tests/docs_blocks.py)"
        )
        capfd.readouterr()
        code = _python(words, stdin)
        captured = capfd.readouterr()
        done.append(Ran(words, code, captured.out, captured.err))
        assert code == 0, f"{block.where}: {line!r} exited {code}:\n{captured.err[-3000:]}"
    return done


def run_python(block: Block, capfd: pytest.CaptureFixture) -> tuple[dict, str]:
    """A Python block: saved as ``NAME.py`` when its first line says so, else run."""
    assert block.lang == "python", f"{block.where}: not a Python block"
    first = block.text.splitlines()[0].strip()
    if first.startswith("# ") and first.endswith(".py") and " " not in first[2:]:
        Path(first[2:]).write_text(block.text)
        return {}, ""
    namespace: dict = {"__name__": "docs_block"}
    capfd.readouterr()
    exec(compile(block.text, block.where, "exec"), namespace)  # noqa: S102 - the doc's code
    return namespace, capfd.readouterr().out


def _split(blocks: list[Block], *langs: str) -> list[Block]:
    assert [b.lang for b in blocks] == list(langs), [(b.where, b.lang) for b in blocks]
    return blocks


def test_readme_bytewax_quickstart(request, workdir, capfd):
    flow_block, cli_block = _split(blocks_for(request), "python", "bash")
    _, printed = run_python(flow_block, capfd)
    assert printed == "1\n3\n"  # as its comment says
    once, resumable = run_shell(cli_block, capfd)
    assert "long word: " in once.out
    # The batch job and the checkpointed stream print the same lines.
    assert sorted(once.out.splitlines()) == sorted(resumable.out.splitlines())
    assert (workdir / "ckpt" / "commits").is_dir()


def test_readme_numaflow_quickstarts(request, workdir, capfd):
    udf_block, udf_file_block, pipeline_block = _split(
        blocks_for(request), "python", "bash", "bash"
    )
    _, printed = run_python(udf_block, capfd)
    assert printed == "[b'a', b'b', b'c']\n"
    [udf_file] = run_shell(udf_file_block, capfd)
    lines = [json.loads(line) for line in udf_file.out.splitlines()]
    assert [(d["keys"], d["value"]) for d in lines] == [(["odd"], "1"), (["even"], "2")]
    [pipeline] = run_shell(pipeline_block, capfd)
    records = log_records(pipeline.out.splitlines())
    assert len(records) == 5  # the generator's rpu: what it has at once
    assert all(set(json.loads(r["payload"])) == {"id", "value"} for r in records)


def test_time_page(request, workdir, capfd):
    [block] = _split(blocks_for(request), "python")
    namespace, printed = run_python(block, capfd)
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    assert sorted(namespace["out"]) == [("a", 1), ("a", 1), ("a", 2)]
    assert namespace["late"] == [("a", t0 + timedelta(seconds=3))]
    assert printed.startswith("[('a', 1), ('a', 1), ('a', 2)] [('a', datetime.datetime(")


def test_time_page_live_input(request, workdir, capfd):
    [block] = _split(blocks_for(request), "python")
    namespace, printed = run_python(block, capfd)
    assert printed == "20 0\n"  # as its comment says: every reading counted, none late
    assert namespace["late"] == []


def test_numaflow_page(request, workdir, capfd):
    flow_block, example_block, pipeline_block = _split(
        blocks_for(request), "python", "bash", "bash"
    )
    namespace, printed = run_python(flow_block, capfd)
    assert printed == "[(['ann'], b'c'), (['bob'], b'x')]\n"
    example, udf_file = run_shell(example_block, capfd)
    assert "in the minute from" in example.out
    assert [json.loads(line)["value"] for line in udf_file.out.splitlines()] == ["1", "2"]
    [pipeline] = run_shell(pipeline_block, capfd)
    assert len(log_records(pipeline.out.splitlines())) == 5


def test_watching_page(request, workdir, capfd):
    [block] = _split(blocks_for(request), "bash")
    run, mermaid, page = run_shell(block, capfd)
    figures = [json.loads(line) for line in (workdir / "progress.jsonl").read_text().splitlines()]
    assert figures and sum(f["steps"]["poem"]["out"] for f in figures) > 0
    assert "\nflowchart TD\n" in mermaid.out
    assert "<svg" in (workdir / "flow.html").read_text()


def test_recovery_page(request, workdir, capfd):
    [block] = _split(blocks_for(request), "bash")
    run, inspected, checked = run_shell(block, capfd)
    assert "long word: " in run.out
    assert "ckpt" in inspected.out and inspected.code == checked.code == 0


@pytest.fixture
def nats_url(tmp_path_factory: pytest.TempPathFactory):
    from tests.nats_server import NatsServer

    with NatsServer(tmp_path_factory.mktemp("nats") / "store") as server:
        yield server.url


def test_jetstream_page(request, workdir, capfd, nats_url):
    from tests.nats_server import add_stream, publish, read_all

    flow_file, cli_block = _split(blocks_for(request), "python", "bash")
    doc_url = "nats://127.0.0.1:4222"
    assert doc_url in flow_file.text
    run_python(replace(flow_file, text=flow_file.text.replace(doc_url, nats_url)), capfd)
    add_stream(nats_url, "ORDERS", ["orders.>"])
    add_stream(nats_url, "TOTALS", ["totals.>"], duplicate_window=3600.0)
    publish(nats_url, [(f"orders.{n}", f"order {n}".encode(), None) for n in range(3)])
    run_shell(cli_block, capfd)
    publish(nats_url, [("orders.3", b"order 3", None)])
    run_shell(cli_block, capfd)  # "run again for what came since"
    written = read_all(nats_url, "TOTALS")
    assert [payload for _, payload, _ in written] == [f"ORDER {n}".encode() for n in range(4)]
    assert {subject for subject, _, _ in written} == {"totals.all"}
