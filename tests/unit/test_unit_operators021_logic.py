"""The ``stateful_batch`` kind's logic and bytewax 0.21's keyed operators' logics, in
plain Python (no Spark).

`StatefulBatchRun` gets one key's state, its values of a micro-batch and ``now``
(ms) and returns an `Outcome`; ``on_timer`` at ``EOF_MS`` is the end of the input.
Expected results follow bytewax 0.21.1's tests (pytests/operators/test_stateful.py,
test_collect.py, test_join.py, test_*_final.py) where one call sees what one
bytewax activation sees.
"""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowspark.operators import StatefulLogic
from flowspark.operators.joins import JoinBuilder, JoinState
from flowspark.operators.keyed import CollectBuilder, FoldFinalBuilder
from flowspark.operators.logic import ItemLogicBuilder
from flowspark.operators.shims import TTLCache, _PreReduce, _ReduceFolder, _StatefulFlatMapper
from flowspark.runtime.errors import RemoteStepFailure, find_step_error
from flowspark.runtime.keyed import KeyedCall
from flowspark.runtime.stateful import StatefulBatchRun
from flowspark.runtime.windowing import EOF_MS
from flowspark.shared.times import aware_to_ms


class Transitions(StatefulLogic):
    """bytewax's test logic: every call emits ``(old state, new state)``."""

    item_triggers_notify = False
    after_item = StatefulLogic.RETAIN
    after_notify = StatefulLogic.RETAIN
    after_eof = StatefulLogic.RETAIN
    notify_in = timedelta(0)

    def __init__(self, state: Any) -> None:
        self._state, self._notify_at = state if state is not None else ("NEW", None)

    def on_item(self, value: Any) -> tuple[list[Any], bool]:
        if self.item_triggers_notify:
            self._notify_at = datetime(2024, 1, 1, tzinfo=UTC) + self.notify_in
        old, self._state = self._state, "ITEM"
        return [(old, self._state)], self.after_item

    def on_notify(self) -> tuple[list[Any], bool]:
        self._notify_at = None
        old, self._state = self._state, "NOTIFY"
        return [(old, self._state)], self.after_notify

    def on_eof(self) -> tuple[list[Any], bool]:
        old, self._state = self._state, "EOF"
        return [(old, self._state)], self.after_eof

    def notify_at(self) -> datetime | None:
        return self._notify_at

    def snapshot(self) -> Any:
        return (self._state, self._notify_at)


T0 = aware_to_ms(datetime(2024, 1, 1, tzinfo=UTC))


def _run(cls: type, calls: list[tuple[str, int, list[Any]]]) -> list[Any]:
    """Feed one key through ``calls`` (``("values", now, values)`` or ``("timer", now,
    [])``); everything it emitted, in order."""
    run = StatefulBatchRun("f.stateful", ItemLogicBuilder(cls))
    state, out = None, []
    for what, now, values in calls:
        if what == "values":
            outcome = run.on_values(KeyedCall("ALL", state, now, values))
        else:
            outcome = run.on_timer(KeyedCall("ALL", state, now))
        state = outcome.state
        out += [value for _key, value in outcome.emitted]
        assert pickle.loads(pickle.dumps(state)) == state
    return out


def test_items_with_retain_and_discard():
    class Discard(Transitions):
        after_item = StatefulLogic.DISCARD

    retain = _run(Transitions, [("values", T0, [1]), ("values", T0 + 5, [2])])
    discard = _run(Discard, [("values", T0, [1]), ("values", T0 + 5, [2])])
    assert retain == [("NEW", "ITEM"), ("ITEM", "ITEM")]
    assert discard == [("NEW", "ITEM"), ("NEW", "ITEM")]


def test_a_discard_part_way_through_a_batch_builds_a_new_logic_for_the_next_value():
    class Discard(Transitions):
        after_item = StatefulLogic.DISCARD

    assert _run(Discard, [("values", T0, [1, 2])]) == [("NEW", "ITEM"), ("NEW", "ITEM")]


def test_a_notification_due_fires_before_the_next_values():
    class Notify(Transitions):
        item_triggers_notify = True

    class NotifyDiscard(Notify):
        after_notify = StatefulLogic.DISCARD

    calls = [("values", T0 - 10, [1]), ("values", T0 + 5, [2])]
    assert _run(Notify, calls) == [
        ("NEW", "ITEM"),
        ("ITEM", "NOTIFY"),
        ("NOTIFY", "ITEM"),
        ("ITEM", "NOTIFY"),  # due again at T0 + 5: this call's own notification
    ]
    assert _run(NotifyDiscard, calls) == [
        ("NEW", "ITEM"),
        ("ITEM", "NOTIFY"),
        ("NEW", "ITEM"),
        ("ITEM", "NOTIFY"),
    ]


def test_the_wake_time_is_the_notification_else_the_end_of_the_input():
    class Later(Transitions):
        item_triggers_notify = True
        notify_in = timedelta(seconds=3)

    run = StatefulBatchRun("f.s", ItemLogicBuilder(Later))
    placed = run.on_values(KeyedCall("k", None, T0, [1]))
    assert placed.wake == T0 + 3000
    assert run.on_timer(KeyedCall("k", placed.state, T0 + 1000)).emitted == []
    fired = run.on_timer(KeyedCall("k", placed.state, T0 + 3000))
    assert fired.emitted == [("k", ("ITEM", "NOTIFY"))] and fired.wake == EOF_MS
    assert StatefulBatchRun("f.s", ItemLogicBuilder(Transitions)).on_values(
        KeyedCall("k", None, T0, [1])
    ).wake == (EOF_MS)


def test_on_eof_at_the_end_of_the_input_and_no_late_notification():
    class EofDiscard(Transitions):
        after_eof = StatefulLogic.DISCARD
        item_triggers_notify = True
        notify_in = timedelta(days=365 * 100)  # not due by the end

    run = StatefulBatchRun("f.s", ItemLogicBuilder(EofDiscard))
    placed = run.on_values(KeyedCall("k", None, T0, [1]))
    ended = run.on_timer(KeyedCall("k", placed.state, EOF_MS))
    assert ended.emitted == [("k", ("ITEM", "EOF"))] and ended.state is None
    retained = StatefulBatchRun("f.s", ItemLogicBuilder(Transitions))
    kept = retained.on_timer(KeyedCall("k", placed.state, EOF_MS))
    assert kept.state is not None and kept.wake is None  # nothing wakes it in this run


def test_a_notification_due_by_the_end_fires_before_on_eof():
    class Notify(Transitions):
        item_triggers_notify = True  # at 2024-01-01: long past

    run = StatefulBatchRun("f.s", ItemLogicBuilder(Notify))
    placed = run.on_values(KeyedCall("k", None, T0 - 10, [1]))
    assert run.on_timer(KeyedCall("k", placed.state, EOF_MS)).emitted == [
        ("k", ("ITEM", "NOTIFY")),
        ("k", ("NOTIFY", "EOF")),
    ]


def test_values_flushed_at_the_end_are_handled_then_eof():
    run = StatefulBatchRun("f.s", ItemLogicBuilder(Transitions))
    assert run.on_values_at_end(KeyedCall("k", None, T0, [1])).emitted == [
        ("k", ("NEW", "ITEM")),
        ("k", ("ITEM", "EOF")),
    ]


def test_a_logic_that_does_not_return_a_pair_is_named():
    class Bad(StatefulLogic):
        def __init__(self, _resume: Any) -> None:
            pass

        def on_item(self, value: Any) -> Any:
            return [value]

        def snapshot(self) -> None:
            return None

    run = StatefulBatchRun("f.bad", Bad)  # a batch logic whose on_batch is missing
    with pytest.raises(RemoteStepFailure) as info:
        run.on_values(KeyedCall("k", None, T0, [1]))
    error = find_step_error(str(info.value))
    assert isinstance(error, TypeError) and "Bad has no `on_batch` method" in str(error)
    run = StatefulBatchRun("f.bad", lambda _r: type("B", (), {"on_batch": lambda s, v: v})())
    with pytest.raises(RemoteStepFailure) as info:
        run.on_values(KeyedCall("k", None, T0, [1, 2, 3]))
    error = find_step_error(str(info.value))
    assert isinstance(error, TypeError) and "must return a 2-tuple" in str(error)


def test_an_error_in_a_logic_names_the_users_class():
    class Broken(Transitions):
        def on_item(self, value: Any) -> Any:
            raise KeyError(value)

    with pytest.raises(RemoteStepFailure) as info:
        StatefulBatchRun("f.s", ItemLogicBuilder(Broken)).on_values(KeyedCall("k", None, 0, [1]))
    error = find_step_error(str(info.value))
    assert isinstance(error, KeyError) and error.function.endswith("Broken")


def test_a_naive_notification_time_is_refused():
    class Naive(Transitions):
        def notify_at(self) -> datetime:
            return datetime(2024, 1, 1)

    with pytest.raises(RemoteStepFailure, match="timezone-aware"):
        StatefulBatchRun("f.s", ItemLogicBuilder(Naive)).on_values(KeyedCall("k", None, 0, [1]))


# -- the operators' own logics --------------------------------------------------------------


def _whole(builder: Any, values: list[Any], now: int = T0) -> list[Any]:
    """A key's values in one call, then the end of the input (a whole-input run)."""
    run = StatefulBatchRun("f.step", builder)
    placed = run.on_values(KeyedCall("k", None, now, values))
    ended = run.on_timer(KeyedCall("k", placed.state, EOF_MS))
    return [value for _key, value in placed.emitted + ended.emitted]


def test_collect_emits_full_lists_then_the_rest_at_the_end():
    builder = CollectBuilder(timedelta(seconds=10), 3)
    assert _whole(builder, list(range(10))) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]


def test_collect_times_out_after_the_latest_value():
    clock = [datetime(2024, 1, 1, tzinfo=UTC)]
    builder = CollectBuilder(timedelta(seconds=10), 5, now_getter=lambda: clock[0])
    run = StatefulBatchRun("f.collect", builder)
    placed = run.on_values(KeyedCall("k", None, T0, [1]))
    clock[0] += timedelta(seconds=8)
    again = run.on_values(KeyedCall("k", placed.state, T0 + 8000, [2]))
    assert again.emitted == [] and again.wake == T0 + 18_000  # not T0 + 10 s
    fired = run.on_timer(KeyedCall("k", again.state, T0 + 18_000))
    assert fired.emitted == [("k", [1, 2])] and fired.state is None


def test_fold_final_emits_only_at_the_end():
    builder = FoldFinalBuilder(lambda: 0, lambda acc, v: acc + v)
    run = StatefulBatchRun("f.fold", builder)
    placed = run.on_values(KeyedCall("key1", None, T0, [1, 2]))
    assert placed.emitted == [] and placed.wake == EOF_MS
    more = run.on_values(KeyedCall("key1", placed.state, T0 + 1, [5]))
    assert run.on_timer(KeyedCall("key1", more.state, EOF_MS)).emitted == [("key1", 8)]


def test_reduce_final_pre_reduces_a_chunk_and_folds_from_none():
    pre = _PreReduce("f.reduce", lambda a, b: a + b)
    assert pre([("key1", 1), ("key2", 3), ("key1", 2)]) == [("key1", 3), ("key2", 3)]
    builder = FoldFinalBuilder(lambda: None, _ReduceFolder(max))
    assert _whole(builder, [1, 19, 2]) == [19]


def test_pre_reduce_names_an_item_that_is_not_a_pair():
    with pytest.raises(TypeError, match="requires `\\(key, value\\)` 2-tuple"):
        _PreReduce("f.reduce", max)([1])


@pytest.mark.parametrize(
    ("insert", "emit", "lefts", "rights", "expected"),
    [
        ("last", "complete", [1], [2], [(1, 2)]),
        ("first", "final", [1], [2, 3], [(1, 2)]),
        ("last", "final", [1], [2, 3], [(1, 3)]),
        ("last", "running", [1], [2, 3], [(1, None), (1, 2), (1, 3)]),
        ("product", "final", [1, 2], [3, 4], [(1, 3), (1, 4), (2, 3), (2, 4)]),
    ],
)
def test_join_modes_as_bytewaxs_tests(insert, emit, lefts, rights, expected):
    values = [(0, v) for v in lefts] + [(1, v) for v in rights]
    assert _whole(JoinBuilder(2, insert, emit), values) == expected


def test_join_state_rows_put_none_for_a_silent_side():
    state = JoinState.for_side_count(3)
    for side, value in [(0, 1), (0, 2), (2, 3), (2, 4)]:
        state.add_val(side, value)
    assert state.astuples() == [(1, None, 3), (1, None, 4), (2, None, 3), (2, None, 4)]


def test_join_complete_forgets_the_key_once_emitted():
    run = StatefulBatchRun("f.join", JoinBuilder(2, "last", "complete"))
    out = run.on_values(KeyedCall("k", None, T0, [(0, 1), (1, 2), (0, 5)]))
    assert out.emitted == [("k", (1, 2))] and out.state is not None
    assert run.on_values(KeyedCall("k", out.state, T0, [(1, 6)])).emitted == [("k", (5, 6))]


def test_stateful_flat_map_mapper_returns_lists_and_names_a_bad_result():
    mapper = _StatefulFlatMapper("f.sfm", lambda s, v: (v, (x for x in [v, v])))
    assert mapper(None, 3) == (3, [3, 3])
    with pytest.raises(TypeError, match="must be a 2-tuple of `\\(updated_state, emit_values\\)`"):
        _StatefulFlatMapper("f.sfm", lambda s, v: v)(None, 3)


def test_ttl_cache_fetches_again_after_the_ttl():
    clock = [datetime(2024, 1, 1)]
    fetched: list[str] = []
    cache = TTLCache(lambda k: fetched.append(k) or k, lambda: clock[0], timedelta(seconds=5))
    cache.get("a")
    cache.get("a")
    clock[0] += timedelta(seconds=6)
    cache.get("a")
    assert fetched == ["a", "a"]
