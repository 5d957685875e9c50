"""The ``batch_map`` step: Numaflow's batch map over the datums of a chunk.

A chunk's datums are cut, in order, into batches of at most ``batch_size``
(Numaflow's ``readBatchSize``; a batch never spans two chunks, so the last one of a
chunk may be smaller). Each batch is one call ``handler(datums)``: ``datums`` is an
async iterable of the batch's :class:`~flowspark.api.udf.batch.BatchMapDatum` s and
the call returns (or, ``async``, resolves to) ``BatchResponses``. The batches of a
chunk run one after the other on this process's handler event loop, as Numaflow
sends a batch and waits for its answers before the next.

**Request ids.** A datum's request id (its ``id`` as the handler sees it) is its own
id when the ids of its batch are all non-empty and distinct, else its position in
the batch (``"0"``, ``"1"`` …): Numaflow's request ids are unique offsets, and an
answer must name exactly one request.

**Answers.** Numaflow requires one response per request id: an id that is not in the
batch, an id answered twice, or a request left unanswered fails the step with an
error naming the step and that id. Outputs follow the requests' order (not the
responses'); message ``i`` of request ``r`` becomes a datum with id ``f"{r}-{i}"``
and the request's event time, watermark and headers; ``DROP``-tagged messages are
removed (their index still counts).

>>> from datetime import datetime, timezone
>>> from flowspark.api.udf.batch import BatchResponse, BatchResponses
>>> from flowspark.api.udf.types import StreamMessage as Message
>>> t = datetime(2024, 1, 1, tzinfo=timezone.utc)
>>> async def upper(datums):
...     return BatchResponses(*[
...         BatchResponse.with_msgs(d.id, [Message(d.value.upper())]) async for d in datums
...     ])
>>> out = run_batch_map("up", upper, [Datum([], b"a", t, t, id="x"), Datum([], b"b", t, t)], 2)
>>> [(d.id, d.value) for d in out]  # "" is no id: the batch's requests go by position
[('0-0', b'A'), ('1-0', b'B')]
>>> request_ids([Datum([], b"", t, t, id=i) for i in ("a", "b")])
['a', 'b']
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from flowspark.api.udf.batch import BatchMapDatum, BatchResponse
from flowspark.api.udf.types import Datum
from flowspark.runtime.errors import short_repr, step_failure
from flowspark.runtime.numaflow.convert import step_datums
from flowspark.runtime.numaflow.messages import child_datum
from flowspark.runtime.numaflow.run import HandlerStep, event_loop

__all__ = ["BatchMapRunner", "run_batch_map", "request_ids", "DEFAULT_BATCH_SIZE"]

DEFAULT_BATCH_SIZE = 500
"""Numaflow's default ``readBatchSize``: the most datums one batch holds."""

_NOT_A_MESSAGE = "a BatchResponse's messages must be Message objects"


def request_ids(batch: Sequence[Datum]) -> list[str]:
    """The request id of each datum of ``batch``: the datums' ids when they are all
    non-empty and distinct, else their positions (``"0"``, ``"1"`` …)."""
    ids = [datum._id for datum in batch]
    if all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids):
        return ids
    return [str(position) for position in range(len(batch))]


class _Batch:
    """A batch as a failed step's item shows it: its size and first request ids."""

    __slots__ = ("ids",)

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids

    def __repr__(self) -> str:
        shown = ", ".join(repr(i) for i in self.ids[:5]) + (", ..." if len(self.ids) > 5 else "")
        return f"batch of {len(self.ids)} datums (request ids {shown})"


class _BatchDatums:
    """The ``datums`` a batch-map handler reads with ``async for`` (once, in order)."""

    __slots__ = ("_datums",)

    def __init__(self, datums: list[BatchMapDatum]) -> None:
        self._datums = iter(datums)

    def __aiter__(self) -> _BatchDatums:
        return self

    async def __anext__(self) -> BatchMapDatum:
        for datum in self._datums:
            return datum
        raise StopAsyncIteration


def _requests(batch: Sequence[Datum]) -> tuple[list[str], list[BatchMapDatum]]:
    """The batch's request ids and the datums the handler gets (id = request id)."""
    ids = request_ids(batch)
    make = BatchMapDatum._make
    return ids, [
        make(d._keys, d._value, d._event_time, d._watermark, d._headers, rid, d._tags)
        for d, rid in zip(batch, ids)
    ]


def _answer(response: Any) -> tuple[Any, Any]:
    """``(id, messages)`` of one response (flowspark's or any object with both)."""
    if response.__class__ is BatchResponse:
        return response._id, response.messages
    try:
        return response.id, response.messages
    except AttributeError:
        raise TypeError(
            "a batch-map handler must return BatchResponse objects (one per request id); "
            f"got {short_repr(response, 80)}"
        ) from None


def _outputs(
    step_id: str,
    handler: Any,
    ids: list[str],
    requests: list[BatchMapDatum],
    responses: Any,
) -> list[Datum]:
    """The datums of one batch's answers, in request order, every id checked."""
    error: Exception
    if responses is None or not hasattr(responses, "__iter__"):
        error = TypeError(
            "a batch-map handler must return BatchResponses; it returned "
            f"{type(responses).__name__}"
        )
        raise step_failure(step_id, handler, _Batch(ids), error)
    position = {rid: i for i, rid in enumerate(ids)}
    answered: list[Any] = [None] * len(ids)
    for response in responses:
        try:
            rid, messages = _answer(response)
        except TypeError as exc:
            raise step_failure(step_id, handler, _Batch(ids), exc) from None
        i = position.get(rid) if isinstance(rid, str) else None
        if i is None:
            error = ValueError(
                f"the batch-map handler answered request id {rid!r}, which is not in the "
                f"batch ({short_repr(_Batch(ids))})"
            )
            raise step_failure(step_id, handler, response, error)
        if answered[i] is not None:
            error = ValueError(f"the batch-map handler answered request id {rid!r} twice")
            raise step_failure(step_id, handler, response, error)
        answered[i] = messages
    unanswered = [rid for rid, messages in zip(ids, answered) if messages is None]
    if unanswered:
        rid = unanswered[0]
        error = ValueError(
            f"the batch-map handler gave no response for request id {rid!r} "
            f"({len(unanswered)} of the batch's {len(ids)} requests unanswered; Numaflow "
            "needs one BatchResponse per request id)"
        )
        raise step_failure(step_id, handler, requests[position[rid]], error)
    out: list[Datum] = []
    for rid, request, messages in zip(ids, requests, answered):
        try:
            for index, message in enumerate(messages):
                child = child_datum(message, request, f"{rid}-{index}", _NOT_A_MESSAGE)
                if child is not None:
                    out.append(child)
        except Exception as exc:
            raise step_failure(step_id, handler, request, exc) from None
    return out


async def _run_batches(
    step_id: str, handler: Callable[..., Any], batches: list[list[Datum]]
) -> list[Datum]:
    """Each batch through the handler, in turn; its answers checked before the next."""
    out: list[Datum] = []
    for batch in batches:
        ids, requests = _requests(batch)
        try:
            responses = handler(_BatchDatums(requests))
            if inspect.isawaitable(responses):
                responses = await responses
        except Exception as exc:
            raise step_failure(step_id, handler, _Batch(ids), exc) from None
        out.extend(_outputs(step_id, handler, ids, requests, responses))
    return out


def run_batch_map(
    step_id: str, handler: Callable[..., Any], datums: list[Datum], batch_size: int
) -> list[Datum]:
    """``datums`` through ``handler`` in batches of at most ``batch_size``; the datums of
    every answer's messages, in request order (see the module doc)."""
    if not datums:
        return []
    batches = [datums[i : i + batch_size] for i in range(0, len(datums), batch_size)]
    return event_loop().run_until_complete(_run_batches(step_id, handler, batches))


class BatchMapRunner(HandlerStep):
    """The ``batch_map`` step: a chunk's datums through the handler, batch by batch."""

    def __init__(
        self,
        step_id: str,
        factory: Callable[[], Callable[..., Any]],
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        super().__init__(step_id, factory)
        self.batch_size = batch_size

    def run_chunk(self, items: Sequence[Any]) -> list[Any]:
        """Datums in, the datums of every answer's messages out (``DROP``s removed)."""
        datums = step_datums(items, self.step_id, f"batch_map {self.step_id!r}")
        return run_batch_map(self.step_id, self.handler, datums, self.batch_size)
