"""Running a pynumaflow source transformer on the datums a source reads.

:class:`TransformRunner` is the ``flat_map`` function of a source's
``transformer`` step: each datum goes through the handler (a function, an
``async`` function or a :class:`~flowspark.api.udf.transform.SourceTransformer`),
and each returned message becomes a datum with the message's value, keys, tags
and event time, and the parent's watermark, headers and id. ``DROP``-tagged
messages are dropped.

>>> from flowspark.api.udf.times import utc_from_ms
>>> from flowspark.api.udf.transform import Message, Messages
>>> async def stamp(keys, datum):
...     return Messages(Message(datum.value.upper(), utc_from_ms(0), keys=["k"], tags=["t"]))
>>> t = utc_from_ms(1_700_000_000_000)
>>> (out,) = TransformRunner(stamp)(Datum([], b"hi", t, t, id="m-1"))
>>> out.value, out.keys, out.tags, out.event_time.isoformat(), out.watermark == t, out.id
(b'HI', ['k'], ['t'], '1970-01-01T00:00:00+00:00', True, 'm-1')
"""

from __future__ import annotations

import inspect
from typing import Any

from flowspark.api.udf.times import as_utc
from flowspark.api.udf.transform import Datum as TransformDatum
from flowspark.api.udf.transform import transform_handler
from flowspark.api.udf.types import DROP, Datum
from flowspark.runtime.errors import short_repr
from flowspark.runtime.numaflow.convert import step_datum
from flowspark.runtime.numaflow.run import event_loop
from flowspark.shared.asyncrun import run_to_completion

__all__ = ["TransformRunner"]

_NOT_A_MESSAGE = "a source transformer must return sourcetransformer.Message objects"


def _as_transform_datum(datum: Datum) -> TransformDatum:
    out = TransformDatum._make(*datum._fields())
    out._user_metadata = out._system_metadata = None
    return out


class TransformRunner:
    """``datum -> [datum, ...]``: a source transformer over one datum.

    ``handler`` is a source-transform server of :mod:`flowspark.sourcetransformer`,
    a SourceTransformer instance (flowspark's or pynumaflow's) or a function,
    sync or ``async``. Picklable when the handler is.
    """

    def __init__(self, handler: Any) -> None:
        self.handler = transform_handler(handler)

    def __call__(self, item: Any) -> list[Datum]:
        datum = item if isinstance(item, Datum) else step_datum(item, "a source transformer")
        result = self.handler(list(datum._keys), _as_transform_datum(datum))
        if inspect.isawaitable(result):
            pending = result
            result = run_to_completion(
                lambda: pending, event_loop(), thread_name="flowspark-sourcetransform"
            )
        if result is None:
            raise TypeError(f"source transformer {self.handler!r} returned None; expected Messages")
        return [out for out in (self._output(m, datum) for m in result) if out is not None]

    @staticmethod
    def _output(message: Any, parent: Datum) -> Datum | None:
        try:
            keys, value, tags, event_time = (
                message.keys,
                message.value,
                message.tags,
                message.event_time,
            )
        except AttributeError:
            raise TypeError(f"{_NOT_A_MESSAGE}; got {short_repr(message, 80)}") from None
        if tags and DROP in tags:
            return None
        if not isinstance(value, bytes):
            raise TypeError(f"{_NOT_A_MESSAGE}; its value is {short_repr(value, 80)}, not bytes")
        return Datum._make(
            list(keys or ()),
            value,
            as_utc(event_time, "Message.event_time"),
            parent._watermark,
            parent._headers,
            parent._id,
            list(tags or ()),
        )

    def __repr__(self) -> str:
        return f"TransformRunner({self.handler!r})"
