"""stdio benchmarks: trio-mcp vs the official Python SDK, over real server processes.

    .venv/bin/python benchmarks/bench_stdio.py                  # 3 s per row, 20 spawns
    .venv/bin/python benchmarks/bench_stdio.py --seconds 10 --spawns 50
    .venv/bin/python benchmarks/bench_stdio.py --ours-only      # no SDK needed
    .venv/bin/python benchmarks/bench_stdio.py --importtime     # where our server's start-up goes

Both servers (``benchmarks/servers/``) serve one tool, ``async def echo(text:
str) -> str`` with ``structured_output=False``, over stdin/stdout: trio-mcp's
with the project's python, the SDK's (``MCPServer(...).run("stdio")``) with
``.cache/sdk-venv`` (made by ``bash scripts/setup-interop``). Measured one
after another, never two at a time:

1. ``tools/call`` round trips, one caller (``seq``) and ``--concurrency``
   callers in flight (``c64``), each row for ``--seconds`` after a warm-up,
   for every client→server pairing: trio-mcp→trio-mcp, mcp-sdk→mcp-sdk (the
   SDK's own stdio client, ``mcp.Client(StdioServerParameters(...))``, run by
   ``benchmarks/sdk_stdio_client.py`` in the SDK venv), and the cross
   pairings mcp-sdk→trio-mcp and trio-mcp→mcp-sdk, which separate client
   speed from server speed. Mode ``handshake`` is the initialize handshake
   (trio-mcp ``era="handshake"``, SDK ``mode="legacy"``); mode
   ``2026-07-28`` is the stateless protocol after a ``server/discover``
   probe (trio-mcp ``era="modern"``, SDK ``mode="auto"``, its default).
2. spawn → initialized: median and p90 over ``--spawns`` spawns (after one
   untimed warm-up spawn) of the time from spawning the server process to
   holding an initialized session, each client against its own server.
3. the server's peak RSS (``VmHWM``), read at the end of each throughput run.

Output: tables, the trio-mcp/SDK ratios, one JSON line per row (``kind``
``calls``, ``spawn`` or ``rss``) and a JSON summary line (``"summary": true``).
Throughput ratios are trio-mcp over SDK (> 1: trio-mcp faster); spawn-time and
RSS ratios are trio-mcp over SDK too (< 1: trio-mcp smaller).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _report import (
    PAYLOAD,
    call_ratios,
    cpu_ns,
    default_warmup,
    find,
    json_line,
    label,
    load_average,
    make_row,
    measure,
    pair_name,
    parse_json_lines,
    percentile,
    ratio,
    sdk_env,
    table,
)

BENCH = "stdio"
OURS = "trio-mcp"
SDK = "mcp-sdk"
HANDSHAKE = "handshake"
MODERN = "2026-07-28"
SDK_PYTHON = ROOT / ".cache" / "sdk-venv" / "bin" / "python"
SERVER_SCRIPTS = {
    OURS: HERE / "servers" / "trio_echo_server.py",
    SDK: HERE / "servers" / "sdk_echo_server.py",
}
#: (client, server, mode), in the order they run. The handshake rows are
#: required; the 2026-07-28 rows are reported if they work.
PAIRINGS = [
    (OURS, OURS, HANDSHAKE),
    (SDK, SDK, HANDSHAKE),
    (SDK, OURS, HANDSHAKE),
    (OURS, SDK, HANDSHAKE),
    (OURS, OURS, MODERN),
    (SDK, SDK, MODERN),
    (SDK, OURS, MODERN),
    (OURS, SDK, MODERN),
]
#: The issue's targets, printed for context only (never asserted).
TARGETS = {"seq": 4.0, "c64": 10.0, "spawn_median_ms": 150.0, "rss_mb": 40.0}


def progress(message: str) -> None:
    print(f"[bench_stdio] {message} ...", file=sys.stderr, flush=True)


def server_command(impl: str, args: argparse.Namespace) -> list[str]:
    python = sys.executable if impl == OURS else str(args.sdk_python)
    return [python, str(SERVER_SCRIPTS[impl])]


def peak_rss_kb(pid: int | None) -> int | None:
    """``VmHWM`` (peak resident set size, kB) of a live process (Linux)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def rss_row(server: str, client: str, mode: str, kb: int, source: str = "VmHWM") -> dict[str, Any]:
    return {
        "bench": BENCH,
        "kind": "rss",
        "impl": server,
        "client": client,
        "mode": mode,
        "peak_rss_mb": round(kb / 1024, 1),
        "source": source,
    }


def spawn_row(
    impl: str, mode: str, samples_ns: list[int], cpu_samples_ns: list[int | None], **extra: Any
) -> dict[str, Any]:
    if not samples_ns:
        raise RuntimeError(f"{impl} {mode}: no spawn timed")
    ordered = sorted(samples_ns)
    cpu = [c for c in cpu_samples_ns if c]
    if cpu:
        extra["server_cpu_ms"] = round(statistics.median(cpu) / 1e6, 1)
    return {
        "bench": BENCH,
        "kind": "spawn",
        "impl": impl,
        "mode": mode,
        "spawns": len(ordered),
        "median_ms": round(statistics.median(ordered) / 1e6, 1),
        "p90_ms": round(percentile(ordered, 90) / 1e6, 1),
        "min_ms": round(ordered[0] / 1e6, 1),
        "max_ms": round(ordered[-1] / 1e6, 1),
        **extra,
    }


def check_protocol(mode: str, protocol: str | None) -> None:
    if (mode == MODERN) != (protocol == MODERN):
        raise RuntimeError(f"mode {mode} ended up speaking protocol {protocol!r}")


# ------------------------------------------------------------ trio-mcp client


def our_params(server: str, args: argparse.Namespace) -> Any:
    from trio_mcp.transports.stdio import StdioServerParameters

    command, *rest = server_command(server, args)
    return StdioServerParameters(command=command, args=rest, cwd=str(ROOT), name=f"{server}-echo")


def our_era(mode: str) -> str:
    return "handshake" if mode == HANDSHAKE else "modern"


def run_our_calls(server: str, mode: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    import trio

    from trio_mcp import open_session
    from trio_mcp.transports.stdio import StdioTransport

    rows: list[dict[str, Any]] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            transport = StdioTransport(our_params(server, args))
            stream = await nursery.start(transport.run)
            async with open_session(stream, era=our_era(mode)) as session:
                check_protocol(mode, session.protocol_version)

                async def call() -> None:
                    await session.call_tool("echo", {"text": PAYLOAD})

                check = await session.call_tool("echo", {"text": PAYLOAD})
                if check.is_error or check.content[0].text != PAYLOAD:
                    raise RuntimeError(f"unexpected echo result: {check!r}")
                for concurrency in (1, args.concurrency):
                    latencies = await measure(
                        call,
                        concurrency=concurrency,
                        warmup=args.warmup,
                        seconds=args.seconds,
                        open_group=trio.open_nursery,
                    )
                    rows.append(
                        make_row(
                            pair_name(OURS, server),
                            mode,
                            concurrency,
                            latencies,
                            args.seconds,
                            bench=BENCH,
                            kind="calls",
                            client=OURS,
                            server=server,
                            protocol=session.protocol_version,
                        )
                    )
                kb = peak_rss_kb(transport.pid)
            # leaving open_session closed the stream: the server was stopped and reaped
        if kb is None:
            raise RuntimeError(f"cannot read the peak RSS of {server}'s server (pid {transport.pid})")
        rows.append(rss_row(server, OURS, mode, kb))

    trio.run(main)
    return rows


def run_our_spawns(mode: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    import trio

    from trio_mcp import open_session
    from trio_mcp.transports.stdio import StdioTransport

    samples: list[int] = []
    cpu_samples: list[int | None] = []
    protocol: list[str | None] = [None]

    async def main() -> None:
        params = our_params(OURS, args)
        for i in range(args.spawns + 1):  # the first spawn is an untimed warm-up
            begin = time.perf_counter_ns()
            async with trio.open_nursery() as nursery:
                transport = StdioTransport(params)
                stream = await nursery.start(transport.run)
                async with open_session(stream, era=our_era(mode)) as session:
                    ready = time.perf_counter_ns()
                    cpu = cpu_ns(transport.pid)
                    protocol[0] = session.protocol_version
            if i:
                samples.append(ready - begin)
                cpu_samples.append(cpu)

    trio.run(main)
    check_protocol(mode, protocol[0])
    return [spawn_row(OURS, mode, samples, cpu_samples, protocol=protocol[0])]


# ----------------------------------------------------------------- SDK client


def run_sdk_client(what: str, server: str, mode: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    cmd = [
        str(args.sdk_python),
        str(HERE / "sdk_stdio_client.py"),
        what,
        "--mode",
        "legacy" if mode == HANDSHAKE else "auto",
        "--label",
        mode,
        "--server-impl",
        server,
        "--seconds",
        repr(args.seconds),
        "--warmup",
        repr(args.warmup),
        "--concurrency",
        str(args.concurrency),
        "--spawns",
        str(args.spawns),
        "--",
        *server_command(server, args),
    ]
    env = sdk_env()
    if what == "calls":
        budget = 2 * (args.warmup + args.seconds) + 60
    else:
        budget = 5 * (args.spawns + 1) + 60
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=budget)
    except BaseException:
        proc.kill()  # its server sees its stdin close and exits
        proc.communicate()
        raise
    if proc.returncode != 0:
        raise RuntimeError(
            f"the SDK client ({what}, {server} server, {mode}) exited with status {proc.returncode}"
        )
    objects = [o for o in parse_json_lines(out) if o.get("bench") == BENCH]
    rows: list[dict[str, Any]] = []
    for obj in objects:
        if obj.get("kind") == "spawn-samples":
            rows.append(
                spawn_row(
                    SDK,
                    mode,
                    obj["samples_ns"],
                    obj.get("cpu_ns", []),
                    protocol=obj.get("protocol"),
                    sdk_version=obj.get("sdk_version"),
                )
            )
        else:
            rows.append(obj)
    for row in rows:
        if row["kind"] in ("calls", "spawn"):
            check_protocol(mode, row.get("protocol"))
    expected = 3 if what == "calls" else 1
    if len(rows) != expected:
        raise RuntimeError(
            f"the SDK client ({what}, {server} server, {mode}) printed {len(rows)} rows, not {expected}"
        )
    return rows


# -------------------------------------------------------------------- report


def simple_table(header: tuple[str, ...], body: list[tuple[str, ...]], left: int) -> str:
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        )

    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *(fmt(b) for b in body)])


def summarize(
    calls: list[dict[str, Any]],
    spawns: list[dict[str, Any]],
    rss: list[dict[str, Any]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    cs = (1, args.concurrency)
    summary: dict[str, Any] = {
        "bench": BENCH,
        "summary": True,
        "seconds": args.seconds,
        "concurrency": args.concurrency,
        "spawns": args.spawns,
    }
    own, sdk = (OURS, OURS, HANDSHAKE), (SDK, SDK, HANDSHAKE)
    summary["ratios"] = call_ratios(calls, own, sdk, cs)
    summary["p50_ratios"] = call_ratios(calls, own, sdk, cs, "p50_us")
    if modern := call_ratios(calls, (OURS, OURS, MODERN), (SDK, SDK, MODERN), cs):
        summary["ratios_vs_2026"] = modern
    # one side swapped, the other held: what the server (resp. client) alone is worth
    summary["server_ratios"] = {
        f"{SDK} client {k}": v for k, v in call_ratios(calls, (SDK, OURS, HANDSHAKE), sdk, cs).items()
    } | {f"{OURS} client {k}": v for k, v in call_ratios(calls, own, (OURS, SDK, HANDSHAKE), cs).items()}
    summary["client_ratios"] = {
        f"{SDK} server {k}": v for k, v in call_ratios(calls, (OURS, SDK, HANDSHAKE), sdk, cs).items()
    } | {f"{OURS} server {k}": v for k, v in call_ratios(calls, own, (SDK, OURS, HANDSHAKE), cs).items()}
    summary["spawn_ms"] = {
        f"{r['impl']} {r['mode']}": {"median": r["median_ms"], "p90": r["p90_ms"]}
        | ({"server_cpu": r["server_cpu_ms"]} if "server_cpu_ms" in r else {})
        for r in spawns
    }
    ours_spawn, sdk_spawn = find(spawns, impl=OURS, mode=HANDSHAKE), find(spawns, impl=SDK, mode=HANDSHAKE)
    if (value := ratio(ours_spawn, sdk_spawn, "median_ms")) is not None:
        summary["spawn_median_ratio"] = value
        summary["spawn_p90_ratio"] = ratio(ours_spawn, sdk_spawn, "p90_ms")
    summary["rss_mb"] = {f"{r['impl']} ({r['client']} client, {r['mode']})": r["peak_rss_mb"] for r in rss}
    ours_rss, sdk_rss = (
        find(rss, impl=OURS, client=OURS, mode=HANDSHAKE),
        find(rss, impl=SDK, client=SDK, mode=HANDSHAKE),
    )
    if (value := ratio(ours_rss, sdk_rss, "peak_rss_mb")) is not None:
        summary["rss_ratio"] = value
    versions = {r["sdk_version"] for r in calls + spawns if r.get("sdk_version")}
    if versions:
        summary["sdk_version"] = ", ".join(sorted(versions))
    summary["targets"] = TARGETS
    return summary


def print_report(
    calls: list[dict[str, Any]],
    spawns: list[dict[str, Any]],
    rss: list[dict[str, Any]],
    summary: dict[str, Any],
    args: argparse.Namespace,
) -> None:
    print()
    print(
        f"stdio tools/call, echo tool, {args.seconds:g} s per row after {args.warmup:g} s warm-up "
        f"(impl = client->server)"
    )
    print(table(calls))
    print()
    print(
        f"spawn -> initialized session, {args.spawns} spawns after 1 warm-up (each client against its own server;"
        " server CPU = CPU time the server had used by then, median)"
    )
    print(
        simple_table(
            ("impl", "mode", "median ms", "p90 ms", "min ms", "max ms", "server CPU ms"),
            [
                (
                    r["impl"],
                    r["mode"],
                    f"{r['median_ms']:.1f}",
                    f"{r['p90_ms']:.1f}",
                    f"{r['min_ms']:.1f}",
                    f"{r['max_ms']:.1f}",
                    f"{r['server_cpu_ms']:.1f}" if "server_cpu_ms" in r else "n/a",
                )
                for r in spawns
            ],
            2,
        )
    )
    print()
    print("server peak RSS (VmHWM at the end of its throughput run)")
    print(
        simple_table(
            ("server", "client", "mode", "peak MB"),
            [(r["impl"], r["client"], r["mode"], f"{r['peak_rss_mb']:.1f}") for r in rss],
            3,
        )
    )
    if not summary["ratios"]:
        return
    print()
    print(f"trio-mcp / official SDK {summary.get('sdk_version', '')} (issue targets, for context only):")
    c = label(args.concurrency)
    for key, target in (("seq", TARGETS["seq"]), (c, TARGETS["c64"] if args.concurrency == 64 else None)):
        value = summary["ratios"].get(key)
        if value is None:
            continue
        p50 = summary["p50_ratios"].get(key)
        modern = summary.get("ratios_vs_2026", {}).get(key)
        line = f"  calls/s {key + ':':5} {value:5.1f}× (p50 latency {p50:.1f}×)"
        if modern is not None:
            line += f", 2026-07-28 {modern:5.1f}×"
        if target is not None:
            line += f"   [target ≥ {target:g}×]"
        print(line)
    for name, key in (("server only", "server_ratios"), ("client only", "client_ratios")):
        parts = ", ".join(f"{k} {v:.1f}×" for k, v in summary[key].items())
        print(f"  {name}: {parts}")
    ours_spawn, sdk_spawn = find(spawns, impl=OURS, mode=HANDSHAKE), find(spawns, impl=SDK, mode=HANDSHAKE)
    if ours_spawn and sdk_spawn:
        cpu = ""
        if "server_cpu_ms" in ours_spawn and "server_cpu_ms" in sdk_spawn:
            cpu = (
                f" (server CPU {ours_spawn['server_cpu_ms']:.0f} ms vs {sdk_spawn['server_cpu_ms']:.0f} ms"
                f" = {ours_spawn['server_cpu_ms'] / sdk_spawn['server_cpu_ms']:.2f}×)"
            )
        print(
            f"  spawn->initialized median: {ours_spawn['median_ms']:.0f} ms vs {sdk_spawn['median_ms']:.0f} ms"
            f" = {summary['spawn_median_ratio']:.2f}×{cpu}   [target ≤ {TARGETS['spawn_median_ms']:g} ms]"
        )
    ours_rss = find(rss, impl=OURS, client=OURS, mode=HANDSHAKE)
    sdk_rss = find(rss, impl=SDK, client=SDK, mode=HANDSHAKE)
    if ours_rss and sdk_rss:
        print(
            f"  server peak RSS: {ours_rss['peak_rss_mb']:.1f} MB vs {sdk_rss['peak_rss_mb']:.1f} MB"
            f" = {summary['rss_ratio']:.2f}×   [target ≤ {TARGETS['rss_mb']:g} MB]"
        )


# ---------------------------------------------------------------- importtime


def import_profile(runs: int = 5, top: int = 15) -> int:
    """Run our server with ``-X importtime --import-only``; print the self
    time summed per top-level package, and the heaviest imports, of the
    fastest of ``runs`` runs."""
    best: list[tuple[int, int, str]] | None = None
    # As a spawned server runs: bytecode caches written (the first run warms them up).
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHONHOME")
    }
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", str(SERVER_SCRIPTS[OURS]), "--import-only"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        entries = []
        for line in proc.stderr.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)", line)
            if m:
                entries.append((int(m[1]), int(m[2]), m[4]))
        if entries and (best is None or sum(e[0] for e in entries) < sum(e[0] for e in best)):
            best = entries
    if not best:
        print("bench_stdio: -X importtime printed nothing", file=sys.stderr)
        return 1
    total = sum(e[0] for e in best)
    per_package: dict[str, int] = {}
    for self_us, _, name in best:
        per_package[name.split(".")[0]] = per_package.get(name.split(".")[0], 0) + self_us
    print(f"trio_echo_server.py imports: {len(best)} modules, {total / 1000:.1f} ms (fastest of {runs} runs)")
    print("self time per top-level package:")
    for name, us in sorted(per_package.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {name:28} {us / 1000:7.1f} ms")
    print("heaviest imports (cumulative):")
    for self_us, cum_us, name in sorted(best, key=lambda e: -e[1])[:top]:
        print(f"  {name:40} {cum_us / 1000:7.1f} ms (self {self_us / 1000:.1f})")
    heavy = sorted(
        {n.split(".")[0] for _, _, n in best}
        & {
            "hypercorn",
            "httpx",
            "httpcore",
            "h11",
            "h2",
            "jsonschema",
            "trio_websocket",
            "wsproto",
            "anyio",
            "cattrs",
            "pydantic",
            "asyncio",
            "ssl",
            "email",
        }
    )
    print(f"optional-looking packages imported: {', '.join(heavy) or 'none'}")
    return 0


# ---------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="measured duration per throughput row (default 3)"
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="warm-up before each throughput row (default: min(0.5, seconds/2))",
    )
    parser.add_argument(
        "--concurrency", type=int, default=64, help="callers in flight in the concurrent rows"
    )
    parser.add_argument("--spawns", type=int, default=20, help="timed spawns per spawn row (default 20)")
    parser.add_argument("--ours-only", action="store_true", help="only trio-mcp->trio-mcp (no SDK needed)")
    parser.add_argument("--handshake-only", action="store_true", help="skip the 2026-07-28 rows")
    parser.add_argument(
        "--sdk-python",
        type=Path,
        default=SDK_PYTHON,
        help="python of the venv holding the official SDK (default .cache/sdk-venv)",
    )
    parser.add_argument(
        "--importtime",
        action="store_true",
        help="only profile the imports of trio-mcp's stdio server and exit",
    )
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.concurrency < 1 or args.spawns < 1:
        parser.error("--seconds must be > 0, --concurrency and --spawns >= 1")
    if args.warmup is None:
        args.warmup = default_warmup(args.seconds)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.importtime:
        return import_profile()
    if not args.ours_only and not Path(args.sdk_python).exists():
        print(
            f"bench_stdio: the official SDK venv is missing ({args.sdk_python} not found).\n"
            "  create it with:  bash scripts/setup-interop\n"
            "  or run only trio-mcp:  --ours-only",
            file=sys.stderr,
        )
        return 2

    jobs: list[tuple[str, bool, Callable[[], list[dict[str, Any]]]]] = []
    for client, server, mode in PAIRINGS:
        if args.ours_only and SDK in (client, server) or args.handshake_only and mode == MODERN:
            continue
        name = f"calls {pair_name(client, server)} {mode}"
        if client == OURS:
            jobs.append((name, mode == HANDSHAKE, lambda s=server, m=mode: run_our_calls(s, m, args)))
        else:
            jobs.append(
                (name, mode == HANDSHAKE, lambda s=server, m=mode: run_sdk_client("calls", s, m, args))
            )
    for mode in (HANDSHAKE, MODERN):
        if args.handshake_only and mode == MODERN:
            continue
        jobs.append((f"spawn {OURS} {mode}", mode == HANDSHAKE, lambda m=mode: run_our_spawns(m, args)))
        if not args.ours_only:
            jobs.append(
                (
                    f"spawn {SDK} {mode}",
                    mode == HANDSHAKE,
                    lambda m=mode: run_sdk_client("spawn", SDK, m, args),
                )
            )

    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    load_before = load_average()
    for name, required, job in jobs:  # one at a time: never two measurements at once
        progress(name)
        try:
            rows += job()
        except Exception as exc:  # report, keep the other rows
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
            print(
                f"bench_stdio: {name} failed{'' if required else ' (optional row skipped)'}: {exc}",
                file=sys.stderr,
            )
            if not required:
                failures.pop()

    calls = [r for r in rows if r.get("kind") == "calls"]
    spawns = [r for r in rows if r.get("kind") == "spawn"]
    rss = [r for r in rows if r.get("kind") == "rss"]
    summary = summarize(calls, spawns, rss, args)
    # other work on the machine skews every figure: say how busy it was
    summary["load_average"] = [load_before, load_average()]
    print_report(calls, spawns, rss, summary, args)
    print(
        f"\n1-minute load average: {load_before} before, {summary['load_average'][1]} after "
        f"({os.cpu_count()} CPUs)"
    )
    print()
    for row in calls + spawns + rss:
        json_line(row)
    json_line(summary)
    if failures:
        print("bench_stdio: failed:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
