"""Peer-to-peer JSON-RPC round trips over ``memory_pair``, against a floor.

Rows:

* ``floor seq``: two trio tasks ping-pong one object over two memory
  channels (the cheapest round trip trio can do);
* ``floor x64``: 64 tasks ping-pong with one server task (one shared request
  channel, one reply channel each), the floor for 64 calls in flight;
* ``peer <mode> seq``: one caller, one request at a time;
* ``peer <mode> x64``: 64 callers, each with one request in flight.

Every row runs for a fixed duration (``--seconds``, default 2). The table
shows calls/s, microseconds per call (1e6 / calls/s: per-call cost at that
concurrency), latency percentiles of single calls, and the ratio of the
row's throughput to the floor at the same concurrency (higher is better),
and its p50 latency over the floor's p50 (lower is better; the steadier
figure on a busy machine). One JSON line per row follows the table.

    .venv/bin/python benchmarks/bench_peer.py [--seconds N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from typing import Any

import trio

from trio_mcp.actors import InboundRequest, Peer
from trio_mcp.transports import memory_pair

CONCURRENCY = 64


class Echo:
    async def handle_request(self, request: InboundRequest) -> Any:
        return request.params  # Raw in bytes mode: no payload decode

    async def handle_notification(self, method: str, params: Any) -> None:
        return None

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        return False


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, int(q * len(sorted_values)))
    return sorted_values[index]


def _row(name: str, calls: int, elapsed: float, latencies: list[float], concurrency: int) -> dict[str, Any]:
    latencies.sort()
    rate = calls / elapsed
    return {
        "bench": name,
        "concurrency": concurrency,
        "calls": calls,
        "seconds": round(elapsed, 3),
        "calls_per_s": round(rate, 1),
        "us_per_call": round(1e6 / rate, 3),
        "p50_us": round(_percentile(latencies, 0.50) * 1e6, 2),
        "p99_us": round(_percentile(latencies, 0.99) * 1e6, 2),
        "max_us": round(latencies[-1] * 1e6, 2) if latencies else None,
    }


async def bench_floor(concurrency: int, seconds: float) -> dict[str, Any]:
    to_server, server_inbox = trio.open_memory_channel[Any](concurrency)

    async def server() -> None:
        async for reply_to, item in server_inbox:
            await reply_to.send(item)

    latencies: list[float] = []
    counts = [0] * concurrency
    clock = time.perf_counter
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        start = clock()
        deadline = start + seconds

        async def caller(slot: int) -> None:
            reply_send, reply_recv = trio.open_memory_channel[Any](1)
            send, receive, record = to_server.send, reply_recv.receive, latencies.append
            message = (reply_send, slot)
            n = 0
            now = clock()
            while now < deadline:
                await send(message)
                await receive()
                after = clock()
                record(after - now)
                now = after
                n += 1
            counts[slot] = n

        async with trio.open_nursery() as callers:
            for slot in range(concurrency):
                callers.start_soon(caller, slot)
        elapsed = clock() - start
        await to_server.aclose()
    label = "seq" if concurrency == 1 else f"x{concurrency}"
    return _row(f"floor {label} (trio channels)", sum(counts), elapsed, latencies, concurrency)


async def bench_peer(mode: str, concurrency: int, seconds: float) -> dict[str, Any]:
    a, b = memory_pair(mode=mode)  # type: ignore[arg-type]
    client = Peer(a, name="client")
    server = Peer(b, Echo(), name="server")
    latencies: list[float] = []
    counts = [0] * concurrency
    params = {"n": 1, "text": "hello"}
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        await nursery.start(server.run)
        for _ in range(200):  # warm up (workers, caches)
            await client.request("echo", params)
        clock = time.perf_counter
        start = clock()
        deadline = start + seconds

        async def caller(slot: int) -> None:
            request = client.request
            record = latencies.append
            n = 0
            now = clock()
            while now < deadline:
                await request("echo", params)
                after = clock()
                record(after - now)
                now = after
                n += 1
            counts[slot] = n

        async with trio.open_nursery() as callers:
            for slot in range(concurrency):
                callers.start_soon(caller, slot)
        elapsed = clock() - start
        await client.aclose()
        nursery.cancel_scope.cancel()
    label = "seq" if concurrency == 1 else f"x{concurrency}"
    return _row(f"peer {mode} {label}", sum(counts), elapsed, latencies, concurrency)


async def main(seconds: float) -> list[dict[str, Any]]:
    rows = [await bench_floor(1, seconds), await bench_floor(CONCURRENCY, seconds)]
    for mode in ("zero-copy", "bytes"):
        for concurrency in (1, CONCURRENCY):
            rows.append(await bench_peer(mode, concurrency, seconds))
    floors = {row["concurrency"]: row for row in rows[:2]}
    for row in rows:
        floor = floors[row["concurrency"]]
        row["ratio_to_floor"] = round(row["calls_per_s"] / floor["calls_per_s"], 4)
        row["p50_over_floor_p50"] = round(row["p50_us"] / floor["p50_us"], 3)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    header = f"{'bench':<30} {'calls/s':>11} {'us/call':>9} {'p50 us':>9} {'p99 us':>9} {'vs floor':>9} {'p50/floor':>9}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['bench']:<30} {r['calls_per_s']:>11,.0f} {r['us_per_call']:>9.2f} "
            f"{r['p50_us']:>9.1f} {r['p99_us']:>9.1f} {r['ratio_to_floor']:>9.3f} {r['p50_over_floor_p50']:>9.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each row (default 2)")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(
        f"# python {platform.python_version()}, trio {trio.__version__}, {platform.machine()}, load {load:.2f}"
    )
    results = trio.run(main, args.seconds)
    print_table(results)
    print(f"# load average after: {os.getloadavg()[0]:.2f} (other work on the machine skews every figure)")
    for row in results:
        print(json.dumps(row))
