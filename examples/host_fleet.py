"""A host with a fleet of supervised stdio servers, one of which crashes.

An embedded :class:`~trio_mcp.actors._host.Host` starts three servers as
subprocesses and keeps them connected:

* ``alpha`` and ``beta``: two copies of ``everything_server.py``;
* ``flaky``: this very file run with ``--serve-flaky``, a small server whose
  process exits (``os._exit``) on a random call — deterministic: every life
  of the process gets its own seed, derived from ``--seed``.

While a few workers call tools through the host's registry (``alpha__echo``,
``beta__add``, ``flaky__echo``), each connection's supervision events are
printed as they happen: connected, disconnected, reconnect scheduled, lists
refreshed. A call in flight when the flaky server dies fails at once with
``ConnectionClosed``; the next one waits for the restart. The load is
bounded (``--calls``, ``--seconds``); then the host shuts down cleanly
(each server's stdin is closed and it exits) and a summary is printed,
followed by the pids of every process the fleet started — all reaped.

    python examples/host_fleet.py               # 300 calls or 10 s
    python examples/host_fleet.py --calls 60 --seed 3
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from trio_mcp.actors import (
    Connected,
    Connection,
    ConnectionEvent,
    ConnectionFailed,
    ConnectionSettings,
    Disconnected,
    Host,
    ListsRefreshed,
    ReconnectScheduled,
)
from trio_mcp.protocol import ConnectionClosed, McpError, ToolAnnotations
from trio_mcp.supervision import Backoff
from trio_mcp.transports.stdio import StdioServerParameters, StdioTransport

HERE = Path(__file__).resolve().parent
EVERYTHING = str(HERE / "everything_server.py")

#: Restart fast, and allow many restarts: the flaky server crashes often.
SETTINGS = ConnectionSettings(
    backoff=Backoff(initial=0.05, maximum=0.25, reset_after=2.0),
    max_restarts=50,
    max_seconds=10.0,
    start_retries=2,
    start_timeout=10.0,
    reconnect_wait=5.0,
    ping_interval=2.0,
    ping_timeout=2.0,
    shutdown_grace=3.0,
)
#: How a server is stopped: close stdin, then SIGTERM, then SIGKILL.
GRACES: dict[str, Any] = {"close_grace": 2.0, "term_grace": 1.0, "kill_timeout": 2.0}


# --------------------------------------------------------- the flaky server


def serve_flaky(seed: int) -> None:
    """``--serve-flaky``: a server whose process exits on its k-th tool call,
    k drawn from ``random.Random(seed)`` between 4 and 16."""
    from trio_mcp.server import MCPServer
    from trio_mcp.transports.stdio import stdio_server_stream

    app = MCPServer("flaky")
    crash_at = random.Random(seed).randint(4, 16)
    calls = 0

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(message: str) -> str:
        """Echo the message back (unless it is time to crash)."""
        nonlocal calls
        calls += 1
        if calls >= crash_at:
            print(f"flaky: crashing at call {calls} (seed {seed})", file=sys.stderr, flush=True)
            os._exit(1)
        return message

    async def serve() -> None:
        async with stdio_server_stream() as stream:
            await app.serve(stream, name="flaky-stdio")

    trio.run(serve)


# ------------------------------------------------------------------- the host


class Fleet:
    """Transport factories that remember every process they started."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.transports: dict[str, list[StdioTransport]] = {}

    def _env(self) -> dict[str, str]:
        # Servers get a minimal environment; keep a PYTHONPATH if one is in use.
        path = os.environ.get("PYTHONPATH")
        return {"PYTHONPATH": path} if path else {}

    def factory(self, name: str, args: Callable[[int], list[str]]) -> Callable[[], StdioTransport]:
        lives = itertools.count()
        made = self.transports.setdefault(name, [])

        def make() -> StdioTransport:
            params = StdioServerParameters(
                command=sys.executable, args=args(next(lives)), env=self._env(), name=name, **GRACES
            )
            transport = StdioTransport(params)
            made.append(transport)
            return transport

        return make

    def everything(self, name: str) -> Callable[[], StdioTransport]:
        return self.factory(name, lambda life: [EVERYTHING])

    def flaky(self, name: str) -> Callable[[], StdioTransport]:
        def args(life: int) -> list[str]:
            return [__file__, "--serve-flaky", "--seed", str(self.seed * 1000 + life)]

        return self.factory(name, args)

    def all(self) -> list[StdioTransport]:
        return [t for made in self.transports.values() for t in made]


class Clock:
    def __init__(self) -> None:
        self.start = trio.current_time()

    def say(self, text: str) -> None:
        print(f"[{trio.current_time() - self.start:6.2f}s] {text}", flush=True)


def one_line(text: str) -> str:
    return " | ".join(line for line in text.splitlines() if line.strip())


def describe(event: ConnectionEvent, fleet: Fleet) -> str:
    if isinstance(event, Connected):
        return f"connected to {event.server} (protocol {event.protocol_version}, connect #{event.connects})"
    if isinstance(event, Disconnected):
        made = fleet.transports.get(event.name) or [None]
        last = made[-1]
        process = "" if last is None else f" (pid {last.pid}, exit status {last.returncode})"
        return f"disconnected{process}: {one_line(event.reason)}"
    if isinstance(event, ReconnectScheduled):
        return f"reconnect scheduled in {event.delay:.2f} s (attempt {event.attempt})"
    if isinstance(event, ListsRefreshed):
        return f"lists refreshed: {event.tools} tools, {event.prompts} prompts, {event.resources} resources"
    if isinstance(event, ConnectionFailed):
        return f"GAVE UP: {event.reason}"
    return repr(event)  # pragma: no cover


async def print_events(clock: Clock, fleet: Fleet, name: str, conn: Connection) -> None:
    async for event in conn.events():
        clock.say(f"{name:<6} {describe(event, fleet)}")


class Tally:
    def __init__(self) -> None:
        self.ok = 0
        self.closed = 0
        self.other = 0


def plan(i: int) -> tuple[str, dict[str, Any]]:
    """The i-th call of the load: round robin over the three servers."""
    which = i % 3
    if which == 0:
        return "alpha__echo", {"message": f"hello {i}"}
    if which == 1:
        return "beta__add", {"a": i, "b": 1}
    return "flaky__echo", {"message": f"hello {i}"}


async def load(host: Host, clock: Clock, tally: Tally, calls: int, seconds: float, workers: int) -> bool:
    """Run ``calls`` calls on ``workers`` workers, for at most ``seconds``;
    True if the time ran out first."""
    numbers = itertools.count()

    async def worker() -> None:
        while (i := next(numbers)) < calls:
            tool, arguments = plan(i)
            try:
                result = await host.call_tool(tool, arguments)
            except ConnectionClosed as exc:
                tally.closed += 1
                clock.say(f"call #{i} {tool} failed: ConnectionClosed: {one_line(exc.message)}")
            except McpError as exc:
                tally.other += 1
                clock.say(f"call #{i} {tool} failed: {type(exc).__name__}: {exc.message}")
            else:
                if result.is_error is True:
                    tally.other += 1
                    clock.say(f"call #{i} {tool} returned an error: {result.content}")
                else:
                    tally.ok += 1

    with trio.move_on_after(seconds) as scope:
        async with trio.open_nursery() as nursery:
            for _ in range(workers):
                nursery.start_soon(worker)
    return scope.cancelled_caught


async def main(calls: int, seconds: float, seed: int, workers: int) -> int:
    clock = Clock()
    fleet = Fleet(seed)
    tally = Tally()
    host = Host(settings=SETTINGS)
    factories = {
        "alpha": fleet.everything("alpha"),
        "beta": fleet.everything("beta"),
        "flaky": fleet.flaky("flaky"),
    }
    connections: dict[str, Connection] = {}
    print(f"fleet: starting {', '.join(factories)} (seed {seed}); {calls} calls or {seconds:g} s", flush=True)
    timed_out = False
    async with trio.open_nursery() as nursery:
        host_scope = trio.CancelScope()

        async def run_host(*, task_status: trio.TaskStatus[Host]) -> None:
            with host_scope:
                await host.run(task_status=task_status)

        await nursery.start(run_host)
        async with trio.open_nursery() as printers:
            async with trio.open_nursery() as starting:
                for name, factory in factories.items():

                    async def add(name: str = name, factory: Any = factory) -> None:
                        conn = connections[name] = await host.add_server(name, factory)
                        printers.start_soon(print_events, clock, fleet, name, conn)

                    starting.start_soon(add)
            clock.say(f"fleet up: {len(host.tools())} tools in the registry; load starts")
            started = trio.current_time()
            timed_out = await load(host, clock, tally, calls, seconds, workers)
            elapsed = trio.current_time() - started
            printers.cancel_scope.cancel()  # the shutdown is reported below
        clock.say("load done; shutting the host down")
        host_scope.cancel()
    clock.say("host closed")

    transports = fleet.all()
    # A server stopped by the host exits 0 (end of stdin): any other status is a crash.
    crashes = sum(1 for t in transports if t.returncode not in (0, None))
    reconnects = {name: conn.statistics()["connects"] - 1 for name, conn in sorted(connections.items())}
    total = tally.ok + tally.closed + tally.other
    print(
        f"summary: {total} calls in {elapsed:.2f} s{' (time limit)' if timed_out else ''}: {tally.ok} ok, "
        f"{tally.closed} failed with ConnectionClosed, {tally.other} failed otherwise; "
        f"{crashes} crashes, {sum(reconnects.values())} reconnects "
        f"({', '.join(f'{name} {n}' for name, n in reconnects.items())})",
        flush=True,
    )
    running = [t.pid for t in transports if t.returncode is None]
    pids = " ".join(str(t.pid) for t in transports if t.pid is not None)
    state = "all exited and reaped" if not running else f"NOT REAPED: {running}"
    print(f"children: {pids} ({len(transports)} started, {state})", flush=True)
    return 0 if not running else 1


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=300, help="calls to make (default 300)")
    parser.add_argument("--seconds", type=float, default=10.0, help="time limit of the load (default 10)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the flaky server's crashes")
    parser.add_argument("--workers", type=int, default=3, help="concurrent callers (default 3)")
    parser.add_argument("--verbose", action="store_true", help="also show the transports' logs")
    parser.add_argument("--serve-flaky", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    options = parse(sys.argv[1:])
    if options.serve_flaky:
        serve_flaky(options.seed)
        sys.exit(0)
    # The events say it all; the transports' own warnings only with --verbose.
    level = logging.INFO if options.verbose else logging.ERROR
    logging.basicConfig(level=level, format="    %(name)s: %(message)s")
    sys.exit(trio.run(main, options.calls, options.seconds, options.seed, options.workers))
