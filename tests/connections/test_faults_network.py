"""Connections over the network transports survive their servers: an HTTP
server restarted under a live client (the client re-initializes after the
404 of its old session) and a WebSocket server restarted under a live client
(the lost connection is noticed at once). Real servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from trio_mcp import ConnectionClosed
from trio_mcp.actors import Connected, Connection, ConnectionSettings, Disconnected
from trio_mcp.server import MCPServer
from trio_mcp.serving.http import HttpServer
from trio_mcp.supervision import Backoff
from trio_mcp.transports.http import StreamableHttpTransport
from trio_mcp.transports.websocket import WebSocketServer, WebSocketTransport

TIMEOUT = 20.0
SETTINGS = ConnectionSettings(
    backoff=Backoff(initial=0.05, maximum=0.2, reset_after=5.0), reconnect_wait=10.0
)


def make_app(tag: str) -> MCPServer:
    app = MCPServer(f"server-{tag}")

    @app.tool
    def whoami() -> str:
        return tag

    @app.tool
    async def stall() -> str:
        await trio.sleep_forever()
        return "never"

    return app


@asynccontextmanager
async def running(server: Any) -> AsyncIterator[Any]:
    async with trio.open_nursery() as nursery:
        info = await nursery.start(server.run)
        try:
            yield info
        finally:
            server.stop()


async def events(conn: Connection) -> list[Any]:
    out = []
    while True:
        try:
            out.append(conn.events().receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return out


async def test_http_server_restarted_under_a_live_client() -> None:
    with trio.fail_after(TIMEOUT):
        first = HttpServer(make_app("first"), port=0, retry_interval=0.05)
        async with trio.open_nursery() as nursery:
            async with running(first) as info:
                port, url = info.port, info.url
                conn = await nursery.start(
                    Connection(lambda: StreamableHttpTransport(url), name="web", settings=SETTINGS).run
                )
                assert (await conn.call_tool("whoami")).content[0].text == "first"
            # The first server is gone with every session it had; a new one takes the port.
            async with running(HttpServer(make_app("second"), port=port, retry_interval=0.05)):
                # The first call after the restart meets the 404 of the old session: it fails at
                # once (it may not be repeated blindly), and the connection re-initializes.
                try:
                    await conn.call_tool("whoami")
                except ConnectionClosed as exc:
                    assert "session expired" in str(exc)
                result = await conn.call_tool("whoami")
                assert result.content[0].text == "second"
                kinds = [type(e) for e in await events(conn)]
                assert kinds.count(Connected) == 2 and Disconnected in kinds
                nursery.cancel_scope.cancel()


async def test_websocket_server_restarted_under_a_live_client() -> None:
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            first = WebSocketServer(make_app("first"), port=0)
            async with running(first) as info:
                port, url = info.port, info.url
                conn = await nursery.start(
                    Connection(lambda: WebSocketTransport(url), name="ws", settings=SETTINGS).run
                )
                assert (await conn.call_tool("whoami")).content[0].text == "first"
                failed: list[BaseException] = []

                async def in_flight() -> None:
                    try:
                        await conn.call_tool("stall")
                    except ConnectionClosed as exc:
                        failed.append(exc)

                nursery.start_soon(in_flight)
                await trio.testing.wait_all_tasks_blocked()
            # Stopping the server failed the call in flight at once.
            with trio.fail_after(2):
                while not failed:
                    await trio.sleep(0.01)
            async with running(WebSocketServer(make_app("second"), port=port)):
                assert (await conn.call_tool("whoami")).content[0].text == "second"
                nursery.cancel_scope.cancel()
