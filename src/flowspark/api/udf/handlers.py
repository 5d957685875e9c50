"""The handler ABCs of pynumaflow 0.14 (same names, same abstract ``handler`` signatures).

Calling an instance calls its ``handler``, as in pynumaflow.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import AsyncIterable
from typing import Any

from flowspark.api.udf.batch import BatchMapDatum, BatchResponses
from flowspark.api.udf.types import (
    AccumulatorDatum,
    MapStreamDatum,
    Messages,
    Metadata,
    ReduceStreamDatum,
    StreamMessage,
)
from flowspark.shared.asynciter import NonBlockingIterator

__all__ = ["MapStreamer", "ReduceStreamer", "Accumulator", "Mapper", "Reducer", "BatchMapper"]


class _CallsHandler(metaclass=ABCMeta):  # noqa: B024 - each subclass declares its handler
    """The base of the handler ABCs (their ``ABCMeta``): calling an instance calls its
    abstract ``handler`` with the same arguments."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.handler(*args, **kwargs)  # type: ignore[attr-defined]


class MapStreamer(_CallsHandler):
    """A map-stream UDF: one async generator run per input datum.

    flowspark uses one instance for all datums (like pynumaflow's server).
    """

    @abstractmethod
    async def handler(self, keys: list[str], datum: MapStreamDatum) -> AsyncIterable[StreamMessage]:
        """Yield the messages for ``datum`` as they are ready (an async generator)."""
        raise NotImplementedError


class ReduceStreamer(_CallsHandler):
    """A reduce-stream UDF: a new instance per (window, keys), results put on ``output``."""

    @abstractmethod
    async def handler(
        self,
        keys: list[str],
        datums: AsyncIterable[ReduceStreamDatum],
        output: NonBlockingIterator[StreamMessage],
        md: Metadata,
    ) -> None:
        """Consume the window's ``datums`` and ``await output.put(Message(...))`` any time."""
        raise NotImplementedError


class Accumulator(_CallsHandler):
    """An accumulator UDF: a new instance per key opening; keys are on each datum."""

    @abstractmethod
    async def handler(
        self,
        datums: AsyncIterable[AccumulatorDatum],
        output: NonBlockingIterator[Any],
    ) -> None:
        """Consume the key's ``datums`` and put accumulator messages on ``output``."""
        raise NotImplementedError


class Mapper(_CallsHandler):
    """A (synchronous) map UDF: the messages for one datum, all at once."""

    @abstractmethod
    def handler(self, keys: list[str], datum: MapStreamDatum) -> Messages[StreamMessage]:
        """Return the messages for ``datum``."""
        raise NotImplementedError


class Reducer(_CallsHandler):
    """A reduce UDF: a new instance per (window, keys); the messages are returned at window end."""

    @abstractmethod
    async def handler(
        self, keys: list[str], datums: AsyncIterable[MapStreamDatum], md: Metadata
    ) -> Messages[StreamMessage]:
        """Consume the window's ``datums`` and return its messages."""
        raise NotImplementedError


class BatchMapper(_CallsHandler):
    """A batch-map UDF: one call per batch of datums, one answer per request id.

    flowspark uses one instance for all batches (like pynumaflow's server).
    """

    @abstractmethod
    async def handler(self, datums: AsyncIterable[BatchMapDatum]) -> BatchResponses:
        """Read the batch's ``datums`` and return a ``BatchResponse`` for each one's id."""
        raise NotImplementedError
