"""One embedded ``local[2]`` Spark session for every Spark test."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def spark():
    from flowspark.engine.session import get_session

    return get_session("local[2]")
