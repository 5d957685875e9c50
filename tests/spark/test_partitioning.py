"""flowspark's Python copy of Spark's hash partitioning agrees with Spark."""

from __future__ import annotations

import random

from flowspark.runtime.partitioning import spark_partition, spark_string_hash


def _random_keys(count: int) -> list[str]:
    rnd = random.Random(7)
    alphabet = "ab Z09\x1e\x1fé漢😀"
    return ["", "a", "héllo"] + [
        "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14))) for _ in range(count)
    ]


def test_hash_and_partition_match_spark(spark):
    from pyspark.sql import functions as F

    keys = _random_keys(500)
    df = spark.createDataFrame([(k,) for k in keys], "key string")
    rows = df.select("key", F.hash("key").alias("h")).collect()
    assert [(r.key, r.h) for r in rows] == [(k, spark_string_hash(k)) for k in keys]

    placed = df.repartition(5, "key").withColumn("p", F.spark_partition_id()).collect()
    assert len(placed) == len(keys)
    assert all(r.p == spark_partition(r.key, 5) for r in placed)
