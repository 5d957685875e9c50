"""Numaflow's side-input manager, on the driver: retrieve on a schedule, write the files.

Each side input's retrieve handler runs once at start and then on each fire of
its ``trigger.schedule``, as Numaflow's manager runs it. A failed retrieval is
logged and not retried (the next fire tries again). A response that broadcasts
is written to ``<directory>/<name>`` for every directory that takes the side
input, by an atomic rename, and only when the value changed; ``no_broadcast``
leaves the files as they are.

Schedules are Numaflow's: cron with seconds first (``"0 */2 * * * *"``), plain
five-field cron, the ``@hourly``-style names, or an interval
(:meth:`Schedule.every`), in ``trigger.timezone`` (UTC by default).

>>> from datetime import datetime, UTC
>>> start = datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC)
>>> Schedule.parse("0 */2 * * * *").next_after(start).isoformat()
'2026-01-01T00:02:00+00:00'
>>> Schedule.parse("*/5 * * * *").next_after(start).isoformat()
'2026-01-01T00:05:00+00:00'
>>> Schedule.every(90).next_after(start).isoformat()
'2026-01-01T00:01:35+00:00'
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

__all__ = ["Schedule", "SideInputManager", "write_side_input"]

log = logging.getLogger("flowspark.side_inputs")


@dataclass(frozen=True)
class Schedule:
    """When a side input is retrieved: a cron expression or a fixed interval."""

    cron: str | None = None
    seconds_first: bool = False
    interval_s: float | None = None
    timezone: str = "UTC"

    @classmethod
    def parse(cls, text: str, timezone: str | None = None) -> Schedule:
        """A cron ``text`` (6 fields: seconds first; 5 fields; or ``@hourly`` …) in
        ``timezone``. A bad expression or time zone raises ``ValueError``."""
        zone = timezone or "UTC"
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{zone!r} is not a known time zone") from None
        seconds_first = len(text.split()) == 6
        if not croniter.is_valid(text, second_at_beginning=seconds_first):
            raise ValueError(f"{text!r} is not a cron schedule")
        return cls(cron=text, seconds_first=seconds_first, timezone=zone)

    @classmethod
    def every(cls, seconds: float) -> Schedule:
        """Every ``seconds`` (> 0), counted from the previous fire."""
        if seconds <= 0:
            raise ValueError(f"an interval must be > 0 s; got {seconds!r}")
        return cls(interval_s=seconds)

    def next_after(self, moment: datetime) -> datetime:
        """The first fire strictly after ``moment`` (an aware datetime)."""
        if self.interval_s is not None:
            return moment + timedelta(seconds=self.interval_s)
        assert self.cron is not None
        local = moment.astimezone(ZoneInfo(self.timezone))
        fire = croniter(self.cron, local, second_at_beginning=self.seconds_first)
        return fire.get_next(datetime).astimezone(UTC)


def write_side_input(directory: str | os.PathLike[str], name: str, value: bytes) -> bool:
    """Write ``value`` to ``directory/name`` by an atomic rename; ``False`` (nothing
    written) when the file already holds it."""
    target = Path(directory) / name
    try:
        if target.read_bytes() == value:
            return False
    except FileNotFoundError:
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{name}.{time.time_ns()}.tmp")
    temporary.write_bytes(value)
    os.replace(temporary, target)
    return True


class SideInputManager:
    """Runs one side input's retrievals in a daemon thread and writes what they give.

    ``retrieve`` returns a response with ``value`` and ``no_broadcast`` (pynumaflow's
    ``sideinput.Response``); ``directories`` are where the value is written.
    """

    def __init__(
        self,
        name: str,
        retrieve: Callable[[], Any],
        schedule: Schedule,
        directories: Sequence[str | os.PathLike[str]],
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.name, self.retrieve, self.schedule = name, retrieve, schedule
        self.directories = list(directories)
        self.now = now
        self.retrievals = self.broadcasts = 0
        self.has_value = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def retrieve_once(self) -> bool:
        """Call the handler once and write its value; whether it broadcast one."""
        self.retrievals += 1
        try:
            response = self.retrieve()
            broadcast = not response.no_broadcast
            value = bytes(response.value) if broadcast else b""
        except Exception:
            log.exception("side input %s: retrieval failed; the next trigger retries", self.name)
            return False
        if not broadcast:
            return False
        for directory in self.directories:
            write_side_input(directory, self.name, value)
        self.broadcasts += 1
        self.has_value.set()
        return True

    def start(self) -> None:
        """Retrieve now, then on each fire of the schedule, until :meth:`stop`."""
        self._thread = threading.Thread(
            target=self._run, name=f"side-input-{self.name}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        self.retrieve_once()
        fire = self.now()
        while True:
            fire = self.schedule.next_after(max(fire, self.now()))
            wait = (fire - self.now()).total_seconds()
            if self._stop.wait(max(wait, 0.0)):
                return
            self.retrieve_once()

    def next_fire(self) -> datetime:
        """When the schedule fires next, from now."""
        return self.schedule.next_after(self.now())

    def stop(self) -> None:
        """Stop retrieving (waits for a retrieval under way)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
