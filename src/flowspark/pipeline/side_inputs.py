"""A pipeline's side inputs during one run: managers, directories and UDF processes.

Numaflow runs each side input's retrieval in a manager on its schedule and
keeps a copy of the latest value in every vertex pod that lists it, under
``/var/numaflow/side-inputs/<name>``; a vertex starts once all its side inputs
have a value. :class:`SideInputService` does the same for a run on flowspark
(a service of the pipeline's Dataflow: entered when the run starts, left when it
ends):

* each side input's retrieve handler runs on the driver on its schedule
  (:class:`~flowspark.runtime.numaflow.side_inputs.SideInputManager`);
* each map vertex that lists side inputs gets a directory of its own, holding
  only those, and its UDF script runs whole in a process of its own with
  ``SIDE_INPUT_DIR_PATH`` set to it
  (:mod:`flowspark.runtime.numaflow.script_host`);
* the UDF processes start once every side input a vertex lists has a value,
  and the run's first micro-batch after that.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowspark.api.udf.side_input import SIDE_INPUT_DIR_ENV
from flowspark.pipeline.errors import PipelineSpecError
from flowspark.pipeline.model import SideInputSpec
from flowspark.runtime.numaflow.script_host import HOSTED_KINDS, ScriptProcess
from flowspark.runtime.numaflow.side_inputs import Schedule, SideInputManager

__all__ = ["SideInputService", "SideInputVertex", "schedule_of"]

log = logging.getLogger("flowspark.pipeline")

# How often the wait for a side input's first value says that it waits.
_WAIT_NOTE_S = 10.0


def schedule_of(spec: SideInputSpec) -> Schedule:
    """The side input's trigger as a :class:`Schedule` (checked when the spec loaded)."""
    if spec.every_s is not None:
        return Schedule.every(spec.every_s)
    return Schedule.parse(spec.schedule, spec.timezone)


@dataclass(frozen=True)
class SideInputVertex:
    """A map vertex that reads side inputs: its UDF process and the names it lists."""

    process: ScriptProcess
    names: tuple[str, ...]


class SideInputService:
    """The side inputs of one run (see the module doc); a context manager."""

    def __init__(
        self,
        side_inputs: Sequence[tuple[SideInputSpec, Callable[[], Any]]],
        vertices: Sequence[SideInputVertex],
    ) -> None:
        self.side_inputs = list(side_inputs)
        self.vertices = list(vertices)
        self.managers: list[SideInputManager] = []
        self.root: Path | None = None

    def __enter__(self) -> SideInputService:
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="flowspark-side-inputs-"))
        directories = {v.process.vertex: self.root / v.process.vertex for v in self.vertices}
        for directory in directories.values():
            directory.mkdir()
        for spec, retrieve in self.side_inputs:
            users = [directories[v.process.vertex] for v in self.vertices if spec.name in v.names]
            manager = SideInputManager(spec.name, retrieve, schedule_of(spec), users)
            self.managers.append(manager)
            manager.start()
        for manager in self.managers:
            if manager.directories:
                _wait_for_value(manager)
        for vertex in self.vertices:
            process = vertex.process
            process.start({SIDE_INPUT_DIR_ENV: str(directories[process.vertex])})
        for vertex in self.vertices:
            process = vertex.process
            try:
                kind = process.kind()
            except RuntimeError as exc:
                raise PipelineSpecError(
                    f'vertex "{process.vertex}": UDF file {process.script!r}: {exc}'
                ) from None
            if kind not in HOSTED_KINDS:
                raise PipelineSpecError(
                    f'vertex "{process.vertex}" reads side inputs, so its UDF must be a map '
                    f"or map stream server on flowspark; {process.script!r} starts a {kind} "
                    "server"
                )

    def __exit__(self, *exc: object) -> None:
        for manager in self.managers:
            manager.stop()
        for vertex in self.vertices:
            vertex.process.stop()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


def _wait_for_value(manager: SideInputManager) -> None:
    """Wait until the side input broadcast a value once (as a Numaflow vertex waits)."""
    while not manager.has_value.wait(_WAIT_NOTE_S):
        log.warning(
            "side input %s: waiting for its first broadcast value (next retrieval at %s)",
            manager.name,
            manager.next_fire().isoformat(timespec="seconds"),
        )
