"""The server side of the legacy HTTP+SSE transport: :class:`SseApp` (ASGI)
and :class:`SseServer` (hypercorn). Decisions: see :mod:`trio_mcp.transports.sse`."""

from __future__ import annotations

import logging
import secrets
from functools import partial
from typing import Any, Final, cast
from urllib.parse import parse_qs

import attrs
import trio

from ..._util import check_positive
from ...protocol import PARSE_ERROR, Frame, InvalidMessage, decode, encode, error_response
from .._asgi import (
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
from .._base import TransportClosed, TransportError, host_in_url
from .._server_info import ServerInfo
from ..http._security import LOCAL_HOSTS, HostPolicy
from ..http._sse import PING

__all__ = [
    "SESSION_PARAM",
    "SseApp",
    "SseServer",
    "SseServerInfo",
    "SseServerSettings",
    "SseSessionStream",
    "format_sse",
]

log = logging.getLogger("trio_mcp.sse")


SESSION_PARAM: Final = "session_id"


def format_sse(event: str, data: str | bytes) -> bytes:
    """One named event whose data holds no line break (compact JSON, a URL)."""
    raw = data.encode() if isinstance(data, str) else data
    if b"\n" in raw or b"\r" in raw:
        raise ValueError("SSE data must not contain line breaks here")
    return b"event: " + event.encode() + b"\ndata: " + raw + b"\n\n"


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
