"""Import face of bytewax's ``bytewax.window``: clocks and windows.

The types are defined in :mod:`flowspark.api.window`; this module re-exports them.
"""

from flowspark.api.window import (
    UTC_MAX,
    UTC_MIN,
    ClockConfig,
    EventClockConfig,
    SessionWindow,
    SlidingWindow,
    SystemClockConfig,
    TumblingWindow,
    WindowConfig,
)

__all__ = [
    "ClockConfig",
    "EventClockConfig",
    "SystemClockConfig",
    "WindowConfig",
    "TumblingWindow",
    "SlidingWindow",
    "SessionWindow",
    "UTC_MIN",
    "UTC_MAX",
]
