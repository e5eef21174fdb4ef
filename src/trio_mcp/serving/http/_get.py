"""``GET`` (the session's standalone SSE stream, or a resumption with
``Last-Event-ID``), ``DELETE`` (end the session), and the pump that writes
a stream's events to one HTTP response."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any, Final

import trio

from ...protocol import ErrorResponse, encode
from ...transports._asgi import (
    HttpError,
    Receive,
    Send,
    error_body,
    respond,
    start_event_stream,
    watch_disconnect,
)
from ...transports.http._sse import PING, format_event, format_retry
from ._config import ERROR_STATUS, LAST_EVENT_HEADER, SESSION_HEADER, accepts, media_types
from ._session import HttpSessionStream
from ._streams import Busy, Conn, Event, OutStream
from ._watch import Guard

if TYPE_CHECKING:
    from ._app import StreamableHttpApp

__all__ = ["answer_status", "handle_delete", "handle_get", "pump", "session_headers"]

log = logging.getLogger("trio_mcp.http.server")

_SESSION_HEADER: Final = SESSION_HEADER.encode()


def _stateless() -> HttpError:
    """GET and DELETE on a stateless server: there is no session, and no GET stream."""
    return HttpError(
        405,
        "Method not allowed: this server is stateless (no sessions, no GET stream)",
        headers=[(b"allow", b"POST")],
    )


async def handle_get(app: StreamableHttpApp, receive: Receive, send: Send, headers: dict[str, str]) -> None:
    if app.settings.stateless:
        raise _stateless()
    if not accepts(media_types(headers.get("accept")), "text/event-stream"):
        raise HttpError(406, "Not Acceptable: the GET stream is text/event-stream")
    session = await app.session_for(headers)
    conn = Conn(app.settings.sse_buffer, True)
    last = headers.get(LAST_EVENT_HEADER)
    stream: OutStream | None = None
    initial: list[Event] = []
    store = app.event_store
    if last is not None and store is not None:
        last = last.strip()
        try:
            with trio.fail_after(app.settings.store_timeout):
                stream_id = await store.stream_of(last)
        except Exception:
            log.exception("event store: stream_of failed")
            stream_id = None
        if stream_id is not None and session.owns(stream_id):
            live = session.streams.get(stream_id)
            if live is not None:
                try:
                    initial = await live.attach(conn, resume_after=last)
                except Busy:
                    raise HttpError(409, "Conflict: that stream is already open") from None
                stream = live
            else:
                # Finished while disconnected: replay what is left, then end.
                initial.extend(await session.events_after(last) or ())
                conn.complete = True
                conn.close()
                await pump(app, session, None, conn, initial, receive, send, sse_now=True, forget=stream_id)
                return
    if stream is None:
        app.check_taking_work()  # a new GET stream; a resumption is still served while draining
        current = session.standalone
        if current.conn is not None:
            raise HttpError(409, "Conflict: the session's GET stream is already open")
        if current.ever_attached:
            current = session.new_standalone()
        try:
            initial = await current.attach(conn)
        except Busy:
            raise HttpError(409, "Conflict: the session's GET stream is already open") from None
        stream = current
    await pump(app, session, stream, conn, initial, receive, send, sse_now=True)


async def handle_delete(app: StreamableHttpApp, send: Send, headers: dict[str, str]) -> None:
    if app.settings.stateless:
        raise _stateless()
    session = await app.session_for(headers)
    app.end_session(session, "deleted by the client")
    await respond(send, 200, b"")


def session_headers(session: HttpSessionStream) -> list[tuple[bytes, bytes]]:
    """``Mcp-Session-Id`` for a live session; none for a stateless one or one
    that has ended (a failed ``initialize`` names no session)."""
    if session.id is None or session.closed:
        return []
    return [(_SESSION_HEADER, session.id.encode())]


async def pump(
    app: StreamableHttpApp,
    session: HttpSessionStream,
    stream: OutStream | None,
    conn: Conn,
    initial: list[Event],
    receive: Receive,
    send: Send,
    *,
    sse_now: bool,
    forget: str | None = None,
    guard: Guard | None = None,
) -> None:
    """Write a stream's items to one HTTP response until the stream is
    complete, the session ends, or the client goes away.

    A task watches for the client going away (``http.disconnect``) and ends
    the response then. With a ``guard`` (a POST in a session), the answer (a
    JSON body or an SSE stream) is waited for and written in the POST's own
    cancel scope, with no nursery, and a watcher only once the POST has taken
    ``disconnect_watch_delay`` (the common, fast case pays for none; see
    :mod:`._watch`), so that a client that went away keeps neither its
    connection nor this task for long. Without one (a GET stream, a
    stateless request's own session), the watcher runs from the start."""
    session.connections += 1
    app.response_started()
    writer = _Writer(app, session, send, shielded=True)
    try:
        first: Any = _NOTHING
        if guard is not None and not sse_now:
            if not conn.ended:  # (an answer served in the POST's own task is there already)
                guard.watch_after_delay()
            first = await conn.next()
            if first is not None and first[0] == "j":
                guard.writing(app.settings.write_timeout)
                status, body, headers = writer.json_body(first[1], stream is not None and stream.batch)
                await respond(send, status, body, headers)
                writer.finished = True
                return
        if guard is not None:
            # Anything else (an SSE stream, 202 for a cancelled call, 404):
            # still in the POST's scope, still watched only from the delay on;
            # the last write stops the watcher instead of a shield.
            if sse_now:
                guard.watch_after_delay()
            writer.shielded = False
            writer.guard = guard
            await writer.run(stream, conn, initial, sse_now, first)
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_disconnect, receive, nursery.cancel_scope)
            try:
                await writer.run(stream, conn, initial, sse_now, first)
            finally:
                nursery.cancel_scope.cancel()
    finally:
        session.connections -= 1
        app.response_ended()
        session.touch()
        if writer.started:
            app._sse_connections -= 1
        if stream is not None:
            stream.detach(conn)
        if writer.finished and conn.complete:
            target = (
                forget
                if forget is not None
                else (stream.id if stream is not None and not stream.standalone else None)
            )
            if target is not None:
                app.forget_later(session, target)


def answer_status(session: HttpSessionStream, answer: Any) -> int:
    """The HTTP status of a POST's one JSON answer: 200, but in a stateless
    session a protocol error has an HTTP status too."""
    if session.id is None and type(answer) is ErrorResponse:
        return ERROR_STATUS.get(answer.error.code, 200)
    return 200


#: No item received yet (see pump).
_NOTHING: Final[Any] = object()


class _Writer:
    """One HTTP response of a stream: JSON (one write) or SSE."""

    __slots__ = (
        "app",
        "conn",
        "finished",
        "guard",
        "prefix",
        "send",
        "session",
        "settings",
        "shielded",
        "started",
    )

    def __init__(
        self, app: StreamableHttpApp, session: HttpSessionStream, send: Send, *, shielded: bool
    ) -> None:
        self.app = app
        self.settings = app.settings
        self.session = session
        self.send = send
        #: The last write is shielded from the disconnect watcher (when there is one).
        self.shielded = shielded
        #: The POST's guard, whose watcher the last write stops (see _watch).
        self.guard: Guard | None = None
        self.started = False
        self.finished = False
        #: What goes out in front of the next body write (the SSE ``retry`` hint).
        self.prefix = b""
        #: The connection it writes (see ping_soon).
        self.conn: Conn | None = None

    async def run(
        self, stream: OutStream | None, conn: Conn, initial: list[Event], sse_now: bool, first: Any = _NOTHING
    ) -> None:
        """Write the response; ``first``: an item already received (None: the end)."""
        try:
            await self._run(stream, conn, initial, sse_now, first)
        except trio.TooSlowError:
            pass  # the client does not read: drop the connection, it can resume

    async def _run(
        self, stream: OutStream | None, conn: Conn, initial: list[Event], sse_now: bool, first: Any
    ) -> None:
        self.conn = conn
        if sse_now:
            await self.start_sse()
        if initial:
            await self.write(b"".join(format_event(event_id, data) for event_id, data in initial))
        recv = conn.recv
        item: tuple[Any, ...] | None
        while True:
            if first is not _NOTHING:
                item, first = first, _NOTHING
                if item is None:
                    break
            elif self.started and self.guard is not None:
                # A POST's keep-alives come from its watcher (see ping_soon): no
                # wait to bound. (The receive's schedule point lets a handler
                # about to answer do so: its answer then joins this write.)
                try:
                    item = await recv.receive()
                except trio.EndOfChannel:
                    break
            elif self.started:
                try:
                    item = recv.receive_nowait()  # one there already: no wait to bound
                except trio.EndOfChannel:
                    break
                except trio.WouldBlock:
                    item = None
                    with trio.move_on_after(self.settings.ping_interval):
                        try:
                            item = await recv.receive()
                        except trio.EndOfChannel:
                            break
            else:
                try:
                    item = await recv.receive()
                except trio.EndOfChannel:
                    break
            if item is None or item[0] == "p":  # nothing for ping_interval, or the watcher asks
                await self.write(PING)
                continue
            if item[0] == "j":
                await self.json_answer(item[1], stream is not None and stream.batch)
                return
            if item[0] == "x":  # every request of the POST was cancelled: no answer
                if self.started:
                    break
                await self.last_write(202, b"")
                return
            if not self.started:
                await self.start_sse()
            # Every event already queued goes out in one write; with the end
            # of the stream, in the response's last write.
            data = format_event(item[1], item[2])
            while True:
                try:
                    more = recv.receive_nowait()
                except trio.WouldBlock:
                    break
                except trio.EndOfChannel:
                    await self.last_write(None, data)
                    return
                if more[0] == "e":  # (a keep-alive asked for meanwhile: this write is one)
                    data += format_event(more[1], more[2])
            await self.write(data)
        if self.started:
            await self.last_write(None, b"")
        else:
            await self.last_write(404, error_body(-32000, "Session ended before the request was answered"))

    def json_body(self, messages: list[Any], batched: bool) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        """The status, body and headers of a JSON answer."""
        body = encode(messages if batched else messages[0])
        status = 200 if batched else answer_status(self.session, messages[0])
        return status, body, session_headers(self.session)

    async def json_answer(self, messages: list[Any], batched: bool) -> None:
        """The whole JSON answer: start and body, straight to the server."""
        status, body, headers = self.json_body(messages, batched)
        if self.guard is not None:
            self.guard.stop_watching()
        if self.shielded:  # see last_write
            with trio.CancelScope(shield=True), trio.fail_after(self.settings.write_timeout):
                await respond(self.send, status, body, headers)
        else:
            with trio.fail_after(self.settings.write_timeout):
                await respond(self.send, status, body, headers)
        self.finished = True

    async def write(self, data: bytes) -> None:
        if self.prefix:
            data, self.prefix = self.prefix + data, b""
        await self._body(data, True)

    async def _body(self, data: bytes, more: bool) -> None:
        await self._bounded({"type": "http.response.body", "body": data, "more_body": more})

    async def _bounded(self, message: dict[str, Any]) -> None:
        """One send bounded by ``write_timeout``: in a POST's guard, by the
        guard's deadline (no cancel scope per write)."""
        guard = self.guard
        if guard is None:
            with trio.fail_after(self.settings.write_timeout):
                await self.send(message)
            return
        scope = guard.scope
        scope.deadline = guard.now() + self.settings.write_timeout
        await self.send(message)
        if message.get("more_body", True):  # (after the last write nothing waits in the POST's scope)
            scope.deadline = math.inf

    async def ping_soon(self) -> None:
        """From a POST's watcher: have the writer (the response's one writer)
        write a keep-alive comment, unless its queue is full (it is writing)."""
        conn = self.conn
        if conn is not None:
            try:
                conn.send.send_nowait(("p",))
            except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        await trio.lowlevel.checkpoint()

    async def last_write(self, status: int | None, data: bytes) -> None:
        if self.guard is not None:
            self.guard.stop_watching()
        if self.shielded:
            # Shielded from the disconnect watcher: once the response is
            # complete the server reports a disconnect while it is still
            # recycling the connection inside this very send (hypercorn), and
            # cancelling that would strand the connection.
            with trio.CancelScope(shield=True):
                await self._last_write(status, data)
        else:
            await self._last_write(status, data)
        self.finished = True

    async def _last_write(self, status: int | None, data: bytes) -> None:
        if status is None:
            if self.prefix:
                data, self.prefix = self.prefix + data, b""
            await self._body(data, False)
            return
        with trio.fail_after(self.settings.write_timeout):
            await respond(self.send, status, data, session_headers(self.session))

    async def start_sse(self) -> None:
        self.started = True
        self.app._sse_connections += 1
        settings = self.settings
        guard = self.guard
        if guard is not None:
            guard.keep_alive(self.ping_soon, settings.ping_interval)
        await start_event_stream(self._bounded, session_headers(self.session))
        if self.session.primes:  # sent with the first event (or ping)
            self.prefix = format_retry(int(settings.retry_interval * 1000))
