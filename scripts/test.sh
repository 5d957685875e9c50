#!/usr/bin/env bash
# The full test suite: lint, unit tests (no Spark), Spark integration tests on one
# local[2] session, and the SIGKILL recovery tests. Extra args go to pytest.
source "$(dirname "$0")/venv.sh"
cd "$ROOT"
"$VENV_PY" -m ruff check src tests bench examples
exec "$VENV_PY" -m pytest -q "$@"
