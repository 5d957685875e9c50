"""What several recovery test modules compare against: the output of an example run
locally (embedded Spark, from the checkout), computed once per test session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.warm_cli import WarmRun

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def local_output() -> Callable[..., str]:
    """``local_output(FLOW, *ARGS)``: the stdout of ``python -m flowspark.run FLOW ARGS``
    run locally from the checkout (asserted to exit 0). Each command runs once per
    session: the examples' output is the same in every run, and the tests that
    compare a cluster's or a Connect server's run with it only read it."""
    done: dict[tuple[str, ...], str] = {}

    def run(flow: str, *args: str) -> str:
        key = (flow, *args)
        if key not in done:
            local = WarmRun([flow, *args], cwd=ROOT)  # on the warm child (tests.warm_cli)
            assert local.wait() == 0, local.stderr()[-3000:]
            done[key] = local.stdout_path.read_text()
        return done[key]

    return run
