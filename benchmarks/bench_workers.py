"""What ``trio-mcp bench --workers`` buys: calls/s that 1 and 2 load-generating
worker processes drive against stdio servers, measured by the tool itself.

    .venv/bin/python benchmarks/bench_workers.py                    # 3 rounds of 5 s rows
    .venv/bin/python benchmarks/bench_workers.py --seconds 10 --rounds 5

Servers: trio-mcp's stdio echo server (``benchmarks/servers/trio_echo_server.py``)
and, when the TypeScript SDK is among the npm peers (``bash
scripts/setup-interop``) and ``benchmarks/drivers/ts_stdio_server.mjs`` is
there, the TypeScript SDK's. Every row is ``trio-mcp bench -c C --workers W``
(C callers in all, one session per worker: over stdio a session is its own
server process, so W workers load W server processes), interleaved over the
rounds; the report gives the median calls/s per row, the 2-worker/1-worker
ratio, and the load average seen around the rows (the machine is shared:
compare ratios, not absolute figures).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from _report import json_line, load_average

ROOT = Path(__file__).resolve().parent.parent
TRIO_SERVER = ROOT / "benchmarks" / "servers" / "trio_echo_server.py"
TS_SERVER = ROOT / "benchmarks" / "drivers" / "ts_stdio_server.mjs"
TS_SDK = ROOT / "tests" / "interop" / "node_modules" / "@modelcontextprotocol" / "sdk"


def servers() -> dict[str, list[str]]:
    found = {"trio-mcp": [sys.executable, str(TRIO_SERVER)]}
    node = shutil.which("node")
    if node and TS_SERVER.is_file() and TS_SDK.is_dir():
        found["ts-sdk"] = [node, str(TS_SERVER)]
    return found


def run_row(server: list[str], workers: int, callers: int, seconds: float) -> dict[str, float]:
    argv = [sys.executable, "-m", "trio_mcp.cli", "bench", "echo", "text=hi", "-c", str(callers),
            "--workers", str(workers), "-d", f"{seconds}s", "--warmup", "1s", "--live", "off", "--json",
            "--", *server]  # fmt: skip
    out = subprocess.run(
        argv, capture_output=True, text=True, timeout=seconds * 4 + 120, check=False, cwd=ROOT
    )
    if out.returncode != 0:
        raise SystemExit(f"bench_workers: a row failed: {' '.join(argv)}\n{out.stderr}")
    report = json.loads(out.stdout)
    return {"calls_per_s": report["calls_per_s"], "p99_us": report["total"]["latency_us"]["p99"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--callers", type=int, default=64)
    args = parser.parse_args()
    found = servers()
    if "ts-sdk" not in found:
        print("bench_workers: no TypeScript SDK stdio server here; its rows are left out", file=sys.stderr)
    rows: dict[tuple[str, int], list[float]] = {}
    loads: list[float] = []
    for _ in range(args.rounds):
        for name, server in found.items():
            for workers in (1, 2):
                load = load_average()
                if load is not None:
                    loads.append(load)
                row = run_row(server, workers, args.callers, args.seconds)
                rows.setdefault((name, workers), []).append(row["calls_per_s"])
    print(f"{'server':<10} {'workers':>7} {'calls/s (median)':>17} {'rounds':>30}")
    for (name, workers), values in rows.items():
        spread = ", ".join(f"{v:,.0f}" for v in values)
        print(f"{name:<10} {workers:>7} {statistics.median(values):>17,.0f} {spread:>30}")
    summary = {"bench": "workers", "callers": args.callers, "seconds": args.seconds, "rounds": args.rounds}
    for name in found:
        one, two = statistics.median(rows[(name, 1)]), statistics.median(rows[(name, 2)])
        print(f"{name}: 2 workers / 1 worker = {two / one:.2f}")
        summary[name] = {"w1_calls_per_s": one, "w2_calls_per_s": two, "ratio": round(two / one, 3)}
    if loads:
        print(f"load average (1 min) around the rows: {min(loads):.2f}–{max(loads):.2f}")
        summary["loadavg"] = [min(loads), max(loads)]
    summary["cpus"] = os.cpu_count()
    json_line(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
