"""The fenced blocks of the Markdown docs, and what runs them.

Every block that holds commands (```bash, ```python, …) has an HTML comment on the
line just before its fence saying who runs it (``tests/unit/test_unit_docs.py``
checks that each one does):

- ``<!-- run-by: tests/spark/test_docs_commands.py::test_name -->``: that test runs
  the block's own text (it gets it from :func:`blocks_for`);
- ``<!-- needs: nats-server; run-by: tests/…::test_name -->``: the block needs a
  service, and that test starts it and runs the same commands;
- ``<!-- run-by: .ci/run -->``: CI runs each of the block's lines as written;
- ``<!-- not-run: why -->``: nothing runs it, for the reason given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMMAND_LANGS = frozenset({"bash", "sh", "shell", "console", "python", "py", "pycon"})
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<body>.*?)\s*-->\s*$")
_KEYS = ("run-by", "needs", "not-run")


def doc_files() -> list[Path]:
    """The Markdown files whose blocks are checked: README, ARCHITECTURE, docs/, bench/."""
    files = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "bench" / "README.md"]
    return [f for f in files if f.exists()] + sorted((ROOT / "docs").glob("*.md"))


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its marker."""

    path: str  # relative to the repository, e.g. "docs/recovery.md"
    line: int  # the opening fence's line, from 1
    lang: str
    text: str
    marker: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def is_command(self) -> bool:
        return self.lang in COMMAND_LANGS


def parse_marker(body: str) -> dict[str, str]:
    """``needs: x; run-by: y`` -> ``{"needs": "x", "run-by": "y"}`` (unknown keys kept)."""
    marker: dict[str, str] = {}
    for part in body.split(";"):
        key, sep, value = part.partition(":")
        if sep:
            marker[key.strip()] = value.strip()
    return marker


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file, each with the marker just before it."""
    lines = path.read_text().splitlines()
    rel = path.relative_to(ROOT).as_posix()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence = opening["fence"]
        lang = opening["info"].strip().split(" ")[0] if opening["info"].strip() else ""
        marker: dict[str, str] = {}
        if i > 0 and (m := _MARKER.match(lines[i - 1])):
            marker = parse_marker(m["body"])
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j])
            j += 1
        found.append(Block(rel, i + 1, lang, "\n".join(body) + "\n", marker))
        i = j + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in doc_files() for block in blocks(path)]


def run_by_id(request: Any) -> str:
    """``tests/spark/test_docs_commands.py::test_name`` for the running test."""
    path = Path(request.node.path).resolve().relative_to(ROOT).as_posix()
    return f"{path}::{request.node.originalname}"


def blocks_for(request: Any) -> list[Block]:
    """The blocks whose marker says the running test runs them (at least one)."""
    me = run_by_id(request)
    mine = [b for b in all_blocks() if b.marker.get("run-by") == me]
    assert mine, f"no block in the docs says run-by: {me}"
    return mine
