"""Transports: memory, stdio, Streamable HTTP, legacy SSE, WebSocket.

Every transport implements :class:`MessageStream`. The network transports
live in their own modules (``transports.http``, ``transports.sse``,
``transports.websocket``) and are imported on use, to keep start-up fast.
The Streamable HTTP server, which hosts sessions, is in :mod:`trio_mcp.serving`.
"""

from typing import TYPE_CHECKING

from ._base import RELATED_REQUEST, MessageStream, TransportClosed, TransportError
from .memory import MemoryStream, memory_pair
from .stdio import (
    DEFAULT_MAX_LINE_BYTES,
    StdioExit,
    StdioServerParameters,
    StdioStartError,
    StdioStream,
    StdioTransport,
    stdio_server_stream,
)

#: Names served lazily from the network transports (their imports cost ~100 ms).
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
}

if TYPE_CHECKING:  # what type checkers see of the names imported on first use
    from .http import (
        HttpClientSettings as HttpClientSettings,
    )
    from .http import (
        StreamableHttpTransport as StreamableHttpTransport,
    )
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
    "MemoryStream",
    "memory_pair",
    "StdioStream",
    "stdio_server_stream",
    "StdioServerParameters",
    "StdioTransport",
    "StdioStartError",
    "StdioExit",
    "DEFAULT_MAX_LINE_BYTES",
]
