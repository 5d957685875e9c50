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

# Every name of the core and stateless modules is an operator of this package (their
# ``__all__`` is the list); of the other modules, the names imported here.
from flowspark.api.dataflow import Dataflow, Stream
from flowspark.operators.core import *  # noqa: F403
from flowspark.operators.core import __all__ as _core_names
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
from flowspark.operators.stateless import *  # noqa: F403
from flowspark.operators.stateless import __all__ as _stateless_names

__all__ = [
    "Dataflow",
    "JoinEmitMode",
    "JoinInsertMode",
    "StatefulBatchLogic",
    "StatefulLogic",
    "Stream",
    "TTLCache",
    "collect",
    "count_final",
    "fold_final",
    "join",
    "max_final",
    "min_final",
    "operator",
    "reduce_final",
    "stateful",
    "stateful_flat_map",
    "stateful_map",
    *_core_names,
    *_stateless_names,
]
