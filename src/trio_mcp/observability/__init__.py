"""Observability: OpenTelemetry traces of MCP sessions (see ``_tracing``).

Importing this package installs the default :class:`Tracing` (sessions trace
when a global tracer provider is set); sessions import it when the first one
is made (``trio_mcp.actors._instrument``).
"""

from ._tracing import TRACER_NAME, Tracing

__all__ = ["TRACER_NAME", "Tracing"]
