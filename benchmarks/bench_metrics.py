"""The hot-path cost of Prometheus metrics: in-process ``tools/call`` with and
without :class:`trio_mcp.observability.Metrics`, interleaved.

    .venv/bin/python benchmarks/bench_metrics.py                   # 5 rounds of 3000 calls per row
    .venv/bin/python benchmarks/bench_metrics.py --rounds 9 --calls 5000

Variants, each an ``MCPServer`` with one ``async def echo(text) -> str`` tool
called back-to-back by one caller over ``trio_mcp.testing.connected`` (the
``bytes`` pair: every message through the JSON codec, as on a wire):

* ``off``: no metrics (what the Python API does unless asked);
* ``noop``: a middleware that does nothing (``await call_next()``): what
  the middleware machinery costs by itself (a ``Context`` per request, the
  chain);
* ``on``: ``Metrics().instrument(app)``, what ``trio-mcp run -t http`` does
  (the middleware adds to plain integers; the Prometheus families are built
  only when scraped);
* ``native``: for comparison, a middleware doing the same with
  prometheus_client's own ``Counter``/``Histogram``/``Gauge`` children (label
  children looked up once and cached): why ``on`` does not.

The rows run interleaved (off, noop, on, native; then noop, on, native, off; …) for
``--rounds`` rounds of ``--calls`` calls each, after a warm-up, so load on
the machine falls on every variant alike. Per variant: calls/s (wall clock: noisy on a
busy machine), CPU per call (this process's user+sys time, client and server
together, over the calls), Python function calls per request under cProfile
and, with ``--instructions``, CPU instructions per call under valgrind's
callgrind (both independent of load). Reported as the median over rounds and as
ratios to ``off``, with the load average before and after. The last line is
JSON.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import trio

from trio_mcp.observability import Metrics
from trio_mcp.server import Context, MCPServer
from trio_mcp.testing import connected

VARIANTS = ("off", "noop", "on", "native")


def make_app(variant: str) -> MCPServer:
    app = MCPServer("bench-metrics", "1.0")

    @app.tool
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    if variant == "noop":

        @app.add_middleware
        async def noop(ctx: Context, call_next: Any) -> Any:
            return await call_next()

    elif variant == "on":
        Metrics().instrument(app)
    elif variant == "native":
        app.add_middleware(native_middleware())
    return app


def native_middleware() -> Callable[[Context, Any], Any]:
    """The same counts with prometheus_client's metric objects on the hot path."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    registry = CollectorRegistry()
    requests = Counter("requests", "", ["method", "outcome"], registry=registry)
    latency = Histogram("duration_seconds", "", ["method", "tool"], registry=registry)
    in_flight = Gauge("in_flight", "", registry=registry)
    children: dict[tuple[str, str], Any] = {}

    def child(metric: Any, *labels: str) -> Any:
        found = children.get((id(metric), *labels))  # type: ignore[arg-type]
        if found is None:
            found = children[(id(metric), *labels)] = metric.labels(*labels)  # type: ignore[index]
        return found

    async def middleware(ctx: Context, call_next: Any) -> Any:
        method = ctx.request.method
        in_flight.inc()
        start = time.perf_counter()
        outcome = "error"
        try:
            result = await call_next()
            outcome = "ok"
            return result
        finally:
            in_flight.dec()
            child(requests, method, outcome).inc()
            child(latency, method, "echo" if method == "tools/call" else "").observe(
                time.perf_counter() - start
            )

    return middleware


async def run_calls(
    app: MCPServer, calls: int, profile: cProfile.Profile | None = None
) -> tuple[float, float]:
    """``calls`` calls after a warm-up: (wall seconds, CPU seconds)."""
    async with connected(app, mode="bytes") as client:
        for _ in range(200):
            await client.call_tool("echo", {"text": "hi"})
        if profile is not None:
            profile.enable()
        cpu = time.process_time()
        wall = time.perf_counter()
        for _ in range(calls):
            await client.call_tool("echo", {"text": "hi"})
        wall = time.perf_counter() - wall
        cpu = time.process_time() - cpu
        if profile is not None:
            profile.disable()
    return wall, cpu


def function_calls_per_request(variant: str, calls: int) -> float:
    profile = cProfile.Profile()
    trio.run(run_calls, make_app(variant), calls, profile)
    return float(pstats.Stats(profile).total_calls) / calls  # type: ignore[attr-defined]


def instructions_per_call(variant: str, few: int = 500, many: int = 2500) -> float:
    """CPU instructions of one call under callgrind: two runs of the same
    program with ``few`` and ``many`` calls, the difference over the extra calls
    (start-up, imports and warm-up cancel out)."""

    def collected(calls: int) -> int:
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                sys.executable,
                __file__,
                "--only",
                variant,
                "--calls",
                str(calls),
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        match = re.search(r"Collected : (\d+)", out.stderr)
        assert match is not None, out.stderr[-2000:]
        return int(match.group(1))

    return (collected(many) - collected(few)) / (many - few)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--profile-calls", type=int, default=500)
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count CPU instructions per call with valgrind (callgrind): slow, load-independent",
    )
    parser.add_argument("--only", choices=VARIANTS, help=argparse.SUPPRESS)  # one run, for callgrind
    args = parser.parse_args()
    if args.only:
        gc.disable()  # no collection lands in one run and not the other
        trio.run(run_calls, make_app(args.only), args.calls)
        return

    load_before = os.getloadavg()
    apps = {variant: make_app(variant) for variant in VARIANTS}
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpus: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for round_ in range(args.rounds):
        shift = round_ % len(VARIANTS)  # each variant runs first in turn: no order bias
        for variant in VARIANTS[shift:] + VARIANTS[:shift]:
            wall, cpu = trio.run(run_calls, apps[variant], args.calls)
            rates[variant].append(args.calls / wall)
            cpus[variant].append(cpu / args.calls * 1e6)
    profiled = {variant: function_calls_per_request(variant, args.profile_calls) for variant in VARIANTS}
    instructions = {v: instructions_per_call(v) for v in VARIANTS} if args.instructions else {}
    load_after = os.getloadavg()

    rate = {v: statistics.median(rates[v]) for v in VARIANTS}
    cpu = {v: statistics.median(cpus[v]) for v in VARIANTS}
    print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f}")
    print(
        f"{'variant':<8} {'calls/s':>10} {'CPU us/call':>12} {'py calls/req':>13} {'rate/off':>9} {'cpu/off':>8} {'pycalls/off':>12}"
    )
    for v in VARIANTS:
        print(
            f"{v:<8} {rate[v]:>10.0f} {cpu[v]:>12.1f} {profiled[v]:>13.1f} "
            f"{rate[v] / rate['off']:>9.3f} {cpu[v] / cpu['off']:>8.3f} {profiled[v] / profiled['off']:>12.3f}"
        )
    for v, count in instructions.items():
        print(
            f"{v:<8} {count:>10.0f} instructions/call (callgrind), {count / instructions['off']:.3f} of off"
        )
    summary = {
        "bench": "metrics",
        "rounds": args.rounds,
        "calls": args.calls,
        "loadavg": [round(load_before[0], 2), round(load_after[0], 2)],
        "calls_per_s": {v: round(rate[v], 1) for v in VARIANTS},
        "cpu_us_per_call": {v: round(cpu[v], 2) for v in VARIANTS},
        "py_calls_per_request": {v: round(profiled[v], 2) for v in VARIANTS},
        "instructions_per_call": {v: round(n) for v, n in instructions.items()},
        "ratios": {
            v: {
                "calls_per_s": round(rate[v] / rate["off"], 4),
                "cpu_per_call": round(cpu[v] / cpu["off"], 4),
                "py_calls": round(profiled[v] / profiled["off"], 4),
            }
            for v in VARIANTS
            if v != "off"
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
