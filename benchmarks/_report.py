"""Shared by the benchmarks (both sides of each): the load loop,
percentiles, the table, the JSON lines, and the ratio helpers of the
process benchmarks.

Standard library only: the official SDK side imports this module from its
own venv (``.cache/sdk-venv``), where trio-mcp is not installed.
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TextIO

BENCH = "inprocess"
PAYLOAD = "hello, benchmark"
JSON_FIELDS = (
    "bench",
    "impl",
    "mode",
    "concurrency",
    "calls_per_s",
    "mean_us",
    "p50_us",
    "p99_us",
    "calls",
    "seconds",
)


def default_warmup(seconds: float) -> float:
    """Warm-up before each row: half a second, less for very short runs."""
    return max(0.05, min(0.5, seconds / 2))


def cpu_ns(pid: int | None) -> int | None:
    """CPU time (ns) used so far by a live process's threads: the first field
    of ``/proc/<pid>/task/*/schedstat`` (Linux), unaffected by the time the
    process waited for a CPU on a busy machine. ``None`` when unknown."""
    if pid is None:
        return None
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    except OSError:
        return None
    return total or None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of an already sorted sequence."""
    if not sorted_values:
        raise ValueError("no samples")
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


async def measure(
    call: Callable[[], Awaitable[Any]],
    *,
    concurrency: int,
    warmup: float,
    seconds: float,
    open_group: Callable[[], AbstractAsyncContextManager[Any]],
) -> list[int]:
    """Run ``concurrency`` callers doing back-to-back ``call()`` for
    ``warmup + seconds``; return the latencies (ns) of the calls that
    *completed* inside the measured window (after the warm-up).

    Throughput is ``len(result) / seconds``. Callers stop on their own at the
    end of the window (no cancellation), so teardown costs at most one call.
    ``open_group`` is ``trio.open_nursery`` or ``anyio.create_task_group``.
    """
    gc.collect()
    clock = time.perf_counter_ns
    window_start = clock() + int(warmup * 1e9)
    window_end = window_start + int(seconds * 1e9)
    latencies: list[int] = []
    record = latencies.append

    async def caller() -> None:
        while True:
            begin = clock()
            await call()
            done = clock()
            if done >= window_end:
                return
            if done >= window_start:
                record(done - begin)

    async with open_group() as group:
        for _ in range(concurrency):
            group.start_soon(caller)
    return latencies


def make_row(
    impl: str,
    mode: str,
    concurrency: int,
    latencies_ns: list[int],
    seconds: float,
    *,
    bench: str = BENCH,
    **extra: Any,
) -> dict[str, Any]:
    if not latencies_ns:
        raise RuntimeError(f"{impl} {mode} x{concurrency}: no call completed in the measured window")
    ordered = sorted(latencies_ns)
    row = {
        "bench": bench,
        "impl": impl,
        "mode": mode,
        "concurrency": concurrency,
        "calls_per_s": round(len(ordered) / seconds, 1),
        "mean_us": round(sum(ordered) / len(ordered) / 1e3, 2),
        "p50_us": round(percentile(ordered, 50) / 1e3, 2),
        "p99_us": round(percentile(ordered, 99) / 1e3, 2),
        "calls": len(ordered),
        "seconds": seconds,
    }
    row.update(extra)
    return row


def json_line(obj: dict[str, Any], out: TextIO = sys.stdout) -> None:
    out.write(json.dumps(obj, separators=(",", ":")) + "\n")
    out.flush()


def parse_json_lines(text: str) -> list[dict[str, Any]]:
    """Every JSON object among the lines of ``text`` (other lines ignored)."""
    objects = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            objects.append(obj)
    return objects


def parse_rows(text: str, bench: str = BENCH) -> list[dict[str, Any]]:
    """The benchmark rows (of ``bench``) among the JSON lines of ``text`` (other lines ignored)."""
    return [obj for obj in parse_json_lines(text) if obj.get("bench") == bench and "calls_per_s" in obj]


def label(concurrency: int) -> str:
    return "seq" if concurrency == 1 else f"c{concurrency}"


def table(rows: Sequence[dict[str, Any]]) -> str:
    header = ("impl", "mode", "callers", "calls/s", "mean µs", "p50 µs", "p99 µs", "calls")
    body = [
        (
            r["impl"],
            r["mode"],
            str(r["concurrency"]),
            f"{r['calls_per_s']:,.0f}",
            f"{r['mean_us']:,.1f}",
            f"{r['p50_us']:,.1f}",
            f"{r['p99_us']:,.1f}",
            f"{r['calls']:,}",
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)]
    left = {0, 1}

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        )

    lines = [fmt(header), "  ".join("-" * w for w in widths)]
    lines += [fmt(b) for b in body]
    return "\n".join(lines)


# ------------------------------------------------- process benchmarks (stdio, http)


def pair_name(client: str, server: str) -> str:
    return f"{client}->{server}"


def sdk_env() -> dict[str, str]:
    """Our environment for a process of the SDK's venv (none of ours leaks in)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def find(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    """The first row with every ``match`` field equal."""
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return row
    return None


def ratio(
    a: dict[str, Any] | None, b: dict[str, Any] | None, key: str, *, inverse: bool = False
) -> float | None:
    if a is None or b is None or not a.get(key) or not b.get(key):
        return None
    return round(b[key] / a[key] if inverse else a[key] / b[key], 2)


def call_ratios(
    rows: list[dict[str, Any]],
    num: tuple[str, str, str],
    den: tuple[str, str, str],
    concurrencies: tuple[int, ...],
    key: str = "calls_per_s",
) -> dict[str, float]:
    """``num`` over ``den`` per concurrency, each a (client, server, mode); for
    a latency ``key`` the inverse, so that > 1 always means ``num`` is faster."""
    out = {}
    for c in concurrencies:
        a = find(rows, client=num[0], server=num[1], mode=num[2], concurrency=c)
        b = find(rows, client=den[0], server=den[1], mode=den[2], concurrency=c)
        value = ratio(a, b, key, inverse=key != "calls_per_s")
        if value is not None:
            out[label(c)] = value
    return out
