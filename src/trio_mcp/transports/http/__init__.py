"""Streamable HTTP (MCP 2025-03-26 .. 2025-11-25): server and client.

Server: :class:`StreamableHttpApp` (an ASGI 3 app) and :class:`HttpServer`
(an actor running it on hypercorn's trio worker). Client:
:class:`StreamableHttpTransport` (an actor producing a
:class:`HttpClientStream`). Resumable SSE streams keep their events in an
:class:`EventStore` (:class:`MemoryEventStore` by default).
"""

from ._client import HttpClientSettings, HttpClientStream, StreamableHttpTransport
from ._eventstore import EventStore, MemoryEventStore
from ._security import LOCAL_HOSTS
from ._server import (
    HttpServer,
    HttpServerInfo,
    HttpServerSettings,
    HttpServerStatistics,
    HttpSessionStream,
    StreamableHttpApp,
    close_sse_stream,
)

__all__ = [
    "LOCAL_HOSTS",
    "EventStore",
    "HttpClientSettings",
    "HttpClientStream",
    "HttpServer",
    "HttpServerInfo",
    "HttpServerSettings",
    "HttpServerStatistics",
    "HttpSessionStream",
    "MemoryEventStore",
    "StreamableHttpApp",
    "StreamableHttpTransport",
    "close_sse_stream",
]
