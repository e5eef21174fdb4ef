"""Transports: memory, stdio, Streamable HTTP, legacy SSE, WebSocket.

Every transport implements :class:`MessageStream`."""

from ._base import MessageStream, TransportClosed, TransportError
from .memory import MemoryStream, memory_pair

__all__ = ["MessageStream", "TransportError", "TransportClosed", "MemoryStream", "memory_pair"]
