"""Shared job definitions: input generators and independent result checkers.

Pure Python (standard library only) so that every system's child process,
including the one running inside the bytewax venv, can import it by path.

Every checker recomputes the expected result from the job definition (closed
form or a brute-force recount), never from another system's output.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta


def log(msg: str) -> None:
    """Log to stderr (stdout is reserved for the result line)."""
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


JOBS: tuple[str, ...] = ("mapfilter", "wordcount", "window_count", "reorder", "mapstream")

# Below this size the closed-form expectations are also cross-checked by a
# brute-force recount of the input.
BRUTE_FORCE_MAX_N = 200_000

# --------------------------------------------------------------------------
# mapfilter: x in 0..n-1 -> x*3+1 -> keep evens -> count (and sum)
# --------------------------------------------------------------------------


def mapfilter_input(n: int) -> range:
    """Return the input items ``0..n-1``."""
    return range(n)


def mapfilter_fn(x: int) -> int:
    """The map step: ``x*3+1``."""
    return x * 3 + 1


def mapfilter_keep(y: int) -> bool:
    """The filter step: keep even values."""
    return y % 2 == 0


def mapfilter_expected(n: int) -> tuple[int, int]:
    """Return ``(count, sum)`` of the outputs in closed form.

    ``3x+1`` is even exactly when ``x`` is odd; with ``x = 2k+1`` for
    ``k < m = n//2`` the outputs are ``6k+4``, summing to ``3m(m-1) + 4m``.
    """
    m = n // 2
    count, total = m, 3 * m * (m - 1) + 4 * m
    if n <= BRUTE_FORCE_MAX_N:
        outs = [y for y in map(mapfilter_fn, range(n)) if mapfilter_keep(y)]
        assert (len(outs), sum(outs)) == (count, total), "closed form is wrong"
    return count, total


def mapfilter_check(n: int, count: int, total: int) -> bool:
    """Check a system's output count and sum against the expectation."""
    return (int(count), int(total)) == mapfilter_expected(n)


# --------------------------------------------------------------------------
# wordcount: n lines x 6 words from a 1000-word vocabulary
# --------------------------------------------------------------------------

VOCAB_SIZE = 1000
WORDS_PER_LINE = 6
WORD_MUL_LINE = 7  # coprime with VOCAB_SIZE: every word is used
WORD_MUL_POS = 131


def word_index(i: int, j: int) -> int:
    """Vocabulary index of word ``j`` of line ``i``."""
    return (i * WORD_MUL_LINE + j * WORD_MUL_POS) % VOCAB_SIZE


def wordcount_line(i: int) -> str:
    """Line ``i`` of the input: 6 space-separated words ``w0..w999``."""
    return " ".join(f"w{word_index(i, j)}" for j in range(WORDS_PER_LINE))


def wordcount_input(n: int) -> list[str]:
    """Return the n input lines."""
    return [wordcount_line(i) for i in range(n)]


def wordcount_expected(n: int) -> dict[str, int]:
    """Return the exact per-word counts, computed from whole vocabulary cycles.

    Lines ``i`` and ``i + VOCAB_SIZE`` hold the same words, so each full cycle
    of 1000 lines adds the same counts and only the remainder is enumerated.
    """
    cycles, rest = divmod(n, VOCAB_SIZE)
    counts: Counter[str] = Counter()
    for r in range(VOCAB_SIZE):
        reps = cycles + (1 if r < rest else 0)
        if reps:
            for j in range(WORDS_PER_LINE):
                counts[f"w{word_index(r, j)}"] += reps
    if n <= BRUTE_FORCE_MAX_N:
        brute = Counter(w for i in range(n) for w in wordcount_line(i).split())
        assert brute == counts, "cycle formula is wrong"
    return dict(counts)


def wordcount_check(n: int, counts: Iterable[tuple[str, int]]) -> bool:
    """Check emitted ``(word, count)`` pairs (each word exactly once).

    The full per-word table is compared for every n: the expectation is exact
    and cheap (at most 1000 words); the total ``6n`` is checked as well.
    """
    got: dict[str, int] = {}
    for word, c in counts:
        if word in got:
            return False  # a word emitted twice: not a final count
        got[word] = int(c)
    if sum(got.values()) != WORDS_PER_LINE * n:
        return False
    return got == wordcount_expected(n)


# --------------------------------------------------------------------------
# window_count: n events over 100 keys, 10 s tumbling event-time windows
# --------------------------------------------------------------------------

N_KEYS = 100
EVENT_STEP_MS = 10
WINDOW_S = 10
ALIGN_TO = datetime(2024, 1, 1, tzinfo=UTC)
ALIGN_TO_EPOCH_S = int(ALIGN_TO.timestamp())  # 1704067200
EVENTS_PER_WINDOW = WINDOW_S * 1000 // EVENT_STEP_MS  # 1000


def window_event(i: int) -> tuple[str, datetime]:
    """Event ``i``: ``(key, event_time)`` with a UTC-aware timestamp."""
    return f"k{i % N_KEYS}", ALIGN_TO + timedelta(milliseconds=i * EVENT_STEP_MS)


def window_count_input(n: int) -> list[tuple[str, datetime]]:
    """Return the n events in event-time order."""
    return [window_event(i) for i in range(n)]


def window_index_of_start(start: datetime | int) -> int:
    """Window index (0 = the window opening at ``ALIGN_TO``).

    Accepts an aware datetime or epoch seconds of the window start.
    """
    secs = int(start.timestamp()) if isinstance(start, datetime) else int(start)
    idx, rem = divmod(secs - ALIGN_TO_EPOCH_S, WINDOW_S)
    if rem:
        raise ValueError(f"window start {start!r} is not aligned")
    return idx


def window_count_expected(n: int) -> dict[tuple[str, int], int]:
    """Return ``{(key, window_index): count}`` computed arithmetically.

    Window ``w`` holds events ``[w*1000, min(n, (w+1)*1000))``; within it key
    ``k`` gets the events whose index is ``k`` mod 100.
    """
    out: dict[tuple[str, int], int] = {}
    n_windows = -(-n // EVENTS_PER_WINDOW)
    for w in range(n_windows):
        lo, hi = w * EVENTS_PER_WINDOW, min(n, (w + 1) * EVENTS_PER_WINDOW)
        for k in range(N_KEYS):
            first = lo + (k - lo) % N_KEYS  # first index >= lo with i%100 == k
            if first < hi:
                out[(f"k{k}", w)] = (hi - 1 - first) // N_KEYS + 1
    if n <= BRUTE_FORCE_MAX_N:
        brute: Counter[tuple[str, int]] = Counter()
        for i in range(n):
            key, ts = window_event(i)
            brute[(key, int((ts - ALIGN_TO).total_seconds()) // WINDOW_S)] += 1
        assert dict(brute) == out, "window formula is wrong"
    return out


def window_count_check(n: int, counts: Iterable[tuple[str, int, int]], late: int = 0) -> bool:
    """Check emitted ``(key, window_index, count)`` triples.

    Requires no late items, every (key, window) emitted once, counts summing
    to n, and each count equal to the expected one.
    """
    if late:
        return False
    got: dict[tuple[str, int], int] = {}
    for key, w, c in counts:
        if (key, w) in got:
            return False
        got[(key, int(w))] = int(c)
    if sum(got.values()) != n:
        return False
    return got == window_count_expected(n)


# --------------------------------------------------------------------------
# reorder: n jittered events over 100 keys, sorted per key by event time
# --------------------------------------------------------------------------

REORDER_JITTER_US = 2_000_000  # each event's time is late by [0, 2 s)
REORDER_DELAY_S = 3  # watermark = a key's latest event time - 3 s
_MASK64 = (1 << 64) - 1


def reorder_jitter_us(i: int) -> int:
    """Deterministic offset of event ``i`` in ``[0, 2 s)``, in microseconds.

    A splitmix64 finaliser of ``i``: no ``random`` state, so every system (and
    every process) sees the very same events.
    """
    z = ((i + 1) * 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) % REORDER_JITTER_US


def reorder_event(i: int) -> tuple[str, datetime, int]:
    """Event ``i``: ``(key, event_time, i)``; key ``k{i % 100}``, time
    ``ALIGN_TO + i*10ms + jitter(i)`` (UTC-aware). Events arrive in order of ``i``.
    """
    ts = ALIGN_TO + timedelta(microseconds=i * EVENT_STEP_MS * 1000 + reorder_jitter_us(i))
    return f"k{i % N_KEYS}", ts, i


def reorder_input(n: int) -> list[tuple[str, datetime, int]]:
    """Return the n events in arrival order (event times are out of order)."""
    events = [reorder_event(i) for i in range(n)]
    if n <= BRUTE_FORCE_MAX_N:
        # Zero inversions must be reachable: no event may arrive at or below its
        # key's watermark (a key's events are 1 s apart, jitter < 2 s < 3 s delay).
        delay = timedelta(seconds=REORDER_DELAY_S)
        latest: dict[str, datetime] = {}
        for key, ts, _ in events:
            assert key not in latest or ts > latest[key] - delay, "an event would be late"
            latest[key] = max(ts, latest.get(key, ts))
    return events


def reorder_inversions(outputs: Iterable[tuple[str, datetime, int]]) -> int:
    """Adjacent pairs within a key's output order whose event time decreases.

    0 exactly when every key's output is sorted by event time.
    """
    last: dict[str, datetime] = {}
    inversions = 0
    for key, ts, _ in outputs:
        prev = last.get(key)
        if prev is not None and ts < prev:
            inversions += 1
        last[key] = ts
    return inversions


def reorder_check(n: int, outputs: Iterable[tuple[str, datetime, int]]) -> bool:
    """Check emitted ``(key, event_time, i)`` triples, in output order.

    Requires exactly n outputs, every input ``i`` emitted once with its own key
    and event time, and zero inversions of event time within each key.
    """
    outs = list(outputs)
    if len(outs) != n:
        return False
    seen = bytearray(n)
    for key, ts, i in outs:
        i = int(i)
        if not 0 <= i < n or seen[i]:
            return False
        seen[i] = 1
        exp_key, exp_ts, _ = reorder_event(i)
        if key != exp_key or ts != exp_ts:
            return False
    return reorder_inversions(outs) == 0


# --------------------------------------------------------------------------
# mapstream: n datums "i,i+1,i+2" -> comma-split map stream -> 3n messages
# --------------------------------------------------------------------------

MAPSTREAM_PARTS = 3


def mapstream_value(i: int) -> bytes:
    """Value of datum ``i``: ``b"i,i+1,i+2"``."""
    return f"{i},{i + 1},{i + 2}".encode()


def mapstream_input(n: int) -> list[bytes]:
    """Return the n datum values."""
    return [mapstream_value(i) for i in range(n)]


def mapstream_expected(n: int) -> tuple[int, int]:
    """Return ``(count, checksum)`` of the output messages in closed form.

    The checksum is the sum of the messages' values as ints: datum ``i``
    contributes ``i + (i+1) + (i+2) = 3i + 3``, so the total is
    ``3n(n-1)/2 + 3n``.
    """
    count, total = MAPSTREAM_PARTS * n, 3 * n * (n - 1) // 2 + 3 * n
    if n <= BRUTE_FORCE_MAX_N:
        parts = [int(p) for i in range(n) for p in mapstream_value(i).split(b",")]
        assert (len(parts), sum(parts)) == (count, total), "closed form is wrong"
    return count, total


def mapstream_check(n: int, count: int, total: int) -> bool:
    """Check a system's output message count and value checksum."""
    return (int(count), int(total)) == mapstream_expected(n)
