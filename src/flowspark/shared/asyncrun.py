"""Finish a coroutine from synchronous code, whether or not a loop runs here.

>>> async def answer():
...     return 42
>>> run_to_completion(answer)
42
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["run_to_completion"]


def run_to_completion(
    make: Callable[[], Awaitable[Any]],
    loop: asyncio.AbstractEventLoop | None = None,
    thread_name: str = "flowspark-async",
) -> Any:
    """Await ``make()`` to its end and return its result (or raise its error).

    With no loop running in this thread it runs on ``loop`` (else a fresh one);
    inside a running loop (which cannot be re-entered) it runs in a new thread.
    """

    async def main() -> Any:
        return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        if loop is not None:
            return loop.run_until_complete(main())
        return asyncio.run(main())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc

    thread = threading.Thread(target=target, name=thread_name)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]
