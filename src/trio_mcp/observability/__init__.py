"""Observability: OpenTelemetry traces of MCP sessions (see ``_tracing``) and
Prometheus metrics (:class:`Metrics`, served at ``GET /metrics`` by the HTTP
server and the gateway; see ``_metrics``).

Importing ``_tracing`` installs the default :class:`Tracing` (sessions trace
when a global tracer provider is set); the first session made imports it
(``trio_mcp.actors._instrument.DEFAULT_MODULES``), and with it this package:
keep this file free of imports of optional dependencies (``_metrics`` imports
prometheus-client only when a :class:`Metrics` is made).
"""

from ._metrics import DEFAULT_BUCKETS, OTHER, BackingServer, Metrics, MetricSource, MetricsSettings
from ._tracing import TRACER_NAME, Tracing

__all__ = [
    "DEFAULT_BUCKETS",
    "OTHER",
    "TRACER_NAME",
    "BackingServer",
    "MetricSource",
    "Metrics",
    "MetricsSettings",
    "Tracing",
]
