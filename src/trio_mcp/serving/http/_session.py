"""One Streamable HTTP session: the :class:`MessageStream` its server
session talks through, routing every outgoing message to the HTTP
response that must carry it (see :mod:`trio_mcp.serving.http`)."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

import msgspec
import trio
from msgspec import Struct

from ...protocol import V2025_11_25, ErrorResponse, Frame, Notification, Request, Response, coerce
from ...transports._base import RELATED_REQUEST, TransportClosed
from ._config import Mode
from ._eventstore import EventStore, StoredEvent
from ._streams import Conn, OutStream

if TYPE_CHECKING:
    from ._app import StreamableHttpApp

__all__ = ["HttpSessionStream", "close_sse_stream"]

log = logging.getLogger("trio_mcp.http.server")


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
        #: Frames handed to the inbound channel that :meth:`receive` has not
        #: returned yet, and whether the session's reader waits in it: a POST
        #: may hand its frame over directly, or serve it in its own task, only
        #: when nothing is ahead of it (counted here rather than asked of the
        #: channel, whose statistics are an object per question).
        self._queued = 0
        self._reader_waiting = False
        self._direct: Callable[[Any], bool] | None = None
        self.awaiting: dict[int | str, OutStream] = {}
        self.streams: dict[str, OutStream] = {}
        self.standalone = self._new_stream(standalone=True, mode="sse")
        self.stored_streams: set[str] = set()
        self.server_session: Any = None
        #: A stateless session's one POST stream.
        self.post_stream: OutStream | None = None
        self.protocol_version: str | None = None
        self.init_id: int | str | None = None
        self.closed = False
        self.cancel_scope: trio.CancelScope | None = None
        self.created = self.last_active = trio.current_time()
        self.connections = 0
        #: The client sent something after its ``initialize`` (the handshake
        #: is complete; see :class:`~trio_mcp.serving.http.ExpiryPolicy`).
        self.established = False
        #: The token of the principal the session belongs to (its latest one;
        #: see :mod:`._auth`), None without authorization.
        self.auth: Any = None

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
    ) -> OutStream:
        self._counter += 1
        stream = OutStream(
            self,
            f"{self._tag}.{self._counter}",
            standalone=standalone,
            mode=mode,
            pending=pending,
            batch=batch,
        )
        self.streams[stream.id] = stream
        return stream

    def new_post_stream(
        self, ids: list[int | str], mode: Mode, conn: Conn, batch: bool, headers: dict[str, str]
    ) -> OutStream:
        stream = self._new_stream(standalone=False, mode=mode, pending=ids, batch=batch)
        stream.headers = headers
        stream.conn = conn
        stream.ever_attached = True
        for ident in ids:
            self.awaiting[ident] = stream
        if self.id is None:
            self.post_stream = stream
        return stream

    def abandon(self, stream: OutStream) -> None:
        for ident in stream.pending:
            if self.awaiting.get(ident) is stream:
                del self.awaiting[ident]
        stream.close()
        self.streams.pop(stream.id, None)

    def new_standalone(self) -> OutStream:
        old = self.standalone
        old.close()
        self.streams.pop(old.id, None)
        self.app._forget_soon(self, old.id)
        self.standalone = self._new_stream(standalone=True, mode="sse")
        return self.standalone

    def request_headers(self, request_id: int | str) -> dict[str, str] | None:
        """The headers of the POST that carried request ``request_id`` (while it is served)."""
        stream = self.awaiting.get(request_id)
        return None if stream is None else stream.headers

    def dropped(self, count: int = 1) -> None:
        self.app._dropped += count

    def touch(self) -> None:
        self.last_active = self.app.watch.now()

    async def store_event(self, stream_id: str, data: bytes) -> str | None:
        """Store an event; None when the store failed or timed out (the
        event then goes out without an id: it cannot be resumed)."""
        stored = self.store_event_now(stream_id, data)
        if stored is not False:
            return stored
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

    def store_event_now(self, stream_id: str, data: bytes) -> str | None | Literal[False]:
        """:meth:`store_event` with a store that never blocks (one with
        ``store_event_nowait``: no deadline to keep); False with any other."""
        store = self.store
        assert store is not None
        nowait = getattr(type(store), "store_event_nowait", None)
        if nowait is None:
            return False
        try:
            event_id: str = nowait(store, stream_id, data)
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
        if not self.established and (type(frame) is not Request or frame.method != "initialize"):
            self.established = True
        direct = self._direct
        if (
            direct is not None
            and type(frame) in (Request, Response, ErrorResponse)
            and self._queued == 0
            and self._reader_waiting
            and direct(frame)
        ):
            return 0
        queued = False
        # Counted before the send: the frame is the reader's from the moment
        # it is handed over (the send still yields after that).
        self._queued += 1
        try:
            with trio.move_on_after(self.settings.enqueue_timeout):
                try:
                    await self._in_send.send(frame)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return 404
                queued = True
        finally:
            if not queued:
                self._queued -= 1
        if not queued:
            self.app.posts_refused += 1
            return 503
        if type(frame) is not Request:
            await self._end_cancelled(frame)
        return 0

    async def serve_here(self, request: Request, scope: trio.CancelScope) -> bool:
        """Serve ``request`` in the calling task (a POST answered as JSON: its
        related messages go to the GET stream, never to its own) when nothing
        is queued ahead of it and its peer has room, as a worker would (see
        :meth:`~trio_mcp.actors.Peer.serve_here`); its answer is then on its
        stream. False when it must be enqueued instead.

        ``scope`` is the POST's own (see :class:`~._watch.Guard`), which the
        peer cancels when the client cancels the request
        (``notifications/cancelled``): the Cancelled then ends the POST's
        scope, and the POST answers ``202`` after it (see ``handle_post``)."""
        if self._direct is None or self.closed or self._queued or not self._reader_waiting:
            return False  # something is queued ahead of it, or the reader is busy
        self.established = True  # (touched by its answer: until then it is not idle)
        served: bool = await self.server_session.peer.serve_here(request, scope)
        return served

    async def _end_cancelled(self, frame: Frame) -> None:
        """The client cancelled requests (``notifications/cancelled``): they
        will not be answered, so their POST responses end without an answer
        (nothing is left waiting on a connection; see :meth:`OutStream.cancel`)."""
        for item in frame if type(frame) is list else (frame,):
            if type(item) is not Notification or item.method != "notifications/cancelled":
                continue
            try:
                ident = coerce(item.params, _CancelledOnly).requestId
            except (msgspec.ValidationError, msgspec.DecodeError):
                continue
            if type(ident) not in (int, str) or ident == self.init_id:
                continue  # initialize is never cancelled (the peer answers it)
            stream = self.awaiting.pop(ident, None)
            if stream is not None:
                await stream.cancel(ident)

    # ------------------------------------------------------- MessageStream

    async def send(self, message: Any) -> None:
        if self.closed:
            raise TransportClosed("HTTP session ended")
        self.last_active = self.app.watch.now()  # (touch)
        kind = type(message)
        if kind is Response or kind is ErrorResponse:
            ident = message.id
            if ident is not None and ident == self.init_id:
                self._initialize_answered(message)
            stream = self.awaiting.pop(ident, None) if ident is not None else None
            if stream is None:
                self.dropped()
                return
            if not stream.answer_nowait(message, ident):
                await stream.deliver(message, answers=ident)
            if kind is ErrorResponse and ident == self.init_id and self.id is not None:
                self.app.end_session(self, "initialize failed")
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
        self._reader_waiting = True
        try:
            frame = await self._in_recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise trio.EndOfChannel from None
        finally:
            self._reader_waiting = False
        self._queued -= 1
        return frame

    async def aclose(self) -> None:
        self.app.end_session(self, "closed by the server session")
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


class _CancelledOnly(Struct):
    requestId: Any = None


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
