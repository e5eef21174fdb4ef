"""The one interface every transport implements.

A transport hands the peer actor decoded messages and takes typed messages to
send; bytes exist only inside it. Transports that need background work (a
subprocess, an HTTP server) are actors that produce a :class:`MessageStream`
via ``await nursery.start(transport.run)``.

Contract, checked for every transport by ``tests/transports/test_conformance.py``:

* ``send`` may be called from many tasks at once; each message is written
  whole (never interleaved, never half-written on cancellation) and in the
  order the sends completed. It applies backpressure: it blocks while the
  other side is not reading, within the transport's bounded buffer.
* ``receive`` returns one decoded frame: a message, an
  :class:`~trio_mcp.protocol.InvalidMessage` for a bad frame (the stream
  stays usable), or a batch list. At a clean end of stream it raises
  :class:`trio.EndOfChannel`; when the transport breaks it raises
  :class:`TransportError`. Only one task receives.
* ``aclose`` is idempotent and bounded; afterwards ``send`` raises
  :class:`TransportClosed` and the other side's ``receive`` ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Protocol, runtime_checkable

from ..protocol import Frame

__all__ = [
    "RELATED_REQUEST",
    "REQUEST_HEADERS",
    "MessageStream",
    "TransportClosed",
    "TransportError",
    "host_in_url",
]

#: The id of the inbound request whose handler is running in this task, set
#: by the peer around each handler. Transports that route messages per
#: request (Streamable HTTP: a handler's notifications and server-to-client
#: requests travel on the SSE stream of the POST that carried the request)
#: read it in ``send``; the others ignore it.
RELATED_REQUEST: ContextVar[int | str | None] = ContextVar("trio_mcp_related_request", default=None)

#: ``(peer, headers)`` while a request that came over HTTP is served inline
#: in its HTTP task (the stateless path): the request's headers for that
#: peer's handler (``Context.request_headers``). A session served by its own
#: task asks its stream instead (``stream.request_headers(request_id)``).
REQUEST_HEADERS: ContextVar[tuple[object, Mapping[str, str]] | None] = ContextVar(
    "trio_mcp_request_headers", default=None
)


class TransportError(Exception):
    """The transport broke (peer process died, connection lost, garbage…).

    ``reason`` is a short human-readable explanation (exit status, stderr
    tail, HTTP status) that ends up in the callers' ConnectionClosed errors.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransportClosed(TransportError):
    """Sending on a transport that was closed (by either side)."""

    def __init__(self, reason: str = "transport closed") -> None:
        super().__init__(reason)


@runtime_checkable
class MessageStream(Protocol):
    """A bidirectional stream of JSON-RPC messages (contract: module docstring)."""

    async def send(self, message: Any) -> None: ...

    async def receive(self) -> Frame: ...

    async def aclose(self) -> None: ...


def host_in_url(host: str) -> str:
    """``host`` as it stands in a URL, a ``Host`` header or a bind address
    (an IPv6 literal in brackets)."""
    return f"[{host}]" if ":" in host else host
