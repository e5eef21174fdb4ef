"""What the ASGI app alone costs per ``tools/call``, without hypercorn: our
Streamable HTTP app against the floor's do-nothing app and a *minimal MCP*
app (the least an MCP server must do per request).

    .venv/bin/python benchmarks/bench_http_asgi.py
    .venv/bin/python benchmarks/bench_http_asgi.py --calls 5000 --repeats 7
    .venv/bin/python benchmarks/bench_http_asgi.py --callgrind       # instructions per call (valgrind)
    .venv/bin/python benchmarks/bench_http_asgi.py --profile trio-mcp:handshake --top 40

Each app is called directly with the ASGI ``scope`` a hypercorn request
would carry (the Node driver's headers, see ``count_http_calls.py``) and a
``receive`` / ``send`` pair that do no I/O (``receive`` hands over the whole
body in one ``http.request``; ``send`` keeps the last message), one request
after the other in one trio run. The apps:

* ``floor``: ``servers/floor_http_server.py``'s app (reads the body, two
  sends of a fixed answer);
* ``minimal``: reads the body, decodes it as a JSON-RPC request (msgspec,
  to a Struct), checks ``Content-Type``, takes ``text`` out of the echo
  tool's arguments, encodes the answer with its id and sends it (headers,
  then the body): what no MCP server over ASGI can skip;
* ``trio-mcp``: :class:`~trio_mcp.serving.http.StreamableHttpApp` with JSON
  answers, the same echo tool as ``servers/trio_http_server.py``
  (``handshake``: in a session made with ``initialize`` first;
  ``2026-07-28``: stateless);
* ``trio-mcp sse``: the same answering SSE streams.

Per request: the CPU time (``time.process_time``, the best of
``--repeats`` windows of ``--calls`` requests, the apps interleaved), or with
``--callgrind`` the instructions (this script rerun under ``valgrind
--tool=callgrind`` with collection toggled on for the measured window
only). Add hypercorn's own per-request cost (the floor's row of
``count_http_calls.py --callgrind`` less its app) to compare with the
neutral benchmark.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _procs import text_table
from _report import load_average
from count_http_calls import (
    FLOOR,
    FLOOR_SESSION_ID,
    HANDSHAKE,
    HANDSHAKE_VERSION,
    MODERN,
    OURS,
    OURS_SSE,
    PAYLOAD,
    _echo_app,
    _floor_app,
)

MINIMAL = "minimal"
APPS = (FLOOR, MINIMAL, OURS, OURS_SSE)
ERAS = (HANDSHAKE, MODERN)

Message = dict[str, Any]


def _headers(extra: dict[str, str], length: int) -> list[tuple[bytes, bytes]]:
    base = {
        "host": "127.0.0.1:8000",
        "content-length": str(length),
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        **extra,
    }
    return [(k.encode(), v.encode()) for k, v in base.items()]


def _call_body(era: str, ident: int) -> bytes:
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": PAYLOAD}}
    if era == MODERN:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "bench-http-asgi", "version": "1.0"},
        }
    doc = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}
    return json.dumps(doc, separators=(",", ":")).encode()


class Wire:
    """One request's ``receive`` and ``send``, no I/O. As hypercorn's trio
    worker does, ``receive`` is a trio memory channel's, in which the body
    waits (one ``http.request`` with the bytes and ``more_body``, then an
    empty one that ends it)."""

    __slots__ = ("receive", "sent", "status")

    def __init__(self, body: bytes) -> None:
        import trio

        put, self.receive = trio.open_memory_channel[Message](10)
        put.send_nowait({"type": "http.request", "body": body, "more_body": True})
        put.send_nowait({"type": "http.request", "body": b"", "more_body": False})
        self.status = 0
        self.sent: list[bytes] = []

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            for name, value in message.get("headers", ()):
                if name == b"mcp-session-id":
                    self.sent.append(value)
        elif message.get("body"):
            self.sent.append(message["body"])


def _scope(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
        "extensions": {},
    }


class _Args(msgspec.Struct):
    text: str


class _Params(msgspec.Struct):
    name: str
    arguments: _Args


class _Call(msgspec.Struct):
    jsonrpc: str
    id: int | str
    method: str
    params: _Params


class _Text(msgspec.Struct):
    text: str
    type: str = "text"


class _Result(msgspec.Struct):
    content: list[_Text]


class _Answer(msgspec.Struct):
    id: int | str
    result: _Result
    jsonrpc: str = "2.0"


def _minimal_app() -> Callable[..., Awaitable[None]]:
    decoder = msgspec.json.Decoder(_Call)
    encoder = msgspec.json.Encoder()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        ctype = next((v for k, v in scope["headers"] if k == b"content-type"), b"")
        if ctype != b"application/json":
            raise RuntimeError("bad content-type")
        message = await receive()
        body = message["body"]
        while message.get("more_body", False):
            message = await receive()
            body += message["body"]
        call = decoder.decode(body)
        answer = encoder.encode(_Answer(call.id, _Result([_Text(call.params.arguments.text)])))
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


class Target:
    """One app and era: ``call(ident)`` serves one ``tools/call``."""

    def __init__(self, name: str, era: str, app: Any, extra: dict[str, str]) -> None:
        self.name = name
        self.era = era
        self.app = app
        self.extra = extra

    async def call(self, ident: int) -> None:
        body = _call_body(self.era, ident)
        wire = Wire(body)
        await self.app(_scope(_headers(self.extra, len(body))), wire.receive.receive, wire.send)
        if wire.status != 200 or not wire.sent or b'"result"' not in wire.sent[-1]:
            raise RuntimeError(f"{self.name} {self.era}: HTTP {wire.status} {wire.sent!r}")


async def _initialize(app: Any) -> str:
    init = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "bench-http-asgi", "version": "1.0"},
            },
        }
    ).encode()
    wire = Wire(init)
    await app(_scope(_headers({}, len(init))), wire.receive.receive, wire.send)
    session_id = wire.sent[0].decode()
    note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    extra = {"mcp-session-id": session_id, "mcp-protocol-version": HANDSHAKE_VERSION}
    wire = Wire(note)
    await app(_scope(_headers(extra, len(note))), wire.receive.receive, wire.send)
    if wire.status != 202:
        raise RuntimeError(f"notifications/initialized: HTTP {wire.status}")
    return session_id


async def make_targets(nursery: Any, apps: list[str], eras: list[str]) -> list[Target]:
    from trio_mcp.serving.http import StreamableHttpApp

    modern = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"}
    floor_session = {"mcp-session-id": FLOOR_SESSION_ID}
    floor_session["mcp-protocol-version"] = HANDSHAKE_VERSION
    targets = []
    for name in apps:
        for era in eras:
            if name in (FLOOR, MINIMAL):
                app = _floor_app() if name == FLOOR else _minimal_app()
                targets.append(Target(name, era, app, modern if era == MODERN else floor_session))
                continue
            ours = StreamableHttpApp(_echo_app(), json_response=name == OURS)
            await nursery.start(ours.run)
            if era == MODERN:
                targets.append(Target(name, era, ours, modern))
            else:
                session_id = await _initialize(ours)
                extra = {"mcp-session-id": session_id, "mcp-protocol-version": HANDSHAKE_VERSION}
                targets.append(Target(name, era, ours, extra))
    return targets


def measure(apps: list[str], eras: list[str], calls: int, repeats: int) -> dict[tuple[str, str], float]:
    """CPU µs per call, best of ``repeats`` windows, the targets interleaved."""
    import trio

    best: dict[tuple[str, str], float] = {}

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            targets = await make_targets(nursery, apps, eras)
            ident = 1
            for target in targets:  # warm-up
                for _ in range(max(50, calls // 10)):
                    await target.call(ident)
                    ident += 1
            for _ in range(repeats):
                for target in targets:
                    start = time.process_time()
                    for _ in range(calls):
                        await target.call(ident)
                        ident += 1
                    spent = (time.process_time() - start) / calls * 1e6
                    key = (target.name, target.era)
                    best[key] = min(best.get(key, spent), spent)
            nursery.cancel_scope.cancel()

    trio.run(main)
    return best


def _toggle(on: bool) -> None:
    """Zero / dump callgrind's counters of this process (no-op outside valgrind)."""
    if os.environ.get("BENCH_HTTP_ASGI_CALLGRIND"):
        option = "--zero" if on else "--dump"
        subprocess.run(["callgrind_control", option, str(os.getpid())], check=True, capture_output=True)


def instructions_child(app: str, era: str, calls: int) -> None:
    """Under valgrind: warm up, zero the counters, ``calls`` calls, dump."""
    import trio

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            (target,) = await make_targets(nursery, [app], [era])
            for ident in range(1, 101):
                await target.call(ident)
            await trio.to_thread.run_sync(_toggle, True)
            for ident in range(101, 101 + calls):
                await target.call(ident)
            await trio.to_thread.run_sync(_toggle, False)
            nursery.cancel_scope.cancel()

    trio.run(main)


def instructions(apps: list[str], eras: list[str], calls: int) -> dict[tuple[str, str], float]:
    out = {}
    for app in apps:
        for era in eras:
            with tempfile.TemporaryDirectory() as tmp:
                cmd = [
                    "valgrind",
                    "--tool=callgrind",
                    "-q",
                    f"--callgrind-out-file={tmp}/out.%p",
                    sys.executable,
                    __file__,
                    "--child",
                    f"{app}:{era}",
                    "--calls",
                    str(calls),
                ]
                env = {**os.environ, "BENCH_HTTP_ASGI_CALLGRIND": "1"}
                subprocess.run(cmd, check=True, env=env, timeout=1800)
                # The dump of the measured window is the one with the fewest instructions
                # bar the end-of-run one, which holds the shutdown: take the first dump.
                dumps = sorted(Path(tmp).iterdir(), key=lambda p: p.stat().st_mtime)
                out[(app, era)] = _totals(dumps[0]) / calls
    return out


def _totals(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def profile(app: str, era: str, calls: int, top: int) -> None:
    import trio

    profiler = cProfile.Profile()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            (target,) = await make_targets(nursery, [app], [era])
            for ident in range(1, 201):
                await target.call(ident)
            profiler.enable()
            for ident in range(201, 201 + calls):
                await target.call(ident)
            profiler.disable()
            nursery.cancel_scope.cancel()

    trio.run(main)
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    print(f"{app} {era}: {stats.total_calls / calls:.1f} Python calls per call")  # type: ignore[attr-defined]
    for key, value in sorted(raw.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{value[1] / calls:8.2f}  {value[2] / calls * 1e6:7.2f} µs  {pstats.func_std_string(key)}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", default=",".join(APPS), help="comma-separated (default: %(default)s)")
    parser.add_argument("--eras", default=",".join(ERAS), help="comma-separated (default: %(default)s)")
    parser.add_argument("--calls", type=int, default=3000, help="calls per window (default 3000)")
    parser.add_argument("--repeats", type=int, default=5, help="windows per target, the best kept (5)")
    parser.add_argument("--callgrind", action="store_true", help="instructions per call under valgrind")
    parser.add_argument("--profile", metavar="APP:ERA", help="cProfile one target, print the top functions")
    parser.add_argument("--top", type=int, default=40, help="with --profile: functions printed (40)")
    parser.add_argument("--child", metavar="APP:ERA", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.child:
        app, _, era = args.child.partition(":")
        instructions_child(app, era, args.calls)
        return 0
    if args.profile:
        app, _, era = args.profile.partition(":")
        profile(app, era, args.calls, args.top)
        return 0
    apps = [a.strip() for a in args.apps.split(",") if a.strip()]
    eras = [e.strip() for e in args.eras.split(",") if e.strip()]
    load_before = load_average()
    if args.callgrind:
        figures = instructions(apps, eras, args.calls)
        unit = "instructions per call"
    else:
        figures = measure(apps, eras, args.calls, args.repeats)
        unit = "CPU µs per call (best window)"
    load_after = load_average()
    doc = {
        "unit": unit,
        "calls": args.calls,
        "load": [load_before, load_after],
        "rows": [{"app": a, "era": e, "value": v} for (a, e), v in figures.items()],
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(
        f"ASGI app alone, {unit}; {args.calls} calls per window; load average {load_before} -> {load_after}"
    )
    rows = []
    for (app, era), value in figures.items():
        floor = figures.get((FLOOR, era))
        over = "" if floor is None or app == FLOOR else f"{value - floor:,.1f}"
        rows.append([app, era, f"{value:,.1f}", over])
    print(text_table(["app", "era", "per call", "over the floor app"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
