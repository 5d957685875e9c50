#!/usr/bin/env bash
# flowspark's main job: the quickstart flow on embedded local Spark, printing its results.
source "$(dirname "$0")/venv.sh"
cd "$ROOT"
exec "$VENV_PY" -m flowspark.run examples/quickstart.py --bounded "$@"
