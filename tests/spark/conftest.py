"""One embedded ``local[2]`` Spark session for every Spark test, and ``run_example``."""

from __future__ import annotations

import runpy
from collections.abc import Callable

import pytest

from tests.docs_blocks import ROOT


@pytest.fixture(scope="session", autouse=True)
def spark():
    from flowspark.engine.session import get_session

    return get_session("local[2]")


@pytest.fixture
def run_example(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], list[str]]:
    """``run_example("bytewax021_wordcount.py")`` runs that file of ``examples/`` from the
    repository root (where its data paths point) with ``run_main``, as ``python -m
    flowspark.run examples/<file>`` does, and returns the lines it printed."""

    def run(name: str) -> list[str]:
        from flowspark.testing import run_main

        monkeypatch.chdir(ROOT)
        flow = runpy.run_path(str(ROOT / "examples" / name))["flow"]
        capsys.readouterr()  # only what the run prints
        run_main(flow)
        return capsys.readouterr().out.splitlines()

    return run
