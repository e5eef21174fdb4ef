"""The network servers: they host sessions (one server-session actor per
client), so they sit above the actors.

:mod:`trio_mcp.serving.http` holds the Streamable HTTP server (ASGI app,
session registry, event store, stateless path); :mod:`trio_mcp.serving.cluster`
shares its sessions between processes and nodes through Redis (the ``redis``
extra, imported only when used). The legacy HTTP+SSE and
WebSocket servers live beside their clients in
:mod:`trio_mcp.transports.sse` and :mod:`trio_mcp.transports.websocket`
(they hand each connection to the app's ``start_session`` and import no actor).
"""

from .http import (
    EventStore,
    HttpServer,
    HttpServerInfo,
    HttpServerSettings,
    HttpServerStatistics,
    HttpSessionStream,
    MemoryEventStore,
    MemorySessionRegistry,
    SessionRegistry,
    StreamableHttpApp,
    close_sse_stream,
)

__all__ = [
    "EventStore",
    "HttpServer",
    "HttpServerInfo",
    "HttpServerSettings",
    "HttpServerStatistics",
    "HttpSessionStream",
    "MemoryEventStore",
    "MemorySessionRegistry",
    "SessionRegistry",
    "StreamableHttpApp",
    "close_sse_stream",
]
