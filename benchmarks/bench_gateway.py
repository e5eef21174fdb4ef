"""The gateway's cost: calls to one stdio server, directly and through
``trio-mcp gateway -t stdio``, in one run.

    .venv/bin/python benchmarks/bench_gateway.py                    # 3 rounds of 3 s rows
    .venv/bin/python benchmarks/bench_gateway.py --rounds 5 --seconds 5 --concurrency 64

The server is ``benchmarks/servers/trio_echo_server.py`` (one ``echo(text)``
tool). ``direct``: a trio-mcp client spawns it and calls ``echo`` over its
stdin/stdout. ``gateway``: the same client spawns ``trio-mcp gateway FILE -t
stdio`` whose file lists that server, and calls ``echo__echo``: one more
process and two more stdio hops, through the gateway's forwarding path.
``relay``: the same client spawns ``servers/trio_relay.py`` in front of the
server, a trio process that relays bytes and understands none of them: the
floor of any gateway written on trio (a read and a write each way).
``gateway-baseline`` (with ``--baseline SRC``, another checkout's ``src``, e.g.
``git archive main src | tar -x -C /tmp/main``): the gateway process running
that checkout's code, for before/after ratios in one run.
Each row runs one caller (``seq``) or ``--concurrency`` callers in flight for
``--seconds`` after a warm-up, each in a fresh set of processes; the rows are
interleaved over ``--rounds`` (which kind goes first rotates), so all three
see the same machine. The client speaks the handshake era (what the gateway
speaks to its servers).

Each row also gives the CPU time per call of the server side (the server,
or the gateway and its server), of the process the client spawned alone
(the server, or the gateway or relay without its server) and of the client,
read from ``/proc``: unlike calls/s, it does not depend on how long a process
waited for a core.

Output: a table per round, one JSON line per row, and a summary JSON line
with the median calls/s of each row over the rounds, the gateway/direct and
relay/direct ratios (1.0: it costs nothing; the issue's target for the
gateway is >= 0.7), the CPU per call each adds to the server's and its own
process's CPU per call, and the load
average before and after (the machine is shared: read the ratios).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import trio
from _report import PAYLOAD, cpu_ns, default_warmup, json_line, label, load_average, make_row, measure, table

from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.transports.stdio import StdioServerParameters, StdioTransport

BENCH = "gateway"
SERVER = HERE / "servers" / "trio_echo_server.py"
RELAY = HERE / "servers" / "trio_relay.py"
KINDS: tuple[str, ...] = ("direct", "gateway", "relay")
#: Another checkout's ``src`` (``--baseline``): its gateway is the ``gateway-baseline`` row.
BASELINE: Path | None = None


def _children(parent: int) -> list[int]:
    """The pids whose parent is ``parent`` (Linux ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(entry.name))
    return found


def _cpu(pids: list[int]) -> int:
    return sum(cpu_ns(pid) or 0 for pid in pids)


@asynccontextmanager
async def session(kind: str, config: Path) -> AsyncIterator[tuple[ClientSession, str, list[int]]]:
    if kind == "direct":
        params = StdioServerParameters(command=sys.executable, args=(str(SERVER),), name="echo")
        tool = "echo"
    elif kind == "relay":
        relay = (str(RELAY), sys.executable, str(SERVER))
        params = StdioServerParameters(command=sys.executable, args=relay, name="relay")
        tool = "echo"
    else:
        # gateway-baseline: the gateway process imports trio_mcp from --baseline (its server does not).
        env = {"PYTHONPATH": str(BASELINE)} if kind == "gateway-baseline" else {}
        params = StdioServerParameters(
            command=sys.executable,
            args=("-m", "trio_mcp.cli", "gateway", str(config), "-t", "stdio", "--no-watch"),
            name="gateway",
            close_grace=10.0,
            env=env,
        )
        tool = "echo__echo"
    transport = StdioTransport(params)
    async with trio.open_nursery() as nursery:
        stream = await nursery.start(transport.run)
        async with open_session(stream, era="handshake") as client:
            assert transport.pid is not None
            yield client, tool, [transport.pid, *_children(transport.pid)]
        await stream.aclose()


async def row(kind: str, concurrency: int, args: argparse.Namespace, config: Path) -> dict[str, Any]:
    async with session(kind, config) as (client, tool, pids):
        arguments = {"text": PAYLOAD}
        first = await client.call_tool(tool, arguments)
        assert first.is_error is not True and first.content[0].text == PAYLOAD, first

        async def call() -> None:
            await client.call_tool(tool, arguments)

        cpu_before, mine_before, front_before = _cpu(pids), time.process_time_ns(), _cpu(pids[:1])
        latencies = await measure(
            call,
            concurrency=concurrency,
            warmup=default_warmup(args.seconds),
            seconds=args.seconds,
            open_group=trio.open_nursery,
        )
        cpu_after, mine_after, front_after = _cpu(pids), time.process_time_ns(), _cpu(pids[:1])
    calls = max(1, len(latencies))
    # CPU per call (warm-up included in the numerator, so an upper bound), unaffected by waiting for a core.
    return make_row(
        kind,
        "stdio",
        concurrency,
        latencies,
        args.seconds,
        bench=BENCH,
        servers_cpu_us_per_call=round((cpu_after - cpu_before) / calls / 1e3, 1),
        # The process the client spawned alone: the server (direct), or the gateway or relay.
        front_cpu_us_per_call=round((front_after - front_before) / calls / 1e3, 1),
        client_cpu_us_per_call=round((mine_after - mine_before) / calls / 1e3, 1),
    )


async def main(args: argparse.Namespace) -> dict[str, Any]:
    load_before = load_average()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "mcp.json"
        config.write_text(
            json.dumps({"mcpServers": {"echo": {"command": sys.executable, "args": [str(SERVER)]}}})
        )
        for r in range(args.rounds):
            kinds = KINDS[r % len(KINDS) :] + KINDS[: r % len(KINDS)]
            round_rows = []
            for concurrency in (1, args.concurrency):
                for kind in kinds:
                    result = await row(kind, concurrency, args, config)
                    result["round"] = r + 1
                    result["loadavg"] = load_average()
                    round_rows.append(result)
                    json_line(result)
            print(f"round {r + 1}\n{table(round_rows)}\n", file=sys.stderr)
            rows.extend(round_rows)
    summary: dict[str, Any] = {
        "summary": True,
        "bench": BENCH,
        "rounds": args.rounds,
        "seconds": args.seconds,
    }
    for concurrency in (1, args.concurrency):
        medians = {}
        for kind in KINDS:
            values = [r["calls_per_s"] for r in rows if r["impl"] == kind and r["concurrency"] == concurrency]
            medians[kind] = round(statistics.median(values), 1)
        cpu = {
            kind: statistics.median(
                r["servers_cpu_us_per_call"]
                for r in rows
                if r["impl"] == kind and r["concurrency"] == concurrency
            )
            for kind in KINDS
        }
        entry: dict[str, Any] = {f"{kind}_calls_per_s": medians[kind] for kind in KINDS}
        for proxy in KINDS[1:]:
            entry[f"{proxy}_ratio"] = round(medians[proxy] / medians["direct"], 2)
            entry[f"{proxy}_ratio_per_round"] = [
                round(g["calls_per_s"] / d["calls_per_s"], 2)
                for g in rows
                for d in rows
                if g["impl"] == proxy
                and d["impl"] == "direct"
                and g["concurrency"] == d["concurrency"] == concurrency
                and g["round"] == d["round"]
            ]
            # What the proxy process adds per call: its side's CPU less the server's alone,
            # and its own CPU (the gateway's or relay's process, its server not counted).
            entry[f"{proxy}_added_cpu_us_per_call"] = round(cpu[proxy] - cpu["direct"], 1)
            entry[f"{proxy}_own_cpu_us_per_call"] = statistics.median(
                r["front_cpu_us_per_call"]
                for r in rows
                if r["impl"] == proxy and r["concurrency"] == concurrency
            )
        summary[label(concurrency)] = entry
    summary["loadavg_before"] = load_before
    summary["loadavg_after"] = load_average()
    json_line(summary)
    return summary


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per row (default 3)")
    parser.add_argument("--concurrency", type=int, default=64, help="callers in flight (default 64)")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="src of another checkout: adds its gateway as the gateway-baseline row",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    options = parse(sys.argv[1:])
    if options.baseline is not None:
        BASELINE = options.baseline.resolve()
        KINDS = (*KINDS, "gateway-baseline")
    trio.run(main, options)
