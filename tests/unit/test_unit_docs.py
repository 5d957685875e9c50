"""The docs hold together: a short README, links that resolve, nothing outside the
repository, and every command block run by a test or marked with why not.

Markers and blocks: tests/docs_blocks.py. The blocks themselves run in
tests/spark/test_docs_commands.py (and the tests their markers name).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.docs_blocks import ROOT, Block, all_blocks, doc_files, parse_marker

DOC_TESTS = ("tests/spark/test_docs_commands.py", "tests/unit/test_unit_docs.py")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
# Files the repository must not point at (spelt in pieces so this file passes).
_OUTSIDE = [
    re.compile(re.escape("DESIGN" + ".md")),
    re.compile(re.escape("STYLE" + ".md")),
    re.compile(re.escape("../" + "shared")),
    re.compile(re.escape("/work/" + "shared")),
    re.compile(re.escape("shared/" + "spec")),
    re.compile(r"\b(?:py)?numaflow-[\w.-]+\." + "txt\\b"),
    re.compile(r"\bbytewax-[\w.-]+\." + "txt\\b"),
]
_SKIP_DIRS = {".git", ".hypothesis", ".pytest_cache", ".ruff_cache", "__pycache__"}
_TEXT = {".md", ".py", ".sh", ".yaml", ".yml", ".toml", ".cfg", ".txt", ".properties", ""}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _repo_text_files() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if any(p in _SKIP_DIRS or p.startswith(".venv") or p.endswith(".egg-info") for p in parts):
            continue
        if any(p.startswith(".venv") for p in parts) or "results-" in path.name:
            continue
        if path.is_file() and path.suffix in _TEXT and path.stat().st_size < 2_000_000:
            found.append(path)
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors, fenced = set(), False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (m := _HEADING.match(line)):
            anchors.add(slug(m[1]))
    return anchors


def _prose(path: Path) -> str:
    """The file without its fenced blocks (links inside code are not links)."""
    kept, fenced = [], False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def test_the_readme_is_at_most_250_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


@pytest.mark.parametrize("doc", doc_files(), ids=_rel)
def test_every_relative_link_resolves_inside_the_repository(doc: Path):
    broken = []
    for target in _LINK.findall(_prose(doc)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        if not linked.is_relative_to(ROOT) or not linked.exists():
            broken.append(f"{target}: no such file in the repository")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading with that anchor in {_rel(linked)}")
    assert broken == [], f"{_rel(doc)}: {broken}"


def test_the_readme_links_every_docs_page():
    linked = {t.partition("#")[0] for t in _LINK.findall((ROOT / "README.md").read_text())}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages and pages - linked == set()


def test_nothing_refers_to_files_outside_the_repository():
    found = []
    for path in _repo_text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if any(p.search(line) for p in _OUTSIDE):
                found.append(f"{_rel(path)}:{number}: {line.strip()[:100]}")
    assert found == []


@pytest.mark.parametrize("doc", doc_files(), ids=_rel)
def test_every_block_names_its_language(doc: Path):
    bare = [b.where for b in all_blocks() if b.path == _rel(doc) and not b.lang]
    assert bare == [], "give each fence a language (```bash, ```python, ```text, …)"


def _function_source(test_file: Path, name: str) -> str | None:
    tree = ast.parse(test_file.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return ast.get_source_segment(test_file.read_text(), node)
    return None


def _problems(block: Block) -> list[str]:
    marker = block.marker
    unknown = set(marker) - {"run-by", "needs", "not-run"}
    if not marker:
        return ["no marker: add <!-- run-by: … --> or <!-- not-run: why -->"]
    if unknown:
        return [f"unknown marker keys {sorted(unknown)}"]
    if ("run-by" in marker) == ("not-run" in marker):
        return ["give exactly one of run-by and not-run"]
    if "not-run" in marker:
        reason = marker["not-run"]
        ok = len(reason.split()) >= 4 and "needs" not in marker
        return [] if ok else ["not-run needs a reason of a few words (and no needs:)"]
    target = marker["run-by"]
    if target == ".ci/run":
        ci = {line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()}
        commands = [line.split("#")[0].strip() for line in block.text.splitlines()]
        missing = [c for c in commands if c and c not in ci]
        return [f"not run by .ci/run as written: {missing}"] if missing else []
    file_part, sep, name = target.partition("::")
    test_file = ROOT / file_part
    if not sep or not test_file.is_file():
        return [f"run-by {target!r}: no such test file"]
    source = _function_source(test_file, name)
    if source is None:
        return [f"run-by {target!r}: no such test"]
    if file_part in DOC_TESTS:
        return [] if "blocks_for(request)" in source else [f"{target} does not read its blocks"]
    if "needs" in marker or block.path in test_file.read_text():
        return []
    return [f"{target} neither reads {block.path} nor is the block marked needs:"]


def test_every_command_block_is_run_by_a_test_or_says_why_not():
    problems = [
        f"{block.where}: {problem}"
        for block in all_blocks()
        if block.is_command
        for problem in _problems(block)
    ]
    assert problems == []


def test_the_marker_rules_themselves():
    assert parse_marker("needs: nats-server; run-by: a.py::t") == {
        "needs": "nats-server",
        "run-by": "a.py::t",
    }
    block = Block("README.md", 1, "bash", "ls\n")
    assert _problems(block) == ["no marker: add <!-- run-by: … --> or <!-- not-run: why -->"]
    assert _problems(Block("README.md", 1, "bash", "ls\n", {"not-run": "too slow"})) != []
    ci = Block("README.md", 1, "bash", "./scripts/test.sh  # all\n", {"run-by": ".ci/run"})
    assert _problems(ci) == []
    missing = Block("README.md", 1, "bash", "ls\n", {"run-by": "tests/x.py::test_y"})
    assert "no such test file" in _problems(missing)[0]
    assert slug("JetStream → map → JetStream, exactly once, 2026-11-23") == (
        "jetstream--map--jetstream-exactly-once-2026-11-23"
    )
    assert slug("Numaflow steps: the vertex watermark") == "numaflow-steps-the-vertex-watermark"
