"""The flags of flowspark's JVMs (driver and executors); why each: the docstring of
:mod:`flowspark.engine.session`."""

from __future__ import annotations

__all__ = ["JVM_FLAGS"]

JVM_FLAGS = (
    "-XX:TieredStopAtLevel=1",
    "-XX:ReservedCodeCacheSize=256m",
    "-XX:G1HeapRegionSize=4m",
    "-XX:MinHeapFreeRatio=10",
    "-XX:MaxHeapFreeRatio=30",
    "-Xms64m",
    "-XX:GCTimeRatio=4",
)
"""Flags for flowspark's JVMs (driver and executors): the C1 JIT compiler only, and
a heap that starts small and stays the size the run needs (see
:mod:`flowspark.engine.session`)."""
