"""The command lines' value types (argparse ``type=``): each refuses a bad value with
a message argparse prints as ``argument FLAG: must be …; got 'VALUE'``.

>>> count_value("3"), seconds_value("0.5"), port_value("0")
(3, 0.5, 0)
"""

from __future__ import annotations

import argparse
import math

__all__ = ["count_value", "port_value", "seconds_value"]


def seconds_value(text: str) -> float:
    """A number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0; got {text!r}")
    return value


def count_value(text: str) -> int:
    """A whole number >= 1."""
    value = int(text) if text.strip().isdigit() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1; got {text!r}")
    return value


def port_value(text: str) -> int:
    """A port number, 0..65535."""
    value = int(text) if text.strip().isdigit() else -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0..65535; got {text!r}")
    return value
