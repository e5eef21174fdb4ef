"""A real Streamable HTTP server process for the hardening and soak tests.

``python hard_server.py '{"max_sessions": 64, ...}'``: serves an app with
tools (``echo``; ``slow`` and ``progress_then_wait`` to cancel mid-call;
``running``, how many ``slow`` calls run; ``chatty`` that streams
progress), a resource and a prompt on 127.0.0.1 at a free port, prints
``PORT <n>`` on stdout, logs to stderr, and stops when stdin closes.
The argument is a JSON object of :class:`HttpServerSettings` fields.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import trio

from trio_mcp.server import Context, MCPServer
from trio_mcp.serving.http import HttpServer


def make_app() -> MCPServer:
    app = MCPServer("hard")

    @app.tool
    def echo(text: str) -> str:
        return text

    running: dict[str, int] = {}

    @app.tool
    async def slow(seconds: float = 30.0, key: str = "") -> str:
        running[key] = running.get(key, 0) + 1
        try:
            await trio.sleep(seconds)
        finally:
            running[key] -= 1
            if not running[key]:
                del running[key]
        return "slept"

    @app.tool(name="running")
    def running_calls(key: str = "") -> int:
        """How many ``slow`` calls with this ``key`` are running now."""
        return running.get(key, 0)

    @app.tool
    async def progress_then_wait(ctx: Context, seconds: float = 30.0) -> str:
        """Report progress once (the call is running), then wait."""
        await ctx.report_progress(1, 2, "started")
        await trio.sleep(seconds)
        return "waited"

    @app.tool
    async def chatty(ctx: Context, steps: int = 3) -> str:
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
            await trio.sleep(0.01)
        return "chatted"

    @app.resource("memo://one")
    def one() -> str:
        return "one" * 100

    @app.prompt
    def greet(name: str) -> str:
        return f"Hello {name}"

    return app


async def main(options: dict[str, Any]) -> None:
    server = HttpServer(make_app(), **options)
    async with trio.open_nursery() as nursery:
        info = await nursery.start(server.run)
        print(f"PORT {info.port}", flush=True)
        stdin = trio.lowlevel.FdStream(0)
        while await stdin.receive_some(1024):
            pass
        server.stop()


if __name__ == "__main__":
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    trio.run(main, json.loads(sys.argv[1]) if len(sys.argv) > 1 else {})
