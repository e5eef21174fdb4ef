"""Streamable HTTP (MCP 2025-03-26 .. 2025-11-25): the client side.

:class:`StreamableHttpTransport` (an actor producing a
:class:`HttpClientStream`), and what the client and the server share (the
SSE codec, the SEP-2243 header rules, the Host/Origin policy). The server
lives in :mod:`trio_mcp.serving.http`.
"""

from ._client import HttpClientSettings, HttpClientStream, StreamableHttpTransport
from ._security import LOCAL_HOSTS

__all__ = [
    "LOCAL_HOSTS",
    "HttpClientSettings",
    "HttpClientStream",
    "StreamableHttpTransport",
]
