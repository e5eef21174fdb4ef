"""Observability: OpenTelemetry traces of MCP sessions (see ``_tracing``) and
Prometheus metrics (:class:`Metrics`, served at ``GET /metrics`` by the HTTP
server and the gateway; see ``_metrics``).

Importing ``_tracing`` installs the default :class:`Tracing` (sessions trace
when a global tracer provider is set); the first session made imports it
(``trio_mcp.actors._instrument.DEFAULT_MODULES``), and with it this package:
so this file imports nothing optional, and ``_metrics`` only when one of its
names is first asked for (it imports prometheus-client only when a
:class:`Metrics` is made).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._tracing import TRACER_NAME, Tracing

if TYPE_CHECKING:
    from ._metrics import DEFAULT_BUCKETS, OTHER, BackingServer, Metrics, MetricSource, MetricsSettings

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

_METRICS_NAMES = frozenset(
    {"DEFAULT_BUCKETS", "OTHER", "BackingServer", "MetricSource", "Metrics", "MetricsSettings"}
)


def __getattr__(name: str) -> Any:
    if name in _METRICS_NAMES:
        return getattr(importlib.import_module("._metrics", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
