"""The contract of keyed logics: what a call gets, what it returns, and what it may use.

A keyed step's logic (bytewax's kinds in :mod:`flowspark.runtime.stateful`,
Numaflow's in :mod:`flowspark.runtime.numaflow.keyed`, built by
:func:`flowspark.runtime.logics.logic_for`) is a :class:`KeyedLogic`: every call
gets one :class:`KeyedCall` — one key's state (``None`` for a new key), the
values that arrived for it in this micro-batch (in arrival order), ``now`` (the
batch's system time in ms) and, for the logics that keep one, the key's
write-ahead log (:class:`Wal`) and where its values came from — and returns an
:class:`Outcome`: the new state (``None`` forgets the key), what to emit, late
values, and when it wants to be woken (``None``: no timer). The Spark adapter
stores the state and turns wake times into timers; the logic never sees Spark.

>>> call = KeyedCall("k", None, 0, [1, 2])
>>> call.key, call.values, call.wal
('k', [1, 2], None)
>>> KeyedLogic().on_timer(KeyedCall("k", (1,), 5)).state
(1,)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from flowspark.runtime.errors import step_failure
from flowspark.runtime.windowing import EOF_MS

__all__ = ["Outcome", "KeyedCall", "KeyedLogic", "Wal", "HandlerFactory", "on_value_runs"]


class Wal(Protocol):
    """A keyed step's write-ahead log for one key: a list of picklable entries
    (in Spark state, or in memory for a call that nothing outlives)."""

    def read(self) -> list[Any]:
        """Every entry, oldest first."""
        ...

    def append(self, entry: Any) -> None:
        """Add one entry at the end."""
        ...

    def write(self, entries: list[Any]) -> None:
        """Replace every entry by ``entries``."""
        ...

    def clear(self) -> None:
        """Drop every entry."""
        ...


class HandlerFactory(Protocol):
    """A zero-argument callable producing the handler of one key (and window): see
    :func:`flowspark.api.udf.servers.handler_factory`."""

    def __call__(self) -> Callable[..., Any]: ...


class KeyedCall(NamedTuple):
    """One call of a keyed logic for one key.

    ``now`` is the batch's system time in ms (``>= EOF_MS``: the input ended);
    for :meth:`KeyedLogic.on_values_at_end` it is the wall-clock system time.
    ``values`` are the key's values of this batch (none for a timer). ``wal`` is
    the key's write-ahead log and ``origins`` which upstream partition sent which
    run of the values (``[(upstream, count), ...]``; ``None``: all from one): both
    are given only to logics with ``uses_wal``.
    """

    # A named tuple: built once per key and call, it is about three times cheaper
    # to make than a frozen dataclass, and just as immutable.
    key: str
    state: Any
    now: int
    values: Sequence[Any] = ()
    wal: Wal | None = None
    origins: list[tuple[int, int]] | None = None


@dataclass
class Outcome:
    """What one call of a logic produced: its outputs by slot (``emitted`` on slot 0,
    ``late`` on 1, ``meta`` on 2: a 0.21 window step's closed windows), the key's
    new state and when to wake it. ``handled`` counts work its outputs do not show,
    for the run's progress (a cycle's datums run, each round); ``written`` the items
    an output wrote (an output whose parts Spark's tasks write, runtime/parts.py)."""

    state: Any
    emitted: list[Any] = field(default_factory=list)
    late: list[Any] = field(default_factory=list)
    wake: int | None = None
    meta: list[Any] = field(default_factory=list)
    handled: int = 0
    written: int = 0

    def add(self, other: Outcome) -> None:
        """Append ``other``'s outputs to this one's (state and wake stay)."""
        self.emitted += other.emitted
        self.late += other.late
        self.meta += other.meta
        self.handled += other.handled
        self.written += other.written

    @property
    def outputs(self) -> tuple[list[Any], list[Any], list[Any]]:
        """The outputs by slot."""
        return (self.emitted, self.late, self.meta)


def on_value_runs(
    logic: KeyedLogic, key: str, state: Any, runs: Sequence[tuple[int, Sequence[Any]]]
) -> Outcome:
    """``logic.on_values`` for each ``(now, values)`` run of one key in turn (the
    values read at each system time), as one outcome: the last state and wake time,
    everything emitted and late in order.

    >>> class Count(KeyedLogic):
    ...     def on_values(self, call):
    ...         n = (call.state or 0) + len(call.values)
    ...         return Outcome(n, emitted=[(call.now, n)], wake=call.now + 10)
    >>> out = on_value_runs(Count(), "k", None, [(100, "ab"), (250, "c")])
    >>> out.state, out.emitted, out.wake
    (3, [(100, 2), (250, 3)], 260)
    """
    total = Outcome(state)
    for now, values in runs:
        outcome = logic.on_values(KeyedCall(key, total.state, now, values))
        total.state, total.wake = outcome.state, outcome.wake
        total.add(outcome)
    return total


class KeyedLogic:
    """Base of the keyed operators' logic."""

    step_id: str = ""
    uses_timers = False
    uses_wal = False  # the Numaflow logics keep a write-ahead log beside their state

    def use_slots(self, slots: frozenset[int]) -> None:
        """Told which output slots lead to an output (the others need not be filled)."""

    def on_values(self, call: KeyedCall) -> Outcome:
        """Handle this batch's values for ``call.key``."""
        raise NotImplementedError

    def on_timer(self, call: KeyedCall) -> Outcome:
        """Handle a timer (``call.now >= EOF_MS`` means the input ended)."""
        return Outcome(call.state)

    def on_values_at_end(self, call: KeyedCall) -> Outcome:
        """Values that arrive with the end of the input (flushed by an upstream keyed
        step when it ended); ``call.now`` is the system time. By default the logic's
        own end-of-input rule: :meth:`on_values` at ``EOF_MS``."""
        return self.on_values(call._replace(now=EOF_MS))

    def _call(self, fn: Callable[..., Any], item: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            raise step_failure(self.step_id, fn, item, exc) from None
