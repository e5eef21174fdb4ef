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

from __future__ import annotations

import logging
import secrets
import ssl
from collections.abc import Mapping
from functools import lru_cache, partial
from typing import Any, Final, cast
from urllib.parse import parse_qs, urljoin, urlsplit

import attrs
import httpx
import trio

from .._util import check_positive, collapse_groups
from ..protocol import PARSE_ERROR, Frame, InvalidMessage, decode, encode, error_response
from ._asgi import (
    AsgiApp,
    Disconnected,
    HttpError,
    Receive,
    Scope,
    Send,
    as_tuple,
    error_body,
    header_map,
    read_body,
    respond,
    start_event_stream,
    watch_disconnect,
)
from ._base import ServerInfo, TransportClosed, TransportError, host_in_url
from .http._security import LOCAL_HOSTS, HostPolicy
from .http._sse import SseDecoder, SseError

__all__ = [
    "SseApp",
    "SseClientStream",
    "SseServer",
    "SseServerInfo",
    "SseServerSettings",
    "SseSessionStream",
    "SseTransport",
]

log = logging.getLogger("trio_mcp.sse")


#: A comment line: keeps idle connections alive through proxies.
PING: Final = b": ping\n\n"
SESSION_PARAM: Final = "session_id"


def format_sse(event: str, data: str | bytes) -> bytes:
    """One named event whose data holds no line break (compact JSON, a URL)."""
    raw = data.encode() if isinstance(data, str) else data
    if b"\n" in raw or b"\r" in raw:
        raise ValueError("SSE data must not contain line breaks here")
    return b"event: " + event.encode() + b"\ndata: " + raw + b"\n\n"


# ------------------------------------------------------------------ server


@attrs.frozen(kw_only=True)
class SseServerSettings:
    """Every option and bound of the legacy SSE server, named."""

    #: Where clients open their event stream (``GET``).
    sse_path: str = "/sse"
    #: Where clients POST their messages.
    message_path: str = "/messages"
    #: Largest POST body, in bytes (``413`` above).
    max_body_size: int = 4 << 20
    #: Check ``Host`` and ``Origin`` (DNS-rebinding protection).
    dns_rebinding_protection: bool = True
    #: Host names (``"name"`` any port, ``"name:port"``) the server answers to.
    allowed_hosts: tuple[str, ...] = attrs.field(default=LOCAL_HOSTS, converter=as_tuple)
    #: Origins allowed in browser requests (host names or full origins).
    allowed_origins: tuple[str, ...] = attrs.field(default=LOCAL_HOSTS, converter=as_tuple)
    #: Sessions alive at once; a GET beyond gets ``503``.
    max_sessions: int = 1024
    #: POSTed frames waiting for the session's peer.
    inbound_queue: int = 64
    #: Seconds a POST may wait for room in that queue (``503`` after).
    enqueue_timeout: float = 10.0
    #: Messages waiting to be written to the event stream; the session's
    #: ``send`` blocks while it is full (backpressure from a slow reader).
    outbound_buffer: int = 64
    #: Seconds between keep-alive comments on an idle event stream.
    ping_interval: float = 15.0

    def __attrs_post_init__(self) -> None:
        for name in ("sse_path", "message_path"):
            if not getattr(self, name).startswith("/"):
                raise ValueError(f"SseServerSettings.{name} must start with '/'")
        if self.sse_path == self.message_path:
            raise ValueError("sse_path and message_path must differ")
        check_positive(
            self,
            ("max_body_size", "max_sessions", "inbound_queue", "enqueue_timeout", "ping_interval"),
            nonnegative=("outbound_buffer",),
        )


#: Where an :class:`SseServer` listens (``task_status.started`` value);
#: ``url`` is the event stream's.
SseServerInfo = ServerInfo


class SseSessionStream:
    """The :class:`MessageStream` of one SSE session, the ServerSession's end.

    ``receive`` yields the frames of POST bodies; ``send`` queues a message
    for the event stream (bounded: see the module documentation).
    """

    def __init__(self, app: SseApp, session_id: str) -> None:
        self.app = app
        self.id = session_id
        settings = app.settings
        self._in_send, self._in_recv = trio.open_memory_channel[Frame](settings.inbound_queue)
        self._out_send, self._out_recv = trio.open_memory_channel[bytes](settings.outbound_buffer)
        self.closed = False
        self.reason: str | None = None
        self._finished = trio.Event()
        self.cancel_scope: trio.CancelScope | None = None
        self.received = 0
        self.sent = 0

    def __repr__(self) -> str:
        return f"<SseSessionStream {self.id[:8]}{' closed' if self.closed else ''}>"

    async def enqueue(self, frame: Frame) -> int:
        """Hand a POST body to the session: 0 when queued, else an HTTP status."""
        if self.closed:
            return 404
        with trio.move_on_after(self.app.settings.enqueue_timeout):
            try:
                await self._in_send.send(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return 404
            self.received += 1
            return 0
        return 503

    # ------------------------------------------------------- MessageStream

    async def send(self, message: Any) -> None:
        if self.closed:
            raise TransportClosed(f"SSE session {self.id[:8]} ended: {self.reason}")
        data = encode(message)
        try:
            await self._out_send.send(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise TransportClosed(f"SSE session {self.id[:8]} ended: {self.reason}") from None
        self.sent += 1

    async def receive(self) -> Frame:
        try:
            return await self._in_recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise trio.EndOfChannel from None

    async def aclose(self) -> None:
        """End the session: the event stream ends after the queued messages."""
        self._close("closed by the server")
        await trio.lowlevel.checkpoint()

    async def wait_closed(self) -> None:
        """Return once the session has ended (either side)."""
        await self._finished.wait()

    def _close(self, reason: str) -> None:
        """End everything at once (idempotent, never blocks)."""
        if self.closed:
            return
        self.closed = True
        self.reason = reason
        self._in_send.close()
        self._out_send.close()
        self._finished.set()


class SseApp(AsgiApp):
    """The legacy SSE endpoints as an ASGI 3 application.

    ``app`` is a :class:`~trio_mcp.server.LowLevelServer` (or
    :class:`~trio_mcp.server.MCPServer`, or anything with its ``running()``
    and ``start_session(stream, nursery, name=...)``), shared by all
    sessions. Sessions run in the nursery of :meth:`run` (``await
    nursery.start(sse_app.run)``), which also holds the app's lifespan; when
    served by a plain ASGI server the app runs itself inside the ASGI
    lifespan instead (without either, a GET gets ``503``). Under a plain
    ASGI server the app learns of a shutdown only at ``lifespan.shutdown``,
    which hypercorn sends after its connections are done: open event
    streams then last until that server's graceful timeout. :class:`SseServer`
    ends them first.
    """

    def __init__(self, app: Any, *, settings: SseServerSettings | None = None, **options: Any) -> None:
        if settings is None:
            settings = SseServerSettings(**options)
        elif options:
            settings = attrs.evolve(settings, **options)
        if not (hasattr(app, "start_session") and hasattr(app, "running")):
            raise TypeError("app must be a LowLevelServer / MCPServer (start_session and running)")
        self.app = app
        self.settings = settings
        self._policy = HostPolicy(settings.allowed_hosts, settings.allowed_origins)
        self.sessions: dict[str, SseSessionStream] = {}
        self._nursery: trio.Nursery | None = None
        self._running = False
        self._closed = False
        self._stop = trio.Event()
        self._created = 0

    # ------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: trio.TaskStatus[SseApp] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the sessions until :meth:`aclose` (or cancellation)."""
        if self._running:
            raise RuntimeError("an SseApp runs once at a time")
        self._running = True
        try:
            async with self.app.running(), trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started(self)
                await self._stop.wait()
                nursery.cancel_scope.cancel()
        finally:
            self._closed = True
            self._nursery = None
            for session in list(self.sessions.values()):
                self._end_session(session, "server stopped")
            self._running = False

    async def aclose(self) -> None:
        """End every session and event stream, and stop :meth:`run`."""
        self._closed = True
        for session in list(self.sessions.values()):
            self._end_session(session, "server stopped")
        self._stop.set()
        await trio.lowlevel.checkpoint()

    def statistics(self) -> dict[str, int]:
        return {"sessions": len(self.sessions), "sessions_created": self._created}

    def _end_session(self, session: SseSessionStream, reason: str) -> None:
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
            log.debug("session %s ended: %s", session.id, reason)
        session._close(reason)
        if session.cancel_scope is not None:
            session.cancel_scope.cancel()

    async def _session_task(self, session: SseSessionStream, *, task_status: trio.TaskStatus[Any]) -> None:
        started = False
        try:
            with trio.CancelScope() as scope:
                session.cancel_scope = scope
                async with trio.open_nursery() as nursery:
                    server_session = await self.app.start_session(
                        session, nursery, name=f"sse:{session.id[:8]}"
                    )
                    started = True
                    task_status.started(server_session)
        except* TransportError as group:
            log.debug("session %s: %s", session.id, group.exceptions[0])
        except* Exception:
            if not started:
                raise
            log.exception("session %s crashed", session.id)
        finally:
            self._end_session(session, "session finished")

    # ----------------------------------------------------------------- ASGI

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = header_map(scope)
        s = self.settings
        try:
            path = scope.get("path")
            if path not in (s.sse_path, s.message_path):
                raise HttpError(404, "Not found")
            if s.dns_rebinding_protection:
                if not self._policy.host_allowed(headers.get("host")):
                    raise HttpError(421, "Host not allowed")
                if not self._policy.origin_allowed(headers.get("origin")):
                    raise HttpError(403, "Origin not allowed")
            method = scope.get("method", "GET")
            if path == s.sse_path:
                if method != "GET":
                    raise HttpError(405, "Method not allowed", headers=[(b"allow", b"GET")])
                await self._get(scope, receive, send)
            else:
                if method != "POST":
                    raise HttpError(405, "Method not allowed", headers=[(b"allow", b"POST")])
                await self._post(scope, receive, send, headers)
        except HttpError as exc:
            await respond(send, exc.status, error_body(exc.code, exc.message), exc.headers)

    # ------------------------------------------------------------------- GET

    async def _get(self, scope: Scope, receive: Receive, send: Send) -> None:
        nursery = self._nursery
        if nursery is None or self._closed:
            raise HttpError(503, "Server is not running")
        if len(self.sessions) >= self.settings.max_sessions:
            raise HttpError(503, "Too many sessions")
        session = SseSessionStream(self, secrets.token_hex(16))
        self.sessions[session.id] = session
        self._created += 1
        try:
            try:
                await nursery.start(self._session_task, session)
            except Exception:
                log.exception("could not start a session")
                raise HttpError(500, "Could not start a session") from None
            endpoint = (
                f"{scope.get('root_path', '')}{self.settings.message_path}?{SESSION_PARAM}={session.id}"
            )
            await self._pump(session, endpoint, receive, send)
        finally:
            self._end_session(session, "event stream closed")

    async def _pump(self, session: SseSessionStream, endpoint: str, receive: Receive, send: Send) -> None:
        """Write the session's event stream until it ends or the client goes away."""
        ping_interval = self.settings.ping_interval
        out = session._out_recv

        async def write(data: bytes, more: bool = True) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": more})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_disconnect, receive, nursery.cancel_scope)
            await start_event_stream(send)
            await write(format_sse("endpoint", endpoint))
            while True:
                # Only the wait is timed: a write is never cut short (a torn
                # chunk would lose an event).
                data: bytes | None = None
                with trio.move_on_after(ping_interval):
                    try:
                        data = await out.receive()
                    except trio.EndOfChannel:
                        break
                await write(PING if data is None else b"event: message\ndata: " + data + b"\n\n")
            await write(b"", more=False)
            nursery.cancel_scope.cancel()

    # ------------------------------------------------------------------ POST

    async def _post(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        values = query.get(SESSION_PARAM) or query.get("sessionId")
        if not values:
            raise HttpError(400, f"Bad Request: missing {SESSION_PARAM}")
        session = self.sessions.get(values[0])
        if session is None or session.closed:
            raise HttpError(404, "Session not found")
        ctype = headers.get("content-type")
        if ctype is not None and ctype.partition(";")[0].strip().lower() != "application/json":
            raise HttpError(415, "Unsupported Media Type: Content-Type must be application/json")
        try:
            body = await read_body(
                receive,
                headers,
                self.settings.max_body_size,
                # the rest of an oversized body stays unread: the connection cannot be reused
                too_large_headers=[(b"connection", b"close")],
            )
        except Disconnected:
            return  # a partial body is dropped whole
        frame = decode(body)
        if type(frame) is InvalidMessage and frame.error.code == PARSE_ERROR:
            await respond(send, 400, encode(error_response(frame.id, frame.error)))
            return
        status = await session.enqueue(frame)
        if status:
            raise HttpError(status, "Session not found" if status == 404 else "Session busy, retry later")
        await respond(send, 202, b"Accepted", content_type=b"text/plain; charset=utf-8")


class SseServer:
    """An actor serving an MCP app over the legacy HTTP+SSE transport with
    hypercorn's trio worker.

    ``info = await nursery.start(server.run)`` returns an
    :class:`SseServerInfo` whose ``url`` is the event stream's
    (``port=0`` picks a free port). :meth:`stop` (or cancelling ``run``)
    ends every session and event stream, then the listener (within
    ``graceful_timeout`` seconds, but see the backpressure caveat in the
    module documentation).
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        sse_path: str = "/sse",
        message_path: str = "/messages",
        settings: SseServerSettings | None = None,
        graceful_timeout: float = 2.0,
        **options: Any,
    ) -> None:
        if settings is None:
            if "allowed_hosts" not in options and host not in (
                "127.0.0.1",
                "localhost",
                "::1",
                "0.0.0.0",
                "::",
            ):
                options["allowed_hosts"] = (*LOCAL_HOSTS, host_in_url(host))
            settings = SseServerSettings(sse_path=sse_path, message_path=message_path, **options)
        else:
            if sse_path != "/sse":
                options["sse_path"] = sse_path
            if message_path != "/messages":
                options["message_path"] = message_path
            if options:
                settings = attrs.evolve(settings, **options)
        self.asgi = SseApp(app, settings=settings)
        self.host = host
        self.port = port
        self.graceful_timeout = graceful_timeout
        self.info: SseServerInfo | None = None
        self._stop = trio.Event()
        self._started = False

    @property
    def url(self) -> str:
        if self.info is None:
            raise RuntimeError("the server is not running yet")
        return self.info.url

    def stop(self) -> None:
        """Ask ``run`` to end (returns at once)."""
        self._stop.set()

    def statistics(self) -> dict[str, int]:
        return self.asgi.statistics()

    async def run(self, *, task_status: trio.TaskStatus[SseServerInfo] = trio.TASK_STATUS_IGNORED) -> None:
        if self._started:
            raise RuntimeError("an SseServer runs once")
        self._started = True
        from hypercorn.config import Config
        from hypercorn.trio import serve

        config = Config()
        host = self.host
        config.bind = [f"{host_in_url(host)}:{self.port}"]
        config.graceful_timeout = self.graceful_timeout
        config.accesslog = None
        config.errorlog = logging.getLogger("trio_mcp.sse.hypercorn")
        hypercorn_stop = trio.Event()
        async with trio.open_nursery() as nursery:
            await nursery.start(self.asgi.run)
            binds = await nursery.start(
                partial(serve, cast(Any, self.asgi), config, shutdown_trigger=hypercorn_stop.wait)
            )
            port = int(binds[0].rpartition(":")[2]) if binds else self.port
            self.info = ServerInfo.at("http", host, port, self.asgi.settings.sse_path)
            task_status.started(self.info)
            try:
                await self._stop.wait()
            finally:
                # Every event stream ends now (sessions cancelled, responses
                # finished); hypercorn then closes its idle connections.
                hypercorn_stop.set()
                with trio.CancelScope(shield=True):
                    await self.asgi.aclose()
                nursery.cancel_scope.deadline = min(
                    nursery.cancel_scope.deadline, trio.current_time() + self.graceful_timeout + 1.0
                )


# ------------------------------------------------------------------ client


def resolve_endpoint(sse_url: str, data: str) -> str:
    """The POST URL announced by an ``endpoint`` event, resolved against the
    SSE URL; it must have the same origin. Raises :class:`TransportError`."""
    endpoint = urljoin(sse_url, data.strip())
    a, b = urlsplit(sse_url), urlsplit(endpoint)
    if (a.scheme, a.hostname, a.port) != (b.scheme, b.hostname, b.port):
        raise TransportError(f"the endpoint {endpoint!r} is not on the origin of {sse_url!r}")
    return endpoint


@lru_cache(maxsize=1)
def _default_ssl_context() -> ssl.SSLContext:
    # Building one loads the CA bundle (tens of milliseconds): share it.
    return httpx.create_ssl_context()


class SseClientStream:
    """The client's :class:`MessageStream` (from :class:`SseTransport`)."""

    def __init__(
        self,
        transport: SseTransport,
        client: httpx.AsyncClient,
        endpoint: str,
        receive_channel: trio.MemoryReceiveChannel[Frame],
    ) -> None:
        self._transport = transport
        self._client = client
        #: Where messages are POSTed.
        self.endpoint = endpoint
        self._recv = receive_channel
        self.posted = 0

    def __repr__(self) -> str:
        return f"<SseClientStream {self.endpoint}>"

    @property
    def closed(self) -> bool:
        """Closed locally, ended or broken."""
        t = self._transport
        return t._closed or t._ended or t._error is not None

    async def send(self, message: Any) -> None:
        t = self._transport
        if t._closed:
            raise TransportClosed("SSE transport closed")
        if t._error is not None:
            raise TransportError(t._error)
        if t._ended:
            raise TransportClosed("the server ended the event stream")
        body = encode(message)
        try:
            response = await self._client.post(
                self.endpoint, content=body, headers={"content-type": "application/json"}
            )
        except trio.Cancelled:
            raise
        except Exception as exc:  # httpx errors, or the client closed under us
            if t._closed or t._ended:
                raise TransportClosed("SSE transport closed") from None
            reason = f"POST {self.endpoint} failed: {type(exc).__name__}: {exc}"
            t._break(reason)
            raise TransportError(reason) from None
        status = response.status_code
        if 200 <= status < 300:
            self.posted += 1
            return
        detail = response.text.strip()[:200]
        reason = f"the server refused a message: HTTP {status}{': ' + detail if detail else ''}"
        if status in (404, 410):
            t._break(f"the SSE session is gone ({reason})")
        raise TransportError(reason)

    async def receive(self) -> Frame:
        try:
            return await self._recv.receive()
        except trio.ClosedResourceError:
            raise trio.EndOfChannel from None
        except trio.EndOfChannel:
            t = self._transport
            if t._error is not None and not t._closed:
                raise TransportError(t._error) from None
            raise

    async def aclose(self) -> None:
        """Close the event stream (the server ends the session); bounded."""
        t = self._transport
        if not t._closed:
            t._closed = True
            self._recv.close()
            t._wake.set()
        with trio.move_on_after(t.close_timeout, shield=True):
            await t._stopped.wait()


class SseTransport:
    """Client side of the legacy HTTP+SSE transport.

    ``stream = await nursery.start(transport.run)`` opens the event stream at
    ``url``, waits for the ``endpoint`` event and hands out an
    :class:`SseClientStream`. ``run`` raises :class:`TransportError`
    (before reporting started) when the stream cannot be opened (network
    error, a status other than 200, not an event stream, no endpoint in
    time, an endpoint on another origin). It returns once the stream is
    over (``stream.aclose()``, or ended / lost by the server). Cancelling
    ``run`` closes everything (bounded).

    ``headers`` go with every request (GET and POSTs). ``verify``: check
    the server's TLS certificate against the default CA bundle (``True``),
    an ``ssl.SSLContext`` of your own, or not at all (``False``).
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        endpoint_timeout: float = 10.0,
        connect_timeout: float = 10.0,
        sse_read_timeout: float | None = 300.0,
        post_timeout: float = 60.0,
        close_timeout: float = 2.0,
        receive_buffer: int = 64,
        max_event_size: int = 16 << 20,
        verify: ssl.SSLContext | bool = True,
        name: str | None = None,
    ) -> None:
        if urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"an SSE URL starts with http:// or https://, not {url!r}")
        for label, value in (
            ("endpoint_timeout", endpoint_timeout),
            ("connect_timeout", connect_timeout),
            ("post_timeout", post_timeout),
            ("close_timeout", close_timeout),
            ("max_event_size", max_event_size),
        ):
            if not value > 0:
                raise ValueError(f"{label} must be positive")
        if sse_read_timeout is not None and not sse_read_timeout > 0:
            raise ValueError("sse_read_timeout must be positive or None")
        if receive_buffer < 0:
            raise ValueError("receive_buffer must not be negative")
        self.url = url
        self.headers = dict(headers or {})
        self.endpoint_timeout = endpoint_timeout
        self.connect_timeout = connect_timeout
        self.sse_read_timeout = sse_read_timeout
        self.post_timeout = post_timeout
        self.close_timeout = close_timeout
        self.receive_buffer = receive_buffer
        self.max_event_size = max_event_size
        self.verify = verify
        self.name = name or f"sse-client:{url}"
        self._stream: SseClientStream | None = None
        self._closed = False  # aclose was called
        self._ended = False  # the event stream is over
        self._error: str | None = None  # why the transport broke
        self._wake = trio.Event()  # closed locally, ended, or broken
        self._stopped = trio.Event()
        self._started = False

    @property
    def stream(self) -> SseClientStream | None:
        return self._stream

    def __repr__(self) -> str:
        return f"<SseTransport {self.url}>"

    def _break(self, reason: str) -> None:
        if self._error is None and not self._closed:
            self._error = reason
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[SseClientStream] = trio.TASK_STATUS_IGNORED) -> None:
        if self._started:
            raise RuntimeError("an SseTransport runs once")
        self._started = True
        client = httpx.AsyncClient(
            headers=self.headers,
            timeout=httpx.Timeout(self.post_timeout, connect=self.connect_timeout, pool=None),
            verify=_default_ssl_context() if self.verify is True else self.verify,
        )
        response: httpx.Response | None = None
        try:
            response = await self._open(client)
            frames_send, frames_recv = trio.open_memory_channel[Frame](self.receive_buffer)
            with collapse_groups():  # a start failure comes out as itself
                await self._serve(response, client, frames_send, frames_recv, task_status)
        finally:
            self._ended = True
            with trio.CancelScope(shield=True), trio.move_on_after(self.close_timeout):
                if response is not None:
                    await response.aclose()
                await client.aclose()
            self._stopped.set()

    async def _serve(
        self,
        response: httpx.Response,
        client: httpx.AsyncClient,
        frames_send: trio.MemorySendChannel[Frame],
        frames_recv: trio.MemoryReceiveChannel[Frame],
        task_status: trio.TaskStatus[SseClientStream],
    ) -> None:
        async with trio.open_nursery() as nursery:
            try:
                with trio.fail_after(self.endpoint_timeout):
                    endpoint = await nursery.start(self._read, response, frames_send)
            except trio.TooSlowError:
                raise TransportError(
                    f"{self.url}: no endpoint event within {self.endpoint_timeout} s"
                ) from None
            stream = self._stream = SseClientStream(self, client, endpoint, frames_recv)
            task_status.started(stream)
            try:
                await self._wake.wait()
            finally:
                nursery.cancel_scope.cancel()

    async def _open(self, client: httpx.AsyncClient) -> httpx.Response:
        request = client.build_request(
            "GET",
            self.url,
            headers={"accept": "text/event-stream", "cache-control": "no-store"},
            timeout=httpx.Timeout(
                self.sse_read_timeout, connect=self.connect_timeout, pool=self.connect_timeout
            ),
        )
        try:
            response = await client.send(request, stream=True, follow_redirects=True)
        except httpx.HTTPError as exc:
            raise TransportError(
                f"{self.url}: cannot open the event stream: {type(exc).__name__}: {exc}"
            ) from None
        try:
            if response.status_code != 200:
                with trio.move_on_after(self.connect_timeout):
                    await response.aread()
                detail = response.text.strip()[:200] if response.is_stream_consumed else ""
                raise TransportError(
                    f"{self.url}: opening the event stream failed: HTTP {response.status_code}"
                    f"{': ' + detail if detail else ''}"
                )
            ctype = response.headers.get("content-type", "").partition(";")[0].strip().lower()
            if ctype != "text/event-stream":
                raise TransportError(f"{self.url}: not an event stream (Content-Type {ctype or 'missing'!r})")
        except BaseException:
            with trio.CancelScope(shield=True), trio.move_on_after(self.close_timeout):
                await response.aclose()
            raise
        return response

    async def _read(
        self,
        response: httpx.Response,
        frames: trio.MemorySendChannel[Frame],
        *,
        task_status: trio.TaskStatus[str],
    ) -> None:
        """Read the event stream: the endpoint first, then messages."""
        decoder = SseDecoder(self.max_event_size)
        base = str(response.url)
        endpoint: str | None = None
        error: str | None = None
        try:
            async for chunk in response.aiter_bytes():
                for event in decoder.feed(chunk):
                    if event.event == "endpoint":
                        if endpoint is None:
                            endpoint = resolve_endpoint(base, event.data)
                            task_status.started(endpoint)
                        else:
                            log.warning("%s: ignoring a second endpoint event", self.name)
                    elif event.event == "message":
                        if endpoint is None:
                            log.warning("%s: dropping a message sent before the endpoint event", self.name)
                            continue
                        try:
                            await frames.send(decode(event.data))
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            return  # closed locally
                    else:
                        log.debug("%s: ignoring an event of type %r", self.name, event.event)
            if endpoint is None:
                raise TransportError(f"{self.url}: the event stream ended before the endpoint event")
        except (httpx.HTTPError, SseError) as exc:
            error = f"{self.url}: event stream lost: {type(exc).__name__}: {exc}"
            if endpoint is None:
                raise TransportError(error) from None
        finally:
            if error is not None:
                self._break(error)
            self._ended = True  # before the reader of frames can see the end
            frames.close()
            self._wake.set()
