"""``GET`` (the session's standalone SSE stream, or a resumption with
``Last-Event-ID``), ``DELETE`` (end the session), and the pump that writes
a stream's events to one HTTP response."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from ._app import StreamableHttpApp

__all__ = ["handle_delete", "handle_get", "pump", "session_headers"]

log = logging.getLogger("trio_mcp.http.server")


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
                conn.send.close()
                await pump(app, session, None, conn, initial, receive, send, sse_now=True, forget=stream_id)
                return
    if stream is None:
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
    return [(SESSION_HEADER.encode(), session.id.encode())]


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
    watch: bool = True,
) -> None:
    """Write a stream's items to one HTTP response until the stream is
    complete, the session ends, or the client goes away."""
    settings = app.settings
    started = False
    finished = False
    session.connections += 1
    app.response_started()

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
                await respond(send, status, data, session_headers(session))

    async def start_sse() -> None:
        nonlocal started
        started = True
        app._sse_connections += 1
        with trio.fail_after(settings.write_timeout):
            await start_event_stream(send, session_headers(session))
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
                    elif item[0] == "x":  # every request of this POST was cancelled
                        if not started:
                            await last_write(202, b"")
                            finished = True
                        break
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
                    await last_write(404, error_body(-32000, "Session ended before the request was answered"))
                    finished = True
            except trio.TooSlowError:
                pass  # the client does not read: drop the connection, it can resume
            finally:
                nursery.cancel_scope.cancel()
    finally:
        session.connections -= 1
        app.response_ended()
        session.touch()
        if started:
            app._sse_connections -= 1
        if stream is not None:
            stream.detach(conn)
        if finished and conn.complete:
            target = (
                forget
                if forget is not None
                else (stream.id if stream is not None and not stream.standalone else None)
            )
            if target is not None:
                app.forget_later(session, target)
