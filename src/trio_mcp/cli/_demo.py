"""``trio-mcp demo``: an embedded server and client talking, with visible output."""

from __future__ import annotations

import time
from typing import Any

import msgspec
import trio

from .._util import collapse_groups
from ..actors import open_session
from ..protocol import CreateMessageResult, LoggingMessageNotificationParams, TextContent, coerce
from ..server import Context, MCPServer
from ..transports.memory import memory_pair
from ._observe import ObservedStream


class Forecast(msgspec.Struct):
    city: str
    celsius: float
    summary: str


def build_demo_server() -> MCPServer:
    app = MCPServer("demo", "1.0", instructions="A small demonstration server.")

    @app.tool(inline=True)  # tiny and pure: no worker thread needed
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool
    def forecast(city: str) -> Forecast:
        """A (made-up) weather forecast, as structured content."""
        return Forecast(city=city, celsius=21.5, summary="sunny")

    @app.tool
    async def countdown(n: int, ctx: Context) -> str:
        """Count down from n, reporting progress and logging each step."""
        for i in range(n):
            await ctx.report_progress(i + 1, n, f"step {i + 1}")
            await ctx.info(f"tick {n - i}")
        return "liftoff"

    @app.tool
    async def haiku(topic: str, ctx: Context) -> str:
        """Ask the client's LLM (sampling) for a haiku."""
        result = await ctx.sample(f"Write a haiku about {topic}", max_tokens=60)
        return result.content.text if isinstance(result.content, TextContent) else "?"

    @app.resource("demo://greeting/{name}", mime_type="text/plain")
    def greeting(name: str) -> str:
        """A greeting for anyone."""
        return f"Hello, {name}!"

    @app.prompt
    def review(code: str) -> str:
        """Ask for a code review."""
        return f"Please review this code:\n{code}"

    return app


async def run_demo(*, calls: int = 2000, out: Any = print) -> None:
    app = build_demo_server()

    async def sampling(params: Any) -> CreateMessageResult:
        return CreateMessageResult(
            role="assistant",
            content=TextContent(
                text="trio nurseries hum / tasks bloom and then join as one / no orphan remains"
            ),
            model="canned-llm",
        )

    def observe(method: str, params: Any) -> None:
        # In the order the server sent them, before the result that follows.
        if method == "notifications/message":
            log = coerce(params, LoggingMessageNotificationParams)
            out(f"  [server log {log.level}] {log.data}")
        elif method == "notifications/progress":
            note = coerce(params, dict[str, Any])
            message = note.get("message") or ""
            out(f"  progress {float(note['progress'])}/{float(note.get('total', 0))} {message}")

    async def ask_for_progress(progress: float, total: float | None, message: str | None) -> None:
        """Shown by ``observe`` already (in order with the log messages)."""

    client_end, server_end = memory_pair(mode="bytes")
    with collapse_groups():
        async with app.running(), trio.open_nursery() as nursery:
            await app.start_session(server_end, nursery)
            async with open_session(ObservedStream(client_end, observe), sampling_handler=sampling) as client:
                await _tour(client, ask_for_progress, calls, out)
            nursery.cancel_scope.cancel()


async def _tour(client: Any, on_progress: Any, calls: int, out: Any) -> None:
    """What the in-memory demo asks of the server, and what it answered."""
    out(
        f"connected to {client.server_info.name} {client.server_info.version} "
        f"(protocol {client.protocol_version})"
    )
    tools = await client.list_all_tools()
    out("tools: " + ", ".join(t.name for t in tools))
    result = await client.call_tool("add", {"a": 2, "b": 40})
    out(f"add(2, 40) -> {result.structured_content}")
    result = await client.call_tool("forecast", {"city": "Lisbon"})
    out(f"forecast -> {result.structured_content}")
    result = await client.call_tool("countdown", {"n": 3}, on_progress=on_progress)
    out(f"countdown -> {result.content[0].text}")
    result = await client.call_tool("haiku", {"topic": "trio"})
    out(f"haiku -> {result.content[0].text}")
    read = await client.read_resource("demo://greeting/world")
    out(f"read demo://greeting/world -> {read.contents[0].text}")
    prompt = await client.get_prompt("review", {"code": "print('hi')"})
    out(f"prompt review -> {prompt.messages[0].content.text!r}")
    bad = await client.call_tool("add", {"a": "two"})
    out(f"add with a bad argument -> isError={bad.is_error}: {bad.content[0].text}")
    start = time.perf_counter()
    for i in range(calls):
        await client.call_tool("add", {"a": i, "b": 1})
    elapsed = time.perf_counter() - start
    out(f"{calls} sequential tools/call round trips (bytes mode): {calls / elapsed:,.0f} calls/s")


def main() -> int:
    trio.run(run_demo)
    return 0


# ------------------------------------------------------------------ fleet


def serve_demo_stdio(*, crash_after: int | None = None) -> None:
    """Serve the demo server over stdio; with ``crash_after``, the process
    dies (exit status 1) on that many ``echo`` calls: a flaky server."""
    import os
    import sys

    from ..transports.stdio import stdio_server_stream

    app = build_demo_server()
    calls = 0

    @app.tool
    def echo(text: str) -> str:
        """Echo the text (the flaky server dies now and then)."""
        nonlocal calls
        calls += 1
        if crash_after is not None and calls >= crash_after:
            print(f"demo server: crashing on purpose after {calls} calls", file=sys.stderr, flush=True)
            os._exit(1)
        return text

    async def serve() -> None:
        async with stdio_server_stream() as stream:
            await app.serve(stream)

    trio.run(serve)


async def run_fleet(*, calls: int = 300, out: Any = print) -> dict[str, int]:
    """Three supervised stdio demo servers, one of which crashes now and
    then, behind one gateway served over Streamable HTTP on 127.0.0.1, and a
    client of that gateway driving a short load run through it."""
    import sys

    from ..actors import (
        Connected,
        ConnectionFailed,
        ConnectionSettings,
        Disconnected,
        Host,
        ListsRefreshed,
        ReconnectScheduled,
        open_session,
    )
    from ..gateway import Gateway
    from ..serving.http import HttpServer
    from ..supervision import Backoff
    from ..transports.http import StreamableHttpTransport
    from ..transports.stdio import StdioServerParameters, StdioTransport

    settings = ConnectionSettings(
        backoff=Backoff(initial=0.05, maximum=0.5, reset_after=5.0), max_restarts=100, max_seconds=10.0
    )
    lives = {"flaky": 0}

    def factory(name: str) -> Any:
        def make() -> StdioTransport:
            args = ["-m", "trio_mcp.cli", "demo-server"]
            if name == "flaky":
                lives["flaky"] += 1
                args += ["--crash-after", str(7 + 5 * (lives["flaky"] % 3))]
            return StdioTransport(
                StdioServerParameters(command=sys.executable, args=tuple(args), inherit_env=True, name=name)
            )

        return make

    # The transports log each exit; the events below already tell the story.
    import logging

    logging.getLogger("trio_mcp").setLevel(logging.ERROR)
    tally = {"ok": 0, "server_down": 0, "reconnects": 0}
    start = trio.current_time()

    def say(text: str) -> None:
        out(f"  [{trio.current_time() - start:5.2f}s] {text}")

    async def watch(name: str, conn: Any, gateway: Any) -> None:
        # The one reader of the connection's events: it tells the story and
        # has the gateway tell its clients when a server's lists changed.
        async for event in conn.events():
            if isinstance(event, (Connected, ListsRefreshed, ConnectionFailed)):
                gateway.publish_changes()
            if isinstance(event, Connected) and event.connects > 1:
                tally["reconnects"] += 1
                say(f"{name}: reconnected (connect #{event.connects})")
            elif isinstance(event, Disconnected):
                reason = " ".join(event.reason.split())
                say(f"{name}: disconnected: {reason[:110]}")
            elif isinstance(event, ReconnectScheduled):
                say(f"{name}: restart in {event.delay:.2f} s (attempt {event.attempt})")

    names = ("alpha", "beta", "flaky")
    async with trio.open_nursery() as nursery:
        host = await nursery.start(Host(settings=settings, consent_policy=_trust_all()).run)
        gateway = Gateway(host, order=names)
        for name in names:
            conn = await host.add_server(name, factory(name))
            nursery.start_soon(watch, name, conn, gateway)
        info = await nursery.start(HttpServer(gateway).run)  # 127.0.0.1, a free port
        stream = await nursery.start(StreamableHttpTransport(info.url).run)
        async with open_session(stream, era="handshake") as client:
            listed = await client.list_all_tools()
            say(f"fleet up: {len(listed)} tools of {len(names)} servers behind one gateway at {info.url}")
            plan: list[tuple[str, dict[str, Any]]] = [
                ("alpha__add", {"a": 1, "b": 2}),
                ("beta__forecast", {"city": "Oslo"}),
                ("flaky__echo", {"text": "hi"}),
            ]
            t0 = trio.current_time()
            done = 0

            async def worker(offset: int) -> None:
                nonlocal done
                while done < calls:
                    tool, args = plan[(done + offset) % len(plan)]
                    done += 1
                    with trio.fail_after(10):
                        result = await client.call_tool(tool, args)
                    # A server that is down: the gateway answers isError at once.
                    tally["server_down" if result.is_error else "ok"] += 1

            async with trio.open_nursery() as load:
                for i in range(4):
                    load.start_soon(worker, i)
            elapsed = trio.current_time() - t0
        out(
            f"fleet: {calls} calls in {elapsed:.2f} s through the gateway over Streamable HTTP: "
            f"{tally['ok']} ok, {tally['server_down']} answered isError at once while a server was down, "
            f"{tally['reconnects']} reconnects"
        )
        nursery.cancel_scope.cancel()
    return tally


def _trust_all() -> Any:
    from ..actors import ConsentPolicy

    return ConsentPolicy(trusted_servers=frozenset({"alpha", "beta", "flaky"}))
