"""trio-mcp: the Model Context Protocol as a supervised actor runtime on trio.

The curated public API. Wire types live in :mod:`trio_mcp.protocol`,
transports in :mod:`trio_mcp.transports`, supervisors in
:mod:`trio_mcp.supervision`, the test kit in :mod:`trio_mcp.testing`.
"""

from .actors import ExitReason, InboundRequest, Peer, PeerLimits, PeerStatistics
from .actors._client import ClientSession, open_session
from .actors._server import Context, ServerSession
from .protocol import (
    ConnectionClosed,
    InternalError,
    InvalidParams,
    InvalidRequest,
    McpError,
    MethodNotFound,
    MissingClientCapability,
    ParseError,
    ResourceNotFound,
    ServerOverloaded,
    UnsupportedProtocolVersion,
)
from .server import Audio, Image, LowLevelServer, MCPServer
from .transports import MessageStream, TransportClosed, TransportError, memory_pair

__version__ = "0.1.0"

__all__ = [
    "__version__",
    # authoring
    "MCPServer",
    "LowLevelServer",
    "Context",
    "Image",
    "Audio",
    # sessions and actors
    "ClientSession",
    "open_session",
    "ServerSession",
    "Peer",
    "PeerLimits",
    "PeerStatistics",
    "InboundRequest",
    "ExitReason",
    # transports
    "MessageStream",
    "memory_pair",
    "TransportError",
    "TransportClosed",
    # errors
    "McpError",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "InternalError",
    "ServerOverloaded",
    "ResourceNotFound",
    "MissingClientCapability",
    "UnsupportedProtocolVersion",
    "ConnectionClosed",
]
