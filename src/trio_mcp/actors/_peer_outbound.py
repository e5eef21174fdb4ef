"""A peer's outbound calls: requests (with their cancellation and progress),
notifications, ``ping``, and requests served inline by an in-memory other
end. A mixin of :class:`~._peer.Peer`, which owns the state named below."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio
from msgspec import UNSET

from ..protocol import ConnectionClosed, Notification, Request
from ..transports import MessageStream, TransportError
from ._peer_calls import (
    CANCEL_OWED,
    ProgressCallback,
    _answer,
    _progress_of,
    _Reply,
    _with_progress_token,
)
from ._peer_limits import PeerLimits
from ._peer_pool import _INLINE_SINK, InlineServer

log = logging.getLogger("trio_mcp.peer")

#: Requests never served inline (see :meth:`_Outbound.request`): ``initialize``
#: starts the session, ``subscriptions/listen`` is a stream, not a call.
ALWAYS_FRAMED: Final = frozenset({"initialize", "subscriptions/listen"})

# The hot path's callables, looked up once.
_encode: Final = msgspec.json.Encoder().encode  # as protocol.encode, one call less
_Raw: Final = msgspec.Raw
_current_task: Final = trio.lowlevel.current_task
_wait_task_rescheduled: Final = trio.lowlevel.wait_task_rescheduled
_reschedule: Final = trio.lowlevel.reschedule

#: Requests a peer's ``notifications/cancelled`` never interrupts.
NON_CANCELLABLE: Final = frozenset({"initialize"})


class _Outbound:
    """The calling half of a :class:`~._peer.Peer` (see the module doc)."""

    name: str
    stream: MessageStream
    limits: PeerLimits
    _can_inline: bool
    _closed_reason: str | None
    _next_id: int
    id_prefix: str
    #: A pending call's entry: its parked task (a gathered call), a _Reply,
    #: CANCEL_OWED, or what ``expect`` was given (see _peer_calls.deliver).
    _pending: dict[int | str, Any]
    _progress: dict[int | str, _Reply]
    _notifications_dropped: int
    _gathers: bool
    _write_failure: str | None
    _requests: list[tuple[int | str, msgspec.Raw]]
    _writer: trio.lowlevel.Task | None
    #: The stream's ``send_nowait`` (a lone request written in the caller's task), if any.
    _send_nowait: Callable[[Any], bool] | None

    if TYPE_CHECKING:  # the handler pool's and the Peer's

        def _wake_writer(self) -> None: ...

        def _notification(self, note: Notification) -> None: ...

    def _route_progress(self, params: Any) -> bool:
        """Hand progress for one of our pending calls to its caller."""
        parsed = _progress_of(params)
        if parsed is None:
            return False
        token, item = parsed
        reply = self._progress.get(token)
        if reply is None:
            return False  # not ours (any more): the dispatcher gets it
        if item is not None and not reply.deliver_progress(item, self.limits.max_queued_notifications):
            self._notifications_dropped += 1
        return True

    async def request(
        self,
        method: str,
        params: Any = UNSET,
        *,
        result_type: Any = None,
        on_progress: ProgressCallback | None = None,
        cancellable: bool = True,
        stateless: bool = False,
    ) -> Any:
        """Send a request and wait for its answer.

        Deadlines come from the caller's cancel scope. A call cancelled after
        it was sent tells the peer with ``notifications/cancelled`` (unless
        ``cancellable`` is false or the method is in :data:`NON_CANCELLABLE`).
        ``on_progress`` runs in the caller's task for each progress
        notification, in order, before the answer is returned.
        ``result_type`` decodes the result (else it is returned raw); an error
        answer raises the matching :class:`McpError`.

        Over a stream with ``send_batch`` (stdio), a request made while other
        calls are out is encoded here and written by the answer writer with
        everything else ready in this scheduling turn (one write); cancelled
        before that write, it is never sent.

        A transport that can have the other end serve a request in this task
        (an ``"inline"`` in-memory pair) then does, with no frames and no task
        switch: always when ``stateless`` says the request depends on no
        earlier message (a 2026-era request), otherwise (but for
        :data:`ALWAYS_FRAMED`) when nothing sent before it is still queued there.
        The handler's notifications reach this peer in order, before the
        answer, and cancelling the caller cancels the handler.
        """
        if self._closed_reason is not None:
            raise ConnectionClosed(f"connection closed: {self._closed_reason}")
        if self._can_inline:
            if stateless:
                serve = self.stream.inline  # type: ignore[attr-defined]
            else:
                serve = None if method in ALWAYS_FRAMED else self.stream.inline_in_order  # type: ignore[attr-defined]
            if serve is not None:
                return await self._request_inline(serve, method, params, result_type, on_progress)
        ident: int | str = self._next_id
        self._next_id += 1
        if self.id_prefix:
            ident = f"{self.id_prefix}{ident}"
        pending = self._pending
        if on_progress is None and pending and self._gathers and self._write_failure is None:
            # Other calls are out: the answer writer sends this one with
            # whatever else is ready in this scheduling turn (one write).
            # Encoded here, so an unencodable request fails its caller. The
            # pending entry is the parked task itself (the read loop
            # reschedules it with the answer), and there is no checkpoint
            # before parking: a caller cancelled already is told so as it
            # parks, and the abort function (_take_back) takes its request
            # back, not written yet, before the writer can run.
            line = (ident, _Raw(_encode(Request(id=ident, method=method, params=params))))
            self._requests.append(line)
            writer = self._writer
            if writer is not None:
                self._writer = None
                _reschedule(writer)
            pending[ident] = _current_task()
            try:
                msg = await _wait_task_rescheduled(partial(self._take_back, line))
            except trio.Cancelled:
                if (
                    self._pending.pop(ident, None) is CANCEL_OWED
                    and cancellable
                    and method not in NON_CANCELLABLE
                    and self._closed_reason is None
                ):
                    await self._send_cancelled(ident, "cancelled by the caller")
                raise
            return _answer(msg, method, result_type)
        reply = _Reply()
        if on_progress is not None:
            params = _with_progress_token(params, ident)
            reply.progress = deque()
            self._progress[ident] = reply
        pending[ident] = reply
        sent = False
        try:
            request = Request(id=ident, method=method, params=params)
            nowait = self._send_nowait
            if nowait is not None and not self._requests:
                # A lone call: written now, whole, when the stream can
                # (no schedule point of the stream's own; the wait is one).
                await trio.lowlevel.checkpoint_if_cancelled()
                sent = nowait(request)
            if not sent:
                await self.stream.send(request)  # may yield: the answer may come meanwhile
                sent = True
            if on_progress is not None:
                msg = await reply.wait_reporting(on_progress, self.name)
            elif reply.value is None:
                # Parked here, one coroutine frame less than reply.wait().
                reply.task = _current_task()
                msg = await _wait_task_rescheduled(reply._abort)
            else:
                msg = await reply.wait()
        except trio.Cancelled:
            # The initialize request is never cancelled (MCP lifecycle).
            cancellable = cancellable and method not in NON_CANCELLABLE
            if sent and cancellable and reply.value is None and self._closed_reason is None:
                await self._send_cancelled(ident, "cancelled by the caller")
            raise
        except TransportError as exc:
            raise ConnectionClosed(f"connection closed: {exc.reason}") from None
        finally:
            pending.pop(ident, None)
            if on_progress is not None:
                self._progress.pop(ident, None)
        return _answer(msg, method, result_type)

    def _take_back(self, line: tuple[int | str, msgspec.Raw], _: Any) -> trio.lowlevel.Abort:
        """The abort function of a gathered call (see :meth:`request`): runs at
        once when its caller is cancelled while parked, before any other task
        (the writer) can take the request. A request not written yet is taken
        back, never sent; one written leaves :data:`CANCEL_OWED` as its entry
        (its caller then sends ``notifications/cancelled`` unless the answer
        comes first)."""
        ident = line[0]
        requests = self._requests
        if line in requests:
            requests.remove(line)
            self._pending.pop(ident, None)
        else:
            self._pending[ident] = CANCEL_OWED
        return trio.lowlevel.Abort.SUCCEEDED

    def expect(self, reply: Any, *, progress: bool = False) -> int:
        """A request id whose answer, sent for a request someone else writes
        on this peer's stream (a proxy forwarding a call), goes to
        ``reply.deliver(outcome)`` from the read loop, as a caller's would
        (a :class:`ConnectionClosed` error when the peer shuts); with
        ``progress``, progress notifications whose token is the id go to
        ``reply.deliver_progress(item, limit)``. Until :meth:`forget`."""
        if self._closed_reason is not None:
            raise ConnectionClosed(f"connection closed: {self._closed_reason}")
        ident = self._next_id  # (no id_prefix: the proxies that call this never set one)
        self._next_id = ident + 1
        self._pending[ident] = reply
        if progress:
            self._progress[ident] = reply
        return ident

    def forget(self, ident: int | str) -> None:
        """Stop expecting an answer (and progress) for ``ident`` (see :meth:`expect`)."""
        self._pending.pop(ident, None)
        self._progress.pop(ident, None)

    async def _request_inline(
        self,
        serve: InlineServer,
        method: str,
        params: Any,
        result_type: Any,
        on_progress: ProgressCallback | None,
    ) -> Any:
        """Have the other end serve a request in this task (see :meth:`request`)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        ident: int | str = self._next_id
        self._next_id += 1
        if self.id_prefix:
            ident = f"{self.id_prefix}{ident}"
        if on_progress is not None:
            params = _with_progress_token(params, ident)

        async def sink(note: Notification) -> None:
            # The handler's notifications, in its (our) task: progress for
            # this call goes to on_progress, the rest to our dispatcher.
            if on_progress is not None and note.method == "notifications/progress":
                parsed = _progress_of(note.params)
                if parsed is not None and parsed[0] == ident and parsed[1] is not None:
                    try:
                        await on_progress(*parsed[1])
                    except Exception:
                        log.exception("%s: progress callback failed", self.name)
                    return
            if self._closed_reason is None:
                self._notification(note)

        try:
            msg = await serve(Request(id=ident, method=method, params=params), sink)
        except TransportError as exc:
            raise ConnectionClosed(f"connection closed: {exc.reason}") from None
        if self._closed_reason is not None:
            raise ConnectionClosed(f"connection closed: {self._closed_reason}")
        # A schedule point, as every call has (a handler that never awaits
        # makes none): a loop of calls stays fair to the other tasks.
        await trio.lowlevel.cancel_shielded_checkpoint()
        return _answer(msg, method, result_type)

    async def _send_cancelled(self, ident: int | str, reason: str) -> None:
        with trio.move_on_after(self.limits.cancel_send_timeout, shield=True):
            try:
                await self.stream.send(
                    Notification(
                        method="notifications/cancelled", params={"requestId": ident, "reason": reason}
                    )
                )
            except TransportError:
                pass

    async def notify(self, method: str, params: Any = UNSET) -> None:
        """Send a notification (waits only for transport backpressure)."""
        if self._closed_reason is not None:
            raise ConnectionClosed(f"connection closed: {self._closed_reason}")
        inline = _INLINE_SINK.get()
        if inline is not None and inline[0] is self:
            # Serving a request in its caller's task: straight to the caller.
            await inline[1](Notification(method=method, params=params))
            return
        try:
            await self.stream.send(Notification(method=method, params=params))
        except TransportError as exc:
            raise ConnectionClosed(f"connection closed: {exc.reason}") from None

    async def ping(self) -> None:
        await self.request("ping")
