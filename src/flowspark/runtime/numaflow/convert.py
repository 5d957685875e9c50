"""Items as datums: the one place where anything becomes a flowspark :class:`Datum`.

Three entry points, one per kind of caller:

* :class:`DatumMaker`, the ``to_datums`` step: keys, value, event time, headers
  and id are functions of the item (defaults: a ``(str, value)`` pair is a key
  and its value; anything else has no keys).
* :func:`step_datum`, **strict**, for Numaflow steps (``map_stream``, the keyed
  UDF kinds, builtins, source transformers): datums as they are, any SDK's datum
  (pynumaflow's too) field by field, and the plain items ``to_datums()`` takes
  with its defaults (bytes, text, ``(str key, bytes or text)``); anything else is
  a ``TypeError`` naming the step and the item.
* :func:`sink_datum`, **lenient**, for Numaflow's sinks (log, udsink): it never
  refuses an item. Datum-like objects (``keys`` and ``value``) field by field,
  ``(key, value)`` pairs with keys ``[str(key)]``, any other value with keys
  ``[]``, values as bytes, ``str`` as UTF-8, others as ``str(value)``.

Both stamp a datum that has no event time with the time it is converted at.

>>> from datetime import datetime, timezone
>>> make = DatumMaker("conv", event_time=lambda x: datetime(2024, 1, 1, tzinfo=timezone.utc))
>>> d = make(("user-1", "hello"))
>>> d.keys, d.value, d.event_time.isoformat()
(['user-1'], b'hello', '2024-01-01T00:00:00+00:00')
>>> step_datum(d, "map_stream 's'") is d, step_datum(("k", b"v"), "map_stream 's'").keys
(True, ['k'])
>>> step_datum(42, "map_stream 's'")
Traceback (most recent call last):
    ...
TypeError: map_stream 's' needs datums (e.g. flowspark.accumulator.Datum, or items converted \
with stream.to_datums(...)); got 42
>>> (sink_datum((7, 42)).keys, sink_datum((7, 42)).value), sink_datum(d) is d
((['7'], b'42'), True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from flowspark.api.udf.checks import check_datum_functions
from flowspark.api.udf.times import UTCDateTime, as_utc
from flowspark.api.udf.types import Datum
from flowspark.runtime.errors import short_repr, step_failure

__all__ = ["DatumMaker", "step_datum", "step_datums", "sink_datum", "value_bytes", "any_bytes"]


# ------------------------------------------------------------------------- to_datums


def _default_keys(item: Any) -> list[str]:
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return [item[0]]
    return []


def _default_value(item: Any) -> Any:
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return item[1]
    return item


def value_bytes(value: Any) -> bytes:
    """A datum's value: bytes as they are, ``str`` as UTF-8; anything else a ``TypeError``."""
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
            keys, value_bytes(self.value(item)), event_time, event_time, headers, datum_id, []
        )


# ------------------------------------------------------------------- strict: for steps

# Plain items reaching a Numaflow step: to_datums' defaults (stamped when converted).
_PLAIN = DatumMaker("plain items")


def _is_plain(item: Any) -> bool:
    """Bytes, text, or a ``(str key, bytes or text)`` pair: what ``to_datums()`` takes
    with its defaults, so Numaflow steps take them as they are."""
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        item = item[1]
    return isinstance(item, (bytes, str))


def step_datum(item: Any, what: str) -> Datum:
    """``item`` as a flowspark :class:`Datum` for the step ``what`` (strict).

    Datums as they are; any SDK's datum (ours or pynumaflow's: ``keys``, ``value``
    and ``event_time``) field by field; plain items as ``to_datums()`` makes them
    by default; anything else raises ``TypeError`` naming ``what`` and the item.
    """
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


def step_datums(items: Sequence[Any], step_id: str, what: str) -> list[Datum]:
    """A chunk's items as datums (:func:`step_datum` each); an item that is refused
    fails the step ``step_id``."""
    datums = []
    for item in items:
        if not isinstance(item, Datum):
            try:
                item = step_datum(item, what)
            except TypeError as exc:
                raise step_failure(step_id, "datum input", item, exc) from None
        datums.append(item)
    return datums


# ------------------------------------------------------------------ lenient: for sinks


def any_bytes(value: Any) -> bytes:
    """Any value as bytes: bytes as they are, ``str`` as UTF-8, others as ``str(value)``."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return str(value).encode("utf-8")


def _is_datum_like(item: Any) -> bool:
    return hasattr(item, "value") and hasattr(item, "keys") and not isinstance(item, dict)


def sink_datum(item: Any, now: UTCDateTime | None = None) -> Datum:
    """A sink's item as a flowspark datum (lenient: every item converts).

    Datums as they are; datum-like objects field by field; ``(key, value)`` pairs
    with keys ``[key]`` (``[]`` for a ``None`` key; a datum-like value is converted
    as itself); any other value with keys ``[]`` (bytes as they are, ``str`` as
    UTF-8, others as ``str(value)``). Missing times are ``now``; a missing id is ``""``.
    """
    if isinstance(item, Datum):
        return item
    if now is None:
        now = as_utc(datetime.now(UTC), "now")
    if isinstance(item, tuple) and len(item) == 2 and not _is_datum_like(item):
        key, value = item
        if _is_datum_like(value):
            return sink_datum(value, now)
        keys = [] if key is None else [str(key)]
        return Datum._make(keys, any_bytes(value), now, now, {}, "", [])
    if not _is_datum_like(item):
        return Datum._make([], any_bytes(item), now, now, {}, "", [])
    raw_time = getattr(item, "event_time", None)
    event_time = now if raw_time is None else as_utc(raw_time, "Datum.event_time")
    raw_wm = getattr(item, "watermark", None)
    watermark = event_time if raw_wm is None else as_utc(raw_wm, "Datum.watermark")
    headers = getattr(item, "headers", None) or {}
    return Datum._make(
        [str(k) for k in (item.keys or [])],
        any_bytes(item.value if item.value is not None else b""),
        event_time,
        watermark,
        {str(k): str(v) for k, v in dict(headers).items()},
        str(getattr(item, "id", "") or ""),
        list(getattr(item, "tags", None) or []),
    )
