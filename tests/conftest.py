"""Markers by folder: every test under ``tests/spark`` is marked ``spark`` and every
test under ``tests/recovery`` ``recovery`` (both registered in pyproject.toml), so
that ``pytest -m "not spark and not recovery"`` runs the unit tests and doctests and
starts no Spark; a doctest in ``src/`` that runs a flow is marked ``spark``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
MARKER_BY_FOLDER = {"spark": "spark", "recovery": "recovery"}
# A doctest in src/ that runs a flow (``run_main(flow)``) starts Spark: it is a ``spark``
# test too.
RUNS_A_FLOW = re.compile(r"\brun_main\(")


def _runs_a_flow(item: pytest.Item) -> bool:
    examples = getattr(getattr(item, "dtest", None), "examples", ())
    return any(RUNS_A_FLOW.search(example.source) for example in examples)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = Path(item.path).resolve().relative_to(HERE).parts[0]
        except ValueError:  # not under tests/ (a doctest in src/)
            if _runs_a_flow(item):
                item.add_marker("spark")
            continue
        marker = MARKER_BY_FOLDER.get(folder)
        if marker is not None and item.get_closest_marker(marker) is None:
            item.add_marker(marker)


@pytest.fixture()
def moto_server(tmp_path: Path):
    """moto's server (S3, SQS …) on a loopback port, for one test."""
    from tests.s3_server import S3Server

    with S3Server(tmp_path) as server:
        yield server
