"""Transports: memory, stdio, Streamable HTTP, legacy SSE, WebSocket.

Every transport implements :class:`MessageStream`. The network transports
live in their own modules (``transports.http``, ``transports.sse``,
``transports.websocket``) and are imported on use, to keep start-up fast.
The Streamable HTTP server, which hosts sessions, is in :mod:`trio_mcp.serving`.
"""

from typing import TYPE_CHECKING

from ._base import RELATED_REQUEST, MessageStream, TransportClosed, TransportError
from .stdio import DEFAULT_MAX_LINE_BYTES, StdioStream, stdio_server_stream

#: Names served lazily: the network transports (their imports cost ~100 ms), the
#: in-process pairs and the client side of stdio (a stdio server process needs
#: only the stream).
_LAZY = {
    "StreamableHttpTransport": "http",
    "HttpClientSettings": "http",
    "SseServer": "sse",
    "SseApp": "sse",
    "SseServerSettings": "sse",
    "SseTransport": "sse",
    "WebSocketServer": "websocket",
    "WebSocketServerSettings": "websocket",
    "WebSocketTransport": "websocket",
    # in-process pairs: a server process on stdio never needs them
    "MemoryStream": "memory",
    "memory_pair": "memory",
    # the client side of stdio: a server process never needs it
    "StdioExit": "_stdio_client",
    "StdioServerParameters": "_stdio_client",
    "StdioStartError": "_stdio_client",
    "StdioTransport": "_stdio_client",
}

if TYPE_CHECKING:  # what type checkers see of the names imported on first use
    from ._stdio_client import StdioExit as StdioExit
    from ._stdio_client import StdioServerParameters as StdioServerParameters
    from ._stdio_client import StdioStartError as StdioStartError
    from ._stdio_client import StdioTransport as StdioTransport
    from .http import (
        HttpClientSettings as HttpClientSettings,
    )
    from .http import (
        StreamableHttpTransport as StreamableHttpTransport,
    )
    from .memory import MemoryStream as MemoryStream
    from .memory import memory_pair as memory_pair
    from .sse import (
        SseApp as SseApp,
    )
    from .sse import (
        SseServer as SseServer,
    )
    from .sse import (
        SseServerSettings as SseServerSettings,
    )
    from .sse import (
        SseTransport as SseTransport,
    )
    from .websocket import (
        WebSocketServer as WebSocketServer,
    )
    from .websocket import (
        WebSocketServerSettings as WebSocketServerSettings,
    )
    from .websocket import (
        WebSocketTransport as WebSocketTransport,
    )


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    *_LAZY,
    "MessageStream",
    "TransportError",
    "TransportClosed",
    "RELATED_REQUEST",
    "StdioStream",
    "stdio_server_stream",
    "DEFAULT_MAX_LINE_BYTES",
]
