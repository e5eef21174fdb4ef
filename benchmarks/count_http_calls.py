"""What one Streamable HTTP call costs our server and the hypercorn floor, in
counts a busy machine does not change.

    .venv/bin/python benchmarks/count_http_calls.py                  # every target, era and concurrency
    .venv/bin/python benchmarks/count_http_calls.py --calls 1000 --targets trio-mcp,floor
    .venv/bin/python benchmarks/count_http_calls.py --top 30 --targets trio-mcp --eras handshake --seq-only
    .venv/bin/python benchmarks/count_http_calls.py --callgrind       # + instructions per call (valgrind)
    .venv/bin/python benchmarks/count_http_calls.py --callgrind --cache-sim --seq-only  # + cache misses

The same servers as ``bench_http_neutral.py`` (``trio-mcp``: ``HttpServer``
with JSON answers; ``trio-mcp sse``: every answer an SSE stream; ``floor``:
hypercorn serving the do-nothing ASGI app of ``servers/floor_http_server.py``)
are driven with the same requests as its Node driver (``handshake``:
``initialize`` + ``notifications/initialized``, then ``tools/call`` with the
session id; the floor gets the same requests without the handshake;
``2026-07-28``: stateless ``tools/call`` with ``_meta`` and the mirrored
headers), by a raw HTTP/1.1 client over loopback (keep-alive, one connection
per caller), sequentially (``seq``) and with 64 in flight (``c64``).

In-process counts (the server runs on trio in the main thread, the client in
a thread of its own, whose work is not counted): after a warm-up, over
``--calls`` calls, the Python function calls (cProfile) of the trio thread,
the trio task steps and tasks spawned and the garbage collector's
collections by generation and their time (a trio instrument and
``gc.callbacks``, in a second window of as many calls), the most memory a
third window holds at once above what it started with (``tracemalloc``
peak), and the socket sends; each per call (collections per 1,000 calls). ``--top N`` prints the
N functions called most in the first row of each target.

``--callgrind`` also runs every target's server process (``servers/``, as the
neutral benchmark starts them) under ``valgrind --tool=callgrind`` and reports
the instructions it executes per call over ``--callgrind-calls`` calls after a
warm-up (``callgrind_control`` zeroes the counters before and dumps them
after; start-up runs uninstrumented): a figure that does not depend on the
load either, sequentially and with 64 in flight. ``--cache-sim`` adds
valgrind's cache and branch simulation: first-level and last-level cache
misses and mispredicted branches per call (much slower: use it with
``--seq-only``; under valgrind 64 callers can outlast hypercorn's keep-alive).

Prints a table and the ratios ours/floor; ``--json`` prints one JSON
document instead.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib.util
import json
import pstats
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _procs import UrlServer, text_table
from _report import label, load_average

OURS = "trio-mcp"
OURS_SSE = "trio-mcp sse"
FLOOR = "floor"
TARGETS = (OURS, OURS_SSE, FLOOR)
HANDSHAKE = "handshake"
MODERN = "2026-07-28"
HANDSHAKE_VERSION = "2025-11-25"
PAYLOAD = "hello, benchmark"
FLOOR_SESSION_ID = "benchmark-floor-session-00000000"
PATH = "/mcp"
IO_TIMEOUT = 30.0
#: Calls per connection before the client opens a new one (hypercorn closes
#: a connection after its 1,000th request).
PER_CONNECTION = 500
CALLGRIND_TIMEOUT = 600.0
#: A server's start-up under valgrind (imports included) is 30-100 times slower.
CALLGRIND_START_TIMEOUT = 600.0


# ------------------------------------------------------------------ client


@dataclass
class Shape:
    """The headers and body of one era's ``tools/call`` (the id spliced in)."""

    headers: dict[str, str]
    tail: bytes

    def request(self, host: str, ident: int) -> bytes:
        body = b'{"jsonrpc":"2.0","id":%d%s' % (ident, self.tail)
        return _http_post(host, self.headers, body)


def _http_post(host: str, headers: dict[str, str], body: bytes) -> bytes:
    lines = [f"POST {PATH} HTTP/1.1", f"host: {host}", f"content-length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


BASE_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _call_params(era: str) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": PAYLOAD}}
    if era == MODERN:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "count-http-calls", "version": "1.0"},
        }
    return params


def _tail(era: str) -> bytes:
    return (
        b',"method":"tools/call","params":%s}' % json.dumps(_call_params(era), separators=(",", ":")).encode()
    )


class _Response:
    """An HTTP/1.1 response read incrementally (content-length or chunked)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""

    def feed(self, data: bytes) -> bool:
        """Add received bytes; True once the response is whole."""
        self.buffer += data
        if not self.status:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return False
            head, self.buffer = self.buffer[:end].decode("latin-1"), self.buffer[end + 4 :]
            status_line, *lines = head.split("\r\n")
            self.status = int(status_line.split()[1])
            for line in lines:
                name, _, value = line.partition(":")
                self.headers[name.strip().lower()] = value.strip()
        if "content-length" in self.headers:
            length = int(self.headers["content-length"])
            if len(self.buffer) < length:
                return False
            self.body = self.buffer[:length]
            return True
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            body, pos = b"", 0
            while True:
                eol = self.buffer.find(b"\r\n", pos)
                if eol < 0:
                    return False
                size = int(self.buffer[pos:eol].split(b";")[0], 16)
                if len(self.buffer) < eol + 2 + size + 2:
                    return False
                if size == 0:
                    self.body = body
                    return True
                body += self.buffer[eol + 2 : eol + 2 + size]
                pos = eol + 2 + size + 2
        return True  # no body


def exchange(sock: socket.socket, data: bytes) -> _Response:
    """Send one request on a blocking socket and read its response whole."""
    sock.sendall(data)
    response = _Response()
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the server closed the connection")
        if response.feed(chunk):
            return response


def prepare(addr: tuple[str, int], era: str, handshake: bool) -> Shape:
    """The request shape of ``era`` (the handshake era: after an ``initialize``
    and ``notifications/initialized`` when ``handshake``)."""
    headers = dict(BASE_HEADERS)
    if era == MODERN:
        headers.update({"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"})
        return Shape(headers, _tail(era))
    if not handshake:
        headers.update({"mcp-session-id": FLOOR_SESSION_ID, "mcp-protocol-version": HANDSHAKE_VERSION})
        return Shape(headers, _tail(era))
    host = f"{addr[0]}:{addr[1]}"
    init = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "count-http-calls", "version": "1.0"},
            },
        }
    ).encode()
    with socket.create_connection(addr, timeout=IO_TIMEOUT) as sock:
        answer = exchange(sock, _http_post(host, BASE_HEADERS, init))
        if answer.status != 200:
            raise RuntimeError(f"initialize: HTTP {answer.status} {answer.body!r}")
        headers["mcp-protocol-version"] = HANDSHAKE_VERSION
        headers["mcp-session-id"] = answer.headers["mcp-session-id"]
        note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        answer = exchange(sock, _http_post(host, headers, note))
        if answer.status not in (200, 202):
            raise RuntimeError(f"notifications/initialized: HTTP {answer.status}")
    return Shape(headers, _tail(era))


def drive(addr: tuple[str, int], shape: Shape, calls: int, concurrency: int, first_id: int) -> None:
    """``calls`` calls, ``concurrency`` in flight on as many keep-alive
    connections (each replaced after :data:`PER_CONNECTION` calls, below
    hypercorn's limit); each answer checked (HTTP 200 with a result)."""
    host = f"{addr[0]}:{addr[1]}"
    sent = done = 0
    ident = first_id
    pending: dict[socket.socket, tuple[_Response, int]] = {}

    def connect(selector: selectors.BaseSelector) -> None:
        nonlocal sent, ident
        sock = socket.create_connection(addr, timeout=IO_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        selector.register(sock, selectors.EVENT_READ)
        pending[sock] = (_Response(), 1)
        sock.sendall(shape.request(host, ident))
        ident += 1
        sent += 1

    try:
        with selectors.DefaultSelector() as selector:
            for _ in range(min(concurrency, calls)):
                connect(selector)
            deadline = time.monotonic() + IO_TIMEOUT
            while done < calls:
                events = selector.select(timeout=max(0.0, deadline - time.monotonic()))
                if not events:
                    raise RuntimeError(f"no answer within {IO_TIMEOUT:g} s")
                for key, _ in events:
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    chunk = sock.recv(65536)
                    if not chunk:
                        raise RuntimeError("the server closed a connection")
                    response, used = pending[sock]
                    if not response.feed(chunk):
                        continue
                    if response.status != 200 or b'"result"' not in response.body:
                        raise RuntimeError(f"tools/call: HTTP {response.status} {response.body!r}")
                    done += 1
                    deadline = time.monotonic() + IO_TIMEOUT
                    if used >= PER_CONNECTION or sent >= calls:
                        selector.unregister(sock)
                        del pending[sock]
                        sock.close()
                        if sent < calls:
                            connect(selector)
                        continue
                    pending[sock] = (_Response(), used + 1)
                    sock.sendall(shape.request(host, ident))
                    ident += 1
                    sent += 1
    finally:
        for sock in pending:
            sock.close()


# ------------------------------------------------------------ in-process


@dataclass
class Counts:
    target: str
    era: str
    concurrency: int
    calls: int
    py_calls: float = 0.0
    task_steps: float = 0.0
    tasks_spawned: float = 0.0
    sends: float = 0.0
    gc_collections: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    gc_us: float = 0.0
    alloc_peak_kb: float = 0.0
    instructions: float | None = None
    cache: dict[str, float] = field(default_factory=dict)
    top: list[tuple[int, str]] = field(default_factory=list)


class _GcCounter:
    """Counts the garbage collector's collections by generation, and their time."""

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.seconds = 0.0
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.collections[info["generation"]] += 1
            self.seconds += time.perf_counter() - self._began


class _StepCounter:
    """A trio instrument counting task steps and spawns."""

    def __init__(self) -> None:
        self.steps = 0
        self.spawned = 0

    def before_task_step(self, task: Any) -> None:
        self.steps += 1

    def task_spawned(self, task: Any) -> None:
        self.spawned += 1


def _floor_app() -> Any:
    spec = importlib.util.spec_from_file_location(
        "floor_http_server", HERE / "servers" / "floor_http_server.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


def _echo_app() -> Any:
    from trio_mcp.server import MCPServer

    app = MCPServer("bench-echo", "1.0")

    @app.tool(structured_output=False)
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    return app


def _is_send(key: tuple[str, int, str]) -> bool:
    return key[0] == "~" and key[2] in ("<method 'send' of '_socket.socket' objects>",)


def count_target(
    target: str, eras: list[str], concurrencies: list[int], calls: int, top: int, dump: Path | None
) -> list[Counts]:
    """Serve ``target`` in this process and count every (era, concurrency) row
    (``dump``: a directory to write each row's cProfile stats to)."""
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve

    rows: list[Counts] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            stop = trio.Event()
            if target == FLOOR:
                config = Config()
                config.bind = ["127.0.0.1:0"]
                config.accesslog = None
                binds = await nursery.start(
                    lambda task_status: serve(
                        _floor_app(), config, shutdown_trigger=stop.wait, task_status=task_status
                    )
                )
                port = int(binds[0].rpartition(":")[2])
            else:
                from trio_mcp.serving.http import HttpServer

                server = HttpServer(_echo_app(), host="127.0.0.1", port=0, json_response=target == OURS)
                info = await nursery.start(server.run)
                port = info.port
            addr = ("127.0.0.1", port)
            profiler = cProfile.Profile()
            counter = _StepCounter()
            ident = 1
            for era in eras:
                shape = await trio.to_thread.run_sync(prepare, addr, era, target != FLOOR)
                for concurrency in concurrencies:
                    row = Counts(target, era, concurrency, calls)
                    # Warm-up (caches, the tool's first call), then one window per counter.
                    await trio.to_thread.run_sync(
                        drive, addr, shape, max(200, calls // 4), concurrency, ident
                    )
                    ident += calls
                    profiler = cProfile.Profile()
                    profiler.enable()
                    await trio.to_thread.run_sync(drive, addr, shape, calls, concurrency, ident)
                    profiler.disable()
                    ident += calls
                    stats = pstats.Stats(profiler)
                    if dump is not None:
                        name = f"{target.replace(' ', '-')}_{era}_{label(concurrency)}.prof"
                        stats.dump_stats(dump / name)
                    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
                    row.py_calls = stats.total_calls / calls  # type: ignore[attr-defined]
                    row.sends = sum(v[1] for k, v in raw.items() if _is_send(k)) / calls
                    if top and not rows:
                        ranked = sorted(raw.items(), key=lambda kv: -kv[1][1])[:top]
                        row.top = [(v[1], pstats.func_std_string(k)) for k, v in ranked]
                    counter = _StepCounter()
                    collector = _GcCounter()
                    trio.lowlevel.add_instrument(counter)
                    gc.callbacks.append(collector)
                    try:
                        await trio.to_thread.run_sync(drive, addr, shape, calls, concurrency, ident)
                    finally:
                        gc.callbacks.remove(collector)
                        trio.lowlevel.remove_instrument(counter)
                    ident += calls
                    row.task_steps = counter.steps / calls
                    row.tasks_spawned = counter.spawned / calls
                    row.gc_collections = [1000 * n / calls for n in collector.collections]
                    row.gc_us = collector.seconds * 1e6 / calls
                    # The memory a window allocates at its peak, above what it started with
                    # (the client's thread included: a raw client, small).
                    tracemalloc.start()
                    start, _ = tracemalloc.get_traced_memory()
                    await trio.to_thread.run_sync(drive, addr, shape, calls, concurrency, ident)
                    _, peak = tracemalloc.get_traced_memory()
                    tracemalloc.stop()
                    ident += calls
                    row.alloc_peak_kb = (peak - start) / 1024
                    rows.append(row)
            if target == FLOOR:
                stop.set()
            else:
                server.stop()

    trio.run(main)
    return rows


# --------------------------------------------------------------- callgrind


def _server_command(target: str) -> list[str]:
    if target == FLOOR:
        return [sys.executable, str(HERE / "servers" / "floor_http_server.py")]
    extra = ["--sse"] if target == OURS_SSE else []
    return [sys.executable, str(HERE / "servers" / "trio_http_server.py"), *extra]


class _SlowServer(UrlServer):
    """A :class:`UrlServer` started under valgrind: it may take minutes to listen."""

    def _read_url(self, timeout: float) -> str:
        return super()._read_url(max(timeout, CALLGRIND_START_TIMEOUT))


def _totals(path: Path) -> dict[str, int]:
    """A callgrind dump's totals by event (``Ir``, and with the cache and
    branch simulation ``D1mr``, ``DLmr``, ``Bcm``...)."""
    events: list[str] = ["Ir"]
    for line in path.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith(("totals:", "summary:")):
            return dict(zip(events, (int(v) for v in line.split()[1:]), strict=False))
    raise RuntimeError(f"no totals in {path}")


#: What the cache and branch simulation reports per call: first-level misses
#: (instructions and data), last-level misses, mispredicted branches.
CACHE_EVENTS = {
    "L1 misses": ("I1mr", "D1mr", "D1mw"),
    "LL misses": ("ILmr", "DLmr", "DLmw"),
    "branch misses": ("Bcm", "Bim"),
}


def callgrind_target(
    target: str, eras: list[str], concurrencies: list[int], calls: int, cache_sim: bool = False
) -> dict[tuple[str, int], dict[str, float]]:
    """Instructions per call of ``target``'s server process, per row (with
    ``cache_sim``, also the :data:`CACHE_EVENTS` per call)."""
    out: dict[tuple[str, int], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "-q",
            f"--callgrind-out-file={tmp}/callgrind.out.%p",
            "--dump-instr=no",
            # Start-up (imports) runs without instrumentation, turned on for the
            # warm-up of each row: many times faster to start, the same counts.
            "--instr-atstart=no",
            *(["--cache-sim=yes", "--branch-sim=yes"] if cache_sim else []),
            *_server_command(target),
        ]
        server = _SlowServer(f"{target} (callgrind)", cmd)
        try:
            pid = server.pid
            host, _, port = server.url.split("/")[2].rpartition(":")
            addr = (host, int(port))
            ident = 1
            for era in eras:
                shape = prepare(addr, era, target != FLOOR)
                for concurrency in concurrencies:
                    drive(addr, shape, max(50, calls // 4), concurrency, ident)
                    ident += calls
                    _control("--instr=on", pid)
                    drive(addr, shape, max(50, calls // 4), concurrency, ident)
                    ident += calls
                    _control("--zero", pid)
                    drive(addr, shape, calls, concurrency, ident)
                    ident += calls
                    before = set(Path(tmp).iterdir())
                    _control("--dump", pid)
                    dumps = sorted(set(Path(tmp).iterdir()) - before)
                    if not dumps:
                        raise RuntimeError("callgrind_control wrote no dump")
                    totals = _totals(dumps[-1])
                    found = {"Ir": totals["Ir"] / calls}
                    if cache_sim:
                        for name, events in CACHE_EVENTS.items():
                            found[name] = sum(totals.get(e, 0) for e in events) / calls
                    out[(era, concurrency)] = found
        finally:
            server.stop()
    return out


def _control(option: str, pid: int) -> None:
    subprocess.run(
        ["callgrind_control", option, str(pid)], check=True, capture_output=True, timeout=CALLGRIND_TIMEOUT
    )


# ------------------------------------------------------------------ report


def ratios(rows: list[Counts]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        if row.target == FLOOR:
            continue
        floor = next(
            (r for r in rows if r.target == FLOOR and r.era == row.era and r.concurrency == row.concurrency),
            None,
        )
        if floor is None:
            continue
        entry: dict[str, Any] = {
            "target": row.target,
            "era": row.era,
            "concurrency": row.concurrency,
            "py_calls": round(row.py_calls / floor.py_calls, 3),
            "task_steps": round(row.task_steps / floor.task_steps, 3),
        }
        if row.instructions and floor.instructions:
            entry["instructions"] = round(row.instructions / floor.instructions, 3)
        for name in CACHE_EVENTS:
            if row.cache.get(name) and floor.cache.get(name):
                entry[name] = round(row.cache[name] / floor.cache[name], 3)
        out.append(entry)
    return out


def report(doc: dict[str, Any]) -> None:
    print(f"{doc['calls']} calls per row; load average (1 min) {doc['load_before']} -> {doc['load_after']}")
    header = (
        "target", "era", "conc", "py calls", "task steps", "spawns", "sends",
        "gc0/1/2 per 1k", "gc µs", "alloc peak KB", "instructions", *CACHE_EVENTS,
    )  # fmt: skip
    body = [
        (
            r["target"],
            r["era"],
            label(r["concurrency"]),
            f"{r['py_calls']:,.1f}",
            f"{r['task_steps']:.2f}",
            f"{r['tasks_spawned']:.2f}",
            f"{r['sends']:.2f}",
            "/".join(f"{n:.1f}" for n in r["gc_collections"]),
            f"{r['gc_us']:.1f}",
            f"{r['alloc_peak_kb']:,.0f}",
            "n/a" if r["instructions"] is None else f"{r['instructions']:,.0f}",
            *(f"{r['cache'][k]:,.0f}" if k in r["cache"] else "n/a" for k in CACHE_EVENTS),
        )
        for r in doc["rows"]
    ]
    print(text_table(header, body, left=3))
    if doc["ratios"]:
        print("\nours / floor (per call):")
        for r in doc["ratios"]:
            extra = f"  instructions {r['instructions']:.3f}" if "instructions" in r else ""
            extra += "".join(f"  {k} {r[k]:.3f}" for k in CACHE_EVENTS if k in r)
            print(
                f"  {r['target']:<13} {r['era']:<10} {label(r['concurrency']):<4}"
                f"  py calls {r['py_calls']:.3f}  task steps {r['task_steps']:.3f}{extra}"
            )
    for r in doc["rows"]:
        if r["top"]:
            print(f"\nmost called, {r['target']} {r['era']} {label(r['concurrency'])} (calls per call):")
            for count, name in r["top"]:
                print(f"  {count / doc['calls']:8.2f}  {name}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per counted window (default 2000)")
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated (default: %(default)s)")
    parser.add_argument(
        "--eras", default=f"{HANDSHAKE},{MODERN}", help="comma-separated (default: %(default)s)"
    )
    parser.add_argument("--seq-only", action="store_true", help="sequential calls only (no c64 rows)")
    parser.add_argument("--concurrency", type=int, default=64, help="callers in flight of the c rows (64)")
    parser.add_argument("--top", type=int, default=0, help="print the N most called functions of each target")
    parser.add_argument("--callgrind", action="store_true", help="also count instructions under valgrind")
    parser.add_argument(
        "--cache-sim", action="store_true", help="with --callgrind: also simulate caches and branches"
    )
    parser.add_argument("--callgrind-calls", type=int, default=300, help="calls per callgrind window (300)")
    parser.add_argument("--dump-stats", type=Path, default=None, help="write each row's cProfile stats here")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    args.targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    args.eras = [e.strip() for e in args.eras.split(",") if e.strip()]
    if unknown := [t for t in args.targets if t not in TARGETS]:
        parser.error(f"unknown targets {unknown}; choose among {list(TARGETS)}")
    if unknown := [e for e in args.eras if e not in (HANDSHAKE, MODERN)]:
        parser.error(f"unknown eras {unknown}")
    if args.callgrind and shutil.which("valgrind") is None:
        parser.error("--callgrind needs valgrind (and callgrind_control) on the PATH")
    if args.calls < 1 or args.callgrind_calls < 1:
        parser.error("--calls and --callgrind-calls must be >= 1")
    return args


def _rows_by_target(args: argparse.Namespace) -> Iterator[list[Counts]]:
    concurrencies = [1] if args.seq_only else [1, args.concurrency]
    for target in args.targets:
        print(f"[count_http_calls] {target}", file=sys.stderr, flush=True)
        rows = count_target(target, args.eras, concurrencies, args.calls, args.top, args.dump_stats)
        if args.callgrind:
            print(f"[count_http_calls] {target} under callgrind", file=sys.stderr, flush=True)
            found = callgrind_target(target, args.eras, concurrencies, args.callgrind_calls, args.cache_sim)
            for row in rows:
                counted = found.get((row.era, row.concurrency), {})
                row.instructions = counted.get("Ir")
                row.cache = {k: v for k, v in counted.items() if k != "Ir"}
        yield rows


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    before = load_average()
    rows = [row for rows in _rows_by_target(args) for row in rows]
    doc = {
        "bench": "count_http_calls",
        "calls": args.calls,
        "callgrind_calls": args.callgrind_calls if args.callgrind else None,
        "load_before": before,
        "load_after": load_average(),
        "rows": [row.__dict__ for row in rows],
        "ratios": ratios(rows),
    }
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        report(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
