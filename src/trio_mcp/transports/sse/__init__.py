"""The legacy HTTP+SSE transport (MCP 2024-11-05).

Two endpoints:

* ``GET /sse`` opens a session and its event stream. The first event is
  ``endpoint``, whose data is the URL to POST messages to
  (``/messages?session_id=<id>``, relative to the server); every
  server-to-client message then travels as a ``message`` event.
* ``POST /messages?session_id=<id>`` carries one client-to-server message
  (or a batch), answered ``202 Accepted`` once it is queued for the session.
  (``sessionId``, the name some servers use, is accepted as well.)

Three pieces:

* :class:`SseApp` — the server as an ASGI 3 application (mount it anywhere;
  the endpoint URL honours ``root_path``).
* :class:`SseServer` — an actor serving an :class:`SseApp` with hypercorn's
  trio worker on one port.
* :class:`SseTransport` — the client actor: ``stream = await
  nursery.start(SseTransport(url).run)``.

Server decisions
----------------

* **Sessions.** Each GET starts one :class:`~trio_mcp.server.ServerSession`
  over a :class:`SseSessionStream`; its id is 128 random bits from
  :mod:`secrets` (32 hex digits). The session ends when the GET connection
  goes away (a clean end of stream for the session: the legacy protocol has
  no other way for a client to close), and the GET response ends when the
  session does. ``max_sessions`` bounds the sessions (``503`` beyond).
* **POST answers.** ``202`` once queued; ``400`` without ``session_id`` or
  for a body that is not JSON (the body of every error answer is a JSON-RPC
  error object); ``404`` for an unknown or ended session; ``413`` above
  ``max_body_size``; ``415`` for a ``Content-Type`` other than JSON;
  ``503`` when the session's inbound queue stays full for
  ``enqueue_timeout`` seconds. A body that is JSON but not valid JSON-RPC
  (say, a request without ``method``) is accepted and answered by the
  session on the event stream, with its id, like any answer.
* **DNS-rebinding protection.** ``Host`` must be allowed (``421``
  otherwise) and ``Origin``, when present, too (``403``), on both endpoints;
  the allow-lists default to the loopback names
  (see :mod:`trio_mcp.transports.http._security`).
* **Keep-alive.** An idle event stream gets a ``: ping`` comment every
  ``ping_interval`` seconds.
* **Backpressure.** The session's messages wait in a bounded per-session
  queue (``outbound_buffer`` messages) for the task writing the event
  stream. When the client reads slowly the queue fills and the session's
  ``send`` blocks: a slow reader slows its own session (handlers wait to
  report progress or answer) and never makes the server buffer without
  bound. Other sessions are not affected. Inbound, a POST waits for room in
  the session's queue (``inbound_queue``) before it is answered, so a
  client that outruns its session is slowed down the same way.

  Caveat: hypercorn's trio worker shields its socket writes from
  cancellation, so a write to a client that has stopped reading (but keeps
  its connection open) cannot be interrupted; that session stays blocked
  until the client reads or its connection dies, and a server stopping in
  the meantime waits for it.

Client decisions
----------------

* The ``endpoint`` event must arrive within ``endpoint_timeout`` seconds;
  its URL is resolved against the (final) SSE URL and must have the same
  origin (scheme, host, port): a server cannot redirect the client's
  messages elsewhere.
* ``message`` events are decoded and queued for ``receive`` in a bounded
  queue (``receive_buffer``); while it is full the client stops reading the
  stream (backpressure reaches the server through TCP).
* ``send`` POSTs each message (concurrent sends are concurrent POSTs; each
  message is whole in its own body). A ``404`` means the session is gone:
  the transport is broken (``receive`` raises :class:`TransportError`).
  Any other non-2xx answer fails that ``send`` with :class:`TransportError`
  naming the status, and the stream stays usable. A network failure breaks
  the transport. A send cancelled mid-POST is delivered whole or not at
  all (the server drops a partial body).
* A clean end of the event stream (the server ended its response) is a
  clean end for ``receive`` (:class:`trio.EndOfChannel`); a broken one
  (connection lost, read timeout, malformed stream) raises
  :class:`TransportError`. Either way the peer fails its pending calls.
* ``aclose`` closes the event stream (the server ends the session) within
  ``close_timeout`` seconds.
"""

from ._client import SseClientStream, SseTransport, resolve_endpoint
from ._server import (
    SseApp,
    SseServer,
    SseServerInfo,
    SseServerSettings,
    SseSessionStream,
)

__all__ = [
    "SseApp",
    "SseClientStream",
    "SseServer",
    "SseServerInfo",
    "SseServerSettings",
    "SseSessionStream",
    "SseTransport",
    "resolve_endpoint",
]
