"""bytewax 0.21's operators (``bytewax.operators``) on flowspark's engine.

A bytewax 0.21 flow runs here with its import prefix changed (``bytewax.`` →
``flowspark.``). Each operator is a function taking a step id and streams and
returning streams; a flow built with them compiles to the same kinds of steps
(and plan, levels and keyed state) as the same flow written with flowspark's
``Dataflow``/``Stream`` methods. What is here, what differs, and what is not
yet: docs/bytewax-021.md.

>>> import flowspark.operators as op
>>> from flowspark.dataflow import Dataflow
>>> from flowspark.testing import TestingSource
>>> flow = Dataflow("map_eg")
>>> s = op.input("inp", flow, TestingSource(range(3)))
>>> s = op.map("add_one", s, lambda x: x + 10)
>>> _ = op.inspect("out", s)
>>> [step.step_id for step in flow.steps]
['map_eg.inp', 'map_eg.add_one', 'map_eg.out']
"""

from flowspark.api.dataflow import Dataflow, Stream
from flowspark.operators.core import (
    BranchOut,
    KeyedStream,
    branch,
    flat_map_batch,
    input,
    inspect_debug,
    merge,
    output,
    redistribute,
    stateful_batch,
)
from flowspark.operators.joins import JoinEmitMode, JoinInsertMode, join
from flowspark.operators.keyed import (
    collect,
    count_final,
    fold_final,
    max_final,
    min_final,
    reduce_final,
    stateful,
    stateful_flat_map,
    stateful_map,
)
from flowspark.operators.logic import StatefulBatchLogic, StatefulLogic
from flowspark.operators.scoping import operator
from flowspark.operators.shims import TTLCache
from flowspark.operators.stateless import (
    enrich_cached,
    filter,
    filter_map,
    filter_map_value,
    filter_value,
    flat_map,
    flat_map_value,
    flatten,
    inspect,
    key_on,
    key_rm,
    map,
    map_value,
    raises,
)

__all__ = [
    "BranchOut",
    "Dataflow",
    "JoinEmitMode",
    "JoinInsertMode",
    "KeyedStream",
    "StatefulBatchLogic",
    "StatefulLogic",
    "Stream",
    "TTLCache",
    "branch",
    "collect",
    "count_final",
    "enrich_cached",
    "filter",
    "filter_map",
    "filter_map_value",
    "filter_value",
    "flat_map",
    "flat_map_batch",
    "flat_map_value",
    "flatten",
    "fold_final",
    "input",
    "inspect",
    "inspect_debug",
    "join",
    "key_on",
    "key_rm",
    "map",
    "map_value",
    "max_final",
    "merge",
    "min_final",
    "operator",
    "output",
    "raises",
    "redistribute",
    "reduce_final",
    "stateful",
    "stateful_batch",
    "stateful_flat_map",
    "stateful_map",
]
