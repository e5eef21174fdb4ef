"""``GET /metrics``: the Prometheus metrics of a :class:`StreamableHttpApp`.

:func:`install_metrics` counts the app's requests (the
:class:`~trio_mcp.observability.Metrics` middleware), tracks its session
actors (queue depths, overload refusals), adds what the HTTP server counts
anyway, read at scrape time (sessions and SSE streams open, sessions created,
expired, evicted and refused, POSTs refused, messages dropped, frames waiting
in the sessions' inbound queues), and serves the lot at
``settings.metrics_path``. Nothing of it runs when metrics are off.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...observability import Metrics
from ...transports._asgi import HttpError, Receive, Scope, Send, header_map, respond

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from ._app import StreamableHttpApp

__all__ = ["Metrics", "install_metrics"]

_GET_ONLY = [(b"allow", b"GET")]


def install_metrics(app: StreamableHttpApp, metrics: Metrics) -> Metrics:
    """Count ``app``'s requests with ``metrics`` and serve them (see the module)."""
    if not isinstance(metrics, Metrics):
        raise TypeError(f"metrics must be True, False or a Metrics, not {type(metrics).__name__}")
    if app._shared is not None:
        metrics.instrument(app._shared)
    else:
        app._factory = metrics.instrument(app._factory)
    metrics.add_source(lambda: _http_families(app, metrics))

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") not in ("GET", "HEAD"):
            raise HttpError(405, "Method not allowed", headers=_GET_ONLY)
        body, content_type = metrics.render(header_map(scope).get("accept"))
        await respond(send, 200, body, content_type=content_type.encode())

    app.mount(app.settings.metrics_path, route)
    return metrics


def _http_families(app: StreamableHttpApp, metrics: Metrics) -> Iterator[Metric]:
    from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily

    name = metrics.name
    stats = app.statistics()
    yield GaugeMetricFamily(name("sessions_open"), "Streamable HTTP sessions open", value=stats.sessions)
    yield GaugeMetricFamily(
        name("sse_streams_open"), "SSE responses open (POST and GET streams)", value=stats.sse_connections
    )
    yield CounterMetricFamily(name("sessions_created"), "Sessions created", value=stats.sessions_created)
    yield CounterMetricFamily(
        name("sessions_expired"),
        "Sessions ended by session_idle_timeout or handshake_timeout",
        value=stats.sessions_expired,
    )
    yield CounterMetricFamily(
        name("sessions_evicted"),
        "Idle sessions ended at max_sessions for a new one",
        value=stats.sessions_evicted,
    )
    yield CounterMetricFamily(
        name("messages_dropped"), "Messages no client could receive", value=stats.messages_dropped
    )
    rejections = CounterMetricFamily(name("overload_rejections"), "", labels=["reason"])
    rejections.add_metric(["max_sessions"], stats.sessions_refused)
    rejections.add_metric(["session_queue"], stats.posts_refused)
    yield rejections
    inbound = sum(_queued(session) for session in app.registry.local())
    queues = GaugeMetricFamily(name("queue_depth"), "", labels=["queue"])
    queues.add_metric(["http_inbound"], inbound)
    yield queues


def _queued(session: Any) -> int:
    """Frames (POST bodies) waiting in a session's inbound queue."""
    queue = getattr(session, "_in_send", None)
    return 0 if queue is None else int(queue.statistics().current_buffer_used)
