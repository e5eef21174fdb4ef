"""Latency and outcome recording: per operation, per interval, mergeable.

A load generator records each call's outcome and two latencies in
microseconds: *corrected* (from the call's intended start: the schedule's
time in the open model) and *uncorrected* (from the moment it was sent).
Every interval it hands over a :class:`Tick`: the counts and the interval's
HDR histograms, encoded (so a tick crosses a process boundary as it is).
The :class:`Aggregate` adds ticks from any number of workers losslessly:
cumulative histograms per operation, and figures per interval.

Recording is cheap on the hot path: a call appends to two lists; at the
tick the values are grouped at the histogram's own resolution and recorded
with counts.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable
from itertools import accumulate
from typing import Any

import msgspec
from hdrh.histogram import HdrHistogram  # type: ignore[import-untyped]

__all__ = [
    "HIGHEST_US",
    "Aggregate",
    "OpRecorder",
    "OpTick",
    "Tick",
    "histogram_of",
    "moments",
    "new_histogram",
    "percentiles",
]

#: Highest latency recorded exactly (one hour, in µs); slower calls are recorded as this.
HIGHEST_US = 3_600_000_000
#: Significant digits of the histograms.
DIGITS = 3
#: Values below this are kept exactly by a 3-digit HDR histogram; above, its
#: buckets are 2**(bit_length - 11) wide.
_SUB_BUCKETS = 2048
_SHIFT_BITS = _SUB_BUCKETS.bit_length() - 1


def new_histogram() -> HdrHistogram:
    return HdrHistogram(1, HIGHEST_US, DIGITS)


def _grouped(values: list[int]) -> Counter[int]:
    """Values grouped at the histogram's resolution (the same buckets)."""
    counter: Counter[int] = Counter()
    for v in values:
        if v >= _SUB_BUCKETS:
            shift = v.bit_length() - _SHIFT_BITS
            v = (v >> shift) << shift
        counter[v] += 1
    return counter


def _index(v: int) -> int:
    """The counts-array index of value ``v`` in a :func:`new_histogram`
    (lowest 1, 3 digits: 2048 sub-buckets, half-count magnitude 10)."""
    if v < _SUB_BUCKETS:
        return v
    bucket = v.bit_length() - _SHIFT_BITS
    return ((bucket + 1) << (_SHIFT_BITS - 1)) + (v >> bucket) - (_SUB_BUCKETS >> 1)


def histogram_of(values: list[int]) -> HdrHistogram:
    """A histogram of ``values`` (µs), recorded in bulk: grouped at the
    histogram's resolution, then added straight into its counts."""
    h = new_histogram()
    if not values:
        return h
    grouped = _grouped([_clamp(v) for v in values])
    counts = h.counts
    for value, count in grouped.items():
        counts[_index(value)] += count
    h.total_count = len(values)
    h.min_value = min(grouped)
    h.max_value = h.get_highest_equivalent_value(max(grouped))
    return h


def percentiles(h: HdrHistogram, wanted: Iterable[float]) -> dict[float, int]:
    """Values at the ``wanted`` percentiles (as ``get_value_at_percentile``
    reports them), in one cumulative pass over the used part of the counts."""
    total = h.get_total_count()
    if not total:
        return {p: 0 for p in wanted}
    used = _index(h.get_max_value()) + 1
    cumulative = list(accumulate(h.counts[:used]))
    out = {}
    for p in wanted:
        target = max(int(min(p, 100.0) * total / 100 + 0.5), 1)
        index = min(bisect_left(cumulative, target), used - 1)
        value = h.get_value_from_index(index)
        out[p] = h.get_highest_equivalent_value(value) if p else h.get_lowest_equivalent_value(value)
    return out


def moments(h: HdrHistogram) -> tuple[float, float]:
    """Mean and standard deviation (as ``get_mean_value`` / ``get_stddev``
    report them: each count at its bucket's middle), in one pass over the
    used counts. (hdrh's own walk every bucket below the maximum, one Python
    call each: seconds for a histogram reaching into the seconds.)"""
    total = h.get_total_count()
    if not total:
        return 0.0, 0.0
    used = _index(h.get_max_value()) + 1
    middles = []
    for index, count in enumerate(h.counts[:used]):
        if count:
            value = h.get_value_from_index(index)
            lowest = h.get_lowest_equivalent_value(value)
            width = h.get_highest_equivalent_value(value) - lowest + 1
            middles.append((lowest + (width >> 1), count))
    mean = float(sum(m * c for m, c in middles)) / total
    variance = sum((m * 1.0 - mean) ** 2 * c for m, c in middles) / total
    return mean, math.sqrt(variance)


def _clamp(us: int) -> int:
    return 1 if us < 1 else min(us, HIGHEST_US)


class OpTick(msgspec.Struct, kw_only=True):
    ok: int = 0
    is_error: int = 0
    failed: dict[str, int] = {}
    #: Encoded HDR histograms of the interval ("" when empty).
    corrected: str = ""
    uncorrected: str = ""

    @property
    def calls(self) -> int:
        return self.ok + self.is_error + sum(self.failed.values())


class Tick(msgspec.Struct, kw_only=True, tag=True):
    """What one worker measured in one interval (histograms encoded)."""

    worker: int = 0
    index: int
    #: End of the interval, seconds since the measured phase began (negative: warm-up).
    seconds: float
    warmup: bool = False
    in_flight: int = 0
    #: Calls of the open model that started behind schedule (in-flight cap reached).
    late: int = 0
    #: Calls finished during the warm-up (not measured).
    warmup_calls: int = 0
    ops: dict[str, OpTick] = {}


class OpRecorder:
    """One operation's outcomes since the last tick."""

    __slots__ = ("corrected", "failed", "is_error", "ok", "uncorrected")

    def __init__(self) -> None:
        self.ok = 0
        self.is_error = 0
        self.failed: dict[str, int] = {}
        self.corrected: list[int] = []
        self.uncorrected: list[int] = []

    def record(self, kind: str, corrected_us: int, uncorrected_us: int) -> None:
        if kind == "ok":
            self.ok += 1
        elif kind == "is_error":
            self.is_error += 1
        else:
            self.failed[kind] = self.failed.get(kind, 0) + 1
        self.corrected.append(corrected_us)
        self.uncorrected.append(uncorrected_us)

    @staticmethod
    def _encode(values: list[int]) -> str:
        if not values:
            return ""
        encoded: bytes = histogram_of(values).encode()
        return encoded.decode("ascii")

    def drain(self) -> OpTick:
        tick = OpTick(
            ok=self.ok,
            is_error=self.is_error,
            failed=self.failed,
            corrected=self._encode(self.corrected),
            uncorrected=self._encode(self.uncorrected),
        )
        self.ok = self.is_error = 0
        self.failed = {}
        self.corrected = []
        self.uncorrected = []
        return tick


def decode(encoded: str) -> HdrHistogram:
    return HdrHistogram.decode(encoded.encode("ascii"))


def _add(into: HdrHistogram, encoded: str) -> None:
    if encoded:
        into.add(decode(encoded))


class _OpTotals:
    def __init__(self) -> None:
        self.ok = 0
        self.is_error = 0
        self.failed: Counter[str] = Counter()
        self.corrected = new_histogram()
        self.uncorrected = new_histogram()

    def add(self, tick: OpTick) -> None:
        self.ok += tick.ok
        self.is_error += tick.is_error
        self.failed.update(tick.failed)
        _add(self.corrected, tick.corrected)
        _add(self.uncorrected, tick.uncorrected)

    @property
    def calls(self) -> int:
        return self.ok + self.is_error + sum(self.failed.values())


class _Pending:
    """One interval, while not every worker has reported it."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.seconds = 0.0
        self.reporters: set[int] = set()
        self.in_flight = 0
        self.late = 0
        self.ok = 0
        self.is_error = 0
        self.failed: Counter[str] = Counter()
        self.per_op: Counter[str] = Counter()
        self.corrected = new_histogram()
        self.uncorrected = new_histogram()


def _percentiles(h: HdrHistogram) -> dict[str, int]:
    if not h.get_total_count():
        return {"p50": 0, "p90": 0, "p99": 0, "max": 0}
    values = percentiles(h, (50.0, 90.0, 99.0))
    return {"p50": values[50.0], "p90": values[90.0], "p99": values[99.0], "max": h.get_max_value()}


class Aggregate:
    """Everything measured, merged over workers (feed it ticks)."""

    def __init__(self, workers: int = 1, interval: float = 1.0) -> None:
        self.workers = workers
        self.interval = interval
        self.ops: dict[str, _OpTotals] = {}
        #: Figures of every complete interval, in order.
        self.intervals: list[dict[str, Any]] = []
        self._pending: dict[int, _Pending] = {}
        self._finished: set[int] = set()
        #: The latest warm-up tick per worker (the live display shows it).
        self.warmup_calls = 0
        self.in_flight: dict[int, int] = {}
        #: Measured calls per worker.
        self.per_worker: Counter[int] = Counter()

    def op(self, name: str) -> _OpTotals:
        totals = self.ops.get(name)
        if totals is None:
            totals = self.ops[name] = _OpTotals()
        return totals

    def add(self, tick: Tick) -> None:
        self.in_flight[tick.worker] = tick.in_flight
        if tick.warmup:
            self.warmup_calls += tick.warmup_calls
            return
        pending = self._pending.get(tick.index)
        if pending is None:
            pending = self._pending[tick.index] = _Pending(tick.index)
        pending.reporters.add(tick.worker)
        pending.seconds = max(pending.seconds, tick.seconds)
        pending.in_flight += tick.in_flight
        pending.late += tick.late
        for name, op in tick.ops.items():
            self.per_worker[tick.worker] += op.calls
            self.op(name).add(op)
            pending.ok += op.ok
            pending.is_error += op.is_error
            pending.failed.update(op.failed)
            pending.per_op[name] += op.calls
            _add(pending.corrected, op.corrected)
            _add(pending.uncorrected, op.uncorrected)
        self._complete()

    def worker_done(self, worker: int) -> None:
        """A worker sends no more ticks: intervals stop waiting for it."""
        self._finished.add(worker)
        self._complete()

    def _complete(self) -> None:
        for index in sorted(self._pending):
            pending = self._pending[index]
            if len(pending.reporters | self._finished) < self.workers:
                break  # a worker still running has not reported it yet
            del self._pending[index]
            self.intervals.append(self._figures(pending))

    def flush(self) -> None:
        for index in sorted(self._pending):
            self.intervals.append(self._figures(self._pending.pop(index)))

    def _figures(self, p: _Pending) -> dict[str, Any]:
        start = self.intervals[-1]["seconds"] if self.intervals else max(0.0, p.seconds - self.interval)
        width = max(p.seconds - start, 1e-9)
        calls = p.ok + p.is_error + sum(p.failed.values())
        return {
            "index": p.index,
            "seconds": round(p.seconds, 3),
            "width": round(width, 3),
            "calls": calls,
            "calls_per_s": round(calls / width, 1),
            "ok": p.ok,
            "is_error": p.is_error,
            "failed": dict(sorted(p.failed.items())),
            "in_flight": p.in_flight,
            "late": p.late,
            "per_operation": dict(p.per_op),
            "latency_us": _percentiles(p.corrected),
            "uncorrected_us": _percentiles(p.uncorrected),
        }

    def total(self) -> _OpTotals:
        """All operations together (a fresh merge)."""
        out = _OpTotals()
        for op in self.ops.values():
            out.ok += op.ok
            out.is_error += op.is_error
            out.failed.update(op.failed)
            out.corrected.add(op.corrected)
            out.uncorrected.add(op.uncorrected)
        return out
