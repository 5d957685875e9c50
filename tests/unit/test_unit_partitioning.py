"""Spark's hash partitioning in Python, and the whole-input packing that relies on it.

The hash itself is checked against Spark in ``tests/spark/test_partitioning.py``;
the values below were read from Spark 4.3's ``hash()``.
"""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

from flowspark.api.dataflow import Dataflow
from flowspark.connectors.memory import TestingInput, TestingOutput
from flowspark.plan.graph import build_plan
from flowspark.runtime.codec import BUCKET_SEPARATOR, KEY_SEPARATOR, decode_items, decode_ordered
from flowspark.runtime.partitioning import key_for_partition, spark_partition, spark_string_hash
from flowspark.runtime.stage import StageProgram
from flowspark.runtime.task import KeyedBuffer


def test_hash_matches_values_read_from_spark():
    # SELECT hash(''), hash('a'), hash('héllo'), hash('port\x1fkey') in Spark 4.3
    assert spark_string_hash("") == 142593372
    assert spark_string_hash("a") == 1485273170
    assert spark_string_hash("héllo") == 1212979866
    assert spark_string_hash("3\x1fkey") == spark_string_hash("3\x1fkey")


@given(st.text(max_size=40), st.integers(min_value=1, max_value=64))
def test_partition_is_in_range_and_stable(key, partitions):
    p = spark_partition(key, partitions)
    assert 0 <= p < partitions
    assert spark_partition(key, partitions) == p


@given(st.integers(min_value=1, max_value=16), st.data())
def test_key_for_partition_lands_on_that_partition(partitions, data):
    partition = data.draw(st.integers(min_value=0, max_value=partitions - 1))
    key = key_for_partition("7" + BUCKET_SEPARATOR, partition, partitions)
    assert key.startswith("7" + BUCKET_SEPARATOR)
    assert spark_partition(key, partitions) == partition


def _keyed_program(partitions: int) -> tuple[StageProgram, int]:
    flow = Dataflow()
    flow.input("inp", TestingInput([]))
    flow.stateful_map("state", lambda: 0, lambda s, v: (s, v))
    flow.output("out", TestingOutput([]))
    plan = build_plan(flow)
    program = StageProgram.for_level(plan, 0, key_partitions=partitions)
    (port,) = program.keyed
    return program, port


@given(
    st.lists(st.tuples(st.text(max_size=6), st.integers()), max_size=60),
    st.integers(min_value=1, max_value=8),
)
def test_whole_input_rows_carry_each_key_to_its_own_partition(items, partitions):
    program, port = _keyed_program(partitions)
    buffer = KeyedBuffer(program, whole=True)
    buffer.add(port, items, order=5)
    seen: dict[str, list[int]] = {}
    for row_port, row_key, data in buffer.drain():
        assert row_port == port
        order, payload = decode_ordered(data)
        assert order == 5
        for key, encoded in pickle.loads(payload):
            # The row goes where Spark would have sent the key on its own.
            own_partition = spark_partition(f"{port}{KEY_SEPARATOR}{key}", partitions)
            assert spark_partition(row_key, partitions) == own_partition
            assert key not in seen
            seen[key] = list(decode_items(encoded))
    expected: dict[str, list[int]] = {}
    for key, value in items:
        expected.setdefault(key, []).append(value)
    assert seen == expected
