"""Observability: OpenTelemetry traces of MCP sessions (see ``_tracing``).

Importing ``_tracing`` installs the default :class:`Tracing` (sessions trace
when a global tracer provider is set); the first session made imports it
(``trio_mcp.actors._instrument.DEFAULT_MODULES``), and with it this package:
keep this file free of imports of optional dependencies.
"""

from ._tracing import TRACER_NAME, Tracing

__all__ = ["TRACER_NAME", "Tracing"]
