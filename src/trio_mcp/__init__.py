"""trio-mcp: the Model Context Protocol as a supervised actor runtime on trio.

The curated public API. Wire types live in :mod:`trio_mcp.protocol`,
transports in :mod:`trio_mcp.transports`, supervisors in
:mod:`trio_mcp.supervision`, the test kit in :mod:`trio_mcp.testing`.
"""

import importlib
from typing import Any

#: Where each public name lives; imported on first use, so that a process
#: that needs only a server (or only a client) does not pay for the rest.
_EXPORTS = {
    "ExitReason": "actors",
    "InboundRequest": "actors",
    "Peer": "actors",
    "PeerLimits": "actors",
    "PeerStatistics": "actors",
    "ClientSession": "actors._client",
    "Connection": "actors._connection",
    "ConnectionSettings": "actors._connection",
    "Host": "actors._host",
    "ConsentPolicy": "actors._host",
    "ConsentRequest": "actors._host",
    "open_session": "actors._client",
    "Context": "actors._server",
    "ServerSession": "actors._server",
    "ConnectionClosed": "protocol",
    "InternalError": "protocol",
    "InvalidParams": "protocol",
    "InvalidRequest": "protocol",
    "McpError": "protocol",
    "MethodNotFound": "protocol",
    "MissingClientCapability": "protocol",
    "ParseError": "protocol",
    "ResourceNotFound": "protocol",
    "ServerOverloaded": "protocol",
    "UnsupportedProtocolVersion": "protocol",
    "Audio": "server",
    "Image": "server",
    "LowLevelServer": "server",
    "MCPServer": "server",
    "MessageStream": "transports",
    "TransportClosed": "transports",
    "TransportError": "transports",
    "memory_pair": "transports",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


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
    "Connection",
    "ConnectionSettings",
    "Host",
    "ConsentPolicy",
    "ConsentRequest",
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
