"""Actors: the JSON-RPC peer and the MCP roles (server, client, host)."""

import importlib
from typing import TYPE_CHECKING, Any

from ._actor import ExitReason
from ._peer import (
    NON_CANCELLABLE,
    Dispatcher,
    InboundRequest,
    Peer,
    PeerLimits,
    ProgressCallback,
    oversized_batch,
)

#: Names imported on first use (the client, connection and host actors).
_LAZY = {
    "PeerStatistics": "_peer_statistics",
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
    "TaskRuntime": "_tasks",
    "TaskStore": "_tasks",
    "MemoryTaskStore": "_tasks",
    "TaskRecord": "_tasks",
    "TaskStoreFull": "_tasks",
    "TaskClient": "_client_tasks",
    "TaskInfo": "_client_tasks",
    "TaskFailed": "_client_tasks",
    "ClientCall": "_client_call",
    "ClientMiddleware": "_client_call",
    "ServerMiddleware": "_middleware",
}

if TYPE_CHECKING:  # what type checkers see of the names imported on first use
    from ._client import (
        ClientSession as ClientSession,
    )
    from ._client import (
        open_session as open_session,
    )
    from ._client_call import (
        ClientCall as ClientCall,
    )
    from ._client_call import (
        ClientMiddleware as ClientMiddleware,
    )
    from ._client_tasks import (
        TaskClient as TaskClient,
    )
    from ._client_tasks import (
        TaskFailed as TaskFailed,
    )
    from ._client_tasks import (
        TaskInfo as TaskInfo,
    )
    from ._connection import (
        Connected as Connected,
    )
    from ._connection import (
        Connection as Connection,
    )
    from ._connection import (
        ConnectionEvent as ConnectionEvent,
    )
    from ._connection import (
        ConnectionFailed as ConnectionFailed,
    )
    from ._connection import (
        ConnectionSettings as ConnectionSettings,
    )
    from ._connection import (
        Disconnected as Disconnected,
    )
    from ._connection import (
        HealthCheckFailed as HealthCheckFailed,
    )
    from ._connection import (
        ListsRefreshed as ListsRefreshed,
    )
    from ._connection import (
        ReconnectScheduled as ReconnectScheduled,
    )
    from ._host import (
        Approve as Approve,
    )
    from ._host import (
        ConsentPolicy as ConsentPolicy,
    )
    from ._host import (
        ConsentRequest as ConsentRequest,
    )
    from ._host import (
        Deny as Deny,
    )
    from ._host import (
        Host as Host,
    )
    from ._host import (
        HostedTool as HostedTool,
    )
    from ._host import (
        LLMProvider as LLMProvider,
    )
    from ._host import (
        Modify as Modify,
    )
    from ._host import (
        SamplingDenied as SamplingDenied,
    )
    from ._host import (
        ToolCallDenied as ToolCallDenied,
    )
    from ._middleware import (
        ServerMiddleware as ServerMiddleware,
    )
    from ._peer_statistics import PeerStatistics as PeerStatistics
    from ._server import (
        Context as Context,
    )
    from ._server import (
        ServerSession as ServerSession,
    )
    from ._tasks import (
        MemoryTaskStore as MemoryTaskStore,
    )
    from ._tasks import (
        TaskRecord as TaskRecord,
    )
    from ._tasks import (
        TaskRuntime as TaskRuntime,
    )
    from ._tasks import (
        TaskStore as TaskStore,
    )
    from ._tasks import (
        TaskStoreFull as TaskStoreFull,
    )


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
    "InboundRequest",
    "Dispatcher",
    "ProgressCallback",
    "NON_CANCELLABLE",
    "oversized_batch",
]
