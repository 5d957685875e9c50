"""The steps a flow is made of: plain frozen values, no Spark.

A :class:`Step` records what the user asked for (operator kind, step id, the
user's callables and arguments) and which upstream stream(s) feed it. The plan
layer validates and orders them; the engine and runtime decide how they run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Operators that keep no state and fuse into one Python stage.
STATELESS_KINDS = frozenset(
    {
        "map",
        "filter",
        "filter_map",
        "flat_map",
        "inspect",
        "inspect_epoch",
        "inspect_worker",
        "branch",
        "merge",
        "map_stream",
        "output",
    }
)


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

    def __repr__(self) -> str:
        return f"Step({self.kind!r}, {self.step_id!r})"
