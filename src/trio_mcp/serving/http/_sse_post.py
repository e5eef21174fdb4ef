"""The SSE answer of a session POST whose request is served in the POST's
own task (see :meth:`~trio_mcp.serving.http.HttpSessionStream.serve_here`).

No writer task and no channel: the stream's events are held here
(:meth:`InlineSse.event`) as its producer emits them, each stored with its
id first when the app has an event store. An answer ready when the handler
returns (the usual case) goes out as a JSON answer does: the response's
start, with its length, and one body holding the priming event and the
answer (:meth:`InlineSse.finish`, written by ``handle_post``). A message
related to the request (progress, a log message, a request to the client)
is written at once, by the task that sends it, with whatever is held before
it; the response's start and the priming event by the POST's watcher once
the handler has run ``disconnect_watch_delay``, then keep-alive comments
(see :class:`~._watch.Guard`); the stream then ends with the answer's
write. Writes are serialised by a lock made with the first of them, each
bounded by ``write_timeout`` and shielded (a cancelled write would leave
half an event on the wire).

A client that goes away from a stream it can resume (an event with an id was
stored) leaves its handler running: the events go to the store, the answer
with them, for a ``GET`` with ``Last-Event-ID``; without one, the handler is
cancelled, as a JSON answer's is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from ...transports._asgi import SSE_HEADERS, Send
from ...transports.http._sse import PING, format_event, format_retry
from ._get import session_headers
from ._streams import Conn, Event, OutStream
from ._watch import Guard

if TYPE_CHECKING:
    from ._app import StreamableHttpApp
    from ._session import HttpSessionStream

__all__ = ["InlineSse"]


class InlineSse:
    """One session POST's SSE answer, written by the tasks that produce it
    (see the module documentation). Made before its priming event; set as
    its :class:`Conn`'s ``inline`` writer."""

    __slots__ = (
        "app",
        "conn",
        "counted",
        "ended",
        "guard",
        "held",
        "lock",
        "prefix",
        "send",
        "session",
        "started",
        "stream",
    )

    def __init__(
        self,
        app: StreamableHttpApp,
        session: HttpSessionStream,
        stream: OutStream,
        conn: Conn,
        send: Send,
        guard: Guard,
    ) -> None:
        self.app = app
        self.session = session
        self.stream = stream
        self.conn = conn
        self.send = send
        self.guard = guard
        #: Events emitted and not written yet.
        self.held: list[Event] = []
        #: The response's start has been sent (by a write before the last).
        self.started = False
        #: Nothing more is written: the response is complete, or given up.
        self.ended = False
        #: Counted as an open SSE response (see :meth:`close`).
        self.counted = False
        #: Serialises the writes before the last (made with the first of them).
        self.lock: trio.Lock | None = None
        #: The reconnection hint, in front of the first event (2025-11-25 on).
        self.prefix = format_retry(int(app.settings.retry_interval * 1000)) if session.primes else b""
        conn.inline = self
        guard.keep_alive(self.ping, app.settings.ping_interval)
        guard.on_gone = self.gone
        guard.on_watch = self.flush
        guard.on_cancel = self.finish_cancelled

    # ------------------------------------------------------------ producer

    async def event(self, event_id: str | None, data: bytes, hold: bool) -> None:
        """An event of the stream (stored already): held, and unless ``hold``
        (the priming event, the answer) written at once with those before it."""
        self.held.append((event_id, data))
        if not hold:
            await self._flush(b"")

    async def flush(self) -> None:
        """Write what is held (from the POST's watcher, once the handler has
        run ``disconnect_watch_delay``: the client gets the response's start
        and the priming event, whose id lets it resume)."""
        await self._flush(b"")

    async def ping(self) -> None:
        """A keep-alive comment (from the POST's watcher)."""
        await self._flush(PING)

    async def end_early(self) -> None:
        """End the response now, the stream going on (SEP-1699 polling: the
        client resumes it with ``Last-Event-ID``); its handler keeps running
        in the POST's task, out of reach of the client going away."""
        self.guard.stop_watching()
        await self._flush(b"", last=True)

    def gone(self) -> bool:
        """The client went away (the POST's watcher): True when it can resume
        the stream (the handler goes on, its events to the store), False to
        have the handler cancelled."""
        if not self.stream.has_ids:
            return False
        self._give_up()
        return True

    # ------------------------------------------------------------ the end

    async def finish(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """After the handler returned, in the POST's scope: the answer's two
        ASGI messages when nothing was written yet (``handle_post`` writes
        them, as a JSON answer's), else None (written here, or given up)."""
        conn = self.conn
        if not conn.ended:  # answered by another task (the peer's answer writer)
            await conn.wait_ended()
        if self.ended:
            return None
        if not self.started:
            self.ended = True
            body = self._take(b"")
            headers = [*SSE_HEADERS, (b"content-length", b"%d" % len(body)), *session_headers(self.session)]
            start = {"type": "http.response.start", "status": 200, "headers": headers}
            return start, {"type": "http.response.body", "body": body, "more_body": False}
        self.guard.writing(self.app.settings.write_timeout)
        await self._flush(b"", last=True)
        return None

    async def finish_cancelled(self) -> None:
        """The request was cancelled (by the client, or its session ended):
        the stream ends without an answer (after the POST's scope)."""
        await self._flush(b"", last=True)
        self.close()

    def close(self) -> None:
        """The POST is over, or its last write (bookkeeping; idempotent)."""
        if self.counted:
            self.counted = False
            self.app._sse_connections -= 1
            self.app.response_ended()
        conn = self.conn
        if self.ended:
            if conn.complete:
                conn.complete = False  # (forgotten once)
                self.app.forget_later(self.session, self.stream.id)
            if conn.inline is self:
                conn.inline = None  # nothing more to write: no cycle left for the collector

    # ------------------------------------------------------------ writes

    def _take(self, extra: bytes) -> bytes:
        held = self.held
        data = self.prefix + b"".join([format_event(i, d) for i, d in held]) + extra
        held.clear()
        self.prefix = b""
        return data

    async def _flush(self, extra: bytes, *, last: bool = False) -> None:
        """Write what is held (and ``extra``), from whichever task; with
        ``last``, the end of the response."""
        if self.ended:
            return
        lock = self.lock
        if lock is None:
            lock = self.lock = trio.Lock()
        async with lock:
            if self.ended:
                return
            if last:
                self.ended = True
            data = self._take(extra)
            try:
                with trio.CancelScope(shield=True), trio.fail_after(self.app.settings.write_timeout):
                    if not self.started:
                        self.started = self.counted = True
                        self.app.response_started()
                        self.app._sse_connections += 1
                        headers = [*SSE_HEADERS, *session_headers(self.session)]
                        await self.send({"type": "http.response.start", "status": 200, "headers": headers})
                    if data or last:
                        await self.send({"type": "http.response.body", "body": data, "more_body": not last})
            except trio.TooSlowError:
                self._give_up()  # the client does not read: it can resume (events are stored)

    def _give_up(self) -> None:
        """Write no more: the stream goes on without this connection."""
        self.ended = True
        self.held.clear()
        self.stream.detach(self.conn)
