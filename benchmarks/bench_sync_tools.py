"""Wall time of 4 concurrent calls of a sync tool that sleeps 0.5 s.

    .venv/bin/python benchmarks/bench_sync_tools.py              # 3 rounds
    .venv/bin/python benchmarks/bench_sync_tools.py --rounds 5 --ours-only

Each side serves ``def slow() -> str: time.sleep(0.5)`` in process and calls
it 4 times at once, timing from the first call to the last answer:

* trio-mcp ``threads``: the default, sync handlers in worker threads;
* trio-mcp ``inline``: ``@app.tool(inline=True)``, the handler in the event
  loop's task (what every sync tool did before: the calls queue up);
* mcp-sdk: the official SDK's in-memory client (``Client(app, mode="legacy")``)
  in its own venv (``.cache/sdk-venv``, made by ``bash scripts/setup-interop``).

The three run one after the other in each round, rounds interleaved; the
report gives the median per side, the ratios and the load average.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import trio

from trio_mcp import MCPServer
from trio_mcp.testing import connected

ROOT = Path(__file__).resolve().parents[1]
SDK_PYTHON = ROOT / ".cache" / "sdk-venv" / "bin" / "python"
CALLS = 4
SLEEP = 0.5

SDK_SCRIPT = f"""
import time, anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer

app = MCPServer("sync", log_level="WARNING")

@app.tool(structured_output=False)
def slow() -> str:
    time.sleep({SLEEP})
    return "done"

async def main():
    async with Client(app, mode="legacy", cache=None) as client:
        await client.call_tool("slow", {{}})  # warm
        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range({CALLS}):
                group.start_soon(client.call_tool, "slow", {{}})
        print(time.perf_counter() - start)

anyio.run(main)
"""


async def ours(inline: bool) -> float:
    app = MCPServer("sync")

    @app.tool(inline=inline)
    def slow() -> str:
        time.sleep(SLEEP)
        return "done"

    async with connected(app) as client:
        await client.call_tool("slow")  # warm
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(CALLS):
                nursery.start_soon(client.call_tool, "slow")
        return time.perf_counter() - start


def sdk() -> float | None:
    if not SDK_PYTHON.exists():
        return None
    out = subprocess.run(
        [str(SDK_PYTHON), "-c", SDK_SCRIPT], check=False, capture_output=True, text=True, timeout=120
    )
    if out.returncode != 0:
        print(f"mcp-sdk run failed:\n{out.stderr[-2000:]}", file=sys.stderr)
        return None
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ours-only", action="store_true", help="leave out the official SDK")
    args = parser.parse_args()
    times: dict[str, list[float]] = {"trio-mcp threads": [], "trio-mcp inline": [], "mcp-sdk": []}
    loads = []
    for _ in range(args.rounds):
        loads.append(Path("/proc/loadavg").read_text().split()[0])
        times["trio-mcp threads"].append(trio.run(ours, False))
        times["trio-mcp inline"].append(trio.run(ours, True))
        if not args.ours_only:
            sdk_time = sdk()
            if sdk_time is not None:
                times["mcp-sdk"].append(sdk_time)
    print(f"{CALLS} concurrent calls of a sync tool sleeping {SLEEP} s, {args.rounds} rounds")
    print(f"load average (1 min) at each round: {', '.join(loads)}")
    medians = {k: statistics.median(v) for k, v in times.items() if v}
    for name, median in medians.items():
        rounds = ", ".join(f"{t:.3f}" for t in times[name])
        print(f"  {name:18} median {median:.3f} s   (rounds: {rounds})")
    threads = medians["trio-mcp threads"]
    print(f"  inline / threads: {medians['trio-mcp inline'] / threads:.2f}x")
    if "mcp-sdk" in medians:
        print(f"  mcp-sdk / threads: {medians['mcp-sdk'] / threads:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
