"""Benchmark jobs hand-written in plain PySpark (batch DataFrame API).

``local[2]``, ``spark.sql.shuffle.partitions=2``, UI and console progress off,
log level ERROR, session time zone UTC.

``startup_s`` = ``import pyspark`` (measured by ``harness.py``) + SparkSession
creation (JVM start).
``seconds`` = the job: the input is created inside Spark from ``spark.range(n)``
with the same formula as ``jobs.py`` (so it is part of the timed work), the
query runs and its result is collected to the driver. Checking the result in
Python is excluded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import jobs
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

NOTE = "batch DataFrame job (not Structured Streaming); input built in Spark"
T = TypeVar("T")


def _session() -> tuple[SparkSession, float]:
    """Create the local SparkSession; return it with the seconds it took."""
    t0 = time.perf_counter()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("flowspark-bench-pyspark")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark, time.perf_counter() - t0


def _run(
    query: Callable[[SparkSession, int], T],
    check: Callable[[int, T], bool],
    n_outputs: Callable[[T], int],
    n: int,
) -> dict[str, Any]:
    """Start Spark, time ``query(spark, n)`` twice, stop Spark, check both outputs.

    ``seconds`` is the first (cold) run in a fresh session, the figure that is
    comparable with one-shot runs of the other systems; ``warm_seconds`` is an
    identical second run, showing the cost once Spark's classes are loaded.
    """
    spark, session_s = _session()
    try:
        t0 = time.perf_counter()
        output = query(spark, n)
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        warm_output = query(spark, n)
        warm_seconds = time.perf_counter() - t0
    finally:
        spark.stop()
    return {
        "seconds": seconds,
        "startup_s": session_s,
        "ok": check(n, output) and check(n, warm_output),
        "outputs": n_outputs(output),
        "warm_seconds": warm_seconds,
        "note": NOTE,
    }


def _mapfilter(spark: SparkSession, n: int) -> tuple[int, int]:
    y = (F.col("id") * 3 + 1).alias("y")
    df = spark.range(n).select(y).filter(F.col("y") % 2 == 0)
    row = df.agg(F.count("*").alias("c"), F.sum("y").alias("s")).collect()[0]
    return row["c"], row["s"] or 0


def _word_col(j: int) -> Column:
    idx = (F.col("id") * jobs.WORD_MUL_LINE + j * jobs.WORD_MUL_POS) % jobs.VOCAB_SIZE
    return F.concat(F.lit("w"), idx.cast("string"))


def _wordcount(spark: SparkSession, n: int) -> list[tuple[str, int]]:
    words = [_word_col(j) for j in range(jobs.WORDS_PER_LINE)]
    lines = spark.range(n).select(F.concat_ws(" ", *words).alias("line"))
    counts = (
        lines.select(F.explode(F.split("line", " ")).alias("word"))
        .groupBy("word")
        .count()
        .collect()
    )
    return [(r["word"], r["count"]) for r in counts]


def _window_count(spark: SparkSession, n: int) -> list[tuple[str, int, int]]:
    base_us = jobs.ALIGN_TO_EPOCH_S * 1_000_000
    events = spark.range(n).select(
        F.concat(F.lit("k"), (F.col("id") % jobs.N_KEYS).cast("string")).alias("key"),
        F.timestamp_micros(F.col("id") * (jobs.EVENT_STEP_MS * 1000) + base_us).alias("ts"),
    )
    # F.window aligns to the epoch; 2024-01-01Z is a multiple of 10 s from it.
    rows = (
        events.groupBy("key", F.window("ts", f"{jobs.WINDOW_S} seconds").alias("w"))
        .count()
        .select("key", F.unix_timestamp("w.start").alias("start"), "count")
        .collect()
    )
    return [(r["key"], r["start"], r["count"]) for r in rows]


def _check_window_count(n: int, rows: list[tuple[str, int, int]]) -> bool:
    triples = [(k, jobs.window_index_of_start(start), c) for k, start, c in rows]
    return jobs.window_count_check(n, triples)


def run_mapfilter(n: int) -> dict[str, Any]:
    """``spark.range(n)`` -> ``id*3+1`` -> filter even -> count & sum."""
    return _run(_mapfilter, lambda n, kc: jobs.mapfilter_check(n, *kc), lambda kc: kc[0], n)


def run_wordcount(n: int) -> dict[str, Any]:
    """Lines built from ``spark.range`` -> ``split``/``explode`` -> ``groupBy().count()``."""
    return _run(_wordcount, jobs.wordcount_check, len, n)


def run_window_count(n: int) -> dict[str, Any]:
    """Events from ``spark.range`` -> ``groupBy(key, F.window(ts, 10 s)).count()``."""
    return _run(_window_count, _check_window_count, len, n)
