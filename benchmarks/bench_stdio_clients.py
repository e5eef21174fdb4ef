"""stdio *clients* against one server, our ``trio_echo_server.py``: our
client, the trio floor client and the neutral Node driver, interleaved.

    .venv/bin/python benchmarks/bench_stdio_clients.py                      # 64 in flight, 3 rounds, 3 s a row
    .venv/bin/python benchmarks/bench_stdio_clients.py --concurrencies 1,64 --rounds 5
    .venv/bin/python benchmarks/bench_stdio_clients.py --baseline /tmp/main/src   # + main's client, interleaved

Clients, one at a time, in an order rotated every round, each spawning its
own server process (``servers/trio_echo_server.py``, the project's python;
``--server-src`` runs the server from another checkout's ``src`` for all):

* ``ours``: ``StdioTransport`` + ``open_session`` (handshake era),
  ``call_tool("echo", ...)``; ``--src SRC`` imports ``trio_mcp`` from
  another checkout's ``src`` for the client;
* ``baseline`` (with ``--baseline SRC``): the same from ``SRC``;
* ``floor``: ``drivers/trio_floor_client.py``, a minimal trio JSON-lines
  client (64 caller tasks each parked on its own id, msgspec encode and
  decode, one reader task, the writes of a turn gathered): what any trio
  client can do here;
* ``node``: ``drivers/stdio_driver.mjs``, the neutral Node driver of
  ``bench_stdio_neutral.py``.

Per client and concurrency: callers back to back for ``--warmup`` then
``--seconds``; a row is the calls completed in the window per second, the
client's CPU µs per call (Python: ``time.process_time()`` of the client
process; Node: its own ``process.cpuUsage()``) and the server's
(``/proc/<pid>`` of the server). Reported: medians (min–max), and per round
each client's calls/s over the Node driver's, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _procs import clock_ticks, node_binary, run_driver, text_table
from _report import cpu_ns, load_average

SERVER = HERE / "servers" / "trio_echo_server.py"
PAYLOAD = "hello, benchmark"
NODE = "node"
CLIENTS = ("ours", "floor", NODE)


async def measure_row(
    call: Callable[[], Awaitable[None]], concurrency: int, warmup: float, seconds: float, pid: int
) -> dict[str, Any]:
    """``concurrency`` callers of ``call`` back to back; the window's figures."""
    import trio

    done = 0
    stop = False

    async def caller() -> None:
        nonlocal done
        while not stop:
            await call()
            done += 1

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(caller)
        await trio.sleep(warmup)
        calls0, cpu0, server0, t0 = done, time.process_time(), cpu_ns(pid), time.perf_counter()
        await trio.sleep(seconds)
        calls1, cpu1, server1, t1 = done, time.process_time(), cpu_ns(pid), time.perf_counter()
        stop = True
    calls = calls1 - calls0
    if calls == 0:
        raise RuntimeError("no call completed in the measured window")
    return {
        "concurrency": concurrency,
        "calls_per_s": round(calls / (t1 - t0), 1),
        "client_cpu_us": round((cpu1 - cpu0) / calls * 1e6, 2),
        "server_cpu_us": round((server1 - server0) / 1e3 / calls, 2) if server0 and server1 else None,
    }


def child(args: argparse.Namespace) -> int:
    """In the measured client process: print one JSON row per concurrency."""
    import trio

    command = [sys.executable, str(SERVER)]
    extra_env = {} if args.server_src is None else {"PYTHONPATH": args.server_src}
    concurrencies = [int(c) for c in args.concurrencies.split(",")]
    rows: list[dict[str, Any]] = []

    async def rows_for(call: Callable[[], Awaitable[None]], pid: int) -> None:
        for n, c in enumerate(concurrencies):
            warmup = args.warmup * (2 if n == 0 else 1)
            rows.append(await measure_row(call, c, warmup, args.seconds, pid))

    async def ours() -> None:
        from trio_mcp import open_session
        from trio_mcp.transports.stdio import StdioServerParameters, StdioTransport

        params = StdioServerParameters(
            command=command[0], args=tuple(command[1:]), name="echo", env=extra_env
        )
        async with trio.open_nursery() as nursery:
            transport = StdioTransport(params)
            stream = await nursery.start(transport.run)
            async with open_session(stream) as session:

                async def call() -> None:
                    answer = await session.call_tool("echo", {"text": PAYLOAD})
                    if answer.content[0].text != PAYLOAD:
                        raise RuntimeError(f"unexpected echo result: {answer!r}")

                assert transport.pid is not None
                await rows_for(call, transport.pid)

    async def floor() -> None:
        sys.path.insert(0, str(HERE / "drivers"))
        from trio_floor_client import open_floor_client

        async with open_floor_client(command, server_env(args.server_src)) as (client, pid):
            params = {"name": "echo", "arguments": {"text": PAYLOAD}}

            async def call() -> None:
                answer = await client.call("tools/call", params)
                if answer.content[0].text != PAYLOAD:
                    raise RuntimeError(f"unexpected echo result: {answer!r}")

            await rows_for(call, pid)

    trio.run(ours if args.child == "ours" else floor)
    for row in rows:
        print(json.dumps(row))
    return 0


def server_env(server_src: str | None) -> dict[str, str] | None:
    if server_src is None:
        return None
    return {**os.environ, "PYTHONPATH": server_src}


def run_python_client(kind: str, client_src: str | None, args: argparse.Namespace) -> list[dict[str, Any]]:
    env = dict(os.environ)
    # The client imports trio_mcp from client_src; the server it spawns
    # inherits the environment, so the server's src is set for it apart.
    if client_src is not None:
        env["PYTHONPATH"] = client_src
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        kind,
        "--concurrencies",
        args.concurrencies,
        "--seconds",
        str(args.seconds),
        "--warmup",
        str(args.warmup),
    ]
    if args.server_src is not None:
        cmd += ["--server-src", args.server_src]
    budget = len(args.concurrencies.split(",")) * (2 * args.warmup + args.seconds + 10) + 60
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=budget, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind}: client failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def run_node(args: argparse.Namespace) -> list[dict[str, Any]]:
    node = args.node or node_binary()
    if node is None:
        raise RuntimeError("node not found")
    concurrencies = [int(c) for c in args.concurrencies.split(",")]
    options = {
        "command": [sys.executable, str(SERVER)],
        "env": server_env(args.server_src),
        "spawns": 0,
        "concurrencies": concurrencies,
        "warmup": args.warmup,
        "prime": args.warmup,
        "seconds": args.seconds,
        "clockTicks": clock_ticks(),
    }
    budget = len(concurrencies) * (2 * args.warmup + args.seconds + 10) + 60
    out = run_driver(node, "stdio_driver.mjs", options, budget)
    return [
        {
            "concurrency": o["concurrency"],
            "calls_per_s": o["calls_per_s"],
            "client_cpu_us": o.get("driver_cpu_us"),
            "server_cpu_us": o.get("server_cpu_us"),
        }
        for o in out
        if o.get("kind") == "calls"
    ]


def fmt(values: list[float]) -> str:
    if not values:
        return "n/a"
    med = statistics.median(values)
    digits = 0 if med >= 100 else 1
    if len(values) == 1:
        return f"{med:,.{digits}f}"
    return f"{med:,.{digits}f} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", choices=("ours", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--concurrencies", default="64", help="calls in flight (default 64)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per row (default 3)")
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds before measuring (default 0.5)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument(
        "--clients", default=",".join(CLIENTS), help="comma-separated clients (default %(default)s)"
    )
    parser.add_argument("--src", metavar="SRC", help="import trio_mcp from this src for our client")
    parser.add_argument("--baseline", metavar="SRC", help="also our client from this src, interleaved")
    parser.add_argument(
        "--server-src", metavar="SRC", help="run the server's trio_mcp from this src (default: installed)"
    )
    parser.add_argument("--node", default=None, help="node binary (default: the pinned Node 22, else PATH)")
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if unknown := [c for c in clients if c not in CLIENTS]:
        parser.error(f"unknown clients {unknown}; choose among {list(CLIENTS)}")
    if args.baseline:
        clients.insert(0, "baseline")
    runs: dict[str, Callable[[], list[dict[str, Any]]]] = {
        "ours": lambda: run_python_client("ours", args.src, args),
        "baseline": lambda: run_python_client("ours", args.baseline, args),
        "floor": lambda: run_python_client("floor", None, args),
        NODE: lambda: run_node(args),
    }
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    loads: list[str] = []
    per_round: list[dict[tuple[str, int], float]] = []
    for r in range(args.rounds):
        shift = r % len(clients)
        order = clients[shift:] + clients[:shift]
        before = load_average()
        this_round: dict[tuple[str, int], float] = {}
        for name in order:
            for row in runs[name]():
                results.setdefault((name, row["concurrency"]), []).append(row)
                this_round[(name, row["concurrency"])] = row["calls_per_s"]
                print(
                    f"round {r + 1} {name:8s} c={row['concurrency']:<4d} {row['calls_per_s']:9,.0f} calls/s"
                    f"  client {row['client_cpu_us']} us/call  server {row['server_cpu_us']} us/call",
                    file=sys.stderr,
                    flush=True,
                )
        loads.append(f"round {r + 1} {before}→{load_average()}")
        per_round.append(this_round)
    print("load average (1 min) per round: " + ", ".join(loads))
    body = []
    for (name, c), rows in results.items():
        body.append(
            [
                name,
                str(c),
                fmt([row["calls_per_s"] for row in rows]),
                fmt([row["client_cpu_us"] for row in rows if row["client_cpu_us"] is not None]),
                fmt([row["server_cpu_us"] for row in rows if row["server_cpu_us"] is not None]),
            ]
        )
    print(
        text_table(
            ["client", "in flight", "calls/s", "client CPU µs/call", "server CPU µs/call"], body, left=1
        )
    )
    if NODE in clients:
        lines = []
        for name in clients:
            if name == NODE:
                continue
            for c in sorted({c for (n, c) in results if n == name}):
                ratios = [
                    rnd[(name, c)] / rnd[(NODE, c)]
                    for rnd in per_round
                    if (name, c) in rnd and (NODE, c) in rnd
                ]
                if ratios:
                    each = " ".join(f"{x:.2f}" for x in ratios)
                    lines.append(f"{name}/node c={c}: median {statistics.median(ratios):.2f}  rounds {each}")
        print("calls/s over the Node driver's, per round:\n  " + "\n  ".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
