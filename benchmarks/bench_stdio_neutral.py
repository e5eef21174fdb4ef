"""stdio servers driven by one neutral Node driver: trio-mcp, the official Python SDK, the TypeScript SDK, and the driver's own ceiling.

    bash scripts/setup-interop                                   # once: SDK venv, the TS SDK, Node 22
    .venv/bin/python benchmarks/bench_stdio_neutral.py           # 3 rounds, 2 s per row
    .venv/bin/python benchmarks/bench_stdio_neutral.py --rounds 5 --seconds 5
    .venv/bin/python benchmarks/bench_stdio_neutral.py --json    # one JSON document instead of the tables
    .venv/bin/python benchmarks/bench_stdio_neutral.py --targets trio-mcp,ts-sdk --concurrency 64
    .venv/bin/python benchmarks/bench_stdio_neutral.py --targets trio-mcp,gateway,gateway-base,relay \
        --baseline ../main/src                                  # this gateway against another checkout's

The driver (``drivers/stdio_driver.mjs``) spawns each server and writes raw
JSON-RPC lines to its stdin and reads lines from its stdout (no MCP client
library; the requests made in one turn of its event loop go out in one
write). The servers, one at a time, every one in each round, in an order
rotated every round, each serving ``echo(text)``:

* ``trio-mcp``: ``servers/trio_echo_server.py`` (project venv);
* ``mcp-sdk``: ``servers/sdk_echo_server.py`` (the official SDK in ``.cache/sdk-venv``,
  ``MCPServer.run("stdio")``);
* ``ts-sdk``: ``drivers/ts_stdio_server.mjs`` (``@modelcontextprotocol/sdk``,
  ``McpServer`` on ``StdioServerTransport``);
* ``node-echo``: ``drivers/echo_stdio_server.mjs``, a trivial Node JSON-lines echo
  with no MCP work: the driver's own ceiling (every server's figures are below it
  when the driver is not what limits them);
* ``baseline`` (only when named, with ``--baseline SRC``): ``trio_echo_server.py``
  importing ``trio_mcp`` from another checkout's ``src`` (e.g. a detached worktree of
  main), for before/after comparisons interleaved in one run (``ours/baseline``);
* ``trio-floor``: ``servers/trio_floor_server.py``, a minimal trio JSON-lines echo
  (one task: a read, msgspec decoding of its lines, one write of their answers;
  no MCP): the floor of our stack, what trio and msgspec alone do against the
  TypeScript SDK (``floor/ts``) and how much of it our server keeps (``ours/floor``).

Run only when named: ``gateway`` (our echo server behind ``trio-mcp gateway``),
``relay`` (behind ``servers/trio_relay.py``, which only copies lines),
``routing-relay`` (behind ``servers/trio_routing_relay.py``, which decodes each
line, swaps its id and tool name and encodes it again: the floor of a proxy
that routes), ``thread-routing-relay`` (the same in two blocking OS threads,
no event loop: the floor of a Python proxy that routes), ``c-relay`` (behind
``servers/c_relay.c``, compiled by this script with ``cc``: two C threads
copying bytes, the floor of any process between a client and its server) and
``gateway-base`` (``gateway`` importing ``trio_mcp`` from ``--baseline``, another
checkout's ``src``: a change against its base in one run); their server CPU is
the front process's alone.

Per server and round: ``--spawns`` spawn -> initialize answered timings (each
process then closed), then one process: initialize + notifications/initialized,
and per concurrency (``--concurrencies``, default 1, 8, 64, 256 in flight)
``tools/call`` back-to-back for ``--seconds`` after ``--warmup`` (the first
row after twice that); the calls completing in the measured window count.
A row: calls/s, p50/p99 latency, the server's and the driver's CPU µs per
call; per process: peak RSS (``VmHWM``). Reported: the medians over the
rounds (min–max), each server's run-to-run spread of calls/s at each
concurrency (the largest round over the smallest, less 1), spawn ->
initialized median over every spawn, and per round the ratios ours/TS,
ours/SDK, ours/ceiling, floor/TS and ours/floor of calls/s, with each
round's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _procs import (
    DRIVERS,
    add_common_args,
    clock_ticks,
    emit,
    fmt_spread,
    load_line,
    median_table,
    medians,
    missing_parts,
    node_version,
    npm_version,
    ratio_table,
    resolve_common,
    round_ratios,
    run_driver,
    run_rounds,
    sdk_version,
    spread,
)
from _report import label, load_average, sdk_env

BENCH = "stdio_neutral"
OURS = "trio-mcp"
SDK = "mcp-sdk"
TS = "ts-sdk"
CEILING = "node-echo"
FLOOR = "trio-floor"
SECONDS = 2.0  # per row, by default
METRICS = ("calls_per_s", "p50_us", "p99_us", "server_cpu_us", "driver_cpu_us")
RATIOS = [
    (OURS, TS, "ours/ts"),
    (OURS, SDK, "ours/sdk"),
    (OURS, CEILING, "ours/ceiling"),
    (FLOOR, TS, "floor/ts"),
    (OURS, FLOOR, "ours/floor"),
    (OURS, "baseline", "ours/baseline"),
    ("gateway", OURS, "gateway/direct"),
    ("relay", OURS, "relay/direct"),
    ("routing-relay", OURS, "routing-relay/direct"),
    ("thread-routing-relay", OURS, "thread-routing-relay/direct"),
    ("c-relay", OURS, "c-relay/direct"),
    ("gateway-base", OURS, "gateway-base/direct"),
    ("gateway", "gateway-base", "gateway/gateway-base"),
]
#: Issue 17's targets, printed for context, never asserted.
TARGETS = {
    "calls_per_s ours/ts": 1.2,
    "spawn_ms ours": 120.0,
    "peak_rss_mb ours": 30.0,
    "calls_per_s spread ours c64": 0.15,
}


ECHO_SERVER = HERE / "servers" / "trio_echo_server.py"
#: The gateway target's configuration: our echo server, as server "echo".
GATEWAY_CONFIG = Path(tempfile.gettempdir()) / f"bench-stdio-neutral-gateway-{os.getpid()}.json"


@dataclass(frozen=True)
class Target:
    name: str
    script: Path | None  # None: the command is the interpreter and ``args``
    runtime: str  # "ours", "sdk" or "node"
    #: Arguments after the script; the tool the driver calls.
    args: tuple[str, ...] = ()
    tool: str = "echo"


TARGETS_ALL = (
    Target(OURS, ECHO_SERVER, "ours"),
    Target(SDK, HERE / "servers" / "sdk_echo_server.py", "sdk"),
    Target(TS, DRIVERS / "ts_stdio_server.mjs", "node"),
    Target(CEILING, DRIVERS / "echo_stdio_server.mjs", "node"),
    Target(FLOOR, HERE / "servers" / "trio_floor_server.py", "ours"),
    # Not run unless named (--targets): our echo server behind `trio-mcp
    # gateway` (its tool is then echo__echo), and behind a trio process that
    # only relays lines (the floor of any trio proxy). Their server CPU is the
    # front process's alone.
    Target(
        "gateway",
        None,
        "ours",
        ("-m", "trio_mcp.cli", "gateway", str(GATEWAY_CONFIG), "-t", "stdio", "--no-watch"),
        "echo__echo",
    ),
    Target("relay", HERE / "servers" / "trio_relay.py", "ours", (sys.executable, str(ECHO_SERVER))),
    # Behind a trio process that decodes each line, swaps its id and tool name
    # and encodes it again: the floor of a trio proxy that routes.
    Target(
        "routing-relay",
        HERE / "servers" / "trio_routing_relay.py",
        "ours",
        (sys.executable, str(ECHO_SERVER)),
        "echo__echo",
    ),
    # Behind servers/c_relay.c, two C threads copying bytes: the floor of any
    # process between the driver and the server, in any language.
    Target("c-relay", None, "native", (sys.executable, str(ECHO_SERVER))),
    Target(
        "thread-routing-relay",
        HERE / "servers" / "thread_routing_relay.py",
        "ours",
        (sys.executable, str(ECHO_SERVER)),
        "echo__echo",
    ),
    # The gateway of another checkout (--baseline: its src folder, put first
    # on PYTHONPATH), to compare a change with its base in the same run.
    Target(
        "gateway-base",
        None,
        "ours",
        ("-m", "trio_mcp.cli", "gateway", str(GATEWAY_CONFIG), "-t", "stdio", "--no-watch"),
        "echo__echo",
    ),
    # Our echo server on another checkout's trio_mcp (--baseline SRC): before/after in one run.
    Target("baseline", ECHO_SERVER, "ours"),
)
#: What runs unless --targets names others.
DEFAULT_TARGETS = (OURS, SDK, TS, CEILING, FLOOR)


def run_target(
    target: Target, round_no: int, args: argparse.Namespace
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    executable = {
        "ours": sys.executable,
        "sdk": str(args.sdk_python),
        "node": args.node,
        "native": str(args.c_relay),
    }[target.runtime]
    options = {
        "command": [executable, *([] if target.script is None else [str(target.script)]), *target.args],
        "tool": target.tool,
        "env": sdk_env()
        if target.runtime == "sdk"
        else {**os.environ, "PYTHONPATH": str(args.baseline)}
        if target.name in ("baseline", "gateway-base")
        else None,
        "spawns": args.spawns,
        "concurrencies": args.concurrencies,
        "warmup": args.warmup,
        "prime": args.warmup,
        "seconds": args.seconds,
        "clockTicks": clock_ticks(),
    }
    load = load_average()
    budget = args.spawns * 20 + len(args.concurrencies) * (args.warmup + args.seconds + 10) + args.warmup + 30
    out = run_driver(args.node, "stdio_driver.mjs", options, budget)
    rows = [o for o in out if o.get("kind") == "calls"]
    procs = [o for o in out if o.get("kind") == "process"]
    if len(rows) != len(args.concurrencies) or len(procs) != 1:
        raise RuntimeError(
            f"{target.name}: the driver printed {len(rows)} rows and {len(procs)} process lines"
        )
    for row in rows:
        row.update(bench=BENCH, round=round_no, impl=target.name, load=load)
    process = {"bench": BENCH, "round": round_no, "impl": target.name, **procs[0]}
    return rows, process


def round_spread(rows: list[dict[str, Any]], metric: str = "calls_per_s") -> dict[str, dict[str, float]]:
    """Per server and concurrency, the run-to-run spread of ``metric``: the
    largest round's over the smallest's, less 1 (0.12: 12 %; 0 with one round)."""
    per: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        if row.get(metric):
            per.setdefault(row["impl"], {}).setdefault(label(row["concurrency"]), []).append(row[metric])
    return {
        impl: {key: round(max(values) / min(values) - 1, 3) for key, values in by.items()}
        for impl, by in per.items()
    }


def summarize(rows: list[dict[str, Any]], processes: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = {}
    for num, den, name in RATIOS:
        if per := round_ratios(rows, "calls_per_s", num, den, ("concurrency",)):
            ratios[f"calls_per_s {name}"] = per
    spawn: dict[str, Any] = {}
    rss: dict[str, Any] = {}
    for impl in dict.fromkeys(p["impl"] for p in processes):
        mine = [p for p in processes if p["impl"] == impl]
        times = [t for p in mine for t in p["spawn_ms"]]
        if times:
            spawn[impl] = {"median": round(statistics.median(times), 1), "spawns": len(times)}
        if values := [p["peak_rss_mb"] for p in mine if p.get("peak_rss_mb")]:
            rss[impl] = spread(values)
    # The driver's ceiling: in each round, the node-echo row above every
    # server's at the same concurrency (the driver is not what limits them).
    above: dict[str, bool] = {}
    for row in rows:
        if row["impl"] == CEILING:
            others = [
                r["calls_per_s"]
                for r in rows
                if r["round"] == row["round"]
                and r["concurrency"] == row["concurrency"]
                and r["impl"] != CEILING
            ]
            key = label(row["concurrency"])
            above[key] = above.get(key, True) and all(row["calls_per_s"] > v for v in others)
    return {
        "medians": medians(rows, ("impl", "concurrency"), METRICS),
        "calls_per_s_spread": round_spread(rows),
        # the server's CPU per call spreads much less when calls/s spreads
        # because of the machine (how the two processes get the cores)
        "server_cpu_us_spread": round_spread(rows, "server_cpu_us"),
        "ratios": ratios,
        "ceiling_above_every_server": above,
        "spawn_ms": spawn,
        "peak_rss_mb": rss,
        "targets": TARGETS,
    }


def print_report(doc: dict[str, Any]) -> None:
    s = doc["settings"]
    print(
        f"stdio tools/call of an echo tool, neutral Node driver (Node {s['node_version']}); "
        f"{s['rounds']} rounds, {s['seconds']:g} s per row after {s['warmup']:g} s warm-up"
    )
    print(f"peers: official SDK {s.get('sdk_version')}; TypeScript SDK {s.get('ts_sdk_version')}")
    print(load_line(doc["rounds"]))
    print()
    print(median_table(doc["summary"]["medians"], (("impl", "server"), ("concurrency", "in flight"))))
    summary = doc["summary"]
    print(
        "spawn -> initialized, median: "
        + ", ".join(
            f"{k} {v['median']:,.1f} ms ({v['spawns']} spawns)" for k, v in summary["spawn_ms"].items()
        )
    )
    print(
        "server peak RSS MB: "
        + ", ".join(f"{k} {fmt_spread(v, 1)}" for k, v in summary["peak_rss_mb"].items())
    )
    for key, what in (
        ("calls_per_s_spread", "calls/s"),
        ("server_cpu_us_spread", "the server's CPU per call"),
    ):
        print(
            f"run-to-run spread of {what} (largest round / smallest - 1): "
            + "; ".join(
                f"{impl} " + ", ".join(f"{k} {value:.0%}" for k, value in by.items())
                for impl, by in summary[key].items()
            )
        )
    print()
    if above := summary["ceiling_above_every_server"]:
        print(
            "the driver's ceiling (node-echo) above every server's calls/s in every round: "
            + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in above.items())
        )
    print()
    print(
        "ratios of calls/s (> 1: ours serves more; ours/ceiling: how close to the driver's own ceiling; "
        "floor/ts: trio's own floor against the TypeScript SDK):"
    )
    print(ratio_table(summary["ratios"], [r["round"] for r in doc["rounds"]], "in flight"))
    print(
        "issue 17's targets, for context: calls_per_s ours/ts ≥ 1.2 at every concurrency, "
        "ours spawn -> initialized ≤ 120 ms, ours peak RSS ≤ 30 MB, "
        "the spread of ours at 64 in flight < 15 % (on a quiet machine)"
    )
    if floor := summary["ratios"].get("calls_per_s floor/ts"):
        below = [k for k, v in floor.items() if v["median"] < TARGETS["calls_per_s ours/ts"]]
        if below:
            print("the trio floor itself is below 1.2x the TypeScript SDK (median) at: " + ", ".join(below))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, DEFAULT_TARGETS, SECONDS)
    parser.add_argument("--warmup", type=float, default=0.5, help="warm-up per row (default 0.5)")
    parser.add_argument(
        "--concurrencies", default="1,8,64,256", help="calls in flight, one row each (default %(default)s)"
    )
    parser.add_argument(
        "--spawns", type=int, default=5, help="spawn -> initialized timings per server and round"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="the src directory of another trio-mcp checkout: targets `baseline` and `gateway-base` run "
        "our server and our gateway with it",
    )
    args = parser.parse_args(argv)
    try:
        args.concurrencies = [int(c) for c in args.concurrencies.split(",")]
    except ValueError:
        parser.error("--concurrencies takes comma-separated integers")
    if args.warmup < 0 or args.spawns < 0 or min(args.concurrencies) < 1:
        parser.error("--warmup and --spawns must be >= 0, each concurrency >= 1")
    resolve_common(parser, args, {t.name: t for t in TARGETS_ALL})
    if any(t.name in ("baseline", "gateway-base") for t in args.targets) and args.baseline is None:
        parser.error("targets baseline and gateway-base need --baseline SRC_DIR")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    needs_sdk = any(t.runtime == "sdk" for t in args.targets)
    if missing := missing_parts(args.node, Path(args.sdk_python) if needs_sdk else None):
        print(
            f"bench_stdio_neutral: missing {', '.join(missing)}\n  install: bash scripts/setup-interop",
            file=sys.stderr,
        )
        return 2
    settings: dict[str, Any] = {
        "rounds": args.rounds,
        "seconds": args.seconds,
        "warmup": args.warmup,
        "concurrencies": args.concurrencies,
        "spawns": args.spawns,
        "node_version": node_version(args.node),
        "ts_sdk_version": npm_version("@modelcontextprotocol/sdk"),
    }
    if any(t.runtime == "sdk" for t in args.targets):
        settings["sdk_version"] = sdk_version(args.sdk_python)
    args.c_relay = None
    if any(t.runtime == "native" for t in args.targets):
        args.c_relay = Path(tempfile.gettempdir()) / f"bench-stdio-neutral-c-relay-{os.getpid()}"
        build = ["cc", "-O2", "-pthread", "-o", str(args.c_relay), str(HERE / "servers" / "c_relay.c")]
        try:
            built = subprocess.run(build, check=False).returncode == 0
        except FileNotFoundError:  # no C compiler
            built = False
        if not built:
            print(f"bench_stdio_neutral: could not build the c-relay row: {' '.join(build)}", file=sys.stderr)
            return 2
    rows: list[dict[str, Any]] = []
    processes: list[dict[str, Any]] = []

    def run(target: Target, round_no: int) -> None:
        mine, process = run_target(target, round_no, args)
        rows.extend(mine)
        processes.append(process)

    GATEWAY_CONFIG.write_text(
        json.dumps({"mcpServers": {"echo": {"command": sys.executable, "args": [str(ECHO_SERVER)]}}})
    )
    try:
        rounds, failure = run_rounds(args.rounds, args.targets, lambda t: t.name, run, "bench_stdio_neutral")
    finally:
        GATEWAY_CONFIG.unlink(missing_ok=True)
        if args.c_relay is not None:
            args.c_relay.unlink(missing_ok=True)
    doc = {
        "bench": BENCH,
        "settings": settings,
        "rounds": rounds,
        "rows": rows,
        "processes": processes,
        "summary": summarize(rows, processes),
    }
    return emit(doc, args.json, print_report, failure)


if __name__ == "__main__":
    sys.exit(main())
