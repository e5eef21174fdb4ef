"""Hot-path cost of OpenTelemetry tracing: in-process ``tools/call`` with
tracing absent, installed but off, and on.

    .venv/bin/python benchmarks/bench_tracing.py                  # 5 rounds, zero-copy
    .venv/bin/python benchmarks/bench_tracing.py --rounds 9 --calls 5000 --mode bytes

Each variant runs in a fresh process (the global tracer provider can be set
once per process), the variants of a round one after the other in a rotated
order, rounds interleaved:

* ``absent``: ``opentelemetry`` cannot be imported (as without the ``otel``
  extra);
* ``installed``: ``opentelemetry.trace`` imported, no tracer provider set:
  the default :class:`~trio_mcp.observability.Tracing` finds none when the
  sessions are made and leaves them unwrapped;
* ``sdk``: a global SDK ``TracerProvider`` with no span processor: every
  request and notification makes its spans (recording, nothing exported).

A process makes one in-memory client/server pair (``trio_mcp.testing.connected``)
and calls a one-line async tool ``--calls`` times after a warm-up; it reports
calls/s (wall clock), CPU per call (the process's own CPU time from
``/proc/self/task/*/schedstat``, not counting time spent waiting for a CPU)
and Python function calls per request (cProfile over 200 calls: independent
of the machine's load). The report gives each variant's medians and, for each
figure, the median over rounds of its ratio to ``absent`` in the same round
(the runs of a round share the machine's load), with the load average before
and after; then the same as one JSON line.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _report import cpu_ns, load_average

VARIANTS = ("absent", "installed", "sdk")
PROFILED_CALLS = 200


def _prepare(variant: str) -> None:
    if variant == "absent":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # import fails as if not installed
    elif variant == "installed":
        import opentelemetry.trace  # noqa: F401
    elif variant == "sdk":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        trace.set_tracer_provider(TracerProvider())


async def _run(calls: int, mode: str) -> dict[str, Any]:
    from trio_mcp import MCPServer
    from trio_mcp.testing import connected

    app = MCPServer("bench")

    @app.tool()
    async def echo(text: str) -> str:  # async: no worker thread in the measure
        return text

    args = {"text": "hello, benchmark"}
    async with connected(app, mode=mode) as client:  # type: ignore[arg-type]
        traced = "request" in vars(client.peer)
        for _ in range(max(200, calls // 10)):  # warm-up
            await client.call_tool("echo", args)
        cpu0, wall0 = cpu_ns(os.getpid()), time.perf_counter()
        for _ in range(calls):
            await client.call_tool("echo", args)
        wall = time.perf_counter() - wall0
        cpu1 = cpu_ns(os.getpid())
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(PROFILED_CALLS):
            await client.call_tool("echo", args)
        profile.disable()
    cpu_us = None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / 1000 / calls
    stats = pstats.Stats(profile)
    # Calls of tracing code itself (ours or OpenTelemetry's): exact, unlike the
    # total, which trio's randomised scheduling moves by a call or so.
    tracing_calls = sum(
        entry[1]
        for (filename, _, _), entry in stats.stats.items()  # type: ignore[attr-defined]
        if "observability" in filename or "opentelemetry" in filename
    )
    return {
        "traced": traced,
        "calls_per_s": calls / wall,
        "cpu_us_per_call": cpu_us,
        "py_calls_per_request": stats.total_calls / PROFILED_CALLS,  # type: ignore[attr-defined]
        "tracing_calls_per_request": tracing_calls / PROFILED_CALLS,
    }


def child(variant: str, calls: int, mode: str) -> None:
    _prepare(variant)
    import trio

    print(json.dumps({"variant": variant, **trio.run(_run, calls, mode)}))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--mode", choices=("zero-copy", "bytes", "inline"), default="zero-copy")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        child(opts.child, opts.calls, opts.mode)
        return
    load_before = load_average()
    rows: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for r in range(opts.rounds):
        order = VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]
        for variant in order:
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    variant,
                    "--calls",
                    str(opts.calls),
                    "--mode",
                    opts.mode,
                ],
                capture_output=True,
                text=True,
                check=True,
                timeout=600,
            )
            rows[variant].append(json.loads(done.stdout.strip().splitlines()[-1]))
    load_after = load_average()
    print(f"tracing cost, in-process tools/call ({opts.mode}), {opts.rounds} rounds x {opts.calls} calls")
    print(f"load average: {load_before} before, {load_after} after")
    print("medians; each ratio is the median over rounds of (variant / absent) within the round")
    print(
        f"{'variant':<10} {'traced':>6} {'calls/s':>9} {'ratio':>6} {'CPU us/call':>11} {'ratio':>6}"
        f" {'py calls/req':>12} {'ratio':>6}"
    )
    summary: dict[str, Any] = {"bench": "tracing", "mode": opts.mode, "loadavg": [load_before, load_after]}
    for variant in VARIANTS:
        got = rows[variant]
        figures = {key: _median(got, key) for key in KEYS}
        ratios = {key: _ratio(got, rows["absent"], key) for key in KEYS}
        traced = all(r["traced"] for r in got)
        tracing_calls = max(r["tracing_calls_per_request"] for r in got)
        summary[variant] = {
            "traced": traced,
            **figures,
            "tracing_calls_per_request": tracing_calls,
            "ratios": ratios,
        }
        cells = " ".join(
            f"{_text(figures[key], width, digits)} {_text(ratios[key], 6, 3)}"
            for key, width, digits in (
                ("calls_per_s", 9, 0),
                ("cpu_us_per_call", 11, 1),
                ("py_calls_per_request", 12, 1),
            )
        )
        print(f"{variant:<10} {'yes' if traced else 'no':>6} {cells}")
    print(json.dumps(summary))


KEYS = ("calls_per_s", "cpu_us_per_call", "py_calls_per_request")


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.median(values) if values else None


def _ratio(rows: list[dict[str, Any]], base: list[dict[str, Any]], key: str) -> float | None:
    """The median of the per-round ratios (a round's runs share the machine's load)."""
    values = [r[key] / b[key] for r, b in zip(rows, base, strict=True) if r[key] and b[key]]
    return statistics.median(values) if values else None


def _text(value: float | None, width: int, digits: int) -> str:
    return "-".rjust(width) if value is None else f"{value:{width}.{digits}f}"


if __name__ == "__main__":
    main()
