"""Shared job definitions: input generators and independent result checkers.

Pure Python (standard library only) so that every system's child process,
including the one running inside the bytewax venv, can import it by path.

Every checker recomputes the expected result from the job definition (closed
form or a brute-force recount), never from another system's output.
"""

from __future__ import annotations

import heapq
import math
import os
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any


def log(msg: str) -> None:
    """Log to stderr (stdout is reserved for the result line)."""
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


JOBS: tuple[str, ...] = (
    "mapfilter",
    "wordcount",
    "window_count",
    "reorder",
    "mapstream",
    "batchmap",
    "reorder_heap",
    "many_keys",
    "dir_output",
    "latency",
)

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


# --------------------------------------------------------------------------
# batchmap: the mapstream datums through pynumaflow's batch-map example
# (``Flatmap``: comma split) in batches of 500 -> 3n messages, checked as mapstream
# --------------------------------------------------------------------------

BATCHMAP_BATCH_SIZE = 500  # Numaflow's default readBatchSize


# --------------------------------------------------------------------------
# reorder_heap: the reorder events through a stateful_map with a heap per key
# --------------------------------------------------------------------------

# One key's state: [heap of (event_time, seq, i), latest event time, pushes so far].
# seq (the key's arrival count) breaks event-time ties, so i is never compared.
ReorderHeapState = list[Any]
ReorderHeapValue = tuple[datetime, int] | None  # None: the key's end-of-input sentinel


def reorder_heap_input(n: int) -> list[tuple[str, ReorderHeapValue]]:
    """The ``reorder`` events keyed as ``(key, (event_time, i))`` in arrival order,
    then one end-of-input sentinel ``(key, None)`` per key that occurs.

    bytewax 0.21's ``stateful_map`` has no end-of-input hook, so the tail of each
    key's buffer is flushed by its sentinel, which is part of the input on every
    system (``n`` counts the events only, not the sentinels).
    """
    items: list[tuple[str, ReorderHeapValue]] = [(key, (ts, i)) for key, ts, i in reorder_input(n)]
    items.extend((f"k{k}", None) for k in range(min(n, N_KEYS)))
    return items


def reorder_heap_builder() -> None:
    """flowspark (bytewax 0.17 API) builder: a new key starts with no state, as in
    bytewax 0.21, so one mapper serves both."""
    return None


def reorder_heap_mapper(
    state: ReorderHeapState | None, value: ReorderHeapValue
) -> tuple[ReorderHeapState | None, list[tuple[datetime, int]]]:
    """``stateful_map`` mapper: buffer the event in the key's heap and return every
    buffered event older than (the key's latest event time - 3 s), in event-time
    order; the sentinel (``None``) returns all that is left and drops the state."""
    if value is None:
        if state is None:
            return None, []
        return None, [(ts, i) for ts, _, i in sorted(state[0])]
    ts, i = value
    if state is None:
        state = [[], ts, 0]
    heap, latest, seq = state
    if ts > latest:
        latest = state[1] = ts
    state[2] = seq + 1
    heapq.heappush(heap, (ts, seq, i))
    watermark = latest - timedelta(seconds=REORDER_DELAY_S)
    out: list[tuple[datetime, int]] = []
    while heap and heap[0][0] < watermark:
        ets, _, ei = heapq.heappop(heap)
        out.append((ets, ei))
    return state, out


def reorder_heap_flatten(
    item: tuple[str, list[tuple[datetime, int]]],
) -> list[tuple[str, datetime, int]]:
    """``flat_map`` after the mapper: ``(key, [(event_time, i), ...])`` -> triples."""
    key, emitted = item
    return [(key, ts, i) for ts, i in emitted]


# --------------------------------------------------------------------------
# many_keys: n items over n distinct keys through a stateful_map
# --------------------------------------------------------------------------


def many_keys_item(i: int) -> tuple[str, int]:
    """Item ``i`` keyed on its own key ``u{i}``: ``("u{i}", i)``."""
    return f"u{i}", i


def many_keys_builder() -> None:
    """flowspark (bytewax 0.17 API) builder: no state yet (as bytewax 0.21 starts)."""
    return None


def many_keys_mapper(state: tuple[int, int] | None, value: int) -> tuple[tuple[int, int], int]:
    """``stateful_map`` mapper: state ``(count, sum)`` of the key's values, kept for
    ever (never ``None``, so every key's state stays); emits the running sum."""
    count, total = state if state is not None else (0, 0)
    total += value
    return (count + 1, total), total


class ManyKeysChecker:
    """Checks ``(key, running_sum)`` outputs as they arrive, in O(n) bytes: each key
    ``u{i}`` (``0 <= i < n``) exactly once, with sum ``i`` (its only value)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen = bytearray(n)
        self.count = 0
        self.bad = 0

    def add(self, key: str, out: int) -> None:
        """Record one output."""
        self.count += 1
        i = int(key[1:]) if key[:1] == "u" and key[1:].isdigit() else -1
        if not 0 <= i < self.n or self.seen[i] or out != i:
            self.bad += 1
            return
        self.seen[i] = 1

    def ok(self) -> bool:
        """Every key once with its expected sum, nothing else."""
        return self.bad == 0 and self.count == self.n and all(self.seen)


# --------------------------------------------------------------------------
# dir_output: n keyed lines written to DIR_OUTPUT_FILES files (a partitioned sink)
# --------------------------------------------------------------------------

DIR_OUTPUT_FILES = 8
DIR_OUTPUT_KEYS = 1000
# run.py --writes-on: where flowspark writes the files (its DirOutput's writes_on).
WRITES_ON_ENV = "FLOWSPARK_BENCH_WRITES_ON"


def dir_output_item(i: int) -> tuple[str, str]:
    """Item ``i``: ``("k{i % DIR_OUTPUT_KEYS}", "line {i}")``."""
    return f"k{i % DIR_OUTPUT_KEYS}", f"line {i}"


def dir_output_file(key: str) -> int:
    """The file a key's lines go to (the sinks' default, ``zlib.adler32`` of the key)."""
    import zlib

    return zlib.adler32(key.encode()) % DIR_OUTPUT_FILES


def dir_output_check(n: int, folder: str) -> tuple[bool, int]:
    """Whether the files in ``folder`` (``part_0`` … ``part_7``) hold every line once,
    each in its key's file and in its key's order; and how many lines they hold."""
    found = 0
    last: dict[int, int] = {}
    ok = True
    for index in range(DIR_OUTPUT_FILES):
        path = os.path.join(folder, f"part_{index}")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                found += 1
                i = int(line.split()[1])
                key = i % DIR_OUTPUT_KEYS
                ok = ok and dir_output_file(f"k{key}") == index and last.get(key, -1) < i
                last[key] = i
    return ok and found == n, found


# --------------------------------------------------------------------------
# latency: a live input paced at R events/s -> one step -> per-event latency
# --------------------------------------------------------------------------

LATENCY_SHAPES: tuple[str, ...] = ("stateless", "keyed")
LATENCY_KEYS = 1000  # keyed shape: event i has key f"k{i % 1000}"
LATENCY_WARMUP_S = 5.0  # events due in the first 5 s are not in the steady state
LATENCY_EDGE_S = 10.0  # p99 of the first / last 10 s of the steady state
LATENCY_DEFAULT_RATE = 5000
LATENCY_DEFAULT_DURATION_S = 60.0
LATENCY_RATE_ENV = "FLOWSPARK_BENCH_RATE"  # run.py --rate (default 5000)
LATENCY_SHAPE_ENV = "FLOWSPARK_BENCH_SHAPE"  # run.py --shape (default stateless)
LATENCY_BUCKET_S = 1e-5  # latencies are counted in 10 us buckets
LATENCY_MAX_BATCH = 1000  # the most events one next_batch returns (as a Kafka poll)

# (i, due, emitted): the event's index, the wall time it was due and the wall time
# the input emitted it (time.time(), seconds since the epoch).
LatencyEvent = tuple[int, float, float]
# (i, due, emitted, value): value checks the step ran (see latency_value).
LatencyOut = tuple[int, float, float, int]


@dataclass(frozen=True)
class LatencyParams:
    """One latency run: ``n = rate * duration`` events at ``rate`` events/s."""

    n: int
    rate: int
    shape: str

    @property
    def duration(self) -> float:
        """Seconds the input emits for."""
        return self.n / self.rate

    @property
    def warmup_events(self) -> int:
        """Events due in the warm-up (dropped from the figures)."""
        return min(self.n, round(LATENCY_WARMUP_S * self.rate))


def latency_params(n: int) -> LatencyParams:
    """The run's parameters: ``n`` events, rate and shape from the environment
    (``$FLOWSPARK_BENCH_RATE``, ``$FLOWSPARK_BENCH_SHAPE``, set by ``run.py``)."""
    rate = int(os.environ.get(LATENCY_RATE_ENV) or LATENCY_DEFAULT_RATE)
    shape = os.environ.get(LATENCY_SHAPE_ENV) or LATENCY_SHAPES[0]
    if rate <= 0:
        raise ValueError(f"latency: the rate must be positive; got {rate}")
    if shape not in LATENCY_SHAPES:
        raise ValueError(f"latency: unknown shape {shape!r}; choose from {LATENCY_SHAPES}")
    params = LatencyParams(n, rate, shape)
    if params.warmup_events >= n:
        raise ValueError(
            f"latency: {n} events at {rate}/s last {params.duration:g} s, "
            f"not more than the {LATENCY_WARMUP_S:g} s warm-up"
        )
    return params


class LatencyPacer:
    """The schedule of a live input: event ``i`` is due at ``start + i / rate``.

    ``emit(now)`` returns the events due by ``now`` not yet emitted, at most
    :data:`LATENCY_MAX_BATCH` (the oldest), each stamped with ``now`` (the
    emission time), and raises ``StopIteration`` once all ``n`` were emitted. A
    source that is read late emits its backlog in several batches, as a real one
    (e.g. a Kafka consumer) would. Each system's source partition wraps one.
    """

    def __init__(self, n: int, rate: int, start: float) -> None:
        self.n = n
        self.rate = rate
        self.start = start
        self.next_i = 0

    def emit(self, now: float) -> list[LatencyEvent]:
        """The events due by ``now`` (maybe none); ``StopIteration`` at the end."""
        lo = self.next_i
        if lo >= self.n:
            raise StopIteration
        hi = min(self.n, int((now - self.start) * self.rate) + 1, lo + LATENCY_MAX_BATCH)
        if hi <= lo:
            return []
        self.next_i = hi
        start, rate = self.start, self.rate
        return [(i, start + i / rate, now) for i in range(lo, hi)]

    def next_due(self) -> float | None:
        """Wall time the next event is due (``None``: all emitted, the next call ends)."""
        if self.next_i >= self.n:
            return None
        return self.start + self.next_i / self.rate


def latency_map(event: LatencyEvent) -> LatencyOut:
    """The stateless shape's step: append ``i*3+1``."""
    i, due, emitted = event
    return i, due, emitted, i * 3 + 1


def latency_key(event: LatencyEvent) -> tuple[str, LatencyEvent]:
    """Keyed shape: event ``i`` -> ``(f"k{i % 1000}", event)``."""
    return f"k{event[0] % LATENCY_KEYS}", event


def latency_count_mapper(state: int | None, event: LatencyEvent) -> tuple[int, LatencyOut]:
    """Keyed shape's ``stateful_map``: a running count per key, emitted with the event."""
    count = (state or 0) + 1
    i, due, emitted = event
    return count, (i, due, emitted, count)


def latency_count_builder() -> int:
    """flowspark (bytewax 0.17 API) builder of a key's count."""
    return 0


def latency_unkey(item: tuple[str, LatencyOut]) -> LatencyOut:
    """Keyed shape: drop the key after the count."""
    return item[1]


def latency_value(shape: str, i: int) -> int:
    """The value event ``i`` must come out with: ``i*3+1`` (stateless) or the
    key's running count ``i // 1000 + 1`` (keyed; a key's events in order)."""
    return i * 3 + 1 if shape == "stateless" else i // LATENCY_KEYS + 1


def _quantiles_ms(hist: Counter[int], ps: tuple[float, ...]) -> list[float | None]:
    """Nearest-rank quantiles of a bucket histogram, in ms (to the nearest bucket)."""
    total = sum(hist.values())
    if total == 0:
        return [None for _ in ps]
    out: list[float | None] = []
    keys = sorted(hist)
    for p in ps:
        rank = max(1, math.ceil(p * total))
        seen = 0
        for k in keys:
            seen += hist[k]
            if seen >= rank:
                out.append(round(k * LATENCY_BUCKET_S * 1000, 2))
                break
    return out


class LatencyRecorder:
    """The sink's side: per-event latency (arrival - emission) and exactly-once check.

    ``record(items, now)`` is called per written batch with the time of the
    write. Latencies are rounded to 10 us and counted in histograms (memory by
    distinct value, not by event): the steady state (events due after the
    warm-up), its first and last 10 s, and the steady state measured from the due
    time instead of the emission time. Event ``i``'s place in time is ``i / rate``
    after the input's start, its due time.
    """

    def __init__(self, params: LatencyParams) -> None:
        self.params = params
        n, rate = params.n, params.rate
        self.seen = bytearray(n)
        self.delivered = 0
        self.duplicates = 0
        self.bad_values = 0
        self.warm = params.warmup_events
        edge = round(LATENCY_EDGE_S * rate)
        self.first_end = min(n, self.warm + edge)
        self.last_start = max(self.warm, n - edge)
        self.steady: Counter[int] = Counter()
        self.first: Counter[int] = Counter()
        self.last: Counter[int] = Counter()
        self.from_read: Counter[int] = Counter()
        self.by_slice: dict[int, Counter[int]] = {}  # per 10 s of due time, after warm-up
        self.slice_events = edge
        self.max_s = 0.0

    def record(self, items: Iterable[LatencyOut], now: float) -> None:
        """Record one written batch of ``(i, due, emitted, value)`` outputs."""
        n, seen, shape, bucket = self.params.n, self.seen, self.params.shape, LATENCY_BUCKET_S
        for i, due, emitted, value in items:
            self.delivered += 1
            if not 0 <= i < n or value != latency_value(shape, i):
                self.bad_values += 1
                continue
            if seen[i]:
                self.duplicates += 1
                continue
            seen[i] = 1
            if i < self.warm:
                continue
            lat = now - due  # the event happened when due: the wait to be read counts
            b = round(lat / bucket)
            self.steady[b] += 1
            if i < self.first_end:
                self.first[b] += 1
            if i >= self.last_start:
                self.last[b] += 1
            self.by_slice.setdefault((i - self.warm) // self.slice_events, Counter())[b] += 1
            self.from_read[round((now - emitted) / bucket)] += 1
            if lat > self.max_s:
                self.max_s = lat

    def ok(self) -> bool:
        """Every event exactly once, each with its expected value."""
        return (
            self.delivered == self.params.n
            and self.duplicates == 0
            and self.bad_values == 0
            and self.seen.count(0) == 0
        )

    def summary(self) -> dict[str, Any]:
        """The result keys of the run (see ``bench/README.md``)."""
        p = self.params
        p50, p90, p99 = _quantiles_ms(self.steady, (0.5, 0.9, 0.99))
        (first99,) = _quantiles_ms(self.first, (0.99,))
        (last99,) = _quantiles_ms(self.last, (0.99,))
        read50, read99 = _quantiles_ms(self.from_read, (0.5, 0.99))
        return {
            "shape": p.shape,
            "rate": p.rate,
            "duration_s": p.duration,
            "warmup_s": LATENCY_WARMUP_S,
            "p50_ms": p50,
            "p90_ms": p90,
            "p99_ms": p99,
            "p99_first10_ms": first99,
            "p99_last10_ms": last99,
            "p99_by10s_ms": [
                _quantiles_ms(self.by_slice[k], (0.99,))[0] for k in sorted(self.by_slice)
            ],
            "max_ms": round(self.max_s * 1000, 2),
            "read_p50_ms": read50,
            "read_p99_ms": read99,
            "delivered": self.delivered,
            "sent": p.n,
            "duplicates": self.duplicates,
            "bad_values": self.bad_values,
            "ok": self.ok(),
        }
