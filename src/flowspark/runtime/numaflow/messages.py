"""What a handler's message becomes downstream: its keys, value and tags — or nothing.

One place for the UDF kinds (map stream, batch map, reduce stream, accumulator): a
``DROP``-tagged message is never forwarded, anything that is not a message is a
clear error, and flowspark's own messages (checked when they were made) are read
without going through their properties. :func:`child_datum` makes the datum a
map's message becomes: the times and headers of the datum it answers.

>>> from flowspark.mapstreamer import Message
>>> message_parts(Message(b"v", keys=["k"]), "a handler must put Message objects")
(['k'], b'v', [])
>>> message_parts(Message.to_drop(), "a handler must put Message objects") is None
True
"""

from __future__ import annotations

from typing import Any

from flowspark.api.udf.types import DROP, AccumulatorMessage, Datum, StreamMessage
from flowspark.runtime.errors import short_repr
from flowspark.runtime.numaflow.convert import value_bytes

__all__ = ["message_parts", "child_datum"]

_CHECKED = (StreamMessage, AccumulatorMessage)


def message_parts(message: Any, not_a_message: str) -> tuple[list[str], Any, list[str]] | None:
    """``(keys, value, tags)`` of ``message`` (fresh lists), ``None`` for a ``DROP``.

    Any object with ``keys``, ``value`` and ``tags`` counts (pynumaflow's messages
    too); anything else raises ``TypeError(f"{not_a_message}; got ...")``.
    """
    if message.__class__ in _CHECKED:
        keys, value, tags = message._keys, message._value, message._tags
    else:
        try:
            keys, value, tags = message.keys, message.value, message.tags
        except AttributeError:
            raise TypeError(f"{not_a_message}; got {short_repr(message, 80)}") from None
    if tags and DROP in tags:
        return None
    return list(keys or ()), value, list(tags or ())


def child_datum(message: Any, parent: Datum, id_: str, not_a_message: str) -> Datum | None:
    """``message`` as the next datum, with id ``id_`` and ``parent``'s event time,
    watermark and headers; ``None`` for a ``DROP`` (see :func:`message_parts`).

    >>> from datetime import datetime, timezone
    >>> from flowspark.mapstreamer import Message
    >>> t = datetime(2024, 1, 1, tzinfo=timezone.utc)
    >>> parent = Datum(["k"], b"a,b", t, t, {"h": "1"}, id="p")
    >>> child = child_datum(Message(b"a", ["x"]), parent, "p-0", "not a message")
    >>> child.keys, child.value, child.event_time == t, child.headers, child.id
    (['x'], b'a', True, {'h': '1'}, 'p-0')
    """
    parts = message_parts(message, not_a_message)
    if parts is None:
        return None
    keys, value, tags = parts
    if not isinstance(value, bytes):
        value = value_bytes(value)
    return Datum._make(
        keys, value, parent._event_time, parent._watermark, parent._headers, id_, tags
    )
