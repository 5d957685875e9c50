"""The steps a flow is made of: plain frozen values, no Spark.

A :class:`Step` records what the user asked for (operator kind, step id, the
user's callables and arguments) and which upstream stream(s) feed it. The plan
layer validates and orders them; the engine and runtime decide how they run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Family = Literal["input", "stateless", "exchange", "keyed", "output"]
# How a windowed step accumulates a window's values: the reducer folds each value
# into the first, the builder's value folds them, a list sorted by time collects
# them, a Numaflow handler reads them as a stream, or a logic object per window
# (bytewax 0.21's ``WindowLogic``) takes them.
Aggregation = Literal["reduce", "fold", "collect", "handler", "logic"]


@dataclass(frozen=True)
class OperatorKind:
    """What the plan, the stage and the logic factory need to know of an operator.

    ``family``: ``input``/``output`` end a flow; ``stateless`` steps fuse into
    one Python pass; an ``exchange`` moves items to other partitions; a ``keyed``
    step shuffles by key and keeps state. ``applies``: how a stateless step's
    function meets a list of items (``map``, ``filter``, ``filter_map``,
    ``flat_map``, ``flat_map_batch`` (the function gets the whole list),
    ``inspect``, ``inspect_epoch``, ``inspect_worker``, ``inspect_debug``,
    ``branch``, ``chunk`` for a built step taking a whole list at once; ``None``:
    items pass on).
    ``fn``: the ``Step.fns`` entry holding the function, or ``None`` when the
    runtime builds it from the step's arguments. ``state_per_key``: a keyed
    step whose state is kept per key rather than in buckets of keys.
    ``windowed``: a keyed step that gathers each key's values into windows;
    ``late_port``: the step has a second output (slot 1, ``.late``) for the items
    that came after their windows closed, which the run counts per step;
    ``meta_port``: a third output (slot 2, ``.meta``) with each closed window's
    metadata, filled only when it leads to an output;
    ``aggregates``: how a windowed step accumulates a window's values
    (:data:`Aggregation`; ``None`` for a step without windows). ``effect``: a
    step called for its effect (an inspector): a flow may end at one instead of
    at an output, as bytewax 0.21 allows. ``any_clock``: a keyed step that runs on
    whichever clock the flow has (it only asks to be woken in the next micro-batch).

    >>> operator("map").applies, operator("reduce").family
    ('map', 'keyed')
    >>> operator("inspect").effect, operator("map").effect
    (True, False)
    >>> op = operator("fold_window")
    >>> op.windowed, op.late_port, op.aggregates
    (True, True, 'fold')
    """

    name: str
    family: Family
    applies: str | None = None
    fn: str | None = None
    state_per_key: bool = False
    windowed: bool = False
    late_port: bool = False
    meta_port: bool = False
    aggregates: Aggregation | None = None
    effect: bool = False
    any_clock: bool = False


def _kinds(*kinds: OperatorKind) -> dict[str, OperatorKind]:
    return {kind.name: kind for kind in kinds}


OPERATORS: dict[str, OperatorKind] = _kinds(
    OperatorKind("input", "input"),
    OperatorKind("output", "output"),
    OperatorKind("map", "stateless", "map", "mapper"),
    OperatorKind("filter", "stateless", "filter", "predicate"),
    OperatorKind("filter_map", "stateless", "filter_map", "mapper"),
    OperatorKind("flat_map", "stateless", "flat_map", "mapper"),
    OperatorKind("flat_map_batch", "stateless", "flat_map_batch", "mapper"),
    OperatorKind("inspect", "stateless", "inspect", "inspector", effect=True),
    OperatorKind("inspect_epoch", "stateless", "inspect_epoch", "inspector", effect=True),
    OperatorKind("inspect_worker", "stateless", "inspect_worker", "inspector", effect=True),
    # inspector(step_id, item, epoch, worker), as bytewax 0.21's inspect_debug.
    OperatorKind("inspect_debug", "stateless", "inspect_debug", "inspector", effect=True),
    OperatorKind("branch", "stateless", "branch", "predicate"),
    OperatorKind("merge", "stateless"),
    # Numaflow datums: the runtime builds these steps' functions from their arguments.
    OperatorKind("to_datums", "stateless", "map"),
    OperatorKind("key_datums", "stateless", "map"),
    OperatorKind("route", "stateless", "filter"),
    OperatorKind("map_stream", "stateless", "chunk"),
    OperatorKind("batch_map", "stateless", "chunk"),
    OperatorKind("redistribute", "exchange"),
    OperatorKind("reduce", "keyed"),
    OperatorKind("stateful_map", "keyed"),
    OperatorKind("batch", "keyed"),
    # A logic object per key (bytewax 0.21's StatefulBatchLogic), rebuilt from its snapshot.
    OperatorKind("stateful_batch", "keyed"),
    OperatorKind("reduce_window", "keyed", windowed=True, late_port=True, aggregates="reduce"),
    OperatorKind("fold_window", "keyed", windowed=True, late_port=True, aggregates="fold"),
    OperatorKind("collect_window", "keyed", windowed=True, late_port=True, aggregates="collect"),
    # bytewax 0.21's windows: a window logic object per window id, the metadata of
    # each window as it closes, items late by the watermark on ``.late``.
    OperatorKind(
        "window", "keyed", windowed=True, late_port=True, meta_port=True, aggregates="logic"
    ),
    # A Numaflow cycle's vertices: what is still on the cycle after a micro-batch's
    # rounds is the key's state.
    OperatorKind("cycle", "keyed", any_clock=True),
    # Numaflow's keyed kinds keep their handlers' write-ahead log per key.
    OperatorKind("accumulate", "keyed", state_per_key=True),
    OperatorKind(
        "reduce_stream",
        "keyed",
        state_per_key=True,
        windowed=True,
        late_port=True,
        aggregates="handler",
    ),
)
"""Every operator kind a :class:`Step` can have, by name."""


def operator(kind: str) -> OperatorKind:
    """The :class:`OperatorKind` named ``kind``; an unknown kind raises ``ValueError``."""
    try:
        return OPERATORS[kind]
    except KeyError:
        raise ValueError(
            f"unknown operator kind {kind!r}; expected one of {sorted(OPERATORS)}"
        ) from None


@dataclass(frozen=True)
class Port:
    """One output of a step: ``slot`` 0 normally, 0/1 for a branch's trues/falses."""

    step: Step
    slot: int = 0


@dataclass(frozen=True, eq=False)
class Step:
    """One operator application in a flow.

    ``fns`` holds the user's callables by role (``"mapper"``, ``"predicate"``,
    …); ``args`` holds the other arguments (an input or output config, sizes).
    Steps compare by identity: two maps with equal functions are still two steps.
    """

    kind: str
    step_id: str
    upstreams: tuple[Port, ...] = ()
    fns: dict[str, Any] = field(default_factory=dict)
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def operator(self) -> OperatorKind:
        """This step's :class:`OperatorKind` (an unknown kind raises ``ValueError``)."""
        return operator(self.kind)

    def __repr__(self) -> str:
        return f"Step({self.kind!r}, {self.step_id!r})"
