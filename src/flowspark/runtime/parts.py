"""Outputs whose parts Spark's tasks write (``PartitionedOutput.writes_on = "executors"``).

The plan makes such an output a keyed step (:func:`flowspark.plan.graph.is_keyed`):
:class:`PartRoute` gathers the items by part name, the key of the keyed exchange to
the task that owns each part, and :class:`PartWriteLogic` writes the part
there. A part's key state is its last ``snapshot()``, which Spark commits with the
micro-batch. A retried task or a replayed batch gets the snapshot from before the
batch and rebuilds the part from it (``FileOutput`` truncates back), so nothing is
written twice and nothing is lost.

A part is built from its snapshot for each micro-batch that brings it items, and
closed after the snapshot: whether an open part is still where its snapshot says is
not known in a task (another process may have written the part since, in an attempt
of a batch that is replayed now), and only ``build_part`` puts it back there.

>>> from flowspark.api.outputs import PartitionedOutput, StatefulSink
>>> written = []
>>> class Part(StatefulSink):
...     def __init__(self, name, at):
...         self.name, self.at = name, at or 0
...     def write_batch(self, values):
...         written.extend(values)
...         self.at += len(values)
...     def snapshot(self):
...         return self.at
>>> class Two(PartitionedOutput):
...     def list_parts(self):
...         return ["a", "b"]
...     def part_fn(self, key):
...         return len(key)
...     def build_part(self, name, state):
...         return Part(name, state)
>>> PartRoute("out", Two()).group([("k", 1), ("kk", 2), "x"], {})
{'b': [('k', 1), 'x'], 'a': [('kk', 2)]}
>>> from flowspark.runtime.keyed import KeyedCall
>>> logic = PartWriteLogic("out", Two())
>>> outcome = logic.on_values(KeyedCall("b", None, 0, [("k", 1), "x"]))
>>> written, outcome.state, outcome.written
([1, 'x'], (2,), 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flowspark.api.outputs import PartitionedOutput
from flowspark.runtime.errors import step_failure
from flowspark.runtime.keyed import KeyedCall, KeyedLogic, Outcome

__all__ = ["PartRoute", "PartWriteLogic", "value_of"]


def value_of(item: Any) -> tuple[str, Any]:
    """An output item's key and the value written: ``(key, value)`` items as they
    are, any other item keyed by its ``str()`` and written whole (as the driver's
    partitioned writer does)."""
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return item
    return str(item), item


class PartRoute:
    """Which part of ``output`` each item goes to (``part_fn`` of its key, modulo
    the number of parts, named by ``list_parts()`` as the flow was compiled)."""

    def __init__(self, step_id: str, output: PartitionedOutput) -> None:
        self.step_id = step_id
        self.output = output
        self.parts = list(output.list_parts())
        if not self.parts:
            raise ValueError(
                f"output {step_id!r}: {type(output).__name__}.list_parts() returned no parts"
            )

    def group(self, items: Sequence[Any], groups: dict[str, list[Any]]) -> dict[str, list[Any]]:
        """Add each item, in order, to its part's list in ``groups`` (by part name)."""
        parts, count, part_fn = self.parts, len(self.parts), self.output.part_fn
        named: dict[str, str] = {}
        for item in items:
            key = value_of(item)[0]
            part = named.get(key)
            if part is None:
                try:
                    part = named[key] = parts[part_fn(key) % count]
                except Exception as exc:
                    raise step_failure(self.step_id, part_fn, item, exc) from None
            group = groups.get(part)
            if group is None:
                groups[part] = [item]
            else:
                group.append(item)
        return groups


class PartWriteLogic(KeyedLogic):
    """The keyed logic of an output whose parts Spark's tasks write: the key is a
    part's name, the state ``(snapshot,)`` of the part after its last write."""

    def __init__(self, step_id: str, output: PartitionedOutput) -> None:
        self.step_id = step_id
        self.output = output
        self.passes_on = False

    def use_slots(self, slots: frozenset[int]) -> None:
        self.passes_on = 0 in slots  # the output's stream goes on to other steps

    def on_values(self, call: KeyedCall) -> Outcome:
        resume = call.state[0] if call.state is not None else None
        values = [value_of(item)[1] for item in call.values]
        try:
            part = self.output.build_part(call.key, resume)
        except Exception as exc:
            raise step_failure(self.step_id, "build_part", call.key, exc) from None
        try:
            part.write_batch(values)
            snapshot = part.snapshot()
        except Exception as exc:
            raise step_failure(self.step_id, "write_batch", values[:3], exc) from None
        finally:
            part.close()
        emitted = list(call.values) if self.passes_on else []
        return Outcome((snapshot,), emitted=emitted, written=len(values))
