#!/usr/bin/env bash
# Write requirements-lock.txt from a virtualenv's installed packages (default .venv-try,
# made by scripts/try-deps.sh). Run the suite in that venv first: the lock is what the
# README's commands and CI install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv-try}"
LOCK="$ROOT/requirements-lock.txt"
[ -x "$VENV/bin/python" ] || { echo "lock.sh: no virtualenv at $VENV" >&2; exit 2; }
{
  echo "# Exact versions the README's commands install (pip constraints: scripts/venv.sh)."
  echo "# CI last passed with these. To move to newer releases: scripts/try-deps.sh --newest,"
  echo "# then scripts/lock.sh .venv-try to write what that venv holds here."
  "$VENV/bin/python" -m pip freeze --all --exclude-editable --disable-pip-version-check
} > "$LOCK.new"
mv "$LOCK.new" "$LOCK"
echo "lock.sh: wrote $LOCK from $VENV"
