"""A clock and a windower of your own, as bytewax 0.21 lets you write them
(``Clock``/``ClockLogic``, ``Windower``/``WindowerLogic``), counting each user's events
per calendar day. The same file runs on bytewax 0.21.1 with the import prefix changed.

- ``LatestEventClock``: an item's time is its timestamp; the watermark is the latest
  timestamp the key has seen, less ``delay``. No system time is involved, so what is
  late and when a day closes do not depend on how fast the input is read.
- ``CalendarDayWindower``: one window per UTC day; a window's id is the day's
  ordinal (``date.toordinal()``), its metadata the day's start and end.

Each key keeps its clock's and windower's snapshots in its state (a Spark state store
under a recovery directory), as it keeps the window counts.

Run it from the repository root:
``python -m flowspark.run examples/bytewax021_custom_windower.py``
(it prints ``...daily_down: ('alice', (738946, 2))`` for each day's count,
``...daily_late: ...`` for an event that came after its day closed, and
``...daily_meta: ...`` for each closed day).
"""

from datetime import UTC, date, datetime, time, timedelta

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.operators.windowing import (
    UTC_MAX,
    UTC_MIN,
    Clock,
    ClockLogic,
    Windower,
    WindowerLogic,
    WindowMetadata,
    count_window,
)
from flowspark.testing import TestingSource


class LatestEventLogic(ClockLogic):
    def __init__(self, ts_getter, delay, latest):
        self.ts_getter = ts_getter
        self.delay = delay
        self.latest = latest  # the latest timestamp seen (None: none yet)

    def before_batch(self):
        pass

    def on_item(self, value):
        ts = self.ts_getter(value)
        if self.latest is None or ts > self.latest:
            self.latest = ts
        return ts, self.latest - self.delay

    def on_notify(self):
        return UTC_MIN if self.latest is None else self.latest - self.delay

    def on_eof(self):
        return UTC_MAX

    def to_system_utc(self, timestamp):
        return None  # only a later event (or the end of the input) moves the watermark

    def snapshot(self):
        return self.latest


class LatestEventClock(Clock):
    def __init__(self, ts_getter, delay):
        self.ts_getter = ts_getter
        self.delay = delay

    def build(self, resume_state):
        return LatestEventLogic(self.ts_getter, self.delay, resume_state)


def day_bounds(day_id):
    start = datetime.combine(date.fromordinal(day_id), time(), tzinfo=UTC)
    return start, start + timedelta(days=1)


class CalendarDayLogic(WindowerLogic):
    def __init__(self, open_days):
        self.open_days = open_days  # the ids of the days with an open window

    def open_for(self, timestamp):
        day_id = timestamp.date().toordinal()
        self.open_days.add(day_id)
        return [day_id]

    def late_for(self, timestamp):
        return [timestamp.date().toordinal()]

    def merged(self):
        return []

    def close_for(self, watermark):
        closed = sorted(d for d in self.open_days if day_bounds(d)[1] <= watermark)
        self.open_days.difference_update(closed)
        return [(d, WindowMetadata(*day_bounds(d))) for d in closed]

    def notify_at(self):
        return min((day_bounds(d)[1] for d in self.open_days), default=None)

    def is_empty(self):
        return not self.open_days

    def snapshot(self):
        return set(self.open_days)


class CalendarDayWindower(Windower):
    def build(self, resume_state):
        return CalendarDayLogic(set() if resume_state is None else set(resume_state))


def at(text):
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


EVENTS = [
    ("alice", at("2024-03-01T09:00")),
    ("bob", at("2024-03-01T17:30")),
    ("alice", at("2024-03-01T21:45")),
    ("alice", at("2024-03-02T08:15")),  # alice's watermark: 03-02 02:15; 03-01 closes
    ("alice", at("2024-03-01T23:00")),  # before alice's watermark: late
    ("bob", at("2024-03-03T12:00")),  # bob's watermark: 03-03 06:00; 03-01 closes
    ("alice", at("2024-03-02T19:00")),
]

flow = Dataflow("custom_windower")
events = op.input("events", flow, TestingSource(EVENTS))
daily = count_window(
    "daily",
    events,
    LatestEventClock(lambda event: event[1], delay=timedelta(hours=6)),
    CalendarDayWindower(),
    key=lambda event: event[0],
)
op.inspect("daily_down", daily.down)
op.inspect("daily_late", daily.late)
op.inspect("daily_meta", daily.meta)
