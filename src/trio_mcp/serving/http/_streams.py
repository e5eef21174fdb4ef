"""The server-to-client streams of an HTTP session and the HTTP responses
that carry them.

An :class:`OutStream` is a logical stream (a POST's answer stream, or the
session's standalone GET stream); it outlives its HTTP connections. A
:class:`Conn` is one HTTP response carrying it, fed through a bounded
channel. Events are stored in the session's event store first (which gives
them their ids), so a broken stream can be resumed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import trio

from ...protocol import encode
from ._config import Mode

if TYPE_CHECKING:
    from ._session import HttpSessionStream
    from ._sse_post import InlineSse

__all__ = ["Busy", "Conn", "Event", "OutStream"]


class Busy(Exception):
    """The stream already has a connection (409)."""


# ---------------------------------------------------------------- streams


class Conn:
    """One HTTP response carrying a stream to the client.

    Items: ``("e", event_id, data)`` for an SSE event, ``("j", messages)`` for
    the JSON answer of a POST, ``("x",)`` for a POST whose requests were all
    cancelled (no answer: ``202``, or the end of its SSE stream); and
    ``("p",)`` from a POST's watcher, for a keep-alive comment. The producer
    ends it (:meth:`finish` with a last item, or :meth:`close`) when the
    stream is complete; ``complete`` tells the consumer it may forget it.

    SSE events travel through a bounded channel (``send`` / ``recv``), made
    when first used: a POST answered as JSON, the usual case, only ever gets
    its one last item, handed over without one (see :meth:`next`); a POST
    whose request is served in its own task has them written by its
    ``inline`` writer instead (see :mod:`._sse_post`).
    """

    __slots__ = ("_buffer", "_closed", "_last", "_recv", "_send", "_wake", "complete", "inline", "sse_ok")

    def __init__(self, buffer: int, sse_ok: bool) -> None:
        self._buffer = buffer
        self._send: trio.MemorySendChannel[tuple[Any, ...]] | None = None
        self._recv: trio.MemoryReceiveChannel[tuple[Any, ...]] | None = None
        self._last: tuple[Any, ...] | None = None
        self._closed = False
        self._wake: trio.Event | None = None
        self.sse_ok = sse_ok
        self.complete = False
        #: The writer of a POST's SSE answer served in the POST's task (no channel).
        self.inline: InlineSse | None = None

    def _open(self) -> None:
        # (not subscripted: ``open_memory_channel[...]`` costs a typing lookup per call)
        send: trio.MemorySendChannel[tuple[Any, ...]]
        recv: trio.MemoryReceiveChannel[tuple[Any, ...]]
        send, recv = trio.open_memory_channel(self._buffer)
        self._send, self._recv = send, recv
        if self._closed:  # ended before anyone asked for the channel
            if self._last is not None:
                self._send.send_nowait(self._last)
                self._last = None
            self._send.close()
        self._woken()

    def _woken(self) -> None:
        if self._wake is not None:
            self._wake.set()

    @property
    def send(self) -> trio.MemorySendChannel[tuple[Any, ...]]:
        if self._send is None:
            self._open()
        assert self._send is not None
        return self._send

    @property
    def recv(self) -> trio.MemoryReceiveChannel[tuple[Any, ...]]:
        if self._recv is None:
            self._open()
        assert self._recv is not None
        return self._recv

    @property
    def ended(self) -> bool:
        """Whether the producer has ended it (its last item is queued)."""
        return self._closed

    def finish(self, item: tuple[Any, ...]) -> bool:
        """The last item, and the end; False if it could not be queued."""
        if self._closed:
            return False
        send = self._send
        if send is None:
            self._last = item
            self._closed = True
            self._woken()
            return True
        self._closed = True
        try:
            send.send_nowait(item)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            send.close()
            return False
        send.close()
        return True

    def take_json(self) -> list[Any] | None:
        """The JSON answer the producer ended this connection with, if that is
        all it ever carried (taken: the consumer writes it itself); None
        otherwise (see :meth:`next`)."""
        last = self._last
        if last is None or last[0] != "j" or self._recv is not None:
            return None
        self._last = None
        answers: list[Any] = last[1]
        return answers

    def close(self) -> None:
        """The end (the items queued still go out)."""
        self._closed = True
        if self._send is not None:
            self._send.close()
        else:
            self._woken()

    async def wait_ended(self) -> None:
        """Until the producer has ended it (an ``inline`` connection's)."""
        while not self._closed:
            if self._wake is None:
                self._wake = trio.Event()
            await self._wake.wait()

    async def next(self) -> tuple[Any, ...] | None:
        """The next item; None at the end."""
        while self._recv is None:
            if self._closed:
                await trio.lowlevel.checkpoint()
                item, self._last = self._last, None
                return item
            if self._wake is None:
                self._wake = trio.Event()
            await self._wake.wait()
        try:
            return await self._recv.receive()
        except trio.EndOfChannel:
            return None


#: An event to write: (id or None without an event store, data).
Event = tuple["str | None", bytes]


class OutStream:
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
        self.conn: Conn | None = None
        self.ever_attached = False
        self.backlog: deque[bytes] | None = deque() if standalone else None
        self.done = False
        self.has_ids = False  # an event with an id was sent: the client can resume
        self._lock: trio.Lock | None = None
        #: The headers of the POST this stream answers (``Context.request_headers``).
        self.headers: dict[str, str] | None = None

    @property
    def lock(self) -> trio.Lock:
        """Orders the awaits of the SSE path (made when first needed)."""
        lock = self._lock
        if lock is None:
            lock = self._lock = trio.Lock()
        return lock

    # ------------------------------------------------------------ producer

    def answer_nowait(self, message: Any, answers: int | str) -> bool:
        """Take the answer to request ``answers`` if this is a JSON stream, or
        an SSE one written by its POST's task (see :meth:`_hold_answer`)
        (nothing to await, so no lock to take: the lock orders the awaits of
        the SSE path; and no schedule point: its sender, a worker or the
        POST's own task, has its own); False: :meth:`deliver` it."""
        lock = self._lock
        if lock is not None and lock.locked():
            return False
        if self.mode == "sse":
            conn = self.conn
            if conn is None or conn.inline is None or self.done:
                return False
            return self._hold_answer(conn.inline, message, answers)
        if not self.done:
            self._add_json_answer(message, answers)
        return True

    def _hold_answer(self, inline: InlineSse, message: Any, answers: int | str) -> bool:
        """The answer of a POST's SSE stream served in its own task, held for
        the stream's last write when its event (if any) is stored without
        waiting; False: :meth:`deliver` it."""
        session = self.session
        data = encode(message)
        event_id = None
        if session.store is not None:
            stored = session.store_event_now(self.id, data)
            if stored is False:
                return False  # a store that may block: stored under the lock
            if stored is not None:
                event_id = stored
                self.has_ids = True
        inline.held.append((event_id, data))
        self.pending.discard(answers)
        if not self.pending:
            self._finish()
        return True

    async def deliver(self, message: Any, answers: int | str | None = None) -> bool:
        """Route ``message`` here; False if this stream cannot carry it (a
        related message on a JSON-answered POST: the caller reroutes it)."""
        if answers is not None and self.answer_nowait(message, answers):
            return True
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
                    self._add_json_answer(message, answers)
                    return True
            await self._emit(encode(message), hold=answers is not None)
            if answers is not None:
                self.pending.discard(answers)
                if not self.pending:
                    self._finish()
            return True

    def _add_json_answer(self, message: Any, answers: int | str) -> None:
        self.answers.append(message)
        self.pending.discard(answers)
        if not self.pending:
            self._finish_json()

    async def open_sse(self) -> None:
        """Start an SSE-mode POST stream (priming event when the version has one;
        no lock to take: nothing else knows the stream yet)."""
        await self._prime()

    async def _switch_to_sse(self) -> None:
        self.mode = "sse"
        await self._prime()
        answers, self.answers = self.answers, []
        for msg in answers:  # a batch partly answered already
            await self._emit(encode(msg))

    async def _prime(self) -> None:
        if self.session.store is not None and self.session.primes:
            await self._emit(b"", hold=True)

    async def _emit(self, data: bytes, *, hold: bool = False) -> None:
        """Store ``data`` as an event (with an event store) and send it on the
        connection; an ``inline`` one writes it at once unless ``hold`` (the
        priming event, an answer: they go out with the end of the stream)."""
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
            inline = conn.inline
            if inline is not None:
                await inline.event(event_id, data, hold)
                return
            try:
                try:
                    conn.send.send_nowait(("e", event_id, data))
                except trio.WouldBlock:  # a full buffer: wait for room, bounded
                    with trio.fail_after(session.settings.write_timeout):
                        await conn.send.send(("e", event_id, data))
                return
            except (trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError):
                self.detach(conn)
        if event_id is None and data:
            session.dropped()  # no connection and nothing to resume from

    async def cancel(self, ident: int | str) -> None:
        """The client cancelled request ``ident``: it gets no answer. Once
        nothing else is pending the stream ends (its JSON answer with what
        was answered, else ``("x",)``; or the end of its SSE stream)."""
        async with self.lock:
            if self.done or ident not in self.pending:
                return
            self.pending.discard(ident)
            if self.pending:
                return
            if self.mode == "sse":
                self._finish()
            elif self.answers:
                self._finish_json()
            else:
                self.done = True
                self.session.streams.pop(self.id, None)
                conn = self.conn
                if conn is not None:
                    conn.complete = True
                    conn.finish(("x",))  # (a JSON-mode conn carries nothing else)
                    self.conn = None

    def _finish_json(self) -> None:
        self.done = True
        self.session.streams.pop(self.id, None)
        conn = self.conn
        if conn is None:
            self.session.dropped(len(self.answers))
            self._forget_detached()
            return
        conn.complete = True
        if not conn.finish(("j", self.answers)):
            self.session.dropped(len(self.answers))
        self.conn = None

    def _finish(self) -> None:
        self.done = True
        self.session.streams.pop(self.id, None)
        conn = self.conn
        if conn is not None:
            conn.complete = True
            conn.close()
            self.conn = None
        else:
            self._forget_detached()

    def _forget_detached(self) -> None:
        """Complete with no connection (the client went away): its events stay
        in the store for a resumption for ``completed_stream_retention``
        seconds only, not until the session ends."""
        self.session.app.forget_later(self.session, self.id)

    # ------------------------------------------------------------ consumer

    async def attach(self, conn: Conn, *, resume_after: str | None = None) -> list[Event]:
        """Give this stream a connection; returns the events to write first
        (a replay, or the standalone backlog). Raises Busy (409) when it has
        one already, except for a resumption: a client resuming says its
        old connection is dead (the server may not have noticed yet), so
        the new connection takes over."""
        session = self.session
        async with self.lock:
            if self.done or (self.conn is not None and resume_after is None):
                raise Busy
            if self.conn is not None:
                self.detach(self.conn)
            initial: list[Event] = []
            if resume_after is not None:
                if session.store is not None:
                    initial.extend(await session.events_after(resume_after) or ())
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
            conn = self.conn
            if conn is not None:
                self.detach(conn)  # queued events still go out first
                if conn.inline is not None:
                    await conn.inline.end_early()
            return True

    def detach(self, conn: Conn) -> None:
        if self.conn is conn:
            self.conn = None
        conn.close()

    def close(self) -> None:
        """The session ended: end the connection (its queued items still go out)."""
        self.done = True
        conn = self.conn
        if conn is not None:
            self.conn = None
            conn.close()
