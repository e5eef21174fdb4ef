"""The Streamable HTTP server transport (MCP 2025-03-26 .. 2025-11-25).

:class:`StreamableHttpApp` is an ASGI 3 application serving one MCP
endpoint; :class:`HttpServer` runs it on hypercorn's trio worker.

One endpoint, three methods:

* ``POST`` carries one JSON-RPC message (or, in 2025-03-26, a batch).
  Notifications and responses are accepted with ``202``. Requests are
  answered on the same HTTP response, as ``application/json`` or as a
  ``text/event-stream`` on which the handler's own notifications and
  server-to-client requests travel before the answer (see *Routing*).
* ``GET`` opens the session's standalone SSE stream for server-initiated
  messages (one at a time: ``409`` while one is open), or, with
  ``Last-Event-ID``, resumes a broken stream.
* ``DELETE`` ends the session.

Sessions
--------
``initialize`` creates a session: a :class:`~trio_mcp.server.ServerSession`
over a per-session :class:`MessageStream` (:class:`HttpSessionStream`); its
id comes back in ``Mcp-Session-Id`` and every later request must carry it
(``400`` without, ``404`` once it is unknown or ended: the client then
initializes again). ``MCP-Protocol-Version`` is checked on every later
request (``400`` for a version this server does not speak; absent means
the negotiated one). Stateless requests of the 2026-07-28 era (version in
the header or in ``_meta``, no session id) are served in the POST's own
ASGI task by the app's one stateless server session (no session actor per
request; :meth:`~trio_mcp.actors.Peer.serve_inline`): the handler's
notifications go on that POST's stream (JSON-only answers drop them, and
count them), the client going away cancels the handler, and a
server-to-client request fails it at once. ``subscriptions/listen``, and
every stateless request of an app made per session, gets a fresh session
that lives as long as that one POST, everything it sends travelling on
that POST's stream.
Their headers must mirror the body (``Mcp-Method``, ``Mcp-Name``…; a
``tools/call`` also the ``Mcp-Param-*`` of the tool's ``x-mcp-header``
annotations, checked against the input schema the app lists for that tool):
``400`` and -32020 otherwise (see :mod:`._headers`).

Routing (server to client)
--------------------------
The session's ``send`` routes every message:

* a response goes to the POST that carried its request;
* a request or notification sent while a request handler runs (the peer
  sets :data:`~trio_mcp.transports.RELATED_REQUEST`) goes on that request's
  POST stream, which becomes an SSE stream if it was not one yet;
* anything else, or a related message whose POST is answered as JSON, goes
  to the standalone (GET) stream.

Response format: with ``json_response=None`` (the default, *auto*) a POST is
answered as JSON when the answer comes first, and upgraded to SSE when a
related message comes first (if the client accepts SSE); ``True`` always
answers JSON (related messages go to the GET stream); ``False`` always
answers SSE.

Buffering and bounds (all in :class:`HttpServerSettings`)
---------------------------------------------------------
* POST bodies enter the session through a bounded queue
  (``inbound_queue``); a POST that cannot enqueue within
  ``enqueue_timeout`` gets ``503``.
* Each SSE connection has a bounded event queue (``sse_buffer``). A
  ``send`` waits for room at most ``write_timeout``; a client that reads
  too slowly loses its connection (it resumes from the event store), it
  never blocks the session for longer.
* Every event of an SSE stream is stored first in the :class:`EventStore`
  (bounded; default :class:`MemoryEventStore`), which gives it its id.
  A GET with ``Last-Event-ID`` replays what followed on that stream and
  then carries on live if the stream is still open (a POST stream whose
  connection broke keeps collecting its handler's messages and its answer).
  A resuming connection takes the stream over from an old one the server
  has not seen die yet (no ``409`` for a resumption). A completed POST
  stream stays in the store ``completed_stream_retention`` seconds (a
  write to a dead connection succeeds: the client may still resume), and
  a session's streams are forgotten when it ends. SSE streams start with
  a priming event (an id, no data) and a ``retry`` hint from 2025-11-25
  on; a handler can end its POST's HTTP response early with
  :func:`close_sse_stream` (SEP-1699 polling) and the client resumes.
* Without a GET stream: messages for the standalone stream wait in a
  bounded backlog (``standalone_backlog``, oldest dropped first and
  counted) until the first GET stream opens, which receives them. Once a
  GET stream has been open and is gone, messages are kept only in the event
  store, for a resumption with ``Last-Event-ID``; a fresh GET (no
  ``Last-Event-ID``) starts a new stream. Without an event store they are
  dropped and counted (``statistics().messages_dropped``).

Security: ``Host`` and ``Origin`` are checked against allow-lists (default:
the loopback names, any port): ``421`` for a host, ``403`` for an origin
not allowed. :class:`HttpServer` binds 127.0.0.1 by default.

Shutdown: closing the app (``aclose`` / cancelling ``run``) ends every
session and every SSE stream at once; :meth:`HttpServer.stop` then stops
the listener within ``graceful_timeout``.
"""

from __future__ import annotations

import logging
import math
import secrets
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal

import attrs
import msgspec
import trio
from msgspec import Struct

from ..._util import check_positive
from ...protocol import (
    HANDSHAKE_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
    V2025_03_26,
    V2025_11_25,
    ErrorResponse,
    Frame,
    HeaderMismatch,
    InvalidMessage,
    InvalidParams,
    McpError,
    MethodNotFound,
    Notification,
    Request,
    Response,
    coerce,
    decode,
    encode,
    error_response,
    lookup,
    method_available,
)
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
from .._base import RELATED_REQUEST, ServerInfo, TransportClosed, host_in_url
from ._eventstore import EventStore, MemoryEventStore, StoredEvent
from ._headers import (
    PARAM_PREFIX,
    InvalidParamHeader,
    ParamHeaderMap,
    header_mismatch,
    param_header_map,
    param_map_mismatch,
)
from ._security import LOCAL_HOSTS, HostPolicy
from ._sse import PING, format_event, format_retry

__all__ = [
    "HttpServer",
    "HttpServerInfo",
    "HttpServerSettings",
    "HttpServerStatistics",
    "HttpSessionStream",
    "StreamableHttpApp",
    "close_sse_stream",
]

log = logging.getLogger("trio_mcp.http.server")


SESSION_HEADER: Final = "mcp-session-id"
VERSION_HEADER: Final = "mcp-protocol-version"
LAST_EVENT_HEADER: Final = "last-event-id"

_DEFAULT_STORE: Final = "memory"


#: The HTTP status of a stateless request answered with a JSON-RPC error.
ERROR_STATUS: Final = {
    -32700: 400,
    -32600: 400,
    -32602: 400,
    -32020: 400,
    -32021: 400,
    -32022: 400,
    -32601: 404,
}


class _AnyMeta(Struct):
    meta: Any = msgspec.field(default=None, name="_meta")


def _envelope_problem(request: Request) -> tuple[int, McpError] | None:
    try:
        meta = coerce(request.params, _AnyMeta).meta
    except (msgspec.ValidationError, msgspec.DecodeError):
        meta = None
    if not isinstance(meta, dict):
        return 400, InvalidParams(
            "params._meta must be an object carrying the protocol version and client capabilities"
        )
    missing = [k for k in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if k not in meta]
    if missing:
        return 400, InvalidParams(f"params._meta is missing {', '.join(missing)}")
    return None


def _header_problem(headers: dict[str, str], request: Request) -> tuple[int, McpError] | None:
    problem = header_mismatch(headers, request)
    return None if problem is None else (400, HeaderMismatch(problem))


class _CallOnly(Struct):
    name: Any = None
    arguments: Any = None


#: Most ``tools/list`` pages read to find a called tool's input schema.
_SCHEMA_LIST_PAGES: Final = 100


def _param_map_or_none(schema: Any) -> ParamHeaderMap | None:
    try:
        return param_header_map(schema)
    except InvalidParamHeader:
        return None  # not enforced: clients drop such a tool


def _duplicated_params(scope: Scope) -> frozenset[str]:
    seen: set[str] = set()
    twice: set[str] = set()
    for raw_name, _ in scope.get("headers", ()):
        name = raw_name.decode("latin-1").lower()
        if name.startswith(PARAM_PREFIX):
            (twice if name in seen else seen).add(name)
    return frozenset(twice)


def _removed_method(request: Request) -> tuple[int, McpError] | None:
    # Known methods that this era removed (initialize, ping, logging/setLevel,
    # resources/subscribe, ...): the registry knows; unknown ones reach the
    # session, whose -32601 is sent with 404 too (ERROR_STATUS).
    if lookup(request.method) is not None and not method_available(
        request.method, MODERN_VERSIONS[-1], sender="client"
    ):
        return 404, MethodNotFound(
            f"Method not found: {request.method} (not part of protocol {MODERN_VERSIONS[-1]})"
        )
    return None


@attrs.frozen(kw_only=True)
class HttpServerSettings:
    """Every option and bound of the Streamable HTTP server, named."""

    #: The MCP endpoint.
    path: str = "/mcp"
    #: ``None``: JSON unless a related message needs SSE; ``True``: always
    #: JSON; ``False``: always SSE (when the client accepts it).
    json_response: bool | None = None
    #: Largest POST body, in bytes (``413`` above).
    max_body_size: int = 4 << 20
    #: Check ``Host`` and ``Origin`` (DNS-rebinding protection).
    dns_rebinding_protection: bool = True
    #: Host names (``"name"`` any port, ``"name:port"``) the server answers to.
    allowed_hosts: tuple[str, ...] = attrs.field(default=LOCAL_HOSTS, converter=as_tuple)
    #: Origins allowed in browser requests (host names or full origins).
    allowed_origins: tuple[str, ...] = attrs.field(default=LOCAL_HOSTS, converter=as_tuple)
    #: Sessions alive at once; ``initialize`` beyond it gets ``503``.
    max_sessions: int = 1024
    #: Seconds a session may stay without any request or open stream
    #: before it is ended (``None``: never).
    session_idle_timeout: float | None = 3600.0
    #: Frames (POST bodies) waiting for the session's peer.
    inbound_queue: int = 64
    #: Seconds a POST may wait for room in that queue (``503`` after).
    enqueue_timeout: float = 10.0
    #: Events queued for one SSE connection.
    sse_buffer: int = 64
    #: Seconds one write to a client, or one wait for room in its queue,
    #: may take before that connection is dropped (the client resumes).
    write_timeout: float = 10.0
    #: Messages kept for the first GET stream of a session (oldest dropped).
    standalone_backlog: int = 256
    #: Seconds between keep-alive comments on an idle SSE stream.
    ping_interval: float = 15.0
    #: Seconds a client should wait before reconnecting (SSE ``retry``).
    retry_interval: float = 1.0
    #: Seconds one event-store call may take.
    store_timeout: float = 5.0
    #: Seconds a POST stream's events stay in the event store after its
    #: last event was written: the client may not have received it (a write
    #: to a dead connection succeeds) and may still resume.
    completed_stream_retention: float = 30.0

    def __attrs_post_init__(self) -> None:
        if not self.path.startswith("/"):
            raise ValueError("path must start with '/'")
        check_positive(
            self,
            (
                "max_body_size",
                "max_sessions",
                "inbound_queue",
                "enqueue_timeout",
                "sse_buffer",
                "write_timeout",
                "standalone_backlog",
                "ping_interval",
                "retry_interval",
                "store_timeout",
                "completed_stream_retention",
            ),
        )
        if self.session_idle_timeout is not None and self.session_idle_timeout <= 0:
            raise ValueError("HttpServerSettings.session_idle_timeout must be positive or None")


@attrs.frozen
class HttpServerStatistics:
    sessions: int
    sse_connections: int
    #: Messages nobody could receive (no GET stream and no event store, a
    #: full backlog, an answer whose POST was gone).
    messages_dropped: int
    sessions_created: int
    sessions_expired: int


#: Where an :class:`HttpServer` listens (``task_status.started`` value).
HttpServerInfo = ServerInfo


class _Busy(Exception):
    """The stream already has a connection (409)."""


# ---------------------------------------------------------------- streams


class _Conn:
    """One HTTP response carrying a stream to the client.

    Items: ``("e", event_id, data)`` for an SSE event, ``("j", messages)`` for
    the JSON answer of a POST. The producer closes the channel when the
    stream is complete; ``complete`` tells the consumer it may forget it.
    """

    __slots__ = ("complete", "recv", "send", "sse_ok")

    def __init__(self, buffer: int, sse_ok: bool) -> None:
        self.send, self.recv = trio.open_memory_channel[tuple[Any, ...]](buffer)
        self.sse_ok = sse_ok
        self.complete = False


Mode = Literal["auto", "json", "sse"]


class _NoWire:
    """The stream of the server session that serves stateless requests in
    their own ASGI tasks: what it says while serving one goes into that
    request's answer (see :meth:`~trio_mcp.actors.Peer.serve_inline`);
    anything else has nowhere to go."""

    async def send(self, message: Any) -> None:
        raise TransportClosed(
            "a stateless request's server session speaks only through that request's answer"
        )

    async def receive(self) -> Frame:
        await trio.lowlevel.checkpoint()
        raise trio.EndOfChannel

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


class _InlineAnswer:
    """The HTTP answer of a stateless request served in its own ASGI task:
    one JSON body, or an SSE stream (from the start in ``sse`` mode; in
    ``auto`` mode from the handler's first notification) carrying the
    handler's notifications, then the answer. No event ids: nothing of a
    stateless request can be resumed."""

    __slots__ = ("app", "lock", "mode", "nursery", "send", "sse_ok", "started")

    def __init__(
        self, app: StreamableHttpApp, send: Send, mode: Mode, sse_ok: bool, nursery: trio.Nursery
    ) -> None:
        self.app = app
        self.send = send
        self.mode: Mode = mode
        self.sse_ok = sse_ok
        self.nursery = nursery
        self.started = False
        self.lock = trio.Lock()

    async def start_sse(self) -> None:
        self.mode = "sse"
        self.started = True
        self.app._sse_connections += 1
        with trio.fail_after(self.app.settings.write_timeout):
            await start_event_stream(self.send)
        self.nursery.start_soon(self._keep_alive)

    async def notify(self, note: Notification) -> None:
        """A notification of the handler (progress, a log message)."""
        if self.mode != "sse":
            if self.mode == "json" or not self.sse_ok:
                self.app._dropped += 1  # a JSON answer cannot carry it
                return
            await self._guarded(self.start_sse())
        await self._guarded(self._write(format_event(None, encode(note))))

    async def _guarded(self, write: Any) -> None:
        try:
            await write
        except trio.TooSlowError:
            # The client does not read: give up the request (the handler is
            # cancelled at its next checkpoint).
            self.nursery.cancel_scope.cancel()

    async def _write(self, data: bytes, more: bool = True) -> None:
        async with self.lock:
            with trio.fail_after(self.app.settings.write_timeout):
                await self.send({"type": "http.response.body", "body": data, "more_body": more})

    async def _keep_alive(self) -> None:
        while True:
            await trio.sleep(self.app.settings.ping_interval)
            await self._guarded(self._write(PING))

    async def finish(self, reply: Response | ErrorResponse) -> None:
        """Write the answer and end the response. Shielded from the disconnect
        watcher: hypercorn reports a disconnect while it recycles the
        connection inside the last send, and cancelling that would strand it."""
        with trio.CancelScope(shield=True):
            if self.started:
                await self._write(format_event(None, encode(reply)))
                await self._write(b"", more=False)
                return
            status = 200
            if type(reply) is ErrorResponse:
                status = ERROR_STATUS.get(reply.error.code, 200)  # the stateless era gives errors a status
            with trio.fail_after(self.app.settings.write_timeout):
                await respond(self.send, status, encode(reply))


#: An event to write: (id or None without an event store, data).
_Event = tuple["str | None", bytes]


class _OutStream:
    """A logical stream of server-to-client messages: a POST's answer stream
    or the session's standalone stream. Outlives its HTTP connections."""

    def __init__(
        self,
        session: HttpSessionStream,
        stream_id: str,
        *,
        standalone: bool,
        mode: Mode,
        pending: Iterable[int | str] = (),
        batch: bool = False,
    ) -> None:
        self.session = session
        self.id = stream_id
        self.standalone = standalone
        self.mode: Mode = mode
        self.pending: set[int | str] = set(pending)
        self.batch = batch
        self.answers: list[Any] = []
        self.conn: _Conn | None = None
        self.ever_attached = False
        self.backlog: deque[bytes] | None = deque() if standalone else None
        self.done = False
        self.has_ids = False  # an event with an id was sent: the client can resume
        self.lock = trio.Lock()

    # ------------------------------------------------------------ producer

    async def deliver(self, message: Any, answers: int | str | None = None) -> bool:
        """Route ``message`` here; False if this stream cannot carry it (a
        related message on a JSON-answered POST: the caller reroutes it)."""
        async with self.lock:
            if self.done:
                return False
            if self.mode != "sse":
                if answers is None:
                    conn = self.conn
                    if self.mode == "auto" and conn is not None and conn.sse_ok:
                        await self._switch_to_sse()
                    else:
                        return False
                else:
                    self.answers.append(message)
                    self.pending.discard(answers)
                    if not self.pending:
                        self._finish_json()
                    return True
            await self._emit(encode(message))
            if answers is not None:
                self.pending.discard(answers)
                if not self.pending:
                    self._finish()
            return True

    async def open_sse(self) -> None:
        """Start an SSE-mode POST stream (priming event when the version has one)."""
        async with self.lock:
            await self._prime()

    async def _switch_to_sse(self) -> None:
        self.mode = "sse"
        await self._prime()
        answers, self.answers = self.answers, []
        for msg in answers:  # a batch partly answered already
            await self._emit(encode(msg))

    async def _prime(self) -> None:
        if self.session.store is not None and self.session.primes:
            await self._emit(b"")

    async def _emit(self, data: bytes) -> None:
        session = self.session
        if self.conn is None and not self.ever_attached and self.backlog is not None:
            # The standalone stream before its first GET: keep the message
            # for it (it is stored, and gets its id, when the GET comes).
            if data:
                backlog = self.backlog
                if len(backlog) >= session.settings.standalone_backlog:
                    backlog.popleft()
                    session.dropped()
                backlog.append(data)
            return
        event_id = None
        if session.store is not None:
            event_id = await session.store_event(self.id, data)
            if event_id is not None:
                self.has_ids = True
        conn = self.conn
        if conn is not None:
            try:
                with trio.fail_after(session.settings.write_timeout):
                    await conn.send.send(("e", event_id, data))
                return
            except (trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError):
                self.detach(conn)
        if event_id is None and data:
            session.dropped()  # no connection and nothing to resume from

    def _finish_json(self) -> None:
        self.done = True
        self.session.streams.pop(self.id, None)
        conn = self.conn
        if conn is None:
            self.session.dropped(len(self.answers))
            return
        conn.complete = True
        try:
            conn.send.send_nowait(("j", self.answers))
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            self.session.dropped(len(self.answers))
        conn.send.close()
        self.conn = None

    def _finish(self) -> None:
        self.done = True
        self.session.streams.pop(self.id, None)
        conn = self.conn
        if conn is not None:
            conn.complete = True
            conn.send.close()
            self.conn = None

    # ------------------------------------------------------------ consumer

    async def attach(self, conn: _Conn, *, resume_after: str | None = None) -> list[_Event]:
        """Give this stream a connection; returns the events to write first
        (a replay, or the standalone backlog). Raises _Busy (409) when it has
        one already, except for a resumption: a client resuming says its
        old connection is dead (the server may not have noticed yet), so
        the new connection takes over."""
        session = self.session
        async with self.lock:
            if self.done or (self.conn is not None and resume_after is None):
                raise _Busy
            if self.conn is not None:
                self.detach(self.conn)
            initial: list[_Event] = []
            if resume_after is not None:
                if session.store is not None:
                    initial = await session.events_after(resume_after) or []
            elif self.standalone:
                if session.store is not None and session.primes:
                    eid = await session.store_event(self.id, b"")
                    if eid is not None:
                        initial.append((eid, b""))
                backlog, self.backlog = self.backlog or deque(), None
                for data in backlog:
                    eid = await session.store_event(self.id, data) if session.store is not None else None
                    initial.append((eid, data))
            self.conn = conn
            self.ever_attached = True
            return initial

    async def close_connection(self) -> bool:
        """End the current HTTP response without ending the stream (SEP-1699
        polling): the client reconnects with ``Last-Event-ID`` after the
        ``retry`` delay and gets what was sent meanwhile. False when the
        client could not resume (no event store, a JSON answer, no event id
        sent yet)."""
        async with self.lock:
            if self.done or self.session.store is None:
                return False
            if self.mode != "sse":
                conn = self.conn
                if not (self.mode == "auto" and conn is not None and conn.sse_ok):
                    return False
                await self._switch_to_sse()
            if not self.has_ids:
                return False
            if self.conn is not None:
                self.detach(self.conn)  # queued events still go out first
            return True

    def detach(self, conn: _Conn) -> None:
        if self.conn is conn:
            self.conn = None
        conn.send.close()

    def close(self) -> None:
        """The session ended: end the connection (its queued items still go out)."""
        self.done = True
        conn = self.conn
        if conn is not None:
            self.conn = None
            conn.send.close()


# ---------------------------------------------------------------- session


class _MetaOnly(Struct):
    meta: dict[str, Any] = msgspec.field(default_factory=dict, name="_meta")


class HttpSessionStream:
    """The :class:`MessageStream` of one HTTP session, the ServerSession's
    end. ``receive`` yields the frames of POST bodies; ``send`` routes
    (see the module documentation)."""

    #: The answers of a batch POST are gathered by its response stream, not
    #: by the peer (see :meth:`~trio_mcp.actors.Peer.run`).
    answers_batches = True

    def __init__(self, app: StreamableHttpApp, session_id: str | None) -> None:
        self.app = app
        self.settings = app.settings
        self.id = session_id
        self.store: EventStore | None = app.event_store
        self._tag = secrets.token_hex(6)
        self._counter = 0
        self._in_send, self._in_recv = trio.open_memory_channel[Frame](self.settings.inbound_queue)
        self._direct: Callable[[Any], bool] | None = None
        self.awaiting: dict[int | str, _OutStream] = {}
        self.streams: dict[str, _OutStream] = {}
        self.standalone = self._new_stream(standalone=True, mode="sse")
        self.stored_streams: set[str] = set()
        self.server_session: Any = None
        #: A stateless session's one POST stream.
        self.post_stream: _OutStream | None = None
        self.protocol_version: str | None = None
        self.init_id: int | str | None = None
        self.closed = False
        self.cancel_scope: trio.CancelScope | None = None
        self.last_active = trio.current_time()
        self.connections = 0

    def __repr__(self) -> str:
        return f"<HttpSessionStream {self.id or 'stateless'}>"

    # -------------------------------------------------------------- helpers

    @property
    def primes(self) -> bool:
        """Whether SSE streams start with a priming event and a retry hint."""
        version = self.protocol_version
        return version is not None and version >= V2025_11_25

    def owns(self, stream_id: str) -> bool:
        return stream_id.partition(".")[0] == self._tag

    def _new_stream(
        self, *, standalone: bool, mode: Mode, pending: Iterable[int | str] = (), batch: bool = False
    ) -> _OutStream:
        self._counter += 1
        stream = _OutStream(
            self,
            f"{self._tag}.{self._counter}",
            standalone=standalone,
            mode=mode,
            pending=pending,
            batch=batch,
        )
        self.streams[stream.id] = stream
        return stream

    def new_post_stream(self, ids: list[int | str], mode: Mode, conn: _Conn, batch: bool) -> _OutStream:
        stream = self._new_stream(standalone=False, mode=mode, pending=ids, batch=batch)
        stream.conn = conn
        stream.ever_attached = True
        for ident in ids:
            self.awaiting[ident] = stream
        if self.id is None:
            self.post_stream = stream
        return stream

    def abandon(self, stream: _OutStream) -> None:
        for ident in stream.pending:
            if self.awaiting.get(ident) is stream:
                del self.awaiting[ident]
        stream.close()
        self.streams.pop(stream.id, None)

    def new_standalone(self) -> _OutStream:
        old = self.standalone
        old.close()
        self.streams.pop(old.id, None)
        self.app._forget_soon(self, old.id)
        self.standalone = self._new_stream(standalone=True, mode="sse")
        return self.standalone

    def dropped(self, count: int = 1) -> None:
        self.app._dropped += count

    def touch(self) -> None:
        self.last_active = trio.current_time()

    async def store_event(self, stream_id: str, data: bytes) -> str | None:
        """Store an event; None when the store failed or timed out (the
        event then goes out without an id: it cannot be resumed)."""
        store = self.store
        assert store is not None
        try:
            with trio.fail_after(self.settings.store_timeout):
                event_id = await store.store_event(stream_id, data)
        except Exception:
            log.exception("event store: store_event failed")
            return None
        self.stored_streams.add(stream_id)
        return event_id

    async def events_after(self, event_id: str) -> list[StoredEvent] | None:
        store = self.store
        assert store is not None
        try:
            with trio.fail_after(self.settings.store_timeout):
                return await store.events_after(event_id)
        except Exception:
            log.exception("event store: events_after failed")
            return None

    def set_direct(self, receiver: Callable[[Any], bool] | None) -> None:
        """Let POST handlers hand a request or response straight to the
        session's peer while its reader is idle (see MemoryStream.set_direct)."""
        self._direct = receiver

    async def enqueue(self, frame: Frame) -> int:
        """Hand a POST body to the session: 0 when queued, else an HTTP status."""
        if self.closed:
            return 404
        self.touch()
        direct = self._direct
        if direct is not None and type(frame) in (Request, Response, ErrorResponse):
            stats = self._in_send.statistics()
            if stats.current_buffer_used == 0 and stats.tasks_waiting_receive > 0 and direct(frame):
                return 0
        with trio.move_on_after(self.settings.enqueue_timeout):
            try:
                await self._in_send.send(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return 404
            return 0
        return 503

    # ------------------------------------------------------- MessageStream

    async def send(self, message: Any) -> None:
        if self.closed:
            raise TransportClosed("HTTP session ended")
        self.touch()
        kind = type(message)
        if kind is Response or kind is ErrorResponse:
            ident = message.id
            if ident is not None and ident == self.init_id:
                self._initialize_answered(message)
            stream = self.awaiting.pop(ident, None) if ident is not None else None
            if stream is None:
                self.dropped()
                return
            await stream.deliver(message, answers=ident)
            if kind is ErrorResponse and ident == self.init_id and self.id is not None:
                self.app._end_session(self, "initialize failed")
            return
        related = RELATED_REQUEST.get()
        if related is not None:
            stream = self.awaiting.get(related)
            if stream is not None and await stream.deliver(message):
                return
        if self.id is None:
            # Stateless: no standalone stream; everything goes on the one
            # POST's stream (``subscriptions/listen`` notifications, say).
            post = self.post_stream
            if post is None or not await post.deliver(message):
                self.dropped()
            return
        await self.standalone.deliver(message)

    async def close_sse_stream(self, request_id: int | str | None = None) -> bool:
        """Close the HTTP connection carrying a request's SSE stream, or the
        GET stream, without ending the stream itself: the client reconnects
        (``Last-Event-ID``, after the ``retry`` hint) and receives whatever
        was sent in between (2025-11-25, SEP-1699 polling).

        ``request_id`` defaults to the request whose handler is calling
        (:data:`~trio_mcp.transports.RELATED_REQUEST`); with neither, the GET
        stream's connection is closed. Returns False when the client could
        not resume that stream (no event store, a JSON answer, ...).
        """
        if self.closed:
            return False
        if request_id is None:
            request_id = RELATED_REQUEST.get()
        if request_id is None:
            return await self.standalone.close_connection() if self.id is not None else False
        stream = self.awaiting.get(request_id)
        return False if stream is None else await stream.close_connection()

    def _initialize_answered(self, message: Any) -> None:
        version = getattr(self.server_session, "protocol_version", None)
        if version is None and type(message) is Response:
            try:
                version = coerce(message.result, _VersionOnly).protocolVersion
            except (msgspec.ValidationError, msgspec.DecodeError):
                version = None
        self.protocol_version = version if isinstance(version, str) else None

    async def receive(self) -> Frame:
        try:
            return await self._in_recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise trio.EndOfChannel from None

    async def aclose(self) -> None:
        self.app._end_session(self, "closed by the server session")
        await trio.lowlevel.checkpoint()

    def _close(self) -> None:
        """End everything at once (idempotent, never blocks)."""
        if self.closed:
            return
        self.closed = True
        self._direct = None
        self._in_send.close()
        for stream in list(self.streams.values()):
            stream.close()
        self.standalone.close()
        self.streams.clear()
        self.awaiting.clear()


class _VersionOnly(Struct):
    protocolVersion: Any = None


# -------------------------------------------------------------------- app


def _media_types(value: str | None) -> set[str]:
    if value is None:
        return {"*/*"}
    out = set()
    for part in value.split(","):
        media, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, val = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(val)
                except ValueError:
                    q = 0.0
        if q > 0 and media:
            out.add(media.strip().lower())
    return out


def _accepts(types: set[str], media: str) -> bool:
    major = media.partition("/")[0]
    return media in types or f"{major}/*" in types or "*/*" in types


class StreamableHttpApp(AsgiApp):
    """The Streamable HTTP endpoint as an ASGI 3 application.

    ``app`` is a :class:`~trio_mcp.server.LowLevelServer` (or
    :class:`~trio_mcp.server.MCPServer`) shared by all sessions, or a
    zero-argument factory returning a fresh one per session.

    Sessions run in the nursery of :meth:`run` (``await
    nursery.start(app.run)``); when served by a plain ASGI server the app
    runs itself inside the ASGI lifespan instead.
    """

    def __init__(
        self,
        app: Any,
        *,
        settings: HttpServerSettings | None = None,
        event_store: EventStore | None | str = _DEFAULT_STORE,
        **options: Any,
    ) -> None:
        if settings is None:
            settings = HttpServerSettings(**options)
        elif options:
            settings = attrs.evolve(settings, **options)
        self.settings = settings
        if hasattr(app, "start_session") and hasattr(app, "request_handlers"):
            self._shared: Any = app
            self._factory: Callable[[], Any] | None = None
        elif callable(app):
            self._shared = None
            self._factory = app
        else:
            raise TypeError("app must be a LowLevelServer / MCPServer or a factory returning one")
        if isinstance(event_store, str):
            if event_store != _DEFAULT_STORE:
                raise ValueError(f"event_store must be an EventStore, None or {_DEFAULT_STORE!r}")
            self.event_store: EventStore | None = MemoryEventStore()
        else:
            self.event_store = event_store
        self._policy = HostPolicy(settings.allowed_hosts, settings.allowed_origins)
        self.sessions: dict[str, HttpSessionStream] = {}
        self._nursery: trio.Nursery | None = None
        self._running = False
        self._closed = False
        self._stop = trio.Event()
        self._lifespan_ready = trio.Event()
        self._retained: deque[tuple[float, HttpSessionStream, str]] = deque()
        self._retained_wakeup = trio.Event()
        self._dropped = 0
        self._created = 0
        self._expired = 0
        self._sse_connections = 0
        self._pumps = 0
        self._pumps_done = trio.Event()
        #: The server session serving stateless requests inline (see _post_inline).
        self._stateless: Any = None
        self._stateless_methods: tuple[str, ...] = ()
        #: Stateless requests being answered inline (cancelled when the server stops).
        self._inline_answers: set[_InlineAnswer] = set()
        #: Per app: (its ``tools`` list, name -> Tool, or (annotations or None, input
        #: schema) once asked), valid while the app keeps that very list (an
        #: MCPServer builds a new one on every change).
        self._tool_headers: weakref.WeakKeyDictionary[Any, tuple[Any, dict[str, Any]]] = (
            weakref.WeakKeyDictionary()
        )

    # ------------------------------------------------------------ lifecycle

    async def run(
        self, *, task_status: trio.TaskStatus[StreamableHttpApp] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Host the sessions until :meth:`aclose` (or cancellation)."""
        if self._running:
            raise RuntimeError("a StreamableHttpApp runs once at a time")
        self._running = True
        try:
            async with trio.open_nursery() as nursery:
                if self._shared is not None:
                    nursery.start_soon(self._hold_lifespan, self._shared)
                    await self._lifespan_ready.wait()
                self._nursery = nursery
                if self.settings.session_idle_timeout is not None:
                    nursery.start_soon(self._reaper)
                nursery.start_soon(self._janitor)
                task_status.started(self)
                await self._stop.wait()
                nursery.cancel_scope.cancel()
        finally:
            self._closed = True
            self._nursery = None
            for session in list(self.sessions.values()):
                self._end_session(session, "server stopped")
            self._end_inline_answers()
            self._running = False

    def _end_inline_answers(self) -> None:
        for answer in list(self._inline_answers):
            answer.nursery.cancel_scope.cancel()
        self._stateless = None

    async def _hold_lifespan(self, app: Any) -> None:
        async with app.running():
            self._lifespan_ready.set()
            await trio.sleep_forever()

    async def aclose(self) -> None:
        """End every session and SSE stream, and stop :meth:`run`."""
        self._closed = True
        for session in list(self.sessions.values()):
            self._end_session(session, "server stopped")
        self._end_inline_answers()
        self._stop.set()
        await trio.lowlevel.checkpoint()

    async def wait_responses_done(self) -> None:
        """After :meth:`aclose`: wait until every streaming response has ended."""
        if self._pumps == 0:
            await trio.lowlevel.checkpoint()
            return
        await self._pumps_done.wait()

    def statistics(self) -> HttpServerStatistics:
        return HttpServerStatistics(
            sessions=len(self.sessions),
            sse_connections=self._sse_connections,
            messages_dropped=self._dropped,
            sessions_created=self._created,
            sessions_expired=self._expired,
        )

    async def terminate_session(self, session_id: str) -> bool:
        """End a session as if its client had sent DELETE; False if unknown."""
        session = self.sessions.get(session_id)
        if session is None:
            return False
        self._end_session(session, "terminated by the server")
        await trio.lowlevel.checkpoint()
        return True

    def _end_session(self, session: HttpSessionStream, reason: str) -> None:
        if session.id is not None and self.sessions.get(session.id) is session:
            del self.sessions[session.id]
            log.debug("session %s ended: %s", session.id, reason)
        session._close()
        if session.cancel_scope is not None:
            session.cancel_scope.cancel()

    def _forget_soon(self, session: HttpSessionStream, stream_id: str) -> None:
        session.stored_streams.discard(stream_id)
        if self.event_store is not None and self._nursery is not None:
            self._nursery.start_soon(self._forget, [stream_id])

    def _forget_later(self, session: HttpSessionStream, stream_id: str) -> None:
        """Forget a completed stream after the retention delay (or with its session)."""
        if self.event_store is None or stream_id not in session.stored_streams:
            return
        deadline = trio.current_time() + self.settings.completed_stream_retention
        self._retained.append((deadline, session, stream_id))
        self._retained_wakeup.set()

    async def _janitor(self) -> None:
        retained = self._retained
        while True:
            if not retained:
                self._retained_wakeup = trio.Event()
                await self._retained_wakeup.wait()
                continue
            deadline, session, stream_id = retained[0]
            await trio.sleep_until(deadline)
            retained.popleft()
            if stream_id in session.stored_streams:
                session.stored_streams.discard(stream_id)
                await self._forget([stream_id])

    async def _forget(self, stream_ids: Iterable[str]) -> None:
        store = self.event_store
        if store is None:
            return
        with trio.move_on_after(self.settings.store_timeout):
            for stream_id in stream_ids:
                await store.forget_stream(stream_id)

    async def _reaper(self) -> None:
        timeout = self.settings.session_idle_timeout
        assert timeout is not None
        while True:
            await trio.sleep(max(timeout / 4, 0.01))
            now = trio.current_time()
            for session in list(self.sessions.values()):
                if session.connections == 0 and not session.awaiting and now - session.last_active > timeout:
                    self._expired += 1
                    self._end_session(session, "idle timeout")

    async def _start_session(self, session_id: str | None) -> HttpSessionStream:
        nursery = self._nursery
        if nursery is None or self._closed:
            raise HttpError(503, "Server is not running")
        session = HttpSessionStream(self, session_id)
        if session_id is not None:
            self.sessions[session_id] = session
            self._created += 1
        try:
            session.server_session = await nursery.start(self._session_task, session)
        except BaseException:
            self._end_session(session, "failed to start")
            raise
        return session

    async def _session_task(self, session: HttpSessionStream, *, task_status: trio.TaskStatus[Any]) -> None:
        from ...actors._server import ServerSession

        try:
            with trio.CancelScope() as scope:
                session.cancel_scope = scope
                if session.closed:
                    scope.cancel()
                name = f"http:{(session.id or 'stateless')[:8]}"
                if self._shared is not None:
                    app = self._shared
                    await ServerSession(app, session, limits=app.limits, name=name).run(
                        task_status=task_status
                    )
                else:
                    assert self._factory is not None
                    app = self._factory()
                    async with app.running():
                        await ServerSession(app, session, limits=app.limits, name=name).run(
                            task_status=task_status
                        )
        finally:
            self._end_session(session, "session finished")
            stored, session.stored_streams = list(session.stored_streams), set()
            if stored:
                with trio.CancelScope(shield=True):
                    await self._forget(stored)

    # ----------------------------------------------------------------- ASGI

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = header_map(scope)
        try:
            if scope.get("path") != self.settings.path:
                raise HttpError(404, "Not found")
            if self.settings.dns_rebinding_protection:
                if not self._policy.host_allowed(headers.get("host")):
                    raise HttpError(421, "Host not allowed")
                if not self._policy.origin_allowed(headers.get("origin")):
                    raise HttpError(403, "Origin not allowed")
            method = scope.get("method", "GET")
            if method == "POST":
                await self._post(scope, receive, send, headers)
            elif method == "GET":
                await self._get(receive, send, headers)
            elif method == "DELETE":
                await self._delete(send, headers)
            else:
                raise HttpError(405, "Method not allowed", headers=[(b"allow", b"GET, POST, DELETE")])
        except HttpError as exc:
            await respond(send, exc.status, error_body(exc.code, exc.message), exc.headers)

    # ---------------------------------------------------------------- checks

    def _session_for(self, headers: dict[str, str]) -> HttpSessionStream:
        session_id = headers.get(SESSION_HEADER)
        if session_id is None:
            raise HttpError(400, "Bad Request: missing Mcp-Session-Id header")
        session = self.sessions.get(session_id)
        if session is None:
            raise HttpError(404, "Session not found")
        version = headers.get(VERSION_HEADER)
        if version is not None and version.strip() not in HANDSHAKE_VERSIONS:
            raise HttpError(
                400,
                f"Bad Request: unsupported MCP-Protocol-Version {version.strip()!r}; "
                f"supported: {', '.join(HANDSHAKE_VERSIONS)}",
            )
        return session

    # ------------------------------------------------------------------ POST

    async def _post(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        ctype = headers.get("content-type", "").partition(";")[0].strip().lower()
        if ctype != "application/json":
            raise HttpError(415, "Unsupported Media Type: Content-Type must be application/json")
        accepted = _media_types(headers.get("accept"))
        json_ok = _accepts(accepted, "application/json")
        sse_ok = _accepts(accepted, "text/event-stream")
        if not (json_ok or sse_ok):
            raise HttpError(406, "Not Acceptable: accept application/json and text/event-stream")
        try:
            body = await read_body(receive, headers, self.settings.max_body_size)
        except Disconnected:
            return
        frame = decode(body)
        if type(frame) is InvalidMessage:
            await respond(send, 400, encode(error_response(frame.id, frame.error)))
            return
        batch = type(frame) is list
        items: list[Any] = frame if batch else [frame]  # type: ignore[assignment, list-item]
        if batch:
            bad = [m for m in items if type(m) is InvalidMessage]
            if bad:
                await respond(send, 400, encode([error_response(m.id, m.error) for m in bad]))
                return
        requests = [m for m in items if type(m) is Request]
        # An initialize that says it is of the stateless era is a removed method there (404).
        modern_header = headers.get(VERSION_HEADER, "").strip() in MODERN_VERSIONS
        is_init = any(m.method == "initialize" for m in requests) and not modern_header
        ephemeral = False
        if is_init:
            if batch:
                raise HttpError(400, "Invalid Request: initialize must not be part of a batch", code=-32600)
            if len(self.sessions) >= self.settings.max_sessions:
                raise HttpError(503, "Too many sessions")
            session = await self._start_session(secrets.token_urlsafe(24))
        elif SESSION_HEADER not in headers and self._stateless_request(headers, requests):
            if not requests:
                await respond(send, 202, b"")
                return
            if batch:
                raise HttpError(
                    400, "Invalid Request: batches are not allowed in this protocol version", code=-32600
                )
            # The validation ladder of a stateless request, first failure wins:
            # _meta envelope (-32602), mirrored headers (-32020), the method
            # exists in this era (404, -32601); the session checks the version
            # (-32022) and capabilities (-32021), answered with HTTP 400.
            request = requests[0]
            rejection = (
                _envelope_problem(request) or _header_problem(headers, request) or _removed_method(request)
            )
            if rejection is not None:
                status, error = rejection
                await respond(send, status, encode(error_response(request.id, error)))
                return
            if self._shared is not None and request.method != "subscriptions/listen":
                await self._post_inline(request, scope, headers, json_ok, sse_ok, receive, send)
                return
            # subscriptions/listen (a stream of notifications), or an app made
            # per session: a session of its own, for this request only.
            session = await self._start_session(None)
            session.store = None  # nothing to resume without a session
            ephemeral = True
            if request.method == "tools/call" and headers.get(VERSION_HEADER, "").strip() in MODERN_VERSIONS:
                # Last rung: the Mcp-Param-* headers against the tool's schema (-32020).
                problem = await self._param_problem(session.server_session, scope, headers, request)
                if problem is not None:
                    self._end_session(session, "Mcp-Param-* headers rejected")
                    await respond(send, 400, encode(error_response(request.id, HeaderMismatch(problem))))
                    return
        else:
            session = self._session_for(headers)
            if batch and (session.protocol_version or V2025_03_26) > V2025_03_26:
                raise HttpError(
                    400, "Invalid Request: batches are not allowed in this protocol version", code=-32600
                )
        try:
            await self._post_session(session, frame, requests, batch, is_init, json_ok, sse_ok, receive, send)
        finally:
            if ephemeral:
                self._end_session(session, "stateless request done")

    async def _param_problem(
        self, server_session: Any, scope: Scope, headers: dict[str, str], request: Request
    ) -> str | None:
        """Why the ``Mcp-Param-*`` headers of a stateless ``tools/call`` do not
        mirror its arguments (None when they do, or when nothing can be checked:
        malformed params, which the session answers, or an unlisted tool)."""
        try:
            call = coerce(request.params, _CallOnly)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None
        arguments = {} if call.arguments is None else call.arguments
        if not isinstance(call.name, str) or not isinstance(arguments, dict):
            return None
        if not arguments and not any(name.startswith(PARAM_PREFIX) for name in headers):
            return None  # nothing in the body, nothing in the headers
        found = await self._tool_annotations(server_session, call.name, request)
        if found is None or found[0] is None:
            return None
        header_map, schema = found
        duplicated = _duplicated_params(scope)
        return param_map_mismatch(header_map, schema, arguments, headers, duplicated=duplicated)

    async def _tool_annotations(
        self, server_session: Any, name: str, request: Request
    ) -> tuple[ParamHeaderMap | None, Any] | None:
        """The ``x-mcp-header`` annotations (None when invalid) and input schema
        of tool ``name`` as the app lists it; None when it lists no such tool.

        An :class:`~trio_mcp.server.MCPServer` listing its own tools: from
        ``app.tools`` (cached per list). Any other ``tools/list`` handler: its
        pages, asked through the request's session with the request's ``_meta``."""
        app = server_session.app
        handler = app.request_handlers.get("tools/list")
        if handler is None:
            return None
        tools = getattr(app, "tools", None)
        if isinstance(tools, list) and handler.fn == getattr(app, "_list_tools", None):
            cached = self._tool_headers.get(app)
            if cached is None or cached[0] is not tools:
                cached = (tools, {t.name: t for t in tools})
                self._tool_headers[app] = cached
            entry = cached[1].get(name)
            if entry is None:
                return None
            if not isinstance(entry, tuple):  # a Tool: its annotations, worked out once
                entry = cached[1][name] = (_param_map_or_none(entry.input_schema), entry.input_schema)
            return entry
        schema = await self._listed_schema(server_session, name, request)
        return None if schema is None else (_param_map_or_none(schema), schema)

    async def _listed_schema(self, server_session: Any, name: str, request: Request) -> Any:
        from ...actors._peer import InboundRequest

        try:
            meta = coerce(request.params, _AnyMeta).meta
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None
        params: dict[str, Any] = {"_meta": meta}
        seen: set[str] = set()
        for page in range(_SCHEMA_LIST_PAGES):
            listing = Request(id=f"{request.id}:tools/list:{page}", method="tools/list", params=params)
            try:
                result = await server_session.handle_request(InboundRequest(server_session.peer, listing))
                data = msgspec.to_builtins(result)
            except Exception as exc:  # fail open: the call itself still gets its answer (or error)
                log.debug("Mcp-Param-* headers not checked: listing the tools failed: %r", exc)
                return None
            if not isinstance(data, dict):
                return None
            for tool in data.get("tools") or ():
                if isinstance(tool, dict) and tool.get("name") == name:
                    return tool.get("inputSchema")
            cursor = data.get("nextCursor")
            if not isinstance(cursor, str) or cursor in seen:
                return None
            seen.add(cursor)
            params = {"_meta": meta, "cursor": cursor}
        return None

    def _stateless_request(self, headers: dict[str, str], requests: list[Request]) -> bool:
        version = headers.get(VERSION_HEADER)
        if version is not None:
            # Any version but a handshake one, without a session: a stateless
            # request (an unknown version is answered -32022 with what we support).
            return version.strip() not in HANDSHAKE_VERSIONS
        if not requests:
            return False
        for req in requests:
            try:
                meta = coerce(req.params, _MetaOnly).meta
            except (msgspec.ValidationError, msgspec.DecodeError):
                return False
            if meta.get(META_PROTOCOL_VERSION) not in MODERN_VERSIONS:
                return False
        return True

    async def _post_inline(
        self,
        request: Request,
        scope: Scope,
        headers: dict[str, str],
        json_ok: bool,
        sse_ok: bool,
        receive: Receive,
        send: Send,
    ) -> None:
        """A stateless request (not ``subscriptions/listen``) of a shared app,
        served in this ASGI task by the one server session that serves them
        all (:meth:`~trio_mcp.actors.Peer.serve_inline`): no session actor and
        no channels per request. The handler's notifications go on this
        request's SSE stream (``auto`` mode switches to SSE for the first one);
        the client going away cancels the handler."""
        if self._nursery is None or self._closed:
            raise HttpError(503, "Server is not running")
        server = self._stateless_server()
        if request.method == "tools/call" and headers.get(VERSION_HEADER, "").strip() in MODERN_VERSIONS:
            # Last rung: the Mcp-Param-* headers against the tool's schema (-32020).
            problem = await self._param_problem(server, scope, headers, request)
            if problem is not None:
                await respond(send, 400, encode(error_response(request.id, HeaderMismatch(problem))))
                return
        mode = self._answer_mode(json_ok, sse_ok)
        self._pumps += 1
        try:
            async with trio.open_nursery() as nursery:
                answer = _InlineAnswer(self, send, mode, sse_ok, nursery)
                self._inline_answers.add(answer)
                nursery.start_soon(watch_disconnect, receive, nursery.cancel_scope)
                try:
                    if mode == "sse":
                        await answer.start_sse()
                    reply = await server.peer.serve_inline(request, answer.notify)
                    await answer.finish(reply)
                except (trio.TooSlowError, TransportClosed):
                    pass  # the client does not read, or the server stopped: drop the connection
                finally:
                    self._inline_answers.discard(answer)
                    if answer.started:
                        self._sse_connections -= 1
                    nursery.cancel_scope.cancel()
        finally:
            self._pumps -= 1
            if self._pumps == 0 and self._closed:
                self._pumps_done.set()

    def _answer_mode(self, json_ok: bool, sse_ok: bool) -> Mode:
        """How a POST is answered, from the ``json_response`` setting and what the client accepts."""
        setting = self.settings.json_response
        if setting is True:
            return "json" if json_ok else "sse"
        if setting is False:
            return "sse" if sse_ok else "json"
        return "auto" if json_ok else "sse"

    def _stateless_server(self) -> Any:
        """The server session of the shared app that serves stateless requests
        in their own ASGI tasks (made on first use)."""
        app = self._shared
        methods = tuple(app.request_handlers)
        server = self._stateless
        if server is None or methods != self._stateless_methods:
            # A new one when the app's handlers change: a session works out
            # the capabilities it declares (and gates) once.
            from ...actors._server import ServerSession

            server = self._stateless = ServerSession(app, _NoWire(), limits=app.limits, name="http:stateless")
            server.task_nursery = self._nursery  # tasks outlive the request that started them
            self._stateless_methods = methods
        return server

    async def _post_session(
        self,
        session: HttpSessionStream,
        frame: Any,
        requests: list[Request],
        batch: bool,
        is_init: bool,
        json_ok: bool,
        sse_ok: bool,
        receive: Receive,
        send: Send,
    ) -> None:
        if not requests:
            status = await session.enqueue(frame)
            if status:
                raise HttpError(status, "Session not found" if status == 404 else "Session busy, retry later")
            await respond(send, 202, b"", self._session_headers(session))
            return
        ids = [r.id for r in requests]
        if len(set(ids)) != len(ids) or any(i in session.awaiting for i in ids):
            raise HttpError(400, "Invalid Request: duplicate request id", code=-32600)
        mode = self._answer_mode(json_ok, sse_ok)
        conn = _Conn(self.settings.sse_buffer, sse_ok)
        stream = session.new_post_stream(ids, mode, conn, batch)
        if is_init:
            session.init_id = requests[0].id
        try:
            if mode == "sse":
                await stream.open_sse()
            status = await session.enqueue(frame)
        except BaseException:
            session.abandon(stream)
            raise
        if status:
            session.abandon(stream)
            if is_init:
                self._end_session(session, "initialize not accepted")
            raise HttpError(status, "Session not found" if status == 404 else "Session busy, retry later")
        # A JSON answer in a session needs no watcher for the client going
        # away (the answer is written once, to whoever is there); an SSE
        # stream, or a stateless request (whose end cancels it), does.
        await self._pump(
            session,
            stream,
            conn,
            [],
            receive,
            send,
            sse_now=mode == "sse",
            watch=mode == "sse" or session.id is None,
        )
        if session.id is None and not conn.complete:
            # A stateless request whose client went away: nobody can resume it.
            self._end_session(session, "client went away")

    # ------------------------------------------------------------------- GET

    async def _get(self, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        if not _accepts(_media_types(headers.get("accept")), "text/event-stream"):
            raise HttpError(406, "Not Acceptable: the GET stream is text/event-stream")
        session = self._session_for(headers)
        conn = _Conn(self.settings.sse_buffer, True)
        last = headers.get(LAST_EVENT_HEADER)
        stream: _OutStream | None = None
        initial: list[_Event] = []
        store = self.event_store
        if last is not None and store is not None:
            last = last.strip()
            try:
                with trio.fail_after(self.settings.store_timeout):
                    stream_id = await store.stream_of(last)
            except Exception:
                log.exception("event store: stream_of failed")
                stream_id = None
            if stream_id is not None and session.owns(stream_id):
                live = session.streams.get(stream_id)
                if live is not None:
                    try:
                        initial = await live.attach(conn, resume_after=last)
                    except _Busy:
                        raise HttpError(409, "Conflict: that stream is already open") from None
                    stream = live
                else:
                    # Finished while disconnected: replay what is left, then end.
                    initial = await session.events_after(last) or []
                    conn.complete = True
                    conn.send.close()
                    await self._pump(
                        session, None, conn, initial, receive, send, sse_now=True, forget=stream_id
                    )
                    return
        if stream is None:
            current = session.standalone
            if current.conn is not None:
                raise HttpError(409, "Conflict: the session's GET stream is already open")
            if current.ever_attached:
                current = session.new_standalone()
            try:
                initial = await current.attach(conn)
            except _Busy:
                raise HttpError(409, "Conflict: the session's GET stream is already open") from None
            stream = current
        await self._pump(session, stream, conn, initial, receive, send, sse_now=True)

    # ---------------------------------------------------------------- DELETE

    async def _delete(self, send: Send, headers: dict[str, str]) -> None:
        session = self._session_for(headers)
        self._end_session(session, "deleted by the client")
        await respond(send, 200, b"")

    # ------------------------------------------------------------------ pump

    def _session_headers(self, session: HttpSessionStream) -> list[tuple[bytes, bytes]]:
        return [] if session.id is None else [(SESSION_HEADER.encode(), session.id.encode())]

    async def _pump(
        self,
        session: HttpSessionStream,
        stream: _OutStream | None,
        conn: _Conn,
        initial: list[_Event],
        receive: Receive,
        send: Send,
        *,
        sse_now: bool,
        forget: str | None = None,
        watch: bool = True,
    ) -> None:
        """Write a stream's items to one HTTP response until the stream is
        complete, the session ends, or the client goes away."""
        settings = self.settings
        started = False
        finished = False
        session.connections += 1
        self._pumps += 1

        async def write(data: bytes, more: bool = True) -> None:
            with trio.fail_after(settings.write_timeout):
                await send({"type": "http.response.body", "body": data, "more_body": more})

        async def last_write(status: int | None, data: bytes) -> None:
            # Shielded from the disconnect watcher: once the response is
            # complete the server reports a disconnect while it is still
            # recycling the connection inside this very send (hypercorn),
            # and cancelling that would strand the connection.
            with trio.CancelScope(shield=True), trio.fail_after(settings.write_timeout):
                if status is None:
                    await send({"type": "http.response.body", "body": data, "more_body": False})
                else:
                    await respond(send, status, data, self._session_headers(session))

        async def start_sse() -> None:
            nonlocal started
            started = True
            self._sse_connections += 1
            with trio.fail_after(settings.write_timeout):
                await start_event_stream(send, self._session_headers(session))
            if session.primes:
                await write(format_retry(int(settings.retry_interval * 1000)))

        try:
            async with trio.open_nursery() as nursery:
                if watch:
                    nursery.start_soon(watch_disconnect, receive, nursery.cancel_scope)
                try:
                    if sse_now:
                        await start_sse()
                    for event_id, data in initial:
                        await write(format_event(event_id, data))
                    while True:
                        item: tuple[Any, ...] | None = None
                        with trio.move_on_after(settings.ping_interval if started else math.inf):
                            try:
                                item = await conn.recv.receive()
                            except trio.EndOfChannel:
                                break
                        if item is None:
                            await write(PING)
                        elif item[0] == "j":
                            messages = item[1]
                            batched = stream is not None and stream.batch
                            body = encode(messages if batched else messages[0])
                            status = 200
                            if session.id is None and not batched and type(messages[0]) is ErrorResponse:
                                # Stateless era: a protocol error has an HTTP status too.
                                status = ERROR_STATUS.get(messages[0].error.code, 200)
                            await last_write(status, body)
                            finished = True
                            break
                        else:
                            if not started:
                                await start_sse()
                            await write(format_event(item[1], item[2]))
                    if started:
                        await last_write(None, b"")
                        finished = True
                    elif not finished:
                        await last_write(
                            404, error_body(-32000, "Session ended before the request was answered")
                        )
                        finished = True
                except trio.TooSlowError:
                    pass  # the client does not read: drop the connection, it can resume
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            session.connections -= 1
            self._pumps -= 1
            if self._pumps == 0 and self._closed:
                self._pumps_done.set()
            session.touch()
            if started:
                self._sse_connections -= 1
            if stream is not None:
                stream.detach(conn)
            if finished and conn.complete:
                target = (
                    forget
                    if forget is not None
                    else (stream.id if stream is not None and not stream.standalone else None)
                )
                if target is not None:
                    self._forget_later(session, target)


async def close_sse_stream(context: Any) -> bool:
    """From a request handler: close the HTTP connection of this request's
    SSE stream so that the client reconnects and resumes it (SEP-1699).

    ``context`` is the handler's :class:`~trio_mcp.server.Context`. Returns
    False (and does nothing) when the session is not served over Streamable
    HTTP or the client could not resume (see
    :meth:`HttpSessionStream.close_sse_stream`).
    """
    stream = getattr(getattr(getattr(context, "session", None), "peer", None), "stream", None)
    if not isinstance(stream, HttpSessionStream):
        return False
    return await stream.close_sse_stream(context.request_id)


# ----------------------------------------------------------------- server


class HttpServer:
    """An actor serving an MCP app over Streamable HTTP with hypercorn.

    ``await nursery.start(server.run)`` returns an :class:`HttpServerInfo`
    with the bound port (``port=0`` picks a free one). :meth:`stop` (or
    cancelling ``run``) ends every session and stream, then the listener.

    Options are :class:`HttpServerSettings` fields (or ``settings=``).
    Binding a specific non-loopback address adds it to ``allowed_hosts``;
    for a wildcard bind (``0.0.0.0``, ``::``) pass ``allowed_hosts`` with
    the names clients use.
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str = "/mcp",
        settings: HttpServerSettings | None = None,
        event_store: EventStore | None | str = _DEFAULT_STORE,
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
            settings = HttpServerSettings(path=path, **options)
        else:
            if path != "/mcp":
                options["path"] = path
            if options:
                settings = attrs.evolve(settings, **options)
        self.asgi = StreamableHttpApp(app, settings=settings, event_store=event_store)
        self.host = host
        self.port = port
        self.graceful_timeout = graceful_timeout
        self.info: HttpServerInfo | None = None
        self._stop = trio.Event()
        self._listener_stop = trio.Event()

    @property
    def url(self) -> str:
        if self.info is None:
            raise RuntimeError("the server is not running yet")
        return self.info.url

    def stop(self) -> None:
        """Ask ``run`` to end (graceful; returns at once)."""
        self._stop.set()

    async def run(self, *, task_status: trio.TaskStatus[HttpServerInfo] = trio.TASK_STATUS_IGNORED) -> None:
        from hypercorn.config import Config
        from hypercorn.trio import serve

        config = Config()
        host = self.host
        config.bind = [f"{host_in_url(host)}:{self.port}"]
        config.graceful_timeout = self.graceful_timeout
        config.accesslog = None
        config.errorlog = logging.getLogger("trio_mcp.http.hypercorn")  # type: ignore[assignment]
        async with trio.open_nursery() as nursery:
            await nursery.start(self.asgi.run)
            binds = await nursery.start(_serve, serve, self.asgi, config, self._listener_stop.wait)
            port = _port_of(binds[0]) if binds else self.port
            self.info = ServerInfo.at("http", host, port, self.asgi.settings.path)
            task_status.started(self.info)
            await self._stop.wait()
            # End every session and SSE response first, then stop hypercorn,
            # which closes its (now idle) connections; all within a bound.
            nursery.cancel_scope.deadline = trio.current_time() + self.graceful_timeout + 1.0
            await self.asgi.aclose()
            with trio.move_on_after(self.graceful_timeout / 2):
                await self.asgi.wait_responses_done()
            self._listener_stop.set()

    def statistics(self) -> HttpServerStatistics:
        return self.asgi.statistics()


async def _serve(
    serve: Any, app: Any, config: Any, trigger: Any, *, task_status: trio.TaskStatus[Any]
) -> None:
    await serve(app, config, shutdown_trigger=trigger, task_status=task_status)


def _port_of(bind: str) -> int:
    return int(bind.rpartition(":")[2])
