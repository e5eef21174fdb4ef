"""A kept-alive connection that the server resets as it is reused: the POST
sent on it got no answer at all, so the client sends it once more on a fresh
connection instead of failing the transport (servers close idle keep-alive
connections, e.g. Node's after 5 s, and the close can cross a request).

A real hypercorn serves the app; between it and the client, a TCP relay on
127.0.0.1 resets one client connection (RST, SO_LINGER 0) when a request
arrives on it after its first, forwarding nothing of that request."""

from __future__ import annotations

import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import trio

from trio_mcp.actors._client import open_session
from trio_mcp.server import MCPServer
from trio_mcp.serving.http import HttpServer
from trio_mcp.transports.http import StreamableHttpTransport

TIMEOUT = 10.0


def make_app() -> MCPServer:
    app = MCPServer("reset-test")

    @app.tool(inline=True)
    def echo(text: str) -> str:
        return text

    return app


class ResettingRelay:
    """Relays TCP connections to ``target``; the first connection on which a
    second request starts is reset instead (once)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.resets = 0
        self.connections = 0

    async def handle(self, client: trio.SocketStream) -> None:
        self.connections += 1
        backend = await trio.open_tcp_stream(*self.target)
        requests = 0
        async with backend, trio.open_nursery() as nursery:

            async def back() -> None:
                async for data in backend:
                    await client.send_all(data)
                nursery.cancel_scope.cancel()

            nursery.start_soon(back)
            async for data in client:
                requests += data.count(b"POST ")
                if requests > 1 and self.resets == 0:
                    self.resets += 1
                    client.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    client.socket.close()  # RST: the request is never forwarded
                    nursery.cancel_scope.cancel()
                    return
                await backend.send_all(data)
            nursery.cancel_scope.cancel()
        await client.aclose()


@asynccontextmanager
async def relayed(server: HttpServer) -> AsyncIterator[tuple[str, ResettingRelay]]:
    host, port = server.url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    relay = ResettingRelay((host, int(port)))
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, relay.handle, 0, host="127.0.0.1"))
        relay_port = listeners[0].socket.getsockname()[1]
        try:
            yield f"http://127.0.0.1:{relay_port}/mcp", relay
        finally:
            nursery.cancel_scope.cancel()


async def test_a_post_on_a_connection_reset_as_it_is_reused_is_sent_once_more() -> None:
    server = HttpServer(make_app())
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            async with relayed(server) as (url, relay), trio.open_nursery() as inner:
                stream = await inner.start(StreamableHttpTransport(url, max_reconnects=1).run)
                async with open_session(stream) as client:
                    for i in range(4):
                        result = await client.call_tool("echo", {"text": f"call {i}"})
                        assert result.content[0].text == f"call {i}"  # type: ignore[union-attr]
                assert relay.resets == 1
                assert relay.connections >= 2  # the reset request went again on another connection
                inner.cancel_scope.cancel()
            server.stop()
