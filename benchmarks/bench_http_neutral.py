"""Streamable HTTP servers driven by one neutral Node driver: trio-mcp, the official Python SDK, the TypeScript SDK, and hypercorn doing nothing.

    bash scripts/setup-interop                                  # once: SDK venv, undici, TS SDK, Node 22
    .venv/bin/python benchmarks/bench_http_neutral.py           # 3 rounds, 3 s per row
    .venv/bin/python benchmarks/bench_http_neutral.py --rounds 5 --seconds 5
    .venv/bin/python benchmarks/bench_http_neutral.py --json    # one JSON document instead of the tables
    .venv/bin/python benchmarks/bench_http_neutral.py --targets trio-mcp,floor

The driver (``drivers/http_driver.mjs``: raw JSON-RPC over an undici Pool of
``--connections`` keep-alive connections, no MCP client library) costs far
less per call than any of the servers, so the figures are the servers'. The
servers, each in its own process on 127.0.0.1 and a free port, one at a time,
in an order rotated every round:

* ``trio-mcp``: ``servers/trio_http_server.py`` (``HttpServer``, JSON answers);
* ``trio-mcp sse``: the same with ``json_response=False`` (every answer an SSE stream);
* ``mcp-sdk``: ``servers/sdk_http_server.py`` (the official SDK in ``.cache/sdk-venv``,
  ``MCPServer.streamable_http_app`` on uvicorn, JSON answers);
* ``ts-sdk``: ``drivers/ts_http_server.mjs`` (``@modelcontextprotocol/sdk``,
  ``StreamableHTTPServerTransport`` with ``enableJsonResponse: true``);
* ``floor``: ``servers/floor_http_server.py`` (hypercorn's trio worker, configured as
  ``HttpServer`` configures it, serving an ASGI app that answers a fixed small JSON
  body: the most any server on that stack could serve);
* ``floor-conn``: the same app served through the hypercorn connection ``HttpServer``
  uses (``--our-connection``: one socket write per answer, one keep-alive timer per
  connection), so ours/floor-conn is what the MCP layer alone adds; issue 11's targets
  are against the stock ``floor``.

Each serves ``echo(text)``. For each server the driver runs, per era, one row
per concurrency (``seq`` and ``c64``): ``handshake`` (initialize +
notifications/initialized, then ``tools/call`` with the session id; the
floor gets the same requests without the handshake) and ``2026-07-28``
(stateless ``tools/call`` carrying ``_meta`` protocolVersion /
clientCapabilities / clientInfo and the mirrored headers), the latter where
the server speaks it (not the TypeScript SDK 1.32). Every row runs for
``--seconds`` after ``--warmup`` (the first row of each server process after
twice that: its code is cold); the calls that complete in the measured
window count. A row: calls/s, p50/p99
latency, the server's CPU µs per call (``/proc/<pid>/stat`` utime+stime over
the measured window), the driver's own CPU µs per call, and the server's
peak RSS. Reported: the median over the rounds (min–max), and per round the
ratios ours/SDK, ours/TS, ours/floor, ours/floor-conn (calls/s and CPU per call) and SSE/JSON,
with each round's load average.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _procs import (
    UrlServer,
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
    peak_rss_mb,
    ratio_table,
    resolve_common,
    round_ratios,
    run_driver,
    run_rounds,
    sdk_version,
)
from _report import default_warmup, load_average, sdk_env

BENCH = "http_neutral"
OURS = "trio-mcp"
OURS_SSE = "trio-mcp sse"
SDK = "mcp-sdk"
TS = "ts-sdk"
FLOOR = "floor"
#: The same do-nothing app served through our hypercorn connection (see
#: ``servers/floor_http_server.py --our-connection``): ours over it is the MCP
#: layer alone; the issue's targets stay against the stock floor.
FLOOR_CONN = "floor-conn"
HANDSHAKE = "handshake"
MODERN = "2026-07-28"
SECONDS = 3.0  # per row, by default
#: Sent by the driver to the floor as ``Mcp-Session-Id`` (as long as ours).
FLOOR_SESSION_ID = "benchmark-floor-session-00000000"
#: Issue 11's targets for ours over the floor (calls/s at least, CPU per call
#: at most) and SSE over JSON answers; printed for context, never asserted.
TARGETS = {"calls_per_s ours/floor": 0.9, "server_cpu_us ours/floor": 1.15, "calls_per_s sse/json": 1 / 1.2}


@dataclass(frozen=True)
class Target:
    name: str
    eras: tuple[str, ...]
    command: Callable[[argparse.Namespace], list[str]]
    sdk_venv: bool = False
    handshake: bool = True


def _python(script: str, *extra: str) -> Callable[[argparse.Namespace], list[str]]:
    return lambda args: [sys.executable, str(HERE / "servers" / script), *extra]


TARGETS_ALL = (
    Target(OURS, (HANDSHAKE, MODERN), _python("trio_http_server.py")),
    Target(OURS_SSE, (HANDSHAKE, MODERN), _python("trio_http_server.py", "--sse")),
    Target(
        SDK,
        (HANDSHAKE, MODERN),
        lambda args: [str(args.sdk_python), str(HERE / "servers" / "sdk_http_server.py")],
        sdk_venv=True,
    ),
    Target(TS, (HANDSHAKE,), lambda args: [args.node, str(HERE / "drivers" / "ts_http_server.mjs")]),
    Target(FLOOR, (HANDSHAKE, MODERN), _python("floor_http_server.py"), handshake=False),
    Target(
        FLOOR_CONN,
        (HANDSHAKE, MODERN),
        _python("floor_http_server.py", "--our-connection"),
        handshake=False,
    ),
)
#: (metric, numerator, denominator) of the per-round ratios; > 1 on
#: calls/s means the numerator serves more, on CPU that it spends more.
RATIOS = [
    (metric, num, den)
    for metric in ("calls_per_s", "server_cpu_us")
    for num, den in ((OURS, SDK), (OURS, TS), (OURS, FLOOR), (OURS, FLOOR_CONN), (OURS_SSE, OURS))
]
#: How a ratio's sides are named: ``ours/sdk``, ``sse/json``...
NUM_NAMES = {OURS: "ours", OURS_SSE: "sse"}
DEN_NAMES = {SDK: "sdk", TS: "ts", FLOOR: "floor", FLOOR_CONN: "floor-conn", OURS: "json"}
METRICS = ("calls_per_s", "p50_us", "p99_us", "server_cpu_us", "driver_cpu_us", "peak_rss_mb")


def progress(message: str) -> None:
    print(f"[bench_http_neutral] {message}", file=sys.stderr, flush=True)


def hypercorn_settings() -> dict[str, Any]:
    """What hypercorn serves ours and the floor with: its defaults, which
    neither changes, plus what both set (no access log, 2 s graceful stop)."""
    from importlib.metadata import version

    from hypercorn.config import Config

    config = Config()
    return {
        "version": version("hypercorn"),
        "worker": "trio (one process)",
        "keep_alive": True,
        "keep_alive_timeout": config.keep_alive_timeout,
        "keep_alive_max_requests": config.keep_alive_max_requests,
        "h11_max_incomplete_size": config.h11_max_incomplete_size,
        "backlog": config.backlog,
        "accesslog": None,
        "graceful_timeout": 2.0,
    }


def run_target(target: Target, round_no: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    env = sdk_env() if target.sdk_venv else None
    load = load_average()
    server = UrlServer(target.name, target.command(args), env)
    try:
        concurrencies = [1, args.concurrency]
        options = {
            "url": server.url,
            "eras": [e for e in target.eras if e in args.eras],
            "handshake": target.handshake,
            "floorSession": FLOOR_SESSION_ID,
            "concurrencies": concurrencies,
            "connections": args.connections,
            "warmup": args.warmup,
            "prime": args.warmup,
            "seconds": args.seconds,
            "serverPid": server.pid,
            "clockTicks": clock_ticks(),
        }
        budget = (
            len(options["eras"]) * len(concurrencies) * (args.warmup + args.seconds + 10) + args.warmup + 30
        )
        rows = run_driver(args.node, "http_driver.mjs", options, budget)
        rss = peak_rss_mb(server.pid)
    finally:
        status = server.stop()
    if status not in (0, None, -signal.SIGTERM):
        progress(f"note: the {target.name} server exited with status {status}")
    expected = len(options["eras"]) * len(concurrencies)
    if len(rows) != expected:
        raise RuntimeError(f"{target.name}: the driver printed {len(rows)} rows, not {expected}")
    for row in rows:
        answer = "sse" if row.pop("content_type") == "text/event-stream" else "json"
        if answer != ("sse" if target.name == OURS_SSE else "json"):
            raise RuntimeError(f"{target.name}: {answer} answers")
        row.update(bench=BENCH, round=round_no, impl=target.name, answer=answer, peak_rss_mb=rss, load=load)
    return rows


# -------------------------------------------------------------------- report


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians (min–max) per (impl, era, concurrency), and each ratio per
    round with its median (min–max) over the rounds."""
    ratios = {}
    for metric, num, den in RATIOS:
        if per := round_ratios(rows, metric, num, den, ("era", "concurrency")):
            ratios[f"{metric} {NUM_NAMES[num]}/{DEN_NAMES[den]}"] = per
    return {
        "medians": medians(rows, ("impl", "era", "concurrency"), METRICS),
        "ratios": ratios,
        "targets": TARGETS,
    }


def print_report(doc: dict[str, Any]) -> None:
    s = doc["settings"]
    print(
        f"Streamable HTTP tools/call of an echo tool, neutral Node driver (undici {s['undici']}, "
        f"{s['connections']} keep-alive connections, Node {s['node_version']}); "
        f"{s['rounds']} rounds, {s['seconds']:g} s per row after {s['warmup']:g} s warm-up"
    )
    h = s["hypercorn"]
    print(
        f"hypercorn {h['version']} (ours and the floors alike; floor-conn and ours through trio-mcp's connection, "
        f"one write per answer): {h['worker']}, keep-alive on "
        f"(timeout {h['keep_alive_timeout']:g} s, at most {h['keep_alive_max_requests']} requests per "
        f"connection), h11_max_incomplete_size {h['h11_max_incomplete_size']}, backlog {h['backlog']}, "
        "access log off"
    )
    print(f"peers: official SDK {s.get('sdk_version')} on uvicorn; TypeScript SDK {s.get('ts_sdk_version')}")
    print(load_line(doc["rounds"]))
    print()
    print(
        median_table(
            doc["summary"]["medians"], (("impl", "server"), ("era", "era"), ("concurrency", "callers"))
        )
    )
    rss = {m["impl"]: m["peak_rss_mb"] for m in doc["summary"]["medians"] if m.get("peak_rss_mb")}
    print("server peak RSS MB: " + ", ".join(f"{k} {fmt_spread(v, 1)}" for k, v in rss.items()))
    print()
    print("ratios (calls_per_s: > 1 serves more; server_cpu_us: > 1 spends more per call):")
    print(ratio_table(doc["summary"]["ratios"], [r["round"] for r in doc["rounds"]], "era callers"))
    print(
        "issue 11's targets, for context: "
        + ", ".join(
            f"{k} {'≥' if 'calls' in k else '≤'} {v:.2f}" for k, v in doc["summary"]["targets"].items()
        )
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, [t.name for t in TARGETS_ALL], SECONDS)
    parser.add_argument(
        "--warmup", type=float, default=None, help="warm-up per row (default min(0.5, seconds/2))"
    )
    parser.add_argument("--concurrency", type=int, default=64, help="calls in flight in the concurrent rows")
    parser.add_argument("--connections", type=int, default=64, help="the driver's keep-alive connections")
    parser.add_argument("--handshake-only", action="store_true", help="skip the 2026-07-28 rows")
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.connections < 1:
        parser.error("--concurrency and --connections must be >= 1")
    if args.warmup is None:
        args.warmup = default_warmup(args.seconds)
    resolve_common(parser, args, {t.name: t for t in TARGETS_ALL})
    args.eras = (HANDSHAKE,) if args.handshake_only else (HANDSHAKE, MODERN)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    needs_sdk = any(t.sdk_venv for t in args.targets)
    if missing := missing_parts(args.node, Path(args.sdk_python) if needs_sdk else None):
        print(
            "bench_http_neutral: missing "
            + ", ".join(missing)
            + "\n  install them with:  bash scripts/setup-interop",
            file=sys.stderr,
        )
        return 2
    settings: dict[str, Any] = {
        "rounds": args.rounds,
        "seconds": args.seconds,
        "warmup": args.warmup,
        "concurrency": args.concurrency,
        "connections": args.connections,
        "node_version": node_version(args.node),
        "undici": npm_version("undici"),
        "ts_sdk_version": npm_version("@modelcontextprotocol/sdk"),
        "hypercorn": hypercorn_settings(),
    }
    if any(t.sdk_venv for t in args.targets):
        settings["sdk_version"] = sdk_version(args.sdk_python)
    rows: list[dict[str, Any]] = []

    def run(target: Target, round_no: int) -> None:
        rows.extend(run_target(target, round_no, args))

    rounds, failure = run_rounds(args.rounds, args.targets, lambda t: t.name, run, "bench_http_neutral")
    doc = {
        "bench": BENCH,
        "settings": settings,
        "rounds": rounds,
        "rows": rows,
        "summary": summarize(rows),
    }
    return emit(doc, args.json, print_report, failure)


if __name__ == "__main__":
    sys.exit(main())
