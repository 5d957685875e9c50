"""Keyed steps name their upstreams by input part, not by Spark partition number.

A key's clock (the least over its upstreams) must see the same upstream id for the
same input part in every micro-batch, whichever other parts had data then.
"""

from __future__ import annotations

import subprocess
import sys

from flowspark.inputs import PartitionedInput, StatefulSource
from flowspark.runtime.input_offsets import InputSpec, upstream_id
from flowspark.runtime.polling import DriverReadOffsets


class _Scripted(StatefulSource):
    def __init__(self, batches):
        self.batches = list(batches)
        self.i = 0

    def next_batch(self):
        if self.i >= len(self.batches):
            return []
        self.i += 1
        return self.batches[self.i - 1]

    def snapshot(self):
        return self.i


class _TwoParts(PartitionedInput):
    def __init__(self, script):
        self.script = script

    def list_parts(self):
        return list(self.script)

    def build_part(self, for_part, resume_state):
        part = _Scripted(self.script[for_part])
        part.i = resume_state or 0
        return part


def _splits_by_batch(script):
    spec = InputSpec(_TwoParts(script), entry=0, step_id="inp", program=b"")
    offsets = DriverReadOffsets(spec, per_batch_epochs=True, until_end=False)
    start: dict = {}
    batches = []
    for _ in range(3):
        end = offsets.latest(start, 1000)
        batches.append([s.upstream for s in offsets.splits(start, end)])
        offsets.commit(end)
        start = end
    return batches


def test_a_part_keeps_its_upstream_id_when_the_other_part_has_no_data():
    # Batch 1: both parts; batch 2: only b (a is quiet); batch 3: only a.
    script = {"a": [[1], [], [3]], "b": [[10], [20]]}
    batches = _splits_by_batch(script)
    a, b = upstream_id("inp", "a"), upstream_id("inp", "b")
    assert batches[0] == [a, b]
    assert batches[1] == [b]  # b is not renumbered as the first partition
    assert a != b


def test_upstream_ids_never_collide_with_a_keyed_stages_partition_numbers():
    ids = {upstream_id("inp", str(p)) >> 32 for p in range(1000)}
    assert len(ids) == 1000
    assert min(ids) >= 1 << 30  # partition numbers of keyed stages are small


def test_the_input_planning_modules_need_no_pyspark():
    # They run in Spark's planning process, but engine/source.py is their only Spark part.
    modules = ["input_offsets", "polling", "source_watermark"]
    code = "import sys\n" + "".join(f"import flowspark.runtime.{m}\n" for m in modules)
    code += "assert 'pyspark' not in sys.modules, 'pyspark'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
