"""The Streamable HTTP server (MCP 2025-03-26 .. 2025-11-25, and the
stateless 2026-07-28 requests on the same endpoint).

:class:`StreamableHttpApp` is the ASGI 3 app, :class:`HttpServer` runs it on
hypercorn's trio connections. Sessions are found through a
:class:`SessionRegistry` (:class:`MemorySessionRegistry` by default);
resumable SSE streams keep their events in an :class:`EventStore`
(:class:`MemoryEventStore` by default).

Modules: ``_app`` (the ASGI app: dispatch, lifecycle), ``_routes`` (custom
routes, the ``Host`` / ``Origin`` checks), ``_watch`` (a POST's cancel scope
and the watch for slow ones), ``_post`` / ``_get``
(the handlers of each HTTP method), ``_session`` (one session's
MessageStream and routing), ``_streams`` (its SSE streams), ``_sessions``
(the registry), ``_eventstore``, ``_stateless`` (2026-07-28 requests) and
``_stateless_checks`` (their validation ladder, params decoded once),
``_config`` (settings), ``_cors``, ``_health`` (``/healthz``, ``/readyz``),
``_auth`` (the OAuth 2.1 resource server: metadata, challenges, scopes,
sessions bound to their principal; ``auth=``), ``_metrics`` (``/metrics``,
with ``metrics=``), ``_server`` (:class:`HttpServer`) and ``_hypercorn``
(how it runs hypercorn: its connections, with one socket write per sized
answer and one keep-alive task per connection).
"""

from ._app import AsgiCallable, StreamableHttpApp
from ._config import HttpServerInfo, HttpServerSettings, HttpServerStatistics
from ._eventstore import EventStore, MemoryEventStore, StoredEvent
from ._health import Readiness
from ._server import HttpServer
from ._session import HttpSessionStream, close_sse_stream
from ._sessions import ClusterHook, ExpiryPolicy, MemorySessionRegistry, SessionRegistry

__all__ = [
    "AsgiCallable",
    "ClusterHook",
    "EventStore",
    "ExpiryPolicy",
    "HttpServer",
    "HttpServerInfo",
    "HttpServerSettings",
    "HttpServerStatistics",
    "HttpSessionStream",
    "MemoryEventStore",
    "MemorySessionRegistry",
    "Readiness",
    "SessionRegistry",
    "StoredEvent",
    "StreamableHttpApp",
    "close_sse_stream",
]
