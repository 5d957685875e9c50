"""Datums in flows: keying them, routing them by tags, and the map-stream step that
turns each into messages (making them from plain items: :mod:`.convert`; the batch
map step: :mod:`.batch_map`).

These are the callables the Numaflow operators put into ordinary flow steps,
so they run fused in the stateless stages like any ``map`` or ``filter``.

>>> from datetime import datetime, timezone
>>> t = datetime(2024, 1, 1, tzinfo=timezone.utc)
>>> d = Datum(["user-1"], b"hello", t, t, tags=["b"])
>>> TagRoute(["a", "b"], "and")(d), TagRoute(["a"], "not")(d)
(False, True)
>>> DatumKeyer("accumulate 'a'", keyed=False)(d)[1].keys
['NON_KEYED_STREAM']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from flowspark.api.udf.checks import check_route, tags_match
from flowspark.api.udf.types import DROP, Datum
from flowspark.runtime.numaflow.batch_map import BatchMapRunner
from flowspark.runtime.numaflow.convert import DatumMaker, step_datum, step_datums
from flowspark.runtime.numaflow.keyed import routing_key
from flowspark.runtime.numaflow.messages import child_datum
from flowspark.runtime.numaflow.run import HandlerStep, run_map_stream

__all__ = ["DatumKeyer", "TagRoute", "MapStreamRunner", "NON_KEYED", "BUILT_STEPS"]

# Numaflow's key for every datum of a ``keyed: false`` reduce.
NON_KEYED = "NON_KEYED_STREAM"


class DatumKeyer:
    """``datum -> (routing key, datum)``: what a keyed Numaflow step groups by.

    With ``keyed=False`` every datum gets Numaflow's ``NON_KEYED_STREAM`` key.
    """

    def __init__(self, what: str, keyed: bool = True) -> None:
        self.what, self.keyed = what, keyed

    def __call__(self, item: Any) -> tuple[str, Datum]:
        datum = step_datum(item, self.what)
        if not self.keyed:
            datum = Datum._make([NON_KEYED], *datum._fields()[1:])  # the fields after keys
        return routing_key(datum._keys), datum


class TagRoute:
    """Numaflow's conditional forwarding: keep datums whose tags match.

    ``or`` (default): any of ``tags``; ``and``: all of them; ``not``: none of them.
    No ``tags`` at all forwards everything. Untagged datums have tags ``[]``.
    """

    def __init__(self, tags: Sequence[str], operator: str = "or") -> None:
        check_route(tags, operator)
        self.tags = frozenset(tags)
        self.operator = operator

    def __call__(self, datum: Any) -> bool:
        if not self.tags:
            return True
        tags = getattr(datum, "tags", None) or ()
        if DROP in tags:
            return False
        return tags_match(self.tags, self.operator, tags)


def _keys_of(datum: Datum) -> list[str]:
    return list(datum._keys)


def _inherit(message: Any, parent: Datum, index: int) -> Datum | None:
    """A map-stream message as the next datum: the parent's times and headers."""
    return child_datum(
        message, parent, f"{parent._id}-{index}", "a map-stream handler must yield Message objects"
    )


class MapStreamRunner(HandlerStep):
    """The ``map_stream`` step: each datum through the handler, messages as datums."""

    def __init__(self, step_id: str, factory: Callable[[], Callable[..., Any]], concurrency: int):
        super().__init__(step_id, factory)
        self.concurrency = concurrency

    def run_chunk(self, items: Sequence[Any]) -> list[Any]:
        """Datums in, the datums of every message out (``DROP``-tagged ones removed)."""
        datums = step_datums(items, self.step_id, f"map_stream {self.step_id!r}")
        return run_map_stream(
            self.step_id, self.handler, datums, self.concurrency, _keys_of, _inherit
        )


class ChunkStep(Protocol):
    """A built step that takes a whole chunk of items at once (``applies == "chunk"``)."""

    def run_chunk(self, items: Sequence[Any]) -> list[Any]: ...


BUILT_STEPS: dict[str, Callable[[Any], Callable[..., Any] | ChunkStep]] = {
    "to_datums": lambda step: DatumMaker(step.step_id, **step.fns),
    "key_datums": lambda step: DatumKeyer(step.args["what"], step.args["keyed"]),
    "route": lambda step: TagRoute(step.args["tags"], step.args["operator"]),
    "map_stream": lambda step: MapStreamRunner(
        step.step_id, step.fns["factory"], step.args["concurrency"]
    ),
    "batch_map": lambda step: BatchMapRunner(
        step.step_id, step.fns["factory"], step.args["batch_size"]
    ),
}
"""The functions of the stateless Numaflow steps, built from each step's arguments."""
