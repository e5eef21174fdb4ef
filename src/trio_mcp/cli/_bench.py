"""``trio-mcp bench``: a ``tools/call`` load run against any MCP server.

``concurrency`` callers share one session and call the tool back to back,
first for ``warmup`` seconds (not counted), then for ``duration`` seconds or
until ``calls`` calls were made. Every call is bounded by ``call_timeout``.
Latencies go into an HDR histogram (microseconds, 3 significant digits), so
a long run keeps constant memory. A call is counted as

* ``ok``: answered with a result that is not ``isError``;
* ``is_error``: answered with an ``isError`` result;
* ``failed``: answered with a JSON-RPC error, or not answered within
  ``call_timeout`` (by kind: the error's code, or ``timeout``).

A connection that dies ends the run early (every later call would fail the
same way); the report says so.
"""

from __future__ import annotations

import time
from typing import Any

import attrs
import trio

from ..protocol import ConnectionClosed, McpError

__all__ = ["BenchResult", "format_result", "run_bench"]

#: Highest latency the histogram records exactly (one hour, in microseconds);
#: anything slower is recorded as this.
_MAX_US = 3_600_000_000


@attrs.frozen
class BenchResult:
    tool: str
    concurrency: int
    seconds: float
    calls: int
    ok: int
    is_error: int
    failed: dict[str, int]
    calls_per_s: float
    mean_us: float
    p50_us: int
    p90_us: int
    p99_us: int
    p999_us: int
    max_us: int
    protocol: str | None
    #: Why the run ended before its time or call budget, if it did.
    stopped: str | None = None


async def run_bench(
    client: Any,
    tool: str,
    arguments: dict[str, Any],
    *,
    concurrency: int = 16,
    duration: float = 10.0,
    calls: int | None = None,
    warmup: float = 1.0,
    call_timeout: float = 30.0,
    as_task: bool = False,
) -> BenchResult:
    """Run the load against an initialized :class:`~trio_mcp.ClientSession`
    (``as_task``: every call a task-augmented call, followed to its result)."""
    from hdrh.histogram import HdrHistogram

    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if duration <= 0 and calls is None:
        raise ValueError("give a positive duration or a number of calls")
    if calls is not None and calls < 1:
        raise ValueError("calls must be at least 1")
    histogram = HdrHistogram(1, _MAX_US, 3)
    counts = {"ok": 0, "is_error": 0, "issued": 0}
    failed: dict[str, int] = {}
    stopped: str | None = None

    async def one(record: bool) -> None:
        nonlocal stopped
        start = time.perf_counter_ns()
        kind: str | None = None
        try:
            with trio.fail_after(call_timeout):
                if as_task:
                    result = await client.tasks.run_tool(tool, arguments)
                else:
                    result = await client.call_tool(tool, arguments)
            kind = "is_error" if result.is_error is True else "ok"
        except ConnectionClosed as exc:
            stopped = f"the connection closed: {exc.message}"
            kind = f"{exc.code}"
        except McpError as exc:
            kind = f"{exc.code}"
        except trio.TooSlowError:
            kind = "timeout"
        if not record:
            return
        histogram.record_value(min(max((time.perf_counter_ns() - start) // 1000, 1), _MAX_US))
        if kind in ("ok", "is_error"):
            counts[kind] += 1
        else:
            failed[kind] = failed.get(kind, 0) + 1

    async def caller(deadline: float, record: bool, scope: trio.CancelScope) -> None:
        while stopped is None and trio.current_time() < deadline:
            if record and calls is not None:
                if counts["issued"] >= calls:
                    return
                counts["issued"] += 1
            await one(record)
        if stopped is not None:
            scope.cancel()

    async def phase(seconds: float, record: bool) -> float:
        begin = time.perf_counter()
        deadline = trio.current_time() + seconds
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(caller, deadline, record, nursery.cancel_scope)
        return time.perf_counter() - begin

    if warmup > 0:
        await phase(warmup, record=False)
    budget = duration if duration > 0 else float("inf")
    elapsed = await phase(budget, record=True) if stopped is None else 0.0
    total = histogram.get_total_count()
    return BenchResult(
        tool=tool,
        concurrency=concurrency,
        seconds=round(elapsed, 3),
        calls=total,
        ok=counts["ok"],
        is_error=counts["is_error"],
        failed=dict(sorted(failed.items())),
        calls_per_s=round(total / elapsed, 1) if elapsed > 0 else 0.0,
        mean_us=round(histogram.get_mean_value(), 1) if total else 0.0,
        p50_us=histogram.get_value_at_percentile(50) if total else 0,
        p90_us=histogram.get_value_at_percentile(90) if total else 0,
        p99_us=histogram.get_value_at_percentile(99) if total else 0,
        p999_us=histogram.get_value_at_percentile(99.9) if total else 0,
        max_us=histogram.get_max_value() if total else 0,
        protocol=getattr(client, "protocol_version", None),
        stopped=stopped,
    )


def format_result(result: BenchResult, target: str) -> str:
    failed = sum(result.failed.values())
    kinds = ", ".join(f"{k}: {n}" for k, n in result.failed.items())
    head = f"tools/call {result.tool} on {target}: {result.concurrency} callers, {result.seconds:.2f} s"
    calls = f"{result.calls:,} ({result.calls_per_s:,.1f}/s): {result.ok:,} ok, {result.is_error:,} isError"
    latency = (
        f"mean {result.mean_us:,.0f} µs, p50 {result.p50_us:,}, p90 {result.p90_us:,}, "
        f"p99 {result.p99_us:,}, p99.9 {result.p999_us:,}, max {result.max_us:,} µs"
    )
    lines = [
        f"{head}, protocol {result.protocol}",
        f"  calls    {calls}, {failed:,} failed" + (f" ({kinds})" if kinds else ""),
        f"  latency  {latency}",
    ]
    if result.stopped:
        lines.append(f"  stopped early: {result.stopped}")
    return "\n".join(lines)
