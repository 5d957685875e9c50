"""What a handler's message becomes downstream: its keys, value and tags — or nothing.

One place for the three UDF kinds (map stream, reduce stream, accumulator): a
``DROP``-tagged message is never forwarded, anything that is not a message is a
clear error, and flowspark's own messages (checked when they were made) are read
without going through their properties.

>>> from flowspark.mapstreamer import Message
>>> message_parts(Message(b"v", keys=["k"]), "a handler must put Message objects")
(['k'], b'v', [])
>>> message_parts(Message.to_drop(), "a handler must put Message objects") is None
True
"""

from __future__ import annotations

from typing import Any

from flowspark.api.udf.types import DROP, AccumulatorMessage, StreamMessage
from flowspark.runtime.errors import short_repr

__all__ = ["message_parts"]

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
