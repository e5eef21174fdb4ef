"""Actors: the JSON-RPC peer and the MCP roles (server, client, host)."""

import importlib
from typing import Any

from ._actor import ExitReason
from ._peer import (
    NON_CANCELLABLE,
    Dispatcher,
    InboundRequest,
    Peer,
    PeerLimits,
    PeerStatistics,
    ProgressCallback,
)

#: Names imported on first use (the client, connection and host actors).
_LAZY = {
    "ClientSession": "_client",
    "open_session": "_client",
    "ServerSession": "_server",
    "Context": "_server",
    "Connection": "_connection",
    "ConnectionSettings": "_connection",
    "ConnectionEvent": "_connection",
    "Connected": "_connection",
    "Disconnected": "_connection",
    "ReconnectScheduled": "_connection",
    "ListsRefreshed": "_connection",
    "ConnectionFailed": "_connection",
    "HealthCheckFailed": "_connection",
    "Host": "_host",
    "HostedTool": "_host",
    "LLMProvider": "_host",
    "Approve": "_host",
    "Modify": "_host",
    "Deny": "_host",
    "ConsentPolicy": "_host",
    "ConsentRequest": "_host",
    "ToolCallDenied": "_host",
    "SamplingDenied": "_host",
    "ClientCall": "_middleware",
    "ClientMiddleware": "_middleware",
    "ServerMiddleware": "_middleware",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    *_LAZY,
    "ExitReason",
    "Peer",
    "PeerLimits",
    "PeerStatistics",
    "InboundRequest",
    "Dispatcher",
    "ProgressCallback",
    "NON_CANCELLABLE",
]
