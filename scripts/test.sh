#!/usr/bin/env bash
# The full test suite: ruff (lint and format check), mypy, unit tests and doctests (no
# Spark), Spark integration tests on one local[2] session, and the SIGKILL recovery
# tests. Extra args go to pytest.
#
#   ./scripts/test.sh          # everything
#   ./scripts/test.sh --fast   # ruff, mypy, unit tests and doctests only: no Spark starts
#
# pytest runs in $FLOWSPARK_TEST_WORKERS processes (pytest-xdist; default: the
# machine's cores, at most 4), a test file to a process, so a file's shared fixtures
# (a broker, a reference run) are set up once. Each process's Spark tests share one
# local[2] session. FLOWSPARK_TEST_WORKERS=0 runs everything in one process.
source "$(dirname "$0")/venv.sh"
cd "$ROOT"
fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi
started=$SECONDS
cores=$(nproc 2>/dev/null || echo 2)
workers=${FLOWSPARK_TEST_WORKERS:-$((cores < 4 ? cores : 4))}
parallel=(-n "$workers" --dist loadfile)
[ "$workers" = 0 ] && parallel=(-p no:xdist)
"$VENV_PY" -m ruff check src tests bench examples
"$VENV_PY" -m ruff format --check src tests bench examples
"$VENV_PY" -m mypy  # the folders [tool.mypy] in pyproject.toml names
status=0
if [ "$fast" = 1 ]; then
  "$VENV_PY" -m pytest -q "${parallel[@]}" -m "not spark and not recovery" tests/unit src "$@" || status=$?
else
  # Spark's classes for the drivers' JVMs, mapped from one file: ~3 s off each of the
  # suite's JVM starts (built once per Java and pyspark, ~30 s; kept in ~/.cache).
  "$VENV_PY" -m flowspark.engine.class_archive
  "$VENV_PY" -m pytest -q "${parallel[@]}" "$@" || status=$?
fi
took=$((SECONDS - started))
echo "test.sh: $([ "$fast" = 1 ] && echo "--fast " || echo "")wall time $((took / 60)) min $((took % 60)) s" >&2
exit "$status"
