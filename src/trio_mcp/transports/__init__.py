"""Transports: memory, stdio, Streamable HTTP, legacy SSE, WebSocket.

Every transport implements :class:`MessageStream`. The network transports
live in their own modules (``transports.http``, ``transports.sse``,
``transports.websocket``) and are imported on use, to keep start-up fast.
"""

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

__all__ = [
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
