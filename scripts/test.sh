#!/usr/bin/env bash
# The full test suite: ruff (lint and format check), mypy, unit tests and doctests (no
# Spark), Spark integration tests on one local[2] session, and the SIGKILL recovery
# tests. Extra args go to pytest.
#
#   ./scripts/test.sh          # everything
#   ./scripts/test.sh --fast   # ruff, mypy, unit tests and doctests only: no Spark starts
source "$(dirname "$0")/venv.sh"
cd "$ROOT"
fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi
started=$SECONDS
"$VENV_PY" -m ruff check src tests bench examples
"$VENV_PY" -m ruff format --check src tests bench examples
"$VENV_PY" -m mypy  # the folders [tool.mypy] in pyproject.toml names
status=0
if [ "$fast" = 1 ]; then
  "$VENV_PY" -m pytest -q -m "not spark and not recovery" tests/unit src "$@" || status=$?
else
  # Spark's classes for the drivers' JVMs, mapped from one file: ~3 s off each of the
  # suite's JVM starts (built once per Java and pyspark, ~30 s; kept in ~/.cache).
  "$VENV_PY" -m flowspark.engine.class_archive
  "$VENV_PY" -m pytest -q "$@" || status=$?
fi
took=$((SECONDS - started))
echo "test.sh: $([ "$fast" = 1 ] && echo "--fast " || echo "")wall time $((took / 60)) min $((took % 60)) s" >&2
exit "$status"
