"""Streamable HTTP ``tools/call`` throughput and latency: trio-mcp vs the official Python SDK.

    .venv/bin/python benchmarks/bench_http.py                   # 3 s per row
    .venv/bin/python benchmarks/bench_http.py --seconds 10
    .venv/bin/python benchmarks/bench_http.py --ours-only       # no SDK needed (ours + floor)
    .venv/bin/python benchmarks/bench_http.py --no-sse          # JSON-response rows only
    .venv/bin/python benchmarks/bench_http.py --no-floor        # no hypercorn+httpx floor rows
    .venv/bin/python benchmarks/bench_http.py --handshake-only  # no 2026-07-28 rows
    .venv/bin/python benchmarks/bench_http.py --profile-server /tmp/prof   # cProfile our server

Both servers (``benchmarks/servers/``) serve one tool, ``async def echo(text:
str) -> str`` with ``structured_output=False``, over Streamable HTTP on
127.0.0.1, each in its own process on a port chosen at run time:
``trio_http_server.py`` (project venv; ``trio_mcp.serving.http.HttpServer``,
hypercorn's trio worker) and ``sdk_http_server.py`` (``.cache/sdk-venv``, made
by ``bash scripts/setup-interop``; ``MCPServer.streamable_http_app`` on
uvicorn, as ``MCPServer.run("streamable-http")`` serves it). The clients:
trio-mcp's ``StreamableHttpTransport`` + ``open_session`` (``era="handshake"``)
in this process, and the SDK's ``mcp.Client(url, mode="legacy")``, run by
``benchmarks/sdk_http_client.py`` in the SDK venv (in the ``2026-07-28``
rows: ``era="modern"`` and ``mode="auto"``). Every client uses its HTTP
library's default connection pool.

Measured one row after another, never two at a time (the client and the
server each get about one core of a two-core machine): back-to-back
``tools/call`` round trips by one caller (``seq``) and by ``--concurrency``
callers in flight (``c64``), each row for ``--seconds`` after a warm-up, for
these client->server pairings:

* ``json`` (the headline: both servers answer POSTs with
  ``application/json``, trio-mcp ``json_response=True``, SDK
  ``json_response=True``): trio-mcp->trio-mcp, mcp-sdk->mcp-sdk, and the
  cross pairings mcp-sdk->trio-mcp and trio-mcp->mcp-sdk, which separate
  server speed from client speed;
* ``2026-07-28`` (the same JSON-response servers, the stateless protocol
  after a ``server/discover`` probe: trio-mcp ``era="modern"``, SDK
  ``mode="auto"``, its default): trio-mcp->trio-mcp and mcp-sdk->mcp-sdk
  (skip with ``--handshake-only``); the SDK's rows are skipped with a note
  if they fail;
* ``floor``: httpx->hypercorn, the mandated HTTP stack doing no MCP work:
  ``servers/floor_http_server.py`` (project venv; hypercorn's trio worker
  configured as ``HttpServer`` configures it) serves a do-nothing ASGI app
  that reads the body and answers a fixed ``tools/call`` result, and a plain
  ``httpx.AsyncClient`` (our transport's timeouts, httpx's default pool) in
  this process POSTs a fixed ``tools/call`` body with the MCP headers and
  reads the answer (skip with ``--no-floor``). Its calls/s over the SDK's
  (``ceiling_ratios``) is what an MCP layer costing nothing would reach on
  hypercorn+httpx;
* ``sse`` (``json_response=False`` on both: every answer is an SSE stream):
  trio-mcp->trio-mcp and mcp-sdk->mcp-sdk (skip with ``--no-sse``).

Each row also gives the CPU time per call of the client process and of the
server process over the measured window (``/proc/<pid>/task/*/schedstat``,
Linux): with the two on separate cores, ``c64`` throughput is bounded by the
busier one. Output: a table, the trio-mcp/SDK ratios (``ratios``: own pairing
over own pairing; ``ratios_vs_2026``: the same in the 2026-07-28 era;
``server_ratios`` / ``client_ratios`` from the cross pairings;
``ceiling_ratios``: floor over SDK), the 1-minute load average
before and after, then one JSON line per row and a JSON summary line
(``"summary": true``).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _procs import UrlServer
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
    sdk_env,
)

BENCH = "http"
OURS = "trio-mcp"
SDK = "mcp-sdk"
#: The floor: a plain httpx client and hypercorn serving a do-nothing app.
HTTPX = "httpx"
HYPERCORN = "hypercorn"
JSON = "json"
SSE = "sse"
FLOOR = "floor"
#: The stateless protocol era (JSON responses), labelled as in bench_stdio.
MODERN = "2026-07-28"
SDK_PYTHON = ROOT / ".cache" / "sdk-venv" / "bin" / "python"
SERVER_SCRIPTS = {
    OURS: HERE / "servers" / "trio_http_server.py",
    SDK: HERE / "servers" / "sdk_http_server.py",
    HYPERCORN: HERE / "servers" / "floor_http_server.py",
}
#: (client, server, mode), in the order they run. The SDK's 2026-07-28 rows
#: are reported if they work (skipped with a note otherwise).
PAIRINGS = [
    (OURS, OURS, JSON),
    (SDK, SDK, JSON),
    (SDK, OURS, JSON),
    (OURS, SDK, JSON),
    (OURS, OURS, MODERN),
    (SDK, SDK, MODERN),
    (HTTPX, HYPERCORN, FLOOR),
    (OURS, OURS, SSE),
    (SDK, SDK, SSE),
]
#: The issue's targets (trio-mcp->trio-mcp over mcp-sdk->mcp-sdk, JSON
#: responses), printed for context only (never asserted).
TARGETS = {"seq": 3.0, "c64": 5.0}
SERVER_START_TIMEOUT = 30.0
#: Sent by the floor client as ``Mcp-Session-Id`` (as long as our server's).
FLOOR_SESSION_ID = "benchmark-floor-session-00000000"


def progress(message: str) -> None:
    print(f"[bench_http] {message} ...", file=sys.stderr, flush=True)


def per_call_us(ns: int | None, calls: int) -> float | None:
    return None if ns is None or not calls else round(ns / calls / 1e3, 1)


# ------------------------------------------------------------------ servers


class ServerProcess(UrlServer):
    """A server process: started, its URL read from its stdout, stopped (its
    stdin closed, SIGTERM, and SIGKILL if it lingers)."""

    def __init__(self, impl: str, mode: str, args: argparse.Namespace, profile: Path | None = None) -> None:
        self.impl = impl
        python = str(args.sdk_python) if impl == SDK else sys.executable
        cmd = [python, str(SERVER_SCRIPTS[impl])]
        if mode == SSE:
            cmd.append("--sse")
        if profile is not None:
            cmd += ["--profile", str(profile)]
        super().__init__(impl, cmd, sdk_env() if impl == SDK else None)


# ------------------------------------------- clients in this process (trio)


async def measure_rows(
    call: Callable[[], Awaitable[Any]],
    client: str,
    server: ServerProcess,
    mode: str,
    args: argparse.Namespace,
    **extra: Any,
) -> list[dict[str, Any]]:
    """The ``seq`` and concurrent rows of ``call()`` from this process, with
    the CPU time per call of this process and of the server's."""
    import trio

    async def sample_cpu(out: dict[str, int | None]) -> None:
        await trio.sleep(args.warmup)
        client0, server0 = time.process_time_ns(), cpu_ns(server.pid)
        await trio.sleep(args.seconds)
        client1, server1 = time.process_time_ns(), cpu_ns(server.pid)
        out["client"] = client1 - client0
        out["server"] = None if server0 is None or server1 is None else server1 - server0

    rows: list[dict[str, Any]] = []
    for concurrency in (1, args.concurrency):
        cpu: dict[str, int | None] = {}
        async with trio.open_nursery() as sampler:
            sampler.start_soon(sample_cpu, cpu)
            latencies = await measure(
                call,
                concurrency=concurrency,
                warmup=args.warmup,
                seconds=args.seconds,
                open_group=trio.open_nursery,
            )
        rows.append(
            make_row(
                pair_name(client, server.impl),
                mode,
                concurrency,
                latencies,
                args.seconds,
                bench=BENCH,
                kind="calls",
                client=client,
                server=server.impl,
                **extra,
                client_cpu_us=per_call_us(cpu.get("client"), len(latencies)),
                server_cpu_us=per_call_us(cpu.get("server"), len(latencies)),
            )
        )
    return rows


def run_our_client(server: ServerProcess, mode: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    import trio

    from trio_mcp.actors._client import open_session
    from trio_mcp.transports.http import StreamableHttpTransport

    rows: list[dict[str, Any]] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(StreamableHttpTransport(server.url).run)
            async with open_session(stream, era="modern" if mode == MODERN else "handshake") as session:

                async def call() -> None:
                    await session.call_tool("echo", {"text": PAYLOAD})

                check = await session.call_tool("echo", {"text": PAYLOAD})
                if check.is_error or check.content[0].text != PAYLOAD:
                    raise RuntimeError(f"unexpected echo result: {check!r}")
                rows.extend(
                    await measure_rows(call, OURS, server, mode, args, protocol=session.protocol_version)
                )
            nursery.cancel_scope.cancel()

    trio.run(main)
    return rows


def run_floor_client(server: ServerProcess, mode: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """A plain ``httpx.AsyncClient`` (our transport's timeouts, httpx's
    default pool) POSTing one fixed ``tools/call`` body, with the headers
    our client sends within a session, and reading each answer whole: the
    HTTP work of a call and nothing else."""
    import httpx
    import trio

    from trio_mcp.protocol import LATEST_HANDSHAKE_VERSION
    from trio_mcp.transports.http import HttpClientSettings

    settings = HttpClientSettings()
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": PAYLOAD}},
        },
        separators=(",", ":"),
    ).encode()
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-session-id": FLOOR_SESSION_ID,
        "mcp-protocol-version": LATEST_HANDSHAKE_VERSION,
    }
    rows: list[dict[str, Any]] = []

    async def main() -> None:
        timeout = httpx.Timeout(settings.post_timeout, connect=settings.connect_timeout)
        async with httpx.AsyncClient(timeout=timeout) as client:

            async def call() -> None:
                response = await client.post(server.url, content=body, headers=headers)
                if response.status_code != 200:
                    raise RuntimeError(f"the floor server answered HTTP {response.status_code}")

            check = await client.post(server.url, content=body, headers=headers)
            if check.status_code != 200 or "result" not in check.json():
                raise RuntimeError(
                    f"unexpected answer from the floor server: {check.status_code} {check.text!r}"
                )
            rows.extend(await measure_rows(call, HTTPX, server, mode, args))

    trio.run(main)
    return rows


# ----------------------------------------------------------------- SDK client


def run_sdk_client(server: ServerProcess, mode: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    cmd = [
        str(args.sdk_python),
        str(HERE / "sdk_http_client.py"),
        "--url",
        server.url,
        "--server-impl",
        server.impl,
        "--server-pid",
        str(server.pid),
        "--mode",
        "auto" if mode == MODERN else "legacy",
        "--label",
        mode,
        "--seconds",
        repr(args.seconds),
        "--warmup",
        repr(args.warmup),
        "--concurrency",
        str(args.concurrency),
    ]
    budget = 2 * (args.warmup + args.seconds) + 60
    proc = subprocess.Popen(cmd, cwd=ROOT, env=sdk_env(), stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=budget)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    if proc.returncode != 0:
        raise RuntimeError(
            f"the SDK client ({server.impl} server, {mode}) exited with status {proc.returncode}"
        )
    rows = [o for o in parse_json_lines(out) if o.get("bench") == BENCH and o.get("kind") == "calls"]
    if len(rows) != 2:
        raise RuntimeError(f"the SDK client ({server.impl} server, {mode}) printed {len(rows)} rows, not 2")
    return rows


def run_pairing(client: str, server_impl: str, mode: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    profile = None
    if args.profile_server is not None and server_impl == OURS:
        args.profile_server.mkdir(parents=True, exist_ok=True)
        profile = args.profile_server / f"trio-http-server-{mode}-{client}-client.prof"
    progress(f"{pair_name(client, server_impl)} {mode}: starting the {server_impl} server")
    server = ServerProcess(server_impl, mode, args, profile)
    try:
        progress(f"{pair_name(client, server_impl)} {mode}: {server.url}, seq and {label(args.concurrency)}")
        run_client = {OURS: run_our_client, SDK: run_sdk_client, HTTPX: run_floor_client}[client]
        rows = run_client(server, mode, args)
    finally:
        status = server.stop()
    if status not in (0, None, -signal.SIGTERM):
        progress(f"note: the {server_impl} server exited with status {status}")
    if profile is not None:
        progress(f"server profile written to {profile}")
    for row in rows:
        protocol = row.get("protocol")
        if mode != FLOOR and (protocol is None or (mode == MODERN) != (protocol == MODERN)):
            raise RuntimeError(f"{row['impl']} {mode}: unexpected protocol {protocol!r}")
    return rows


# -------------------------------------------------------------------- report


def summarize(rows: list[dict[str, Any]], args: argparse.Namespace, loads: tuple[Any, Any]) -> dict[str, Any]:
    cs = (1, args.concurrency)
    summary: dict[str, Any] = {
        "bench": BENCH,
        "summary": True,
        "seconds": args.seconds,
        "warmup": args.warmup,
        "concurrency": args.concurrency,
    }
    own, sdk = (OURS, OURS, JSON), (SDK, SDK, JSON)
    summary["baseline"] = f"{SDK}->{SDK} json"
    summary["ratios"] = call_ratios(rows, own, sdk, cs)
    summary["p50_ratios"] = call_ratios(rows, own, sdk, cs, "p50_us")
    if modern := call_ratios(rows, (OURS, OURS, MODERN), (SDK, SDK, MODERN), cs):
        summary["ratios_vs_2026"] = modern
    if sse := call_ratios(rows, (OURS, OURS, SSE), (SDK, SDK, SSE), cs):
        summary["sse_ratios"] = sse
        summary["sse_p50_ratios"] = call_ratios(rows, (OURS, OURS, SSE), (SDK, SDK, SSE), cs, "p50_us")
    # one side swapped, the other held: what the server (resp. client) alone is worth
    summary["server_ratios"] = {
        f"{SDK} client {k}": v for k, v in call_ratios(rows, (SDK, OURS, JSON), sdk, cs).items()
    } | {f"{OURS} client {k}": v for k, v in call_ratios(rows, own, (OURS, SDK, JSON), cs).items()}
    summary["client_ratios"] = {
        f"{SDK} server {k}": v for k, v in call_ratios(rows, (OURS, SDK, JSON), sdk, cs).items()
    } | {f"{OURS} server {k}": v for k, v in call_ratios(rows, own, (SDK, OURS, JSON), cs).items()}
    # the floor over the SDK: what an MCP layer costing nothing would reach
    if ceiling := call_ratios(rows, (HTTPX, HYPERCORN, FLOOR), sdk, cs):
        summary["ceiling_ratios"] = ceiling
    # CPU time per call, SDK over trio-mcp (> 1: trio-mcp spends less), own
    # pairings: less sensitive than calls/s to other work on the machine
    cpu: dict[str, float] = {}
    for side in ("client", "server"):
        for c in cs:
            a = find(rows, client=OURS, server=OURS, mode=JSON, concurrency=c)
            b = find(rows, client=SDK, server=SDK, mode=JSON, concurrency=c)
            key = f"{side}_cpu_us"
            if a and b and a.get(key) and b.get(key):
                cpu[f"{side} {label(c)}"] = round(b[key] / a[key], 2)
    if cpu:
        summary["cpu_ratios"] = cpu
    versions = {r["sdk_version"] for r in rows if r.get("sdk_version")}
    if versions:
        summary["sdk_version"] = ", ".join(sorted(versions))
    summary["load_before"], summary["load_after"] = loads
    summary["targets"] = TARGETS
    return summary


def fmt_cpu(value: Any) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def calls_table(rows: list[dict[str, Any]]) -> str:
    header = (
        "client->server",
        "mode",
        "callers",
        "calls/s",
        "mean µs",
        "p50 µs",
        "p99 µs",
        "calls",
        "client CPU µs/call",
        "server CPU µs/call",
    )
    body = [
        (
            r["impl"],
            r["mode"],
            str(r["concurrency"]),
            f"{r['calls_per_s']:,.0f}",
            f"{r['mean_us']:,.1f}",
            f"{r['p50_us']:,.1f}",
            f"{r['p99_us']:,.1f}",
            f"{r['calls']:,}",
            fmt_cpu(r.get("client_cpu_us")),
            fmt_cpu(r.get("server_cpu_us")),
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *(fmt(b) for b in body)])


def print_report(rows: list[dict[str, Any]], summary: dict[str, Any], args: argparse.Namespace) -> None:
    print()
    print(
        f"Streamable HTTP tools/call, echo tool, {args.seconds:g} s per row after {args.warmup:g} s warm-up "
        f"(client->server; json = JSON responses, 2026-07-28 = JSON responses in the stateless era, "
        "sse = SSE responses, floor = hypercorn+httpx doing no MCP work)"
    )
    print(calls_table(rows))
    print(
        f"1-minute load average: {summary['load_before']} before, {summary['load_after']} after "
        "(other work on the machine skews every figure)"
    )
    if not summary["ratios"]:
        return
    print()
    print(
        f"trio-mcp / official SDK {summary.get('sdk_version', '')} calls/s, JSON responses "
        "(issue targets, for context only):"
    )
    c = label(args.concurrency)
    for key, target in (("seq", TARGETS["seq"]), (c, TARGETS["c64"] if args.concurrency == 64 else None)):
        value = summary["ratios"].get(key)
        if value is None:
            continue
        p50 = summary["p50_ratios"].get(key)
        modern = summary.get("ratios_vs_2026", {}).get(key)
        era = f", 2026-07-28 {modern:5.2f}×" if modern is not None else ""
        goal = f"   (target ≥ {target:g}×)" if target is not None else ""
        print(f"  {key + ':':5} {value:5.2f}×  (p50 latency {p50:.2f}×){era}{goal}")
    if ceiling := summary.get("ceiling_ratios"):
        print(
            "  ceiling, httpx->hypercorn floor / SDK: "
            + ", ".join(f"{k} {v:.2f}×" for k, v in ceiling.items())
        )
        print("    (the most an MCP layer costing nothing could reach over the SDK on hypercorn+httpx)")
    for name, title in (
        ("sse_ratios", "SSE responses"),
        ("server_ratios", "server only (client held)"),
        ("client_ratios", "client only (server held)"),
        ("cpu_ratios", "CPU per call, SDK / trio-mcp (> 1: trio-mcp spends less)"),
    ):
        values = summary.get(name)
        if values:
            print(f"  {title}: " + ", ".join(f"{k} {v:.2f}×" for k, v in values.items()))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measured duration per row (default 3)")
    parser.add_argument(
        "--warmup", type=float, default=None, help="warm-up before each row (default: min(0.5, seconds/2))"
    )
    parser.add_argument(
        "--concurrency", type=int, default=64, help="callers in flight in the concurrent rows"
    )
    parser.add_argument(
        "--ours-only", action="store_true", help="only trio-mcp->trio-mcp and the floor (no SDK needed)"
    )
    parser.add_argument("--no-sse", action="store_true", help="skip the SSE-response rows")
    parser.add_argument("--no-floor", action="store_true", help="skip the httpx->hypercorn floor rows")
    parser.add_argument("--handshake-only", action="store_true", help="skip the 2026-07-28 rows")
    parser.add_argument(
        "--sdk-python",
        type=Path,
        default=SDK_PYTHON,
        help="python of the venv holding the official SDK (default .cache/sdk-venv)",
    )
    parser.add_argument(
        "--profile-server",
        type=Path,
        default=None,
        metavar="DIR",
        help="run trio-mcp's server under cProfile; write the stats into DIR",
    )
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.concurrency < 1:
        parser.error("--seconds must be > 0 and --concurrency >= 1")
    if args.warmup is None:
        args.warmup = default_warmup(args.seconds)
    return args


def selected_pairings(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    skipped = {
        m for m, skip in ((SSE, args.no_sse), (FLOOR, args.no_floor), (MODERN, args.handshake_only)) if skip
    }
    pairings = [p for p in PAIRINGS if p[2] not in skipped]
    if args.ours_only:
        pairings = [p for p in pairings if p[0] == p[1] == OURS or p[2] == FLOOR]
    return pairings


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.ours_only and not Path(args.sdk_python).exists():
        print(
            f"bench_http: the official SDK venv is missing ({args.sdk_python} not found).\n"
            "  create it with:  bash scripts/setup-interop\n"
            "  or run only trio-mcp:  --ours-only",
            file=sys.stderr,
        )
        return 2
    pairings = selected_pairings(args)
    load_before = load_average()
    rows: list[dict[str, Any]] = []
    failure = None
    for client, server, mode in pairings:
        try:
            rows += run_pairing(client, server, mode, args)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
            if client == SDK and mode == MODERN:  # optional: report, keep going
                print(
                    f"bench_http: {pair_name(client, server)} {mode} failed (optional rows skipped): {exc}",
                    file=sys.stderr,
                )
                continue
            failure = f"{pair_name(client, server)} {mode}: {exc}"
            break
    summary = summarize(rows, args, (load_before, load_average()))
    print_report(rows, summary, args)
    print()
    for row in rows:
        json_line(row)
    json_line(summary)
    if failure is not None:
        print(f"bench_http: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
