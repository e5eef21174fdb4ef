"""The official Python SDK's client side of the stdio benchmark.

Run by ``benchmarks/bench_stdio.py`` with ``.cache/sdk-venv/bin/python`` (the
SDK's import name ``mcp`` never shares a venv with trio-mcp). It spawns the
server given after ``--`` through the SDK's own stdio client,
``mcp.Client(StdioServerParameters(...), mode=..., cache=None)``, and prints
JSON lines on stdout (notes go to stderr):

* ``calls``: one row per concurrency (``seq`` then ``--concurrency``) of
  back-to-back ``tools/call echo``, each for ``--seconds`` after a warm-up,
  then one ``rss`` line: the server's peak RSS (``VmHWM`` of
  ``/proc/<pid>/status``, read before the session closes; if the pid cannot
  be found, ``ru_maxrss`` of ``getrusage(RUSAGE_CHILDREN)`` after it exited);
* ``spawn``: ``--spawns`` timings (ns) of ``Client.__aenter__``, from the
  spawn of the server process to an initialized session (one untimed
  warm-up spawn first), and the CPU time the server had used by then
  (``/proc/<pid>/task/*/schedstat``), as one ``spawn-samples`` line.

``--mode legacy`` is the initialize handshake; ``--mode auto`` (the SDK's
default) probes ``server/discover`` and talks 2026-07-28 to a server that
answers it. Plain asyncio (``anyio.run``), as an SDK user gets by default.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from importlib.metadata import version
from pathlib import Path

import anyio
from _report import PAYLOAD, cpu_ns, default_warmup, json_line, make_row, measure
from mcp import Client
from mcp.client.stdio import StdioServerParameters

BENCH = "stdio"
CLIENT = "mcp-sdk"


def child_pids() -> list[int]:
    """Pids of this process's children (Linux ``/proc``)."""
    pids: set[int] = set()
    try:
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/children") as f:
                    pids.update(int(p) for p in f.read().split())
            except OSError:
                continue
    except OSError:
        pass
    if pids:
        return sorted(pids)
    me = os.getpid()
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []
    for entry in entries:  # fallback: scan for our ppid
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me:
            pids.add(int(entry))
    return sorted(pids)


def peak_rss_kb(pid: int) -> int | None:
    """``VmHWM`` (peak resident set size, kB) of a live process, if readable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def make_client(args: argparse.Namespace) -> Client:
    params = StdioServerParameters(command=args.server[0], args=list(args.server[1:]), cwd=os.getcwd())
    return Client(params, mode=args.mode, cache=None)


async def run_calls(args: argparse.Namespace) -> None:
    sdk_version = version("mcp")
    rss_kb: int | None = None
    pid: int | None = None
    async with make_client(args) as client:
        protocol = client.protocol_version
        pids = child_pids()
        pid = pids[0] if len(pids) == 1 else None

        async def call() -> None:
            await client.call_tool("echo", {"text": PAYLOAD})

        check = await client.call_tool("echo", {"text": PAYLOAD})
        if check.is_error or check.content[0].text != PAYLOAD:
            raise RuntimeError(f"unexpected echo result: {check!r}")
        for concurrency in (1, args.concurrency):
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
                    sdk_version=sdk_version,
                )
            )
        if pid is not None:
            rss_kb = peak_rss_kb(pid)
    source = "VmHWM"
    if rss_kb is None:  # the server was our only child, and it has been reaped
        rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        source = "ru_maxrss"
    json_line(
        {
            "bench": BENCH,
            "kind": "rss",
            "impl": args.server_impl,
            "client": CLIENT,
            "mode": args.label,
            "peak_rss_mb": round(rss_kb / 1024, 1),
            "source": source,
        }
    )


async def run_spawn(args: argparse.Namespace) -> None:
    samples: list[int] = []
    cpu_samples: list[int | None] = []
    protocol = None
    for i in range(args.spawns + 1):  # the first spawn is an untimed warm-up
        client = make_client(args)
        begin = time.perf_counter_ns()
        async with client:
            ready = time.perf_counter_ns()
            pids = child_pids()
            cpu = cpu_ns(pids[0]) if len(pids) == 1 else None
            protocol = client.protocol_version
        if i:
            samples.append(ready - begin)
            cpu_samples.append(cpu)
    json_line(
        {
            "bench": BENCH,
            "kind": "spawn-samples",
            "impl": CLIENT,
            "mode": args.label,
            "protocol": protocol,
            "samples_ns": samples,
            "cpu_ns": cpu_samples,
            "sdk_version": version("mcp"),
        }
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("calls", "spawn"))
    parser.add_argument("--mode", choices=("legacy", "auto"), default="legacy", help="SDK Client mode")
    parser.add_argument("--label", default=None, help="the rows' mode label (default: --mode)")
    parser.add_argument(
        "--server-impl", default="mcp-sdk", help="name of the server implementation, for the rows"
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="measured duration per row")
    parser.add_argument(
        "--warmup", type=float, default=None, help="warm-up per row (default: min(0.5, seconds/2))"
    )
    parser.add_argument(
        "--concurrency", type=int, default=64, help="callers in flight for the concurrent row"
    )
    parser.add_argument("--spawns", type=int, default=20, help="timed spawns (spawn)")
    parser.add_argument("server", nargs="+", help="-- command and arguments of the stdio server")
    args = parser.parse_args(argv)
    if args.warmup is None:
        args.warmup = default_warmup(args.seconds)
    if args.label is None:
        args.label = args.mode
    args.server[0] = str(Path(args.server[0]).absolute()) if os.sep in args.server[0] else args.server[0]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    anyio.run(run_calls if args.what == "calls" else run_spawn, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
