"""Actors: the JSON-RPC peer and the MCP roles (server, client, host)."""

from ._actor import Actor, ExitReason
from ._peer import (
    NON_CANCELLABLE,
    Dispatcher,
    InboundRequest,
    Peer,
    PeerLimits,
    PeerStatistics,
    ProgressCallback,
)

__all__ = [
    "Actor",
    "ExitReason",
    "Peer",
    "PeerLimits",
    "PeerStatistics",
    "InboundRequest",
    "Dispatcher",
    "ProgressCallback",
    "NON_CANCELLABLE",
]
