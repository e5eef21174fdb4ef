"""Observability: Prometheus metrics (:class:`Metrics`, served at ``GET
/metrics`` by the HTTP server and the gateway)."""

from ._metrics import DEFAULT_BUCKETS, OTHER, BackingServer, Metrics, MetricSource, MetricsSettings

__all__ = [
    "DEFAULT_BUCKETS",
    "OTHER",
    "BackingServer",
    "MetricSource",
    "Metrics",
    "MetricsSettings",
]
