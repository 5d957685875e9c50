"""The small functions bytewax 0.21's operators hand to flowspark's step kinds.

Each wraps a user's function the way bytewax 0.21 does (a ``(key, value)`` split,
a ``bool`` check, the step id for an inspector) and raises bytewax's
``TypeError`` texts. They are private classes at module level, so they pickle by
reference to Spark's workers, and keep the user's function as ``__wrapped__``,
so an error names that function and shows its frames only.

>>> _MapValue("f.m", str.upper)(("k", "a"))
('k', 'A')
>>> _BoolPredicate("f.even", lambda x: x % 2)(3)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
TypeError: return value of `predicate` ... must be a `bool`; got a <class 'int'> instead
>>> _KeyOn("f.k", str)(7)
('7', 7)
>>> list(_FlatMapValue("f.fm", str.split)(("k", "a b")))
[('k', 'a'), ('k', 'b')]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from flowspark.operators.scoping import f_repr

# The wrappers are private classes: an error names the user's function they wrap
# (``__wrapped__``), as for flowspark's other wrappers (runtime/errors.py).
__all__ = [
    "TTLCache",
    "default_debug_inspector",
    "default_inspector",
    "no_state",
    "split_pair",
    "utc_now",
]


def split_pair(step_id: str, item: Any) -> tuple[Any, Any]:
    """``(key, value)`` of a keyed stream's item, with bytewax's ``TypeError`` otherwise."""
    try:
        key, value = item
    except (TypeError, ValueError):
        raise TypeError(
            f"step {step_id!r} requires `(key, value)` 2-tuple as upstream for routing; "
            f"got a {type(item)!r} instead"
        ) from None
    return key, value


def _must_be_bool(keep: Any, predicate: Any, step_id: str) -> bool:
    if keep is True or keep is False:
        return keep
    raise TypeError(
        f"return value of `predicate` {f_repr(predicate)} in step {step_id!r} must be a "
        f"`bool`; got a {type(keep)!r} instead"
    )


@dataclass(frozen=True)
class _Wrapper:
    """A step id and the user's function (``__wrapped__``)."""

    step_id: str
    fn: Callable[..., Any]

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        return self.fn


class _BoolPredicate(_Wrapper):
    """``predicate(item)``, which must return a ``bool`` (``filter``, ``branch``)."""

    def __call__(self, item: Any) -> bool:
        return _must_be_bool(self.fn(item), self.fn, self.step_id)


class _MapValue(_Wrapper):
    """``(key, value)`` → ``(key, mapper(value))``."""

    def __call__(self, item: Any) -> tuple[Any, Any]:
        key, value = split_pair(self.step_id, item)
        return key, self.fn(value)


class _FilterValue(_Wrapper):
    """Keep ``(key, value)`` when ``predicate(value)`` (a ``bool``) is true."""

    def __call__(self, item: Any) -> bool:
        return _must_be_bool(self.fn(split_pair(self.step_id, item)[1]), self.fn, self.step_id)


class _FilterMapValue(_Wrapper):
    """``(key, mapper(value))``, or ``None`` (dropped) when the mapper returns ``None``."""

    def __call__(self, item: Any) -> tuple[Any, Any] | None:
        key, value = split_pair(self.step_id, item)
        out = self.fn(value)
        return None if out is None else (key, out)


class _FlatMapValue(_Wrapper):
    """``(key, w)`` for each ``w`` of ``mapper(value)``."""

    def __call__(self, item: Any) -> Iterable[tuple[Any, Any]]:
        key, value = split_pair(self.step_id, item)
        return ((key, w) for w in self.fn(value))


@dataclass(frozen=True)
class _Flatten:
    """Each item must be an iterable; its elements go on."""

    step_id: str

    def __call__(self, item: Any) -> Iterable[Any]:
        if not isinstance(item, Iterable):
            raise TypeError(
                f"step {self.step_id!r} requires upstream to be iterables; "
                f"got a {type(item)!r} instead"
            )
        return item


class _StepInspector(_Wrapper):
    """``inspector(step_id, item)``: bytewax 0.21's ``inspect`` callback."""

    def __call__(self, item: Any) -> None:
        self.fn(self.step_id, item)


def default_inspector(step_id: str, item: Any) -> None:
    """Print ``{step_id}: {item!r}`` (bytewax 0.21's default for ``inspect``)."""
    print(f"{step_id}: {item!r}", flush=True)


def default_debug_inspector(step_id: str, item: Any, epoch: int, worker: int) -> None:
    """Print ``{step_id} W{worker} @{epoch}: {item!r}`` (the default of ``inspect_debug``)."""
    print(f"{step_id} W{worker} @{epoch}: {item!r}", flush=True)


class _KeyOn(_Wrapper):
    """``item`` → ``(key(item), item)``; the key must be a ``str``.

    >>> on = _KeyOn("k", lambda x: x[0])
    >>> on("ab"), on.map_list(iter(["cd", "ef"]))
    (('a', 'ab'), [('c', 'cd'), ('e', 'ef')])
    """

    def __call__(self, item: Any) -> tuple[str, Any]:
        key = self.fn(item)
        if not isinstance(key, str):
            raise self._not_str(key)
        return key, item

    def map_list(self, items: Iterator[Any]) -> list[tuple[str, Any]]:
        """The same over the items of a whole list at once (a stage's map, see
        :meth:`flowspark.runtime.stage.Node.apply`): the key function runs per item
        without this wrapper's call in between. A key that is not a ``str`` raises
        while ``items`` stands at its item."""
        key, refuse = self.fn, self._refuse
        return [(k, x) for x in items if type(k := key(x)) is str or refuse(k)]

    def _refuse(self, key: Any) -> bool:
        if isinstance(key, str):  # a str subclass
            return True
        raise self._not_str(key)

    def _not_str(self, key: Any) -> TypeError:
        return TypeError(
            f"return value of `key` {f_repr(self.fn)} in step {self.step_id!r} must be "
            f"a `str`; got a {type(key)!r} instead"
        )


@dataclass(frozen=True)
class _KeyRm:
    """``(key, value)`` → ``value``."""

    step_id: str

    def __call__(self, item: Any) -> Any:
        return split_pair(self.step_id, item)[1]


class _KeyOne(_Wrapper):
    """``item`` → ``(key(item), 1)``: what ``count_final`` sums."""

    def __call__(self, item: Any) -> tuple[Any, int]:
        return self.fn(item), 1


@dataclass(frozen=True)
class _Label:
    """``value`` → ``(side, value)``: a join's side number on each value."""

    side: int

    def __call__(self, value: Any) -> tuple[int, Any]:
        return self.side, value


class _PreReduce(_Wrapper):
    """A list of ``(key, value)`` reduced per key, first come first (before the shuffle)."""

    def __call__(self, items: list[Any]) -> list[tuple[Any, Any]]:
        reduced: dict[Any, Any] = {}
        reducer, missing = self.fn, _MISSING
        for item in items:
            if type(item) is tuple and len(item) == 2:  # split_pair's work, inlined
                key, value = item
            else:
                key, value = split_pair(self.step_id, item)
            acc = reduced.get(key, missing)
            reduced[key] = value if acc is missing else reducer(acc, value)
        return list(reduced.items())


_MISSING: Any = object()


def _identity(x: Any) -> Any:
    """The default ``by`` of the max/min operators: a value is its own key."""
    return x


@dataclass(frozen=True)
class _ReduceFolder:
    """A fold whose empty accumulator is ``None``: the first value starts it."""

    reducer: Callable[[Any, Any], Any]

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        return self.reducer

    def __call__(self, acc: Any, value: Any) -> Any:
        return value if acc is None else self.reducer(acc, value)


class _StatefulFlatMapper(_Wrapper):
    """``mapper(state, value) -> (state, values)``, the values as a list (what
    ``stateful_flat_map`` hands ``stateful_map``)."""

    def __call__(self, state: Any, value: Any) -> tuple[Any, list[Any]]:
        result = self.fn(state, value)
        try:
            new_state, values = result
        except (TypeError, ValueError):
            raise TypeError(
                f"return value of `mapper` {f_repr(self.fn)} in step {self.step_id!r} must be "
                f"a 2-tuple of `(updated_state, emit_values)`; got a {type(result)!r} instead"
            ) from None
        return new_state, list(values)


@dataclass(frozen=True)
class _ExpandValues:
    """``(key, [w, ...])`` → ``(key, w)`` for each ``w``."""

    def __call__(self, item: tuple[Any, list[Any]]) -> Iterable[tuple[Any, Any]]:
        key, values = item
        return ((key, w) for w in values)


def no_state() -> None:
    """The state of a new key before its first value: none (bytewax 0.21's
    ``stateful_map`` mapper gets ``None`` then)."""
    return None


def utc_now() -> datetime:
    """The system time as an aware UTC datetime."""
    return datetime.now(UTC)


@dataclass
class TTLCache:
    """A cache of ``v_getter(key)`` per key, fetched again once older than ``ttl``
    (bytewax 0.21's ``TTLCache``).

    >>> now = datetime(2024, 1, 1)
    >>> cache = TTLCache(lambda k: k.upper(), lambda: now, timedelta(seconds=1))
    >>> cache.get("a")
    'A'
    """

    v_getter: Callable[[Any], Any]
    now_getter: Callable[[], datetime]
    ttl: timedelta
    _cache: dict[Any, tuple[datetime, Any]] = field(default_factory=dict)

    def get(self, k: Any) -> Any:
        """The value for ``k``, fetched if missing or older than the TTL."""
        now = self.now_getter()
        hit = self._cache.get(k)
        if hit is not None and now - hit[0] <= self.ttl:
            return hit[1]
        value = self.v_getter(k)
        self._cache[k] = (now, value)
        return value

    def remove(self, k: Any) -> None:
        """Forget the value for ``k``."""
        del self._cache[k]


class _EnrichCached:
    """``mapper(cache, item)`` for each item of a list, with one :class:`TTLCache`
    per Python worker process and its time read once per list."""

    def __init__(
        self,
        getter: Callable[[Any], Any],
        mapper: Callable[[TTLCache, Any], Any],
        ttl: timedelta,
        now_getter: Callable[[], datetime],
    ) -> None:
        self.getter, self.mapper, self.ttl, self.now_getter = getter, mapper, ttl, now_getter
        self._now: datetime | None = None
        self._cache: TTLCache | None = None

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        return self.mapper

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": None, "_now": None}

    def __call__(self, items: list[Any]) -> list[Any]:
        self._now = self.now_getter()
        if self._cache is None:
            self._cache = TTLCache(self.getter, self._batch_now, self.ttl)
        return [self.mapper(self._cache, item) for item in items]

    def _batch_now(self) -> datetime:
        assert self._now is not None  # set before each list
        return self._now
