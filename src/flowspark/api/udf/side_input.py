"""pynumaflow 0.14's ``pynumaflow.sideinput``: the retrieve handler and its server.

A side input is a value a pipeline's UDFs read from a file: Numaflow calls the
side input's ``retrieve_handler()`` on its ``trigger.schedule`` and, unless the
response says ``no_broadcast``, writes the value to
``SIDE_INPUT_DIR_PATH/<side input name>`` in every vertex that lists it.

``SIDE_INPUT_DIR_PATH`` is pynumaflow's ``/var/numaflow/side-inputs`` unless the
environment variable ``FLOWSPARK_SIDE_INPUT_DIR`` names another directory (a
pipeline run gives each UDF process that uses side inputs its own directory).

>>> Response.broadcast_message(b"v1")
Response(value=b'v1', no_broadcast=False)
>>> Response.no_broadcast_message().no_broadcast
True
>>> server = SideInputServer(lambda: Response.broadcast_message(b"v1"))
>>> server.kind, server.retrieve().value
('side_input', b'v1')
"""

from __future__ import annotations

import json
import os
from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias, Unpack

from flowspark.api.udf.servers import (
    NumaflowServer,
    ServerOptions,
    derives_from,
    set_server_options,
    start_or_capture,
)

__all__ = [
    "Response",
    "SideInput",
    "SideInputServer",
    "SideInputOptions",
    "retriever",
    "SIDE_INPUT_DIR_PATH",
    "SIDE_INPUT_DIR_ENV",
    "SIDE_INPUT_SOCK_PATH",
    "SIDE_INPUT_SERVER_INFO_FILE_PATH",
]

SIDE_INPUT_DIR_ENV = "FLOWSPARK_SIDE_INPUT_DIR"
SIDE_INPUT_DIR_PATH = os.environ.get(SIDE_INPUT_DIR_ENV) or "/var/numaflow/side-inputs"
SIDE_INPUT_SOCK_PATH = "/var/run/numaflow/sideinput.sock"
SIDE_INPUT_SERVER_INFO_FILE_PATH = "/var/run/numaflow/sideinput-server-info"


@dataclass
class Response:
    """What one retrieval gives: a value to broadcast, or ``no_broadcast``."""

    __slots__ = ("value", "no_broadcast")

    value: bytes
    no_broadcast: bool

    @classmethod
    def broadcast_message(cls, value: bytes) -> Response:
        """A response whose ``value`` is written for the UDFs."""
        return Response(value=value, no_broadcast=False)

    @classmethod
    def no_broadcast_message(cls) -> Response:
        """A response that leaves the UDFs' current value as it is."""
        return Response(value=b"", no_broadcast=True)


class SideInput(metaclass=ABCMeta):
    """A side input's retrieval: subclass it and implement :meth:`retrieve_handler`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Response:
        return self.retrieve_handler(*args, **kwargs)

    @abstractmethod
    def retrieve_handler(self) -> Response:
        """Called on each trigger of the side input's schedule."""


RetrieverHandlerCallable: TypeAlias = Callable[[], Response]
RetrieverCallable: TypeAlias = SideInput | RetrieverHandlerCallable


def retriever(handler: Any) -> RetrieverHandlerCallable:
    """The callable to run for a side input: a ``SideInput`` instance's
    ``retrieve_handler`` (flowspark's or pynumaflow's ABC), or a function."""
    if isinstance(handler, type):
        raise TypeError(
            f"Invalid handler {handler}: pass an instance of the SideInput subclass, not the class"
        )
    if derives_from(type(handler), SideInput):
        return handler.retrieve_handler
    if not callable(handler):
        raise TypeError(f"Invalid handler {handler!r}: expected a function or a SideInput instance")
    return handler


class SideInputOptions(ServerOptions, total=False):
    """The side-input server's settings: :class:`~flowspark.api.udf.servers.ServerOptions`
    and the directory its values are written to (default ``SIDE_INPUT_DIR_PATH``)."""

    side_input_dir_path: str


class SideInputServer(NumaflowServer):
    """pynumaflow's ``sideinput.SideInputServer``: a ``SideInput`` instance or a function.

    Inside a pipeline run, ``start()`` records the server and flowspark calls its
    handler on the side input's schedule. Alone (``python side_input.py``), it
    retrieves once and prints the response as a JSON line.
    """

    kind: ClassVar[str] = "side_input"
    default_paths = (SIDE_INPUT_SOCK_PATH, SIDE_INPUT_SERVER_INFO_FILE_PATH)

    def __init__(
        self, side_input_instance: RetrieverCallable, **options: Unpack[SideInputOptions]
    ) -> None:
        set_server_options(self, options, self.default_paths, SideInputOptions.__optional_keys__)
        self._one_handler(side_input_instance, retriever)
        self.retrieve: RetrieverHandlerCallable = self.make_handler()
        self.side_input_instance = side_input_instance
        self.side_input_dir_path = options.get("side_input_dir_path", SIDE_INPUT_DIR_PATH)

    def start(self) -> None:
        """Retrieve once and print the response (recorded instead inside a pipeline run)."""
        start_or_capture(self, self._print_once)

    def _print_once(self) -> None:
        response = self.retrieve()
        value = response.value.decode("utf-8", "backslashreplace")
        print(json.dumps({"value": value, "no_broadcast": response.no_broadcast}))
