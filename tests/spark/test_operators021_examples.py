"""bytewax 0.21.1's windowed-count and join examples (``examples/bytewax021_*.py``, the
upstream files with the ``bytewax`` prefix changed) run on local Spark, each checked
against what it must print, worked out here from its data with plain Python. The
wordcount example is run the same way in ``test_operators021.py`` (``run_example`` is
in ``conftest.py``).

A run reads its whole input in one micro-batch, so its lines come grouped per step and
key, not interleaved as bytewax's one-item-at-a-time run prints them: they compare
sorted (as docs/bytewax-021.md says for a whole-input windowed run).
"""

from __future__ import annotations

import csv
import runpy
from collections import Counter
from datetime import UTC, date, datetime, time, timedelta

from flowspark.operators.windowing import WindowMetadata
from tests.docs_blocks import ROOT

SMOOTHIES = ROOT / "examples" / "sample_data" / "smoothie_order_l.csv"


def test_the_windowed_count_example_counts_orders_per_half_hour(run_example):
    with SMOOTHIES.open(newline="") as f:
        times = [
            datetime.strptime(row["time"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
            for row in csv.DictReader(f)
        ]
    # In time order, so with an event clock that waits 0s no order is late.
    assert times == sorted(times)
    start, half_hour = datetime(2024, 8, 29, 8, tzinfo=UTC), timedelta(minutes=30)
    counts = sorted(Counter((t - start) // half_hour for t in times).items())
    assert [n for _, n in counts] == [5, 7, 6, 5, 5, 4, 6, 4, 8]  # the tutorial's counts

    counted = [
        f"windowing_operators_examples.windowed_count_orders: {('total_orders', (w, n))!r}"
        for w, n in counts
    ]
    formatted = []
    for w, n in counts:
        begin, end = start + w * half_hour, start + (w + 1) * half_hour
        # The tutorial's f-string continues its lines inside the string, so it keeps
        # the next lines' four-space indents.
        line = f"Window {w}    ({begin:%H:%M}    - {end:%H:%M}): {n} orders"
        formatted.append(f"windowing_operators_examples.output: {line!r}")

    printed = run_example("bytewax021_windowed_count.py")
    assert sorted(printed) == sorted(counted + formatted)


def test_the_join_example_emits_the_four_sides_of_user_123_once(run_example):
    # examples/join.py's inputs: user 123 has a name on inp1, an email on inp2, a
    # color and a sound on inp3; the key is str(user_id), and the default join
    # (emit_mode="complete") emits once every side has a value.
    joined = ("123", ("Bumble", "bee@bytewax.com", "yellow", "buzz"))
    assert run_example("bytewax021_join.py") == [str(joined)]


def test_the_custom_windower_example_counts_each_users_events_per_day(run_example):
    # Worked out from the example's EVENTS and its rules: per user, the watermark is the
    # latest time seen less six hours; an event before it is late, the others count in
    # their UTC day, and a day is reported once the watermark passes its end (all of
    # them at the end of the input).
    namespace = runpy.run_path(str(ROOT / "examples" / "bytewax021_custom_windower.py"))
    events, delay = namespace["EVENTS"], timedelta(hours=6)
    latest: dict[str, datetime] = {}
    counts: Counter[tuple[str, int]] = Counter()
    late = []
    for user, ts in events:
        latest[user] = max(latest.get(user, ts), ts)
        if ts < latest[user] - delay:
            late.append((user, (ts.date().toordinal(), (user, ts))))
        else:
            counts[(user, ts.date().toordinal())] += 1
    assert len(late) == 1 and sum(counts.values()) == len(events) - 1

    def day(day_id: int) -> WindowMetadata:
        start = datetime.combine(date.fromordinal(day_id), time(), tzinfo=UTC)
        return WindowMetadata(start, start + timedelta(days=1))

    expected = (
        [f"custom_windower.daily_down: {(u, (d, n))!r}" for (u, d), n in counts.items()]
        + [f"custom_windower.daily_late: {item!r}" for item in late]
        + [f"custom_windower.daily_meta: {(u, (d, day(d)))!r}" for u, d in counts]
    )
    assert sorted(run_example("bytewax021_custom_windower.py")) == sorted(expected)
