"""The official Python SDK's client side of the Streamable HTTP benchmark.

Run by ``benchmarks/bench_http.py`` with ``.cache/sdk-venv/bin/python`` (the
SDK's import name ``mcp`` never shares a venv with trio-mcp). It connects to
``--url`` with the SDK's own Streamable HTTP client, ``mcp.Client(url,
mode=..., cache=None)`` (``streamable_http_client`` with its default ``httpx2``
client underneath; ``--mode legacy``, the default, is the initialize
handshake; ``--mode auto``, the SDK's own default, probes ``server/discover``
and talks 2026-07-28 to a server that answers it), and prints one JSON line per
concurrency (``seq`` then ``--concurrency``): back-to-back ``tools/call echo``
for ``--seconds`` after a warm-up. Each row also carries the CPU time per call
of this client process and, with ``--server-pid``, of the server process, over
the measured window. Plain asyncio (``anyio.run``), as an SDK user gets by
default. Notes go to stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib.metadata import version

import anyio
from _report import PAYLOAD, cpu_ns, default_warmup, json_line, make_row, measure
from mcp import Client

BENCH = "http"
CLIENT = "mcp-sdk"


async def sample_cpu(
    out: dict[str, int | None], warmup: float, seconds: float, server_pid: int | None
) -> None:
    """CPU time of this process and of the server over the measured window
    (``measure`` starts the window ``warmup`` after it is called)."""
    await anyio.sleep(warmup)
    client0, server0 = time.process_time_ns(), cpu_ns(server_pid)
    await anyio.sleep(seconds)
    client1, server1 = time.process_time_ns(), cpu_ns(server_pid)
    out["client"] = client1 - client0
    out["server"] = None if server0 is None or server1 is None else server1 - server0


def per_call_us(ns: int | None, calls: int) -> float | None:
    return None if ns is None or not calls else round(ns / calls / 1e3, 1)


async def run(args: argparse.Namespace) -> None:
    sdk_version = version("mcp")
    async with Client(args.url, mode=args.mode, cache=None) as client:
        protocol = client.protocol_version

        async def call() -> None:
            await client.call_tool("echo", {"text": PAYLOAD})

        check = await client.call_tool("echo", {"text": PAYLOAD})
        if check.is_error or check.content[0].text != PAYLOAD:
            raise RuntimeError(f"unexpected echo result: {check!r}")
        for concurrency in (1, args.concurrency):
            cpu: dict[str, int | None] = {}
            async with anyio.create_task_group() as tg:
                tg.start_soon(sample_cpu, cpu, args.warmup, args.seconds, args.server_pid)
                latencies = await measure(
                    call,
                    concurrency=concurrency,
                    warmup=args.warmup,
                    seconds=args.seconds,
                    open_group=anyio.create_task_group,
                )
            json_line(
                make_row(
                    f"{CLIENT}->{args.server_impl}",
                    args.label,
                    concurrency,
                    latencies,
                    args.seconds,
                    bench=BENCH,
                    kind="calls",
                    client=CLIENT,
                    server=args.server_impl,
                    protocol=protocol,
                    client_cpu_us=per_call_us(cpu.get("client"), len(latencies)),
                    server_cpu_us=per_call_us(cpu.get("server"), len(latencies)),
                    sdk_version=sdk_version,
                )
            )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the server's MCP endpoint")
    parser.add_argument("--mode", choices=("legacy", "auto"), default="legacy", help="SDK Client mode")
    parser.add_argument(
        "--server-impl", default="mcp-sdk", help="name of the server implementation, for the rows"
    )
    parser.add_argument("--server-pid", type=int, default=None, help="the server's pid, to read its CPU time")
    parser.add_argument("--label", default="json", help="the rows' mode label")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured duration per row")
    parser.add_argument(
        "--warmup", type=float, default=None, help="warm-up per row (default: min(0.5, seconds/2))"
    )
    parser.add_argument(
        "--concurrency", type=int, default=64, help="callers in flight for the concurrent row"
    )
    args = parser.parse_args(argv)
    if args.warmup is None:
        args.warmup = default_warmup(args.seconds)
    return args


def main(argv: list[str] | None = None) -> int:
    anyio.run(run, parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
