"""The settings, statistics and constants of the Streamable HTTP server."""

from __future__ import annotations

import functools
from typing import Final, Literal

import attrs

from ..._util import check_positive
from ...transports._asgi import as_tuple
from ...transports._server_info import ServerInfo
from ...transports.http._security import LOCAL_HOSTS

__all__ = [
    "ASSIGNED_SESSION",
    "DEFAULT_STORE",
    "ERROR_STATUS",
    "LAST_EVENT_HEADER",
    "SESSION_HEADER",
    "VERSION_HEADER",
    "HttpServerInfo",
    "HttpServerSettings",
    "HttpServerStatistics",
    "Mode",
    "accepts",
    "answer_mode",
    "media_types",
]

SESSION_HEADER: Final = "mcp-session-id"
VERSION_HEADER: Final = "mcp-protocol-version"
LAST_EVENT_HEADER: Final = "last-event-id"
#: The ASGI scope key under which a cluster hook names the session that
#: serves a POST (a node's replica of a session owned elsewhere) instead of
#: the one the registry holds.
ASSIGNED_SESSION: Final = "trio_mcp.session"

DEFAULT_STORE: Final = "memory"


#: The HTTP status of a stateless request answered with a JSON-RPC error.
ERROR_STATUS: Final = {
    -32700: 400,
    -32600: 400,
    -32602: 400,
    -32020: 400,
    -32021: 400,
    -32022: 400,
    -32601: 404,
}


@attrs.frozen(kw_only=True)
class HttpServerSettings:
    """Every option and bound of the Streamable HTTP server, named."""

    #: The MCP endpoint.
    path: str = "/mcp"
    #: ``None``: JSON unless a related message needs SSE; ``True``: always
    #: JSON; ``False``: always SSE (when the client accepts it).
    json_response: bool | None = None
    #: Largest POST body, in bytes (``413`` above).
    max_body_size: int = 4 << 20
    #: Check ``Host`` and ``Origin`` (DNS-rebinding protection).
    dns_rebinding_protection: bool = True
    #: Host names (``"name"`` any port, ``"name:port"``) the server answers to.
    allowed_hosts: tuple[str, ...] = attrs.field(default=LOCAL_HOSTS, converter=as_tuple)
    #: Origins allowed in browser requests (host names or full origins).
    allowed_origins: tuple[str, ...] = attrs.field(default=LOCAL_HOSTS, converter=as_tuple)
    #: Sessions alive at once; ``initialize`` beyond it gets ``503``.
    max_sessions: int = 1024
    #: Seconds a session may stay without any request or open stream
    #: before it is ended (``None``: never).
    session_idle_timeout: float | None = 3600.0
    #: Seconds a new session may wait for its client's next message (the
    #: ``notifications/initialized`` that completes the handshake) before it
    #: is ended (``None``: only ``session_idle_timeout`` applies). At
    #: ``max_sessions``, the idlest session is ended before a new one is
    #: refused (see :class:`~trio_mcp.serving.http.SessionRegistry`).
    handshake_timeout: float | None = 10.0
    #: Seconds the whole request body may take to arrive once the headers
    #: have (``408`` and the connection closed after).
    body_timeout: float = 30.0
    #: Seconds a POST in a session waits for its JSON answer before a task
    #: starts watching for its client going away (a quicker answer never
    #: pays for that task; a client gone meanwhile is noticed then).
    disconnect_watch_delay: float = 1.0
    #: Frames (POST bodies) waiting for the session's peer.
    inbound_queue: int = 64
    #: Seconds a POST may wait for room in that queue (``503`` after).
    enqueue_timeout: float = 10.0
    #: Events queued for one SSE connection.
    sse_buffer: int = 64
    #: Seconds one write to a client, or one wait for room in its queue,
    #: may take before that connection is dropped (the client resumes).
    write_timeout: float = 10.0
    #: Messages kept for the first GET stream of a session (oldest dropped).
    standalone_backlog: int = 256
    #: Seconds between keep-alive comments on an idle SSE stream.
    ping_interval: float = 15.0
    #: Seconds a client should wait before reconnecting (SSE ``retry``).
    retry_interval: float = 1.0
    #: Seconds one event-store call may take.
    store_timeout: float = 5.0
    #: Seconds a POST stream's events stay in the event store after its
    #: last event was written: the client may not have received it (a write
    #: to a dead connection succeeds) and may still resume.
    completed_stream_retention: float = 30.0
    #: Serve handshake-era requests without sessions (as the official SDK's
    #: stateless mode): no ``Mcp-Session-Id``, every POST answered on its
    #: own, ``GET`` and ``DELETE`` refused with ``405``.
    stateless: bool = False
    #: ``GET`` here answers ``200`` while the process is alive (``None``: no such route).
    health_path: str | None = "/healthz"
    #: ``GET`` here answers ``200`` when the server takes sessions, else ``503``
    #: (``None``: no such route).
    ready_path: str | None = "/readyz"
    #: Seconds the readiness callback may take (not ready after).
    readiness_timeout: float = 5.0
    #: ``GET`` here answers the Prometheus metrics, when the server has them
    #: (``metrics=`` of :class:`~trio_mcp.serving.http.HttpServer`).
    metrics_path: str = "/metrics"
    #: Seconds a browser may cache a CORS preflight answer.
    cors_max_age: int = 600
    #: Share sessions with other processes and nodes through this Redis
    #: (``redis://host:port/db``; the ``redis`` extra; see
    #: :mod:`trio_mcp.serving.cluster`). ``None``: this process alone.
    redis_url: str | None = None
    #: This node's name in the cluster (``None``: a random one).
    node_id: str | None = None

    def __attrs_post_init__(self) -> None:
        for name in ("path", "health_path", "ready_path", "metrics_path"):
            value = getattr(self, name)
            if value is not None and not value.startswith("/"):
                raise ValueError(f"{name} must start with '/'")
        check_positive(
            self,
            (
                "max_body_size",
                "max_sessions",
                "inbound_queue",
                "enqueue_timeout",
                "sse_buffer",
                "write_timeout",
                "standalone_backlog",
                "ping_interval",
                "retry_interval",
                "store_timeout",
                "completed_stream_retention",
                "body_timeout",
                "disconnect_watch_delay",
                "readiness_timeout",
                "cors_max_age",
            ),
        )
        for name in ("session_idle_timeout", "handshake_timeout"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"HttpServerSettings.{name} must be positive or None")


@attrs.frozen
class HttpServerStatistics:
    """What :meth:`StreamableHttpApp.statistics` reports."""

    sessions: int
    sse_connections: int
    #: Messages nobody could receive (no GET stream and no event store, a
    #: full backlog, an answer whose POST was gone).
    messages_dropped: int
    sessions_created: int
    #: Ended by ``session_idle_timeout`` or ``handshake_timeout``.
    sessions_expired: int
    #: Ended at ``max_sessions`` to admit a new one (the idlest first).
    sessions_evicted: int = 0
    #: ``initialize`` refused with ``503``: every session busy at ``max_sessions``.
    sessions_refused: int = 0
    #: POSTs refused with ``503``: their session's ``inbound_queue`` stayed
    #: full for ``enqueue_timeout``.
    posts_refused: int = 0


#: Where an :class:`HttpServer` listens (``task_status.started`` value).
HttpServerInfo = ServerInfo


#: How a POST is answered: JSON unless SSE is needed, always JSON, always SSE.
Mode = Literal["auto", "json", "sse"]


@functools.lru_cache(maxsize=64)
def media_types(value: str | None) -> frozenset[str]:
    """The media types an ``Accept`` header accepts (q > 0); clients send the
    same few values, so they are parsed once each."""
    if value is None:
        return frozenset({"*/*"})
    out = set()
    for part in value.split(","):
        media, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, val = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(val)
                except ValueError:
                    q = 0.0
        if q > 0 and media:
            out.add(media.strip().lower())
    return frozenset(out)


def accepts(types: frozenset[str], media: str) -> bool:
    major = media.partition("/")[0]
    return media in types or f"{major}/*" in types or "*/*" in types


def answer_mode(setting: bool | None, json_ok: bool, sse_ok: bool) -> Mode:
    """How a POST is answered, from the ``json_response`` setting and what the client accepts."""
    if setting is True:
        return "json" if json_ok else "sse"
    if setting is False:
        return "sse" if sse_ok else "json"
    return "auto" if json_ok else "sse"
