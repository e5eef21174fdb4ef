"""Our client's CPU time per stdio ``tools/call``, over a fixed number of
calls: the client-side twin of ``bench_stdio_cpu.py`` (which measures servers).

    .venv/bin/python benchmarks/bench_client_cpu.py                        # 1 and 64 in flight, 3 rounds
    .venv/bin/python benchmarks/bench_client_cpu.py --baseline /tmp/main/src  # before/after, interleaved
    .venv/bin/python benchmarks/bench_client_cpu.py --callgrind             # instructions per call
    .venv/bin/python benchmarks/bench_client_cpu.py --profile /tmp/prof     # cProfile call counts per call
    .venv/bin/python benchmarks/bench_client_cpu.py --floor                 # + the trio floor client

Each measurement is a fresh process running our client (``StdioTransport`` +
``open_session``; ``--baseline SRC`` imports ``trio_mcp`` from another
checkout's ``src`` instead, e.g. ``git archive main src | tar -x -C /tmp/main``)
against ``servers/trio_floor_server.py`` (a cheap trio server with no MCP
stack, so the client is the busy side). It keeps ``--concurrency`` callers of
``call_tool("echo", ...)`` going until ``--calls`` calls are done, after
``--warmup`` calls. A row: the client process's own CPU time (user + system,
``time.process_time()``: the server child is not counted) per call.

``--callgrind`` runs each client under ``valgrind --tool=callgrind`` twice
(``--calls`` and twice that many measured calls; not the server) and prints
the instructions per call (the difference of the two, so start-up cancels
out): independent of the machine's load. ``--profile DIR`` runs the measured
calls under cProfile and prints the functions called most per call.
``--floor`` adds a row for ``drivers/trio_floor_client.py`` (a minimal trio
JSON-lines client, no MCP stack: what any trio client can do), interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SERVER = HERE / "servers" / "trio_floor_server.py"
PAYLOAD = "hello"


def child(args: argparse.Namespace) -> int:
    """Run in the measured process: print one JSON row."""
    import resource
    import time

    import trio

    cpu = time.process_time  # the scheduler's exact runtime (getrusage may be tick-sampled)

    result: dict[str, Any] = {}

    async def run_calls(session: Any, calls: int, concurrency: int) -> None:
        left = calls

        async def caller() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                answer = await session.call_tool("echo", {"text": PAYLOAD})
                if answer.content[0].text != PAYLOAD:
                    raise RuntimeError(f"unexpected echo result: {answer!r}")

        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(caller)

    async def floor_main() -> None:
        sys.path.insert(0, str(HERE / "drivers"))
        from trio_floor_client import open_floor_client

        async with open_floor_client([args.server_python, str(SERVER)]) as (client, _pid):
            arguments = {"name": "echo", "arguments": {"text": PAYLOAD}}

            class Session:
                @staticmethod
                async def call_tool(_name: str, _arguments: Any) -> Any:
                    return await client.call("tools/call", arguments)

            await measured(Session())

    async def main() -> None:
        from trio_mcp import open_session
        from trio_mcp.transports.stdio import StdioServerParameters, StdioTransport

        params = StdioServerParameters(command=args.server_python, args=(str(SERVER),), name="floor")
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(StdioTransport(params).run)
            async with open_session(stream) as session:
                await measured(session)

    async def measured(session: Any) -> None:
        await run_calls(session, args.warmup, args.concurrency)
        profiler = None
        if args.profile_out:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        before = cpu()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        await run_calls(session, args.calls, args.concurrency)
        result["cpu_us_per_call"] = (cpu() - before) / args.calls * 1e6
        after = resource.getrusage(resource.RUSAGE_SELF)
        # The split of it (tick-sampled: an indication).
        result["sys_share"] = (after.ru_stime - usage.ru_stime) / max(
            1e-9, after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime
        )
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile_out)

    trio.run(floor_main if args.kind == "floor" else main)
    print(json.dumps(result))
    return 0


def run_child(label: str, src: str | None, args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--kind",
        "floor" if label == "floor" else "ours",
        "--concurrency",
        str(extra.get("concurrency", args.concurrency)),
        "--calls",
        str(extra.get("calls", args.calls)),
        "--warmup",
        str(args.warmup),
        "--server-python",
        sys.executable,
    ]
    if extra.get("profile_out"):
        cmd += ["--profile-out", extra["profile_out"]]
    prefix: list[str] = []
    out_file = None
    if extra.get("callgrind"):
        with tempfile.NamedTemporaryFile(prefix="cg.", suffix=".out", delete=False) as handle:
            out_file = handle.name
        prefix = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}"]
    proc = subprocess.run(prefix + cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{label}: client failed:\n{proc.stderr[-3000:]}")
    row: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if out_file is not None:
        text = Path(out_file).read_text(errors="replace")
        os.unlink(out_file)
        match = re.search(r"^summary:\s*(\d+)", text, re.MULTILINE) or re.search(
            r"^totals:\s*(\d+)", text, re.MULTILINE
        )
        if match is None:
            raise RuntimeError(f"{label}: no totals in the callgrind output")
        row["instructions"] = int(match.group(1))
    return row


def profile_summary(path: str, calls: int, top: int = 25) -> str:
    import pstats

    stats = pstats.Stats(path)
    rows = []
    for (filename, line, name), (_cc, ncalls, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((ncalls / calls, tottime / calls * 1e6, f"{Path(filename).name}:{line}({name})"))
    rows.sort(key=lambda r: -r[1])
    total = sum(r[0] for r in rows)
    lines = [f"  python calls per call: {total:.1f}", "  calls/call  tottime us/call  function"]
    lines += [f"  {n:10.2f}  {t:14.2f}  {where}" for n, t, where in rows[:top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--server-python", default=sys.executable, help=argparse.SUPPRESS)
    parser.add_argument("--kind", choices=("ours", "floor"), default="ours", help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", help=argparse.SUPPRESS)
    parser.add_argument("--concurrency", type=int, default=64, help=argparse.SUPPRESS)
    parser.add_argument("--concurrencies", default="1,64", help="calls in flight (default 1,64)")
    parser.add_argument("--calls", type=int, default=20000, help="measured calls (default 20000)")
    parser.add_argument("--warmup", type=int, default=2000, help="calls before measuring (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--baseline", metavar="SRC", help="also run trio_mcp from this src, interleaved")
    parser.add_argument(
        "--src", metavar="SRC", help="run trio_mcp from this src as ours (default: installed)"
    )
    parser.add_argument("--floor", action="store_true", help="also the trio floor client, interleaved")
    parser.add_argument("--callgrind", action="store_true", help="instructions per call (valgrind)")
    parser.add_argument("--profile", metavar="DIR", help="cProfile the measured calls, per concurrency")
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    targets: list[tuple[str, str | None]] = [("ours", args.src)]
    if args.baseline:
        targets.insert(0, ("baseline", args.baseline))
    if args.floor:
        targets.append(("floor", None))
    concurrencies = [int(c) for c in args.concurrencies.split(",")]
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}", flush=True)
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        for label, src in targets:
            for c in concurrencies:
                path = os.path.join(args.profile, f"{label}-c{c}.prof")
                run_child(label, src, args, concurrency=c, profile_out=path)
                print(f"{label} c={c}:\n{profile_summary(path, args.calls)}", flush=True)
        return 0
    if args.callgrind:
        for c in concurrencies:
            for label, src in targets:
                one = run_child(label, src, args, concurrency=c, callgrind=True)
                two = run_child(label, src, args, concurrency=c, calls=2 * args.calls, callgrind=True)
                per = (two["instructions"] - one["instructions"]) / args.calls
                print(f"{label:9s} c={c:<4d} instructions/call {per:10.0f}", flush=True)
        print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
        return 0
    results: dict[tuple[str, int], list[float]] = {}
    for r in range(args.rounds):
        for c in concurrencies:
            order = targets if r % 2 == 0 else targets[::-1]
            for label, src in order:
                row = run_child(label, src, args, concurrency=c)
                results.setdefault((label, c), []).append(row["cpu_us_per_call"])
                print(
                    f"round {r + 1} {label:9s} c={c:<4d} {row['cpu_us_per_call']:7.2f} us/call"
                    f" (system {row['sys_share']:.0%})",
                    flush=True,
                )
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
    for c in concurrencies:
        for label, _src in targets:
            values = sorted(results[(label, c)])
            print(f"{label:9s} c={c:<4d} median {values[len(values) // 2]:7.2f} us/call  all {values}")
        if args.baseline:
            base = sorted(results[("baseline", c)])[len(results[("baseline", c)]) // 2]
            ours = sorted(results[("ours", c)])[len(results[("ours", c)]) // 2]
            print(f"  c={c}: ours / baseline = {ours / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
