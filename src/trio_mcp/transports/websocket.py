"""WebSocket transport: one JSON-RPC message per text frame, subprotocol ``mcp``.

Three pieces, on `trio-websocket`_:

* :class:`WebSocketStream` — a :class:`~trio_mcp.transports.MessageStream`
  over one WebSocket connection (either side).
* :class:`WebSocketServer` — an actor serving an app
  (:class:`~trio_mcp.server.LowLevelServer` / :class:`~trio_mcp.server.MCPServer`):
  one :class:`~trio_mcp.server.ServerSession` per connection.
* :class:`WebSocketTransport` — the client actor: connects and hands out a
  stream (``stream = await nursery.start(WebSocketTransport(url).run)``).

.. _trio-websocket: https://trio-websocket.readthedocs.io/

Decisions
---------

* **Framing.** Every message is sent as one *text* frame of compact JSON.
  Binary frames are accepted too (decoded as UTF-8 JSON). A frame that is not
  JSON-RPC becomes an :class:`~trio_mcp.protocol.InvalidMessage` and the
  connection goes on (the peer answers it with a JSON-RPC error).
* **Handshake.** The server accepts only clients that offer the ``mcp``
  subprotocol (others get HTTP 400), only on its path (404), only from
  allowed ``Host`` names (421) and ``Origin``\\ s (403): the DNS-rebinding
  protection of the Streamable HTTP transport, same allow-lists (by default
  the loopback names). The client requires the server to select ``mcp``.
* **Size limit.** A message longer than ``max_message_size`` (characters of
  a text frame, bytes of a binary one) closes the connection with code 1009
  (Message Too Big); the reader's ``receive`` then raises
  :class:`TransportError` naming the code, and so does the sender's.
* **Sending.** ``send`` encodes, then hands the frame to the connection's
  writer task through a bounded queue (``send_buffer`` frames). That makes
  sends from many tasks safe, whole, and atomic under cancellation (a frame
  is queued entirely or not at all; only the writer touches the socket).
  Backpressure: the queue, then the socket's buffers, then the other side's
  bounded receive queue (``receive_queue``), which stops reading the socket
  while full.
* **End of stream.** A close with code 1000 (Normal Closure) is a clean end:
  ``receive`` raises :class:`trio.EndOfChannel`. Any other close — 1001 when a
  server shuts down, 1009, 1006 when the TCP connection dropped without a
  close frame — raises :class:`TransportError` with the code and reason,
  which reach the callers' ``ConnectionClosed`` errors.
* **Closing.** ``aclose`` (idempotent) lets the queued frames go out, then
  performs the closing handshake with code 1000, all within
  ``close_timeout`` seconds; past that it drops the TCP connection.
  A stopping :class:`WebSocketServer` closes every connection with 1001.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any, Final
from urllib.parse import urlsplit

import attrs
import trio
import trio_websocket

from .._util import check_positive, collapse_groups
from ..protocol import Frame, decode, encode
from ._base import TransportClosed, TransportError, host_in_url
from ._server_info import ServerInfo
from .http._security import LOCAL_HOSTS, HostPolicy

__all__ = [
    "SUBPROTOCOL",
    "WebSocketServer",
    "WebSocketServerInfo",
    "WebSocketServerSettings",
    "WebSocketStream",
    "WebSocketTransport",
]

log = logging.getLogger("trio_mcp.websocket")

#: The WebSocket subprotocol of MCP.
SUBPROTOCOL: Final = "mcp"
#: Close codes (RFC 6455 section 7.4.1).
NORMAL_CLOSURE: Final = 1000
GOING_AWAY: Final = 1001
MESSAGE_TOO_BIG: Final = 1009

#: Defaults, shared by the server settings and the client.
DEFAULT_SERVER_MAX_MESSAGE: Final = 4 << 20
DEFAULT_CLIENT_MAX_MESSAGE: Final = 16 << 20
DEFAULT_SEND_BUFFER: Final = 8
DEFAULT_RECEIVE_QUEUE: Final = 4
DEFAULT_CLOSE_TIMEOUT: Final = 2.0


def _describe_close(reason: trio_websocket.CloseReason | None) -> str:
    if reason is None:
        return "WebSocket closed: 1006 ABNORMAL_CLOSURE"
    text = f"WebSocket closed: {reason.code} {reason.name}"
    return f"{text} ({reason.reason})" if reason.reason else text


class WebSocketStream:
    """A :class:`MessageStream` over one open WebSocket connection.

    Whoever creates it runs its writer in a nursery (``await
    nursery.start(stream.run_writer)``) for as long as the connection is
    used; :class:`WebSocketServer` and :class:`WebSocketTransport` do.
    """

    def __init__(
        self,
        ws: trio_websocket.WebSocketConnection,
        *,
        send_buffer: int = DEFAULT_SEND_BUFFER,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
        name: str = "websocket",
    ) -> None:
        if send_buffer < 0 or not close_timeout > 0:
            raise ValueError("send_buffer must be >= 0 and close_timeout positive")
        self.name = name
        self._ws = ws
        self._close_timeout = close_timeout
        self._out_send, self._out_recv = trio.open_memory_channel[str](send_buffer)
        self._closing = False  # aclose was called
        self._error: str | None = None  # why the connection is unusable
        self._writer_done = trio.Event()
        self._writer_scope: trio.CancelScope | None = None
        self._finished = trio.Event()  # the connection is over, one way or another
        self._sent = 0
        self._received = 0
        #: The close code and reason, once known (``None`` while open).
        self.close_code: int | None = None
        self.close_reason: str | None = None

    # ----------------------------------------------------------------- info

    @property
    def subprotocol(self) -> str | None:
        return self._ws.subprotocol

    @property
    def closed(self) -> bool:
        return self._closing or self._finished.is_set()

    async def wait_closed(self) -> None:
        """Return once the connection is over (closed by either side, or lost)."""
        await self._finished.wait()

    def statistics(self) -> dict[str, Any]:
        s = self._out_send.statistics()
        return {
            "sent": self._sent,
            "received": self._received,
            "queued": s.current_buffer_used,
            "queue": s.max_buffer_size,
            "close_code": self.close_code,
        }

    def __repr__(self) -> str:
        state = "open" if not self.closed else f"closed {self.close_code}"
        return f"<WebSocketStream {self.name} {state}>"

    # --------------------------------------------------------------- writer

    async def run_writer(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write queued frames until the stream is closed (run in a nursery)."""
        try:
            with trio.CancelScope() as scope:
                self._writer_scope = scope
                task_status.started()
                async for text in self._out_recv:
                    try:
                        await self._ws.send_message(text)
                    except trio_websocket.ConnectionClosed as exc:
                        self._lost(exc.reason)
                        return
                    except Exception as exc:  # e.g. wsproto refusing a frame in a closing state
                        log.debug("%s: write failed", self.name, exc_info=True)
                        self._lost(None, f"WebSocket write failed: {type(exc).__name__}: {exc}")
                        await self._abort()  # so that the reader sees it too
                        return
                    self._sent += 1
        finally:
            # Senders still waiting for room learn that nothing will be written.
            self._out_recv.close()
            self._writer_done.set()

    def _lost(self, reason: trio_websocket.CloseReason | None, error: str | None = None) -> None:
        """The connection ended (seen by the reader or the writer)."""
        code = reason.code if reason is not None else 1006
        if self.close_code is None:
            self.close_code = code
            self.close_reason = reason.reason if reason is not None else None
        if self._error is None and not self._closing and code != NORMAL_CLOSURE:
            self._error = error or _describe_close(reason)
        self._finished.set()

    # -------------------------------------------------------- MessageStream

    async def send(self, message: Any) -> None:
        if self._closing:
            raise TransportClosed(f"{self.name}: WebSocket closed locally")
        if self._error is not None:
            raise TransportError(self._error)
        text = encode(message).decode("utf-8")
        try:
            await self._out_send.send(text)
        except trio.ClosedResourceError:
            raise TransportClosed(f"{self.name}: WebSocket closed locally") from None
        except trio.BrokenResourceError:
            if self._closing:
                raise TransportClosed(f"{self.name}: WebSocket closed locally") from None
            raise TransportError(self._error or f"{self.name}: WebSocket closed by the peer") from None

    async def receive(self) -> Frame:
        try:
            data = await self._ws.get_message()
        except trio_websocket.ConnectionClosed as exc:
            self._lost(exc.reason)
            if self._error is not None:  # lost (or closed abnormally) before any local close
                raise TransportError(self._error) from None
            raise trio.EndOfChannel from None
        self._received += 1
        return decode(data)

    async def aclose(self, code: int = NORMAL_CLOSURE, reason: str | None = None) -> None:
        """Flush queued frames and close with ``code`` (bounded; idempotent)."""
        if self._closing:
            with trio.move_on_after(self._close_timeout, shield=True):
                await self._finished.wait()
            return
        self._closing = True
        self._out_send.close()
        with trio.move_on_after(self._close_timeout, shield=True) as scope:
            await self._writer_done.wait()
            await self._ws.aclose(code, reason)
        if scope.cancelled_caught:
            await self._abort()
        if self.close_code is None:
            self.close_code, self.close_reason = code, reason
        self._finished.set()

    async def _abort(self) -> None:
        """Drop the TCP connection now (the writer may be stuck mid-frame)."""
        if self._writer_scope is not None:
            self._writer_scope.cancel()
        # trio-websocket closes the TCP stream in a ``finally`` of aclose: an
        # aclose in an already-cancelled scope does just that, without waiting.
        with trio.CancelScope(shield=True), trio.CancelScope() as cut:
            cut.cancel()
            await self._ws.aclose(GOING_AWAY, "close timed out")


# ------------------------------------------------------------------ server


def _tuple(value: Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@attrs.frozen(kw_only=True)
class WebSocketServerSettings:
    """Every option and bound of :class:`WebSocketServer`, named."""

    #: The endpoint path; ``None`` accepts any path.
    path: str | None = "/mcp"
    #: Longest accepted message (characters of a text frame); a longer one
    #: closes the connection with 1009.
    max_message_size: int = DEFAULT_SERVER_MAX_MESSAGE
    #: Check ``Host`` and ``Origin`` (DNS-rebinding protection).
    dns_rebinding_protection: bool = True
    #: Host names (``"name"`` any port, ``"name:port"``) the server answers to.
    allowed_hosts: tuple[str, ...] = attrs.field(default=LOCAL_HOSTS, converter=_tuple)
    #: Origins allowed in browser handshakes (host names or full origins).
    allowed_origins: tuple[str, ...] = attrs.field(default=LOCAL_HOSTS, converter=_tuple)
    #: Connections open at once; more are refused with HTTP 503.
    max_connections: int = 1024
    #: Frames queued per connection for its writer before ``send`` blocks.
    send_buffer: int = DEFAULT_SEND_BUFFER
    #: Received messages queued per connection before reading the socket stops.
    receive_queue: int = DEFAULT_RECEIVE_QUEUE
    #: Seconds a client may take to complete the opening handshake.
    handshake_timeout: float = 10.0
    #: Seconds a closing handshake may take (then the TCP connection is dropped).
    close_timeout: float = DEFAULT_CLOSE_TIMEOUT

    def __attrs_post_init__(self) -> None:
        if self.path is not None and not self.path.startswith("/"):
            raise ValueError("path must start with '/' (or be None: any path)")
        check_positive(
            self,
            ("max_message_size", "max_connections", "receive_queue", "handshake_timeout", "close_timeout"),
            nonnegative=("send_buffer",),
        )


#: Where a :class:`WebSocketServer` listens (``task_status.started`` value).
WebSocketServerInfo = ServerInfo


class WebSocketServer:
    """An actor serving an MCP app over WebSocket.

    ``info = await nursery.start(server.run)`` returns a
    :class:`WebSocketServerInfo` with the bound port (``port=0`` picks a free
    one; give an IP address as ``host``, a name may bind several sockets).
    ``app`` is a :class:`~trio_mcp.server.LowLevelServer` (or anything with
    its ``running()`` and ``start_session(stream, nursery, name=...)``); its
    lifespan is entered for as long as the server runs. :meth:`stop` (or
    cancelling ``run``) closes every connection with 1001 (bounded), then
    stops the sessions and the listener.
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str | None = "/mcp",
        settings: WebSocketServerSettings | None = None,
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
            settings = WebSocketServerSettings(path=path, **options)
        elif options or path != "/mcp":
            settings = attrs.evolve(settings, path=path, **options)
        self.app = app
        self.settings = settings
        self.host = host
        self.port = port
        self.info: WebSocketServerInfo | None = None
        self._policy = HostPolicy(settings.allowed_hosts, settings.allowed_origins)
        self._streams: set[WebSocketStream] = set()
        self._stop = trio.Event()
        self._stopping = False
        self._started = False
        self._accepted = 0
        self._rejected = 0

    @property
    def url(self) -> str:
        if self.info is None:
            raise RuntimeError("the server is not running yet")
        return self.info.url

    def stop(self) -> None:
        """Ask ``run`` to end (returns at once)."""
        self._stop.set()

    def statistics(self) -> dict[str, int]:
        return {"connections": len(self._streams), "accepted": self._accepted, "rejected": self._rejected}

    async def run(
        self, *, task_status: trio.TaskStatus[WebSocketServerInfo] = trio.TASK_STATUS_IGNORED
    ) -> None:
        if self._started:
            raise RuntimeError("a WebSocketServer runs once")
        self._started = True
        s = self.settings
        async with self.app.running(), trio.open_nursery() as nursery:
            server = await nursery.start(
                partial(
                    trio_websocket.serve_websocket,
                    self._handle,
                    self.host,
                    self.port,
                    None,
                    message_queue_size=s.receive_queue,
                    max_message_size=s.max_message_size,
                    connect_timeout=s.handshake_timeout,
                    disconnect_timeout=s.close_timeout,
                )
            )
            port = server.listeners[0].port
            self.info = ServerInfo.at("ws", self.host, port, s.path or "/")
            task_status.started(self.info)
            try:
                await self._stop.wait()
            finally:
                with trio.CancelScope(shield=True):
                    await self._close_all(GOING_AWAY, "server shutting down")
                nursery.cancel_scope.cancel()

    async def _close_all(self, code: int, reason: str) -> None:
        self._stopping = True
        async with trio.open_nursery() as nursery:
            for stream in list(self._streams):
                nursery.start_soon(stream.aclose, code, reason)

    # ------------------------------------------------------------ handshake

    def _refusal(self, request: trio_websocket.WebSocketRequest) -> tuple[int, str] | None:
        s = self.settings
        if s.path is not None and urlsplit(request.path).path != s.path:
            return 404, "Not found"
        if s.dns_rebinding_protection:
            # trio-websocket hands over every header but Host, which wsproto
            # keeps on the request event; without it the request is refused.
            event = getattr(request, "_event", None)
            if not self._policy.host_allowed(getattr(event, "host", None)):
                return 421, "Host not allowed"
            origin = _header(request.headers, b"origin")
            if not self._policy.origin_allowed(origin):
                return 403, "Origin not allowed"
        if SUBPROTOCOL not in request.proposed_subprotocols:
            return 400, f"the WebSocket subprotocol {SUBPROTOCOL!r} is required"
        if self._stopping:
            return 503, "Server shutting down"
        if len(self._streams) >= s.max_connections:
            return 503, "Too many connections"
        return None

    async def _handle(self, request: trio_websocket.WebSocketRequest) -> None:
        # An exception out of here would stop the whole server: contain them.
        try:
            refusal = self._refusal(request)
            if refusal is not None:
                self._rejected += 1
                status, text = refusal
                log.info("websocket handshake refused: %d %s (path %s)", status, text, request.path)
                await request.reject(
                    status, extra_headers=[(b"content-type", b"text/plain")], body=text.encode()
                )
                return
            ws = await request.accept(subprotocol=SUBPROTOCOL)
        except trio_websocket.ConnectionClosed:
            return
        except Exception:
            log.exception("websocket handshake failed")
            return
        self._accepted += 1
        s = self.settings
        stream = WebSocketStream(
            ws, send_buffer=s.send_buffer, close_timeout=s.close_timeout, name=f"ws:{ws}"
        )
        self._streams.add(stream)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(stream.run_writer)
                try:
                    await self._serve(stream)
                finally:
                    with trio.CancelScope(shield=True):
                        await stream.aclose()
                    nursery.cancel_scope.cancel()
        finally:
            self._streams.discard(stream)

    async def _serve(self, stream: WebSocketStream) -> None:
        """Run one session over ``stream`` until it ends; contain its failure."""
        try:
            async with trio.open_nursery() as nursery:
                await self.app.start_session(stream, nursery, name=stream.name)
        except* TransportError as group:
            log.debug("%s: session ended: %s", stream.name, group.exceptions[0])
        except* Exception:
            log.exception("%s: session crashed", stream.name)


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    values = [v.decode("latin-1") for k, v in headers if k.lower() == name]
    return ", ".join(values) if values else None


# ------------------------------------------------------------------ client


class WebSocketTransport:
    """Client side: connects to ``url`` (``ws://`` or ``wss://``) offering the
    ``mcp`` subprotocol and serves a :class:`WebSocketStream` over it.

    ``stream = await nursery.start(transport.run)``. ``run`` raises
    :class:`TransportError` (before reporting started) if the connection
    cannot be opened: refused, timed out, handshake rejected (the message
    names the HTTP status and body), or a server that did not select
    ``mcp``. It returns once the connection is over (``stream.aclose()``,
    or closed / lost by the server). Cancelling ``run`` closes the
    connection (bounded).
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        max_message_size: int = DEFAULT_CLIENT_MAX_MESSAGE,
        send_buffer: int = DEFAULT_SEND_BUFFER,
        receive_queue: int = DEFAULT_RECEIVE_QUEUE,
        connect_timeout: float = 10.0,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
        name: str | None = None,
    ) -> None:
        scheme = urlsplit(url).scheme
        if scheme not in ("ws", "wss"):
            raise ValueError(f"a WebSocket URL starts with ws:// or wss://, not {url!r}")
        if max_message_size < 1 or receive_queue < 1 or send_buffer < 0:
            raise ValueError("max_message_size and receive_queue must be positive, send_buffer >= 0")
        if not (connect_timeout > 0 and close_timeout > 0):
            raise ValueError("connect_timeout and close_timeout must be positive")
        self.url = url
        self.headers = dict(headers or {})
        self.max_message_size = max_message_size
        self.send_buffer = send_buffer
        self.receive_queue = receive_queue
        self.connect_timeout = connect_timeout
        self.close_timeout = close_timeout
        self.name = name or f"ws-client:{url}"
        self._stream: WebSocketStream | None = None
        self._started = False

    @property
    def stream(self) -> WebSocketStream | None:
        return self._stream

    def __repr__(self) -> str:
        return f"<WebSocketTransport {self.url}>"

    async def run(self, *, task_status: trio.TaskStatus[WebSocketStream] = trio.TASK_STATUS_IGNORED) -> None:
        if self._started:
            raise RuntimeError("a WebSocketTransport runs once")
        self._started = True
        extra = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
        started = False
        try:
            async with trio_websocket.open_websocket_url(
                self.url,
                subprotocols=[SUBPROTOCOL],
                extra_headers=extra,
                message_queue_size=self.receive_queue,
                max_message_size=self.max_message_size,
                connect_timeout=self.connect_timeout,
                disconnect_timeout=self.close_timeout,
            ) as ws:
                if ws.subprotocol != SUBPROTOCOL:
                    raise TransportError(
                        f"{self.url}: the server selected the subprotocol {ws.subprotocol!r}, not {SUBPROTOCOL!r}"
                    )
                stream = self._stream = WebSocketStream(
                    ws, send_buffer=self.send_buffer, close_timeout=self.close_timeout, name=self.name
                )
                with collapse_groups():
                    async with trio.open_nursery() as nursery:
                        await nursery.start(stream.run_writer)
                        try:
                            task_status.started(stream)
                            started = True
                            await stream.wait_closed()
                        finally:
                            with trio.CancelScope(shield=True):
                                await stream.aclose()
                            nursery.cancel_scope.cancel()
        except trio_websocket.ConnectionRejected as exc:
            body = (exc.body or b"").decode("utf-8", "replace").strip()[:200]
            raise TransportError(
                f"{self.url}: WebSocket handshake rejected: HTTP {exc.status_code}{': ' + body if body else ''}"
            ) from None
        except trio_websocket.ConnectionTimeout:
            raise TransportError(f"{self.url}: timed out opening the WebSocket connection") from None
        except trio_websocket.DisconnectionTimeout:
            if not started:  # pragma: no cover - only raised on exit
                raise TransportError(f"{self.url}: timed out closing the WebSocket connection") from None
        except trio_websocket.HandshakeError as exc:
            cause = exc.__cause__ or exc
            raise TransportError(f"{self.url}: cannot open the WebSocket connection: {cause}") from None
        except OSError as exc:
            raise TransportError(f"{self.url}: cannot open the WebSocket connection: {exc}") from None
