#!/usr/bin/env bash
# flowspark's main job: the quickstart flow on embedded local Spark, printing its results.
source "$(dirname "$0")/venv.sh"
cd "$ROOT"
"$VENV_PY" -m flowspark.run examples/quickstart.py --bounded "$@"
# Once per Java and pyspark (~30 s, after the results): Spark's classes in one file
# that the next runs' JVMs map at start, ~3 s sooner (FLOWSPARK_CLASS_ARCHIVE=0: off).
"$VENV_PY" -m flowspark.engine.class_archive
