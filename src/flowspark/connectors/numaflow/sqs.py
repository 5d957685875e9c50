"""Numaflow's SQS source: an Amazon SQS queue's messages, deleted once their micro-batch commits.

:class:`SqsSourcer` is a pynumaflow ``Sourcer`` over ``boto3`` (the optional
dependency ``flowspark[sqs]``), so the queue is read as a user-defined source is
(:mod:`flowspark.connectors.numaflow.udsource`): each read receives up to
``readBatchSize`` messages within ``readTimeout`` (SQS gives at most 10 a call;
the first call of a read long-polls, the rest do not wait), and a micro-batch's
messages are deleted (Numaflow's ack) only after Spark has committed it. A
message whose micro-batch did not commit (a crash) reappears once its
visibility timeout passes: delivery is at least once, as on Numaflow.

As Numaflow's source makes them, a message's datum has the SQS message id as its
one key, the body as its value, ``SentTimestamp`` as its event time, the
message's system attributes as headers and ``"<receipt handle>-0"`` as its id.
The endpoint is ``endpointUrl`` (or boto3's ``AWS_ENDPOINT_URL``); credentials are
boto3's (environment, profile, instance role).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from flowspark.api.udf import source

__all__ = ["SqsConfig", "SqsSourcer"]

log = logging.getLogger("flowspark.sqs")

_MAX_PER_CALL = 10  # SQS's ReceiveMessage and DeleteMessageBatch limit
_MAX_WAIT_S = 20  # SQS's longest long poll


@dataclass(frozen=True)
class SqsConfig:
    """``source.sqs`` of a Numaflow vertex."""

    queue_name: str
    region: str
    account_id: str
    visibility_timeout: int | None = None
    max_messages: int | None = None
    wait_time_s: int | None = None
    endpoint_url: str | None = None
    attribute_names: tuple[str, ...] = field(default=())
    message_attribute_names: tuple[str, ...] = field(default=())


class SqsSourcer(source.Sourcer):
    """An SQS queue as a ``Sourcer`` (see the module doc); pickled without its client."""

    def __init__(self, config: SqsConfig) -> None:
        self.config = config
        self._client: Any = None
        self._url: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None, "_url": None}

    def _queue(self) -> tuple[Any, str]:
        if self._client is None:
            try:
                import boto3  # noqa: PLC0415 optional dependency (flowspark[sqs])
            except ImportError:
                raise RuntimeError(
                    "the SQS source needs boto3: pip install 'flowspark[sqs]'"
                ) from None
            c = self.config
            client = boto3.client("sqs", region_name=c.region, endpoint_url=c.endpoint_url)
            self._url = client.get_queue_url(
                QueueName=c.queue_name, QueueOwnerAWSAccountId=c.account_id
            )["QueueUrl"]
            self._client = client
        assert self._url is not None
        return self._client, self._url

    async def read_handler(self, datum: source.ReadRequest, output: Any) -> None:
        read = await asyncio.to_thread(self.receive, datum.num_records, datum.timeout_in_ms)
        for message in read:
            await output.put(message)

    def receive(self, count: int, timeout_ms: int) -> list[source.Message]:
        """Up to ``count`` messages within about ``timeout_ms`` (at least one long poll
        of a second when the queue is empty, as Numaflow's source waits)."""
        client, url = self._queue()
        c = self.config
        deadline = time.monotonic() + timeout_ms / 1000
        per_call = min(_MAX_PER_CALL, c.max_messages or _MAX_PER_CALL)
        messages: list[source.Message] = []
        while len(messages) < count:
            remaining = deadline - time.monotonic()
            wait = 0 if messages else max(1, min(int(remaining), _MAX_WAIT_S))
            request: dict[str, Any] = {
                "QueueUrl": url,
                "MaxNumberOfMessages": min(per_call, count - len(messages)),
                "WaitTimeSeconds": wait,
                "MessageSystemAttributeNames": list(c.attribute_names) or ["All"],
                "MessageAttributeNames": list(c.message_attribute_names) or ["All"],
            }
            if c.visibility_timeout is not None:
                request["VisibilityTimeout"] = c.visibility_timeout
            got = client.receive_message(**request).get("Messages", [])
            messages += [_message(m) for m in got]
            if not got or time.monotonic() >= deadline:
                break
        return messages

    async def ack_handler(self, ack_request: source.AckRequest) -> None:
        handles = [o.offset.decode() for o in ack_request.offsets]
        await asyncio.to_thread(self.delete, handles)

    def delete(self, handles: list[str]) -> None:
        """Delete the messages of ``handles`` (receipt handles), 10 a call. A handle
        SQS refuses (its visibility timeout passed: the message is back in the queue)
        is logged; the message will be read again."""
        client, url = self._queue()
        for start in range(0, len(handles), _MAX_PER_CALL):
            chunk = handles[start : start + _MAX_PER_CALL]
            entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(chunk)]
            failed = client.delete_message_batch(QueueUrl=url, Entries=entries).get("Failed", [])
            for failure in failed:
                log.warning(
                    "SQS queue %s: a committed message was not deleted (%s: %s); it will be "
                    "read again",
                    self.config.queue_name,
                    failure.get("Code"),
                    failure.get("Message"),
                )

    async def nack_handler(self, nack_request: source.NackRequest) -> None:
        """Never called: a micro-batch commits or is replayed."""

    async def pending_handler(self) -> source.PendingResponse:
        return source.PendingResponse(count=await asyncio.to_thread(self.pending))

    def pending(self) -> int:
        """SQS's ``ApproximateNumberOfMessages`` (-1 when it does not say)."""
        client, url = self._queue()
        attributes = client.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        ).get("Attributes", {})
        raw = attributes.get("ApproximateNumberOfMessages")
        return int(raw) if raw is not None else -1

    async def active_partitions_handler(self) -> source.PartitionsResponse:
        return source.PartitionsResponse(partitions=[0])


def _message(raw: dict[str, Any]) -> source.Message:
    """An SQS message as Numaflow's SQS source makes it (see the module doc)."""
    attributes = {str(k): str(v) for k, v in raw.get("Attributes", {}).items()}
    sent = attributes.get("SentTimestamp")
    event_time = datetime.now(UTC)
    if sent is not None and sent.isdigit():
        event_time = datetime.fromtimestamp(int(sent) / 1000, UTC)
    return source.Message(
        payload=raw.get("Body", "").encode("utf-8"),
        offset=source.Offset(raw["ReceiptHandle"].encode("utf-8"), partition_id=0),
        event_time=event_time,
        keys=[raw.get("MessageId", "")],
        headers=attributes,
    )
