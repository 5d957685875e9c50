#!/usr/bin/env bash
# Try flowspark with other releases of its dependencies than the lock's, in a side
# virtualenv (.venv-try, made anew), and report what breaks:
#
#   scripts/try-deps.sh --newest                    # the newest release of everything
#   scripts/try-deps.sh cloudpickle==3.0.0          # the lock, but these versions
#   scripts/try-deps.sh --newest -- tests/spark -x  # which tests to run (default: tests/unit)
#
# Prints each package whose version differs from requirements-lock.txt, then runs
# pytest; exits with pytest's code. Nothing here changes .venv or the lock
# (scripts/lock.sh .venv-try writes the lock from this venv once it passes).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-try"
LOCK="$ROOT/requirements-lock.txt"
newest=0
pins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --newest) newest=1 ;;
    *) pins+=("$1") ;;
  esac
  shift
done
[ "${1:-}" = "--" ] && shift
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(tests/unit -q)

rm -rf "$VENV"
PY="$(command -v python3.11 || command -v python3)"
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
if [ "$newest" = 1 ]; then
  "${PIP[@]}" --upgrade pip
  "${PIP[@]}" --upgrade --upgrade-strategy eager -e "$ROOT[test]" ${pins[@]+"${pins[@]}"}
else
  # The lock minus the packages named: those come as asked.
  names=()
  for pin in ${pins[@]+"${pins[@]}"}; do
    names+=("$(echo "$pin" | sed -E 's/[<>=!~ ;[].*//' | tr 'A-Z_' 'a-z-')")
  done
  grep -v '^#' "$LOCK" | while IFS= read -r line; do
    name="$(echo "$line" | sed -E 's/==.*//' | tr 'A-Z_' 'a-z-')"
    skip=0
    for n in ${names[@]+"${names[@]}"}; do [ "$n" = "$name" ] && skip=1; done
    [ "$skip" = 1 ] || echo "$line"
  done > "$VENV/constraints.txt"
  "${PIP[@]}" "$(grep -E '^pip==' "$LOCK")"
  "${PIP[@]}" -c "$VENV/constraints.txt" -e "$ROOT[test]" ${pins[@]+"${pins[@]}"}
fi

echo "try-deps: versions that differ from requirements-lock.txt:"
"$VENV/bin/python" -m pip freeze --all --exclude-editable --disable-pip-version-check \
  | sort > "$VENV/installed.txt"
grep -v '^#' "$LOCK" | sort | comm -13 - "$VENV/installed.txt" | sed 's/^/  /' || true
echo "try-deps: pytest ${tests[*]}"
cd "$ROOT"
PYSPARK_PYTHON="$VENV/bin/python" exec "$VENV/bin/python" -m pytest "${tests[@]}"
