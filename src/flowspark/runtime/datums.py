"""Datums in flows: making them from plain items, keying them, routing them by tags,
and the map-stream step that turns each into messages.

These are the callables the Numaflow operators put into ordinary flow steps,
so they run fused in the stateless stages like any ``map`` or ``filter``.

>>> from datetime import datetime, timezone
>>> make = DatumMaker("conv", event_time=lambda x: datetime(2024, 1, 1, tzinfo=timezone.utc))
>>> d = make(("user-1", "hello"))
>>> d.keys, d.value, d.event_time.isoformat()
(['user-1'], b'hello', '2024-01-01T00:00:00+00:00')
>>> TagRoute(["a", "b"], "and")(d), TagRoute(["a"], "not")(d)
(False, True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from flowspark.api.udf.checks import check_datum_functions, check_route
from flowspark.api.udf.times import as_utc
from flowspark.api.udf.types import DROP, Datum
from flowspark.runtime.errors import short_repr, step_failure
from flowspark.runtime.messages import message_parts
from flowspark.runtime.udf_keyed import routing_key
from flowspark.runtime.udf_run import run_map_stream

__all__ = ["as_datum", "DatumMaker", "DatumKeyer", "TagRoute", "MapStreamRunner", "NON_KEYED"]

# Numaflow's key for every datum of a ``keyed: false`` reduce.
NON_KEYED = "NON_KEYED_STREAM"


def as_datum(item: Any, what: str) -> Datum:
    """``item`` as a flowspark :class:`Datum` (any SDK's datum, ours or pynumaflow's)."""
    if isinstance(item, Datum):
        return item
    if hasattr(item, "value") and hasattr(item, "event_time") and hasattr(item, "keys"):
        event_time = item.event_time
        watermark = getattr(item, "watermark", None) or event_time
        return Datum(
            list(item.keys or []),
            item.value,
            event_time,
            watermark,
            dict(getattr(item, "headers", None) or {}),
            id=getattr(item, "id", "") or "",
            tags=list(getattr(item, "tags", None) or []),
        )
    if _is_plain(item):
        return _PLAIN(item)
    raise TypeError(
        f"{what} needs datums (e.g. flowspark.accumulator.Datum, or items converted with "
        f"stream.to_datums(...)); got {short_repr(item, 100)}"
    )


def _is_plain(item: Any) -> bool:
    """Bytes, text, or a ``(str key, bytes or text)`` pair: what ``to_datums()`` takes
    with its defaults, so Numaflow steps take them as they are."""
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        item = item[1]
    return isinstance(item, (bytes, str))


def _default_keys(item: Any) -> list[str]:
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return [item[0]]
    return []


def _default_value(item: Any) -> Any:
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return item[1]
    return item


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(
        f"a datum's value must be bytes or str; got {type(value).__name__} "
        f"{short_repr(value, 80)} (pass value=... to to_datums to encode it)"
    )


class DatumMaker:
    """Make a datum of each item: ``keys``, ``value``, ``event_time``, ``headers`` and
    ``id`` are functions of the item.

    Defaults: a ``(str, value)`` pair gives keys ``[key]`` and its value, anything
    else no keys and itself; values must be (or become) ``bytes`` (``str`` is
    UTF-8 encoded); without ``event_time`` the datum is stamped with the time it
    is converted at (the processing time, as Numaflow's HTTP source does).
    """

    def __init__(
        self,
        step_id: str,
        keys: Callable[[Any], Sequence[str] | str] | None = None,
        value: Callable[[Any], Any] | None = None,
        event_time: Callable[[Any], datetime] | None = None,
        headers: Callable[[Any], dict[str, str]] | None = None,
        id: Callable[[Any], str] | None = None,  # noqa: A002 - Numaflow's name
    ) -> None:
        fields = {"keys": keys, "value": value, "event_time": event_time, "headers": headers}
        check_datum_functions(step_id, {**fields, "id": id})
        self.step_id = step_id
        self.keys = keys or _default_keys
        self.value = value or _default_value
        self.event_time = event_time
        self.headers = headers
        self.id = id

    def __call__(self, item: Any) -> Datum:
        keys = self.keys(item)
        keys = [keys] if isinstance(keys, str) else list(keys)
        if not all(isinstance(k, str) for k in keys):
            raise TypeError(f"datum keys must be strings; got {keys!r:.100}")
        event_time = (
            as_utc(self.event_time(item), "Datum.event_time")
            if self.event_time is not None
            else as_utc(datetime.now(UTC), "Datum.event_time")
        )
        headers = dict(self.headers(item)) if self.headers is not None else {}
        datum_id = str(self.id(item)) if self.id is not None else ""
        return Datum._make(
            keys, _as_bytes(self.value(item)), event_time, event_time, headers, datum_id, []
        )


# Plain items reaching a Numaflow step: to_datums' defaults (stamped when converted).
_PLAIN = DatumMaker("plain items")


class DatumKeyer:
    """``datum -> (routing key, datum)``: what a keyed Numaflow step groups by.

    With ``keyed=False`` every datum gets Numaflow's ``NON_KEYED_STREAM`` key.
    """

    def __init__(self, what: str, keyed: bool = True) -> None:
        self.what, self.keyed = what, keyed

    def __call__(self, item: Any) -> tuple[str, Datum]:
        datum = as_datum(item, self.what)
        if not self.keyed:
            datum = Datum._make(
                [NON_KEYED],
                datum._value,
                datum._event_time,
                datum._watermark,
                datum._headers,
                datum._id,
                datum._tags,
            )
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
        if self.operator == "or":
            return not self.tags.isdisjoint(tags)
        if self.operator == "and":
            return self.tags.issubset(tags)
        return self.tags.isdisjoint(tags)


def _keys_of(datum: Datum) -> list[str]:
    return list(datum._keys)


def _inherit(message: Any, parent: Datum, index: int) -> Datum | None:
    """A map-stream message as the next datum: the parent's times and headers."""
    parts = message_parts(message, "a map-stream handler must yield Message objects")
    if parts is None:
        return None
    keys, value, tags = parts
    if not isinstance(value, bytes):
        value = _as_bytes(value)
    return Datum._make(
        keys,
        value,
        parent._event_time,
        parent._watermark,
        parent._headers,
        f"{parent._id}-{index}",
        tags,
    )


class MapStreamRunner:
    """The ``map_stream`` step: each datum through the handler, messages as datums."""

    def __init__(self, step_id: str, factory: Callable[[], Callable[..., Any]], concurrency: int):
        self.step_id, self.factory, self.concurrency = step_id, factory, concurrency
        self._handler: Callable[..., Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_handler": None}

    @property
    def handler(self) -> Callable[..., Any]:
        if self._handler is None:
            self._handler = self.factory()
        return self._handler

    def run_chunk(self, items: Sequence[Any]) -> list[Any]:
        """Datums in, the datums of every message out (``DROP``-tagged ones removed)."""
        what = f"map_stream {self.step_id!r}"
        datums = []
        for item in items:
            if not isinstance(item, Datum):
                try:
                    item = as_datum(item, what)
                except TypeError as exc:
                    raise step_failure(self.step_id, "datum input", item, exc) from None
            datums.append(item)
        return run_map_stream(
            self.step_id, self.handler, datums, self.concurrency, _keys_of, _inherit
        )


BUILT_STEPS: dict[str, Callable[[Any], Callable[..., Any]]] = {
    "to_datums": lambda step: DatumMaker(step.step_id, **step.fns),
    "key_datums": lambda step: DatumKeyer(step.args["what"], step.args["keyed"]),
    "route": lambda step: TagRoute(step.args["tags"], step.args["operator"]),
    "map_stream": lambda step: MapStreamRunner(
        step.step_id, step.fns["factory"], step.args["concurrency"]
    ),
}
"""The functions of the stateless Numaflow steps, built from each step's arguments."""
