"""bytewax 0.21's user-defined clocks and windowers in the ``window`` kind (WindowRun),
fed one key's calls with the state pickled between them, as Spark's state store does.

A windower written by the user that cuts the same tumbling windows as the built-in one
must give the same outputs and wake-ups; a clock written by the user must give the
built-in event clock's outputs where their rules agree (no system time passing).
"""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowspark.operators.windowing import (
    UTC_MAX,
    UTC_MIN,
    Clock,
    ClockLogic,
    EventClock,
    FoldWindowBuilder,
    TumblingWindower,
    Windower,
    WindowerLogic,
    WindowMetadata,
)
from flowspark.runtime.errors import RemoteStepFailure, find_step_error
from flowspark.runtime.keyed import KeyedCall
from flowspark.runtime.window_run import WindowRun
from flowspark.runtime.windowing import EOF_MS
from tests.event_times import ALIGN, ALIGN_MS

LENGTH = timedelta(seconds=10)


class TenSecondLogic(WindowerLogic):
    """Tumbling 10 s windows from ALIGN, as a user would write them."""

    def __init__(self, opened: dict[int, datetime]) -> None:
        self.opened = opened

    def open_for(self, timestamp: datetime) -> list[int]:
        wid = (timestamp - ALIGN) // LENGTH
        self.opened.setdefault(wid, ALIGN + wid * LENGTH)
        return [wid]

    def late_for(self, timestamp: datetime) -> list[int]:
        return [(timestamp - ALIGN) // LENGTH]

    def merged(self) -> list[tuple[int, int]]:
        return []

    def close_for(self, watermark: datetime) -> list[tuple[int, WindowMetadata]]:
        done = [wid for wid, start in self.opened.items() if start + LENGTH <= watermark]
        return [
            (wid, WindowMetadata(self.opened.pop(wid), ALIGN + (wid + 1) * LENGTH)) for wid in done
        ]

    def notify_at(self) -> datetime | None:
        return min((start + LENGTH for start in self.opened.values()), default=None)

    def is_empty(self) -> bool:
        return not self.opened

    def snapshot(self) -> dict[int, datetime]:
        return dict(self.opened)


class TenSecondWindower(Windower):
    def build(self, resume_state: Any) -> TenSecondLogic:
        return TenSecondLogic(dict(resume_state or {}))


class LatestLogic(ClockLogic):
    """The watermark is the latest item time less ``wait``; no system time."""

    def __init__(self, wait: timedelta, latest: datetime | None) -> None:
        self.wait, self.latest = wait, latest

    def before_batch(self) -> None:
        pass

    def on_item(self, value: Any) -> tuple[datetime, datetime]:
        ts = ALIGN + timedelta(seconds=value[0])
        self.latest = ts if self.latest is None else max(self.latest, ts)
        return ts, self.latest - self.wait

    def on_notify(self) -> datetime:
        return UTC_MIN if self.latest is None else self.latest - self.wait

    def on_eof(self) -> datetime:
        return UTC_MAX

    def to_system_utc(self, timestamp: datetime) -> datetime | None:
        return timestamp

    def snapshot(self) -> datetime | None:
        return self.latest


class LatestClock(Clock):
    def __init__(self, wait: timedelta) -> None:
        self.wait = wait

    def build(self, resume_state: Any) -> LatestLogic:
        return LatestLogic(self.wait, resume_state)


def _event_clock(wait_s: int) -> EventClock:
    return EventClock(lambda v: ALIGN + timedelta(seconds=v[0]), timedelta(seconds=wait_s))


class _Listing:
    """A window logic builder without ``fold_fns`` (WindowRun's general path)."""

    def __init__(self) -> None:
        self.builder = FoldWindowBuilder(list, lambda acc, v: [*acc, v[0]], list.__add__)

    def __call__(self, resume: Any) -> Any:
        return self.builder(resume)


def _drive(run: WindowRun, calls: list[tuple[int, list[int]]], with_wake: bool) -> list[Any]:
    """Feed ``(system seconds, values)`` calls (no values: a timer), then the end; the
    outputs of each call. The state goes through pickle between calls."""
    seen: list[Any] = []
    state = None
    for second, values in calls:
        now = ALIGN_MS + 1_000 * second
        items = [(v, n) for n, v in enumerate(values)]
        call = KeyedCall("k", state, now, items)
        out = run.on_values(call) if values else run.on_timer(call)
        seen.append((out.emitted, out.late, out.meta, out.wake if with_wake else None))
        state = pickle.loads(pickle.dumps(out.state))
    out = run.on_timer(KeyedCall("k", state, EOF_MS))
    seen.append((out.emitted, out.late, out.meta, out.state))
    return seen


calls_strategy = st.lists(
    st.tuples(st.integers(0, 60), st.lists(st.integers(-20, 80), max_size=8)),
    max_size=6,
).map(lambda calls: sorted(calls, key=lambda c: c[0]))


@settings(max_examples=150, deadline=None)
@given(calls=calls_strategy, wait_s=st.integers(0, 6), ordered=st.booleans())
def test_a_users_windower_matches_the_builtin_one_it_reimplements(calls, wait_s, ordered):
    builtin = WindowRun(
        "w", _event_clock(wait_s), TumblingWindower(LENGTH, ALIGN), _Listing(), ordered
    )
    users = WindowRun("w", _event_clock(wait_s), TenSecondWindower(), _Listing(), ordered)
    assert builtin.fold_fns is None and users.fold_fns is None
    assert _drive(users, calls, True) == _drive(builtin, calls, True)


@settings(max_examples=150, deadline=None)
@given(
    calls=calls_strategy.map(lambda calls: [(0, values) for _, values in calls]),
    wait_s=st.integers(0, 6),
    users_windower=st.booleans(),
)
def test_a_users_clock_matches_the_event_clock_while_no_system_time_passes(
    calls, wait_s, users_windower
):
    # Every call at the same system time: the event clock's watermark is then the
    # latest item time less the wait, as the user's clock says.
    windower = TenSecondWindower() if users_windower else TumblingWindower(LENGTH, ALIGN)
    builtin = WindowRun("w", _event_clock(wait_s), windower, _Listing(), True)
    users = WindowRun("w", LatestClock(timedelta(seconds=wait_s)), windower, _Listing(), True)
    assert _drive(users, calls, False)[:-1] == _drive(builtin, calls, False)[:-1]


def test_a_users_clock_says_when_to_wake() -> None:
    run = WindowRun("w", LatestClock(timedelta(0)), TenSecondWindower(), _Listing(), False)
    out = run.on_values(KeyedCall("k", None, ALIGN_MS, [(3, 0)]))
    assert out.emitted == [] and out.wake == ALIGN_MS + 10_000  # to_system_utc(window end)
    out = run.on_values(KeyedCall("k", out.state, ALIGN_MS, [(12, 1)]))
    assert out.emitted == [("k", (0, [3]))]
    assert out.meta == [("k", (0, WindowMetadata(ALIGN, ALIGN + LENGTH)))]


class _Broken(TenSecondLogic):
    def __init__(self, opened: dict[int, datetime], fail: str) -> None:
        super().__init__(opened)
        self.fail = fail

    def open_for(self, timestamp: datetime) -> Any:
        if self.fail == "open_for":
            raise KeyError("no such window")
        if self.fail == "open_for generator":
            return self._ids_then_failure(timestamp)
        return super().open_for(timestamp)

    def _ids_then_failure(self, timestamp: datetime) -> Any:
        yield from super().open_for(timestamp)
        raise LookupError("after the first id")

    def close_for(self, watermark: datetime) -> Any:
        if self.fail == "close_for":
            return [(0, "not metadata")]
        if self.fail == "close_for not pairs":
            return [0]
        return super().close_for(watermark)


class _BrokenWindower(Windower):
    def __init__(self, fail: str) -> None:
        self.fail = fail

    def build(self, resume_state: Any) -> TenSecondLogic:
        if self.fail == "build":
            raise RuntimeError("cannot build")
        return _Broken(dict(resume_state or {}), self.fail)


@pytest.mark.parametrize(
    ("fail", "function", "cause"),
    [
        ("build", "build", RuntimeError),
        ("open_for", "open_for", KeyError),
        ("open_for generator", "open_for", LookupError),
        ("close_for", "close_for", TypeError),
        ("close_for not pairs", "close_for", TypeError),
    ],
)
def test_a_users_windower_failure_names_the_step_its_method_and_the_key(fail, function, cause):
    run = WindowRun("w", _event_clock(0), _BrokenWindower(fail), _Listing(), False)
    with pytest.raises(RemoteStepFailure) as info:
        run.on_values(KeyedCall("k", None, ALIGN_MS, [(3, 0), (30, 1)]))
    error = find_step_error(str(info.value))
    assert error is not None
    assert error.step_id == "w" and function in error.function
    assert error.item.startswith("('k'")
    assert isinstance(error.__cause__, cause)


class _NaiveLogic(LatestLogic):
    def on_item(self, value: Any) -> tuple[datetime, datetime]:
        return datetime(2024, 1, 1), datetime(2024, 1, 1)


class _NaiveClock(LatestClock):
    def build(self, resume_state: Any) -> LatestLogic:
        return _NaiveLogic(self.wait, resume_state)


def test_a_users_clock_giving_a_naive_time_fails_naming_on_item_and_the_value() -> None:
    run = WindowRun("w", _NaiveClock(timedelta(0)), TenSecondWindower(), _Listing(), False)
    with pytest.raises(RemoteStepFailure) as info:
        run.on_values(KeyedCall("k", None, ALIGN_MS, [(3, 0)]))
    error = find_step_error(str(info.value))
    assert error is not None
    assert "on_item" in error.function and "(3, 0)" in error.item
    assert "timezone-aware" in str(error)


def test_clock_and_windower_take_type_parameters_as_in_bytewax() -> None:
    class Typed(Clock[int, datetime]):
        def build(self, resume_state: datetime | None) -> LatestLogic:
            return LatestLogic(timedelta(0), resume_state)

    class TypedWindower(Windower[dict]):
        def build(self, resume_state: dict | None) -> TenSecondLogic:
            return TenSecondLogic(dict(resume_state or {}))

    run = WindowRun("w", Typed(), TypedWindower(), _Listing(), False)
    out = run.on_values(KeyedCall("k", None, ALIGN_MS, [(3, 0), (12, 1)]))
    assert out.emitted == [("k", (0, [3]))]
