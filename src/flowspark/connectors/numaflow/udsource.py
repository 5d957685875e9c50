"""A Numaflow user-defined source: a pynumaflow ``Sourcer`` read as a flowspark input.

:class:`SourcerInput` is a bytewax-style :class:`~flowspark.api.inputs.PartitionedInput`
read in Spark's source-planning process on the driver (``runtime/polling.py``). Its
``Sourcer`` (a copy of the one given: the input is pickled there) runs on an event
loop of its own, in a thread. Each ``next_batch`` is one ``read_handler`` call for
up to ``read_batch_size`` messages with ``read_timeout`` as ``timeout_in_ms``; each
message becomes a :class:`~flowspark.api.udf.types.Datum` (payload, keys, event
time = watermark, headers; id ``"<base64 offset>-<partition>"``, Numaflow's offset
string).

One part (named after the vertex) serves every source partition: a read is not
per partition. Its snapshot counts the non-empty reads; the offsets of each read
are kept until Spark has committed the micro-batch holding it, then given to
``ack_handler`` in one :class:`~flowspark.api.udf.source.AckRequest` (the planning
process says so through the part's ``committed`` hook). ``nack_handler`` is never
called: a micro-batch either commits or is replayed after a restart, when the
source delivers what it had not acked again. ``pending_handler`` is the input's
backlog (``pending``).
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

from flowspark.api.inputs import PartitionedInput, StatefulSource
from flowspark.api.udf.servers import derives_from
from flowspark.api.udf.source import AckRequest, Offset, ReadRequest, Sourcer
from flowspark.api.udf.times import as_utc
from flowspark.api.udf.types import Datum
from flowspark.shared.asynciter import STREAM_EOF, NonBlockingIterator

__all__ = ["SourcerInput", "UdSourceError", "READ_IDLE_WAIT"]

READ_IDLE_WAIT = timedelta(milliseconds=5)
"""After a read that gave nothing, the next one waits this long."""


class UdSourceError(RuntimeError):
    """A user-defined source's handler failed or broke its contract."""


def _check_sourcer(sourcer: Any, vertex: str) -> None:
    if isinstance(sourcer, type):
        raise TypeError(
            f'user-defined source "{vertex}": pass an instance of the Sourcer subclass, '
            "not the class"
        )
    if not derives_from(type(sourcer), Sourcer):
        raise TypeError(
            f'user-defined source "{vertex}": expected a Sourcer instance, got '
            f"{type(sourcer).__name__}"
        )


class SourcerInput(PartitionedInput):
    """A pynumaflow ``Sourcer`` as an input (see the module doc).

    ``read_batch_size``: messages per read (Numaflow's ``readBatchSize``);
    ``read_timeout``: the read's ``timeout_in_ms`` (Numaflow's ``readTimeout``).
    The handler is trusted to honour the timeout, as Numaflow trusts it.
    ``text_offsets``: datum ids show offsets as their text, not base64 (Numaflow's
    built-in sources whose offsets are strings, e.g. SQS's receipt handles).
    """

    is_live = True

    def __init__(
        self,
        sourcer: Any,
        vertex: str = "source",
        read_batch_size: int = 500,
        read_timeout: timedelta = timedelta(seconds=1),
        text_offsets: bool = False,
    ) -> None:
        _check_sourcer(sourcer, vertex)
        if not isinstance(read_batch_size, int) or read_batch_size < 1:
            raise ValueError(
                f'user-defined source "{vertex}": read_batch_size must be an int >= 1; '
                f"got {read_batch_size!r}"
            )
        self.sourcer = sourcer
        self.vertex = vertex
        self.read_batch_size = read_batch_size
        self.read_timeout = read_timeout
        self.text_offsets = text_offsets
        self._runner: _Runner | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_runner"] = None
        return state

    def runner(self) -> _Runner:
        """The running source (started on first use, in the process that reads)."""
        if self._runner is None:
            self._runner = _Runner(self)
        return self._runner

    def list_parts(self) -> list[str]:
        return [self.vertex]

    def build_part(self, for_part: str, resume_state: Any | None) -> StatefulSource:
        if for_part != self.vertex:
            raise ValueError(f"SourcerInput({self.vertex!r}) has no part {for_part!r}")
        runner = self.runner()
        runner.partitions()  # the source must answer before it is read
        return _SourcerPart(runner, int(resume_state or 0))

    def __repr__(self) -> str:
        return (
            f"SourcerInput({type(self.sourcer).__name__}, vertex={self.vertex!r}, "
            f"read_batch_size={self.read_batch_size})"
        )


def message_datum(
    message: Any, vertex: str, text_offsets: bool = False
) -> tuple[Datum, tuple[bytes, int]]:
    """A read message as a datum, and its offset as ``(bytes, partition)``; the
    datum's id shows the offset in base64, or as its text with ``text_offsets``.

    >>> from flowspark.api.udf.source import Message
    >>> m = Message(b"v", Offset(b"0", 2), datetime(2024, 1, 1), headers={"h": "1"})
    >>> datum, offset = message_datum(m, "in")
    >>> datum.value, datum.id, datum.headers, datum.event_time.isoformat(), offset
    (b'v', 'MA==-2', {'h': '1'}, '2024-01-01T00:00:00+00:00', (b'0', 2))
    """
    try:
        offset = message.offset
        raw, partition = offset.offset, offset.partition_id
        payload = message.payload
        event_time = as_utc(message.event_time, "Message.event_time")
        keys = [str(k) for k in message.keys or []]
        headers = {str(k): str(v) for k, v in dict(message.headers or {}).items()}
    except (AttributeError, TypeError) as exc:
        raise UdSourceError(
            f'user-defined source "{vertex}": read_handler put {type(message).__name__!r}, '
            f"not a Message: {exc}"
        ) from None
    if not isinstance(raw, bytes) or not raw:
        raise UdSourceError(
            f'user-defined source "{vertex}": a message has an empty or non-bytes offset '
            f"({raw!r}); every Message needs Offset(offset=<bytes>, partition_id=<int>)"
        )
    if not isinstance(payload, bytes):
        raise UdSourceError(f'user-defined source "{vertex}": a message payload is not bytes')
    shown = raw.decode("utf-8", "replace") if text_offsets else base64.b64encode(raw).decode()
    ident = f"{shown}-{partition}"
    datum = Datum._make(keys, payload, event_time, event_time, headers, ident, [])
    return datum, (raw, int(partition))


class _Runner:
    """The ``Sourcer`` on its own event loop thread, and the offsets not acked yet."""

    def __init__(self, config: SourcerInput) -> None:
        self.config = config
        self.sourcer = config.sourcer
        self.vertex = config.vertex
        self.unacked: dict[int, list[tuple[bytes, int]]] = {}  # read number -> offsets
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name=f"flowspark-udsource-{self.vertex}", daemon=True
        )
        self.thread.start()
        self._partitions: list[int] | None = None

    def _run(self, handler: str, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """Run a handler's coroutine on the source's loop; its failure in one line."""
        future = asyncio.run_coroutine_threadsafe(make(), self.loop)
        try:
            return future.result()
        except UdSourceError:
            raise
        except Exception as exc:
            raise UdSourceError(
                f'user-defined source "{self.vertex}": {handler} failed: '
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def partitions(self) -> list[int]:
        """The source's active partitions (asked once)."""
        if self._partitions is None:
            response = self._run(
                "active_partitions_handler", self.sourcer.active_partitions_handler
            )
            found = getattr(response, "partitions", None)
            if not isinstance(found, list):
                raise UdSourceError(
                    f'user-defined source "{self.vertex}": active_partitions_handler must '
                    f"return a PartitionsResponse; got {type(response).__name__}"
                )
            self._partitions = found
        return self._partitions

    def read(self) -> list[Any]:
        """One ``read_handler`` call: the messages it put."""
        timeout_ms = int(self.config.read_timeout / timedelta(milliseconds=1))
        request = ReadRequest(num_records=self.config.read_batch_size, timeout_in_ms=timeout_ms)

        async def read() -> list[Any]:
            output: NonBlockingIterator[Any] = NonBlockingIterator()

            async def produce() -> None:
                try:
                    await self.sourcer.read_handler(request, output)
                finally:
                    await output.put(STREAM_EOF)

            task = asyncio.ensure_future(produce())
            messages = [m async for m in output.read_iterator()]
            await task  # its error, if any
            return messages

        return list(self._run("read_handler", read))

    def keep(self, number: int, offsets: list[tuple[bytes, int]]) -> None:
        """Remember the offsets of read ``number`` until it is committed."""
        with self.lock:
            self.unacked[number] = offsets

    def ack_through(self, number: int) -> None:
        """Ack every kept read up to ``number`` (those are in committed micro-batches)."""
        with self.lock:
            done = sorted(n for n in self.unacked if n <= number)
            offsets = [o for n in done for o in self.unacked.pop(n)]
        if not offsets:
            return
        request = AckRequest(offsets=[Offset(raw, partition) for raw, partition in offsets])
        self._run("ack_handler", lambda: self.sourcer.ack_handler(request))

    def pending(self) -> int | None:
        """``pending_handler``'s count (``None`` when negative: not known)."""
        response = self._run("pending_handler", self.sourcer.pending_handler)
        count = getattr(response, "count", None)
        if not isinstance(count, int):
            raise UdSourceError(
                f'user-defined source "{self.vertex}": pending_handler must return a '
                f"PendingResponse; got {type(response).__name__}"
            )
        return count if count >= 0 else None


class _SourcerPart(StatefulSource):
    """The one part of a :class:`SourcerInput`; its snapshot is its count of non-empty reads."""

    def __init__(self, runner: _Runner, reads: int) -> None:
        self.runner = runner
        self.reads = reads
        self._got = True

    def next_batch(self) -> list[Datum]:
        messages = self.runner.read()
        self._got = bool(messages)
        if not messages:
            return []
        text = self.runner.config.text_offsets
        pairs = [message_datum(m, self.runner.vertex, text) for m in messages]
        self.reads += 1
        self.runner.keep(self.reads, [offset for _, offset in pairs])
        return [datum for datum, _ in pairs]

    def next_awake(self) -> datetime | None:
        return None if self._got else datetime.now(UTC) + READ_IDLE_WAIT

    def snapshot(self) -> int:
        return self.reads

    def committed(self, snapshot: Any) -> None:
        """Every read up to ``snapshot`` is in a committed micro-batch: ack it."""
        self.runner.ack_through(int(snapshot or 0))

    def pending(self) -> int | None:
        """The source's pending count (the input's backlog)."""
        return self.runner.pending()
