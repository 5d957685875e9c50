"""Comparing flowspark's pynumaflow server classes with pynumaflow's.

flowspark's servers take pynumaflow's settings as ``**options: Unpack[SomeOptions]``
(a TypedDict), so their signatures list ``options`` where pynumaflow's list the
settings: :func:`parameter_names` puts the TypedDict's keys in its place, and
:func:`settings` gives what a server made of its arguments (for comparing defaults).
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

# What pynumaflow's servers keep of their settings.
SETTINGS = (
    "sock_path",
    "max_message_size",
    "max_threads",
    "server_info_file",
    "shutdown_callback",
    "side_input_dir_path",
    "_server_options",
)


def parameter_names(cls: type) -> list[str]:
    """The names ``cls(...)`` takes, in order: the keys of a ``**options: Unpack[TD]``
    stand where ``options`` does."""
    hints = typing.get_type_hints(cls.__init__)
    names: list[str] = []
    for parameter in inspect.signature(cls).parameters.values():
        if parameter.kind is parameter.VAR_KEYWORD:
            (options,) = typing.get_args(hints[parameter.name])
            names += options.__annotations__
        else:
            names.append(parameter.name)
    return names


def server_settings(server: Any) -> dict[str, Any]:
    """The settings attributes ``server`` has (see :data:`SETTINGS`)."""
    return {name: getattr(server, name) for name in SETTINGS if hasattr(server, name)}
