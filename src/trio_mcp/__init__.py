"""trio-mcp: the Model Context Protocol as a supervised actor runtime on trio."""

from .actors import Peer, PeerLimits
from .protocol import (
    ConnectionClosed,
    InvalidParams,
    McpError,
    MethodNotFound,
    ResourceNotFound,
)
from .transports import MessageStream, TransportError, memory_pair

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "Peer",
    "PeerLimits",
    "McpError",
    "MethodNotFound",
    "InvalidParams",
    "ResourceNotFound",
    "ConnectionClosed",
    "MessageStream",
    "TransportError",
    "memory_pair",
]
