"""A peer's handler pool: the workers that serve admitted requests (a capped
pool, grown on demand), the in-order notification worker, the outbox of the
read loop's own answers, and serving a request inline in its caller's task.

Admitted requests wait in one queue. A worker takes them one after another;
when it takes one while others still wait, it first wakes (or starts) one
more worker, the standby, so a handler that blocks never holds up the rest,
while handlers that finish without waiting are served back to back by one
task (see :meth:`_HandlerPool._worker`).

Over a stream that can write several messages at once (``send_batch``, e.g.
stdio), a worker whose request is not the only one in flight does not write
its answer itself: it hands it to the answer writer and goes on to its next
request; the writer sends every answer handed over in one scheduling turn
with one write (a lone request's worker writes its answer itself), together
with the peer's own requests made while other calls were out (see
:meth:`Peer.request <._peer.Peer.request>`). An answer not written yet still
counts against the admission capacity, so a peer that does not read its
answers cannot make them pile up.

Over such a stream the read loop serves a request itself while no admitted
request waits for a worker (and the cap of concurrent handlers has room),
stepping its handler by hand (see :meth:`_HandlerPool._serve_here`): a
handler that finishes without waiting costs no task switch, and the answers
of one read go out with one write at the end of its burst. A handler that
waits turns the read loop's task into a worker (counted against the cap)
until it is done, and a relief reader, a new task, reads on meanwhile.

A mixin of :class:`~._peer.Peer`, which owns the state named below.
"""

from __future__ import annotations

import logging
import types
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

import msgspec
import outcome
import trio

from .._util import describe
from ..protocol import (
    ConnectionClosed,
    ErrorResponse,
    InternalError,
    McpError,
    Notification,
    Request,
    Response,
    coerce,
    error_response,
)
from ..transports import MessageStream, TransportClosed, TransportError
from ..transports._base import RELATED_REQUEST
from ._actor import ExitReason
from ._peer_calls import deliver
from ._peer_inbound import Dispatcher, InboundRequest, _Batch, _encodable, _Slot

log = logging.getLogger("trio_mcp.peer")

#: Where the notifications of a request served inline go (see :meth:`Peer.request`).
NotificationSink = Callable[[Notification], Awaitable[None]]
#: What serves a request inline: ``await serve(request, sink)`` -> its answer.
InlineServer = Callable[[Request, NotificationSink], Awaitable[Any]]

#: While a peer serves a request inline (in the caller's task): that serving
#: peer, and the sink its notifications go to instead of its transport (the
#: calling peer, in order, before the answer).
_INLINE_SINK: ContextVar[tuple[Any, NotificationSink] | None] = ContextVar(
    "trio_mcp_inline_sink", default=None
)

#: Frames one wake-up of the read loop (or requests one worker) may take
#: without a schedule point, so a burst cannot starve other tasks.
_DRAIN_BUDGET: Final = 32
#: Frames one wake-up of a read loop may take without a schedule point: a
#: pipelining client's usual window (64 calls in flight) in one turn, so its
#: answers go out with one write.
_READ_BUDGET: Final = 64

_EMPTY_RESULT: Final = msgspec.Raw(b"{}")


#: What a read loop returns once its own handler waited and reading went on
#: in a relief reader (see :meth:`_HandlerPool._serve_here`); never an actor's exit.
_HANDED_OFF: Final = ExitReason("handed-off", "reading went on in a relief reader")

#: What :meth:`_HandlerPool._step_plain` returns once the handler is answered.
_DONE: Final = object()

#: A plain handler stepped by hand and the trap it yielded (see ``_step_plain``).
_Started = tuple[Coroutine[Any, Any, Any], Any]


def _taker(stream: MessageStream) -> Callable[[], Any] | None:
    """The stream's way to take a frame already buffered without a schedule
    point, None when there is none: its ``take_nowait`` (None when nothing is
    buffered), or its ``receive_nowait`` with :class:`trio.WouldBlock` as None."""
    take: Callable[[], Any] | None = getattr(stream, "take_nowait", None)
    if take is not None:
        return take
    receive_nowait = getattr(stream, "receive_nowait", None)
    if receive_nowait is None:
        return None

    def take_or_none() -> Any:
        try:
            return receive_nowait()
        except trio.WouldBlock:
            return None

    return take_or_none


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], trap: Any) -> Generator[Any, Any, Any]:
    """Go on running ``coro``, which was stepped by hand and yielded ``trap``
    to the event loop, as if it had been awaited from the start."""
    message = trap
    while True:
        try:
            sent = yield message
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # thrown in by trio (Cancelled, ...)
            try:
                message = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                message = coro.send(sent)
            except StopIteration as stop:
                return stop.value


class _HandlerPool:
    """The serving half of a :class:`~._peer.Peer` (see the module doc)."""

    name: str
    stream: MessageStream
    dispatcher: Dispatcher
    _batches: dict[int | str, _Batch]
    _inflight: dict[int | str, _Slot]
    _queue: deque[Request]
    _idle_workers: list[trio.lowlevel.Task]
    _standby: int
    _max_workers: int
    _nursery: trio.Nursery | None
    _notif_recv: trio.MemoryReceiveChannel[Notification]
    _outbox_recv: trio.MemoryReceiveChannel[Any]
    _late: deque[Any]
    _workers: int
    _running: int
    _served: int
    _closed_reason: str | None
    #: Answers handed to the answer writer, not written yet (``send_batch`` streams).
    _answers: list[Any]
    _requests: list[tuple[int | str, msgspec.Raw]]
    _write_failure: str | None
    _pending: dict[int | str, Any]
    _unwritten: int
    _writer: trio.lowlevel.Task | None
    _gathers: bool
    #: How the read loop writes its answers (a stream that gathers answers).
    _write_lines: Callable[[list[Any]], Awaitable[None]]
    _reader_out: list[Any]
    _serving_here: bool
    _cancelled_by_peer: int

    if TYPE_CHECKING:  # the Peer's

        async def _relief_reader(self) -> None: ...

    def _peer_cancelled(self, params: Any) -> None:
        try:
            data = coerce(params, dict[str, Any])
        except (msgspec.ValidationError, msgspec.DecodeError):
            return
        ident = data.get("requestId")
        if type(ident) is not int and type(ident) is not str:
            return  # not a request id (and maybe unhashable)
        slot = self._inflight.get(ident)
        if slot is None or not slot.cancellable:
            return  # unknown, finished already, or never cancelled (initialize)
        slot.cancelled = True
        self._cancelled_by_peer += 1
        if slot.scope is not None:
            slot.scope.cancel()

    async def _worker(self) -> None:
        """Serve admitted requests one at a time.

        A worker runs its requests inside one cancel scope of its own, not one
        per request (the cheap path: cancellations are rare). A peer's
        ``notifications/cancelled`` cancels the scope of the worker serving
        that request; the worker then opens a fresh scope for the next one.

        Requests wait in one queue; the worker that takes one while others
        still wait first makes sure another worker is on its way (the
        *standby*, see :meth:`_call_standby`), so a handler that blocks never
        holds up the rest, while handlers that finish without waiting are
        served back to back by one task: no task switch per request.
        """
        queue = self._queue
        serve = self._serve
        self._standby -= 1  # started as a standby
        try:
            while True:
                with trio.CancelScope() as scope:
                    streak = 0
                    while True:
                        if not queue:
                            if self._closed_reason is not None:
                                return
                            await self._park()
                            self._standby -= 1
                            continue
                        req = queue.popleft()
                        if queue and self._standby == 0:
                            self._call_standby()
                        if await serve(req, scope):
                            break  # cancelled by the peer: a fresh scope for the next
                        streak += 1
                        if streak >= _DRAIN_BUDGET:  # stay fair to other tasks
                            streak = 0
                            await trio.lowlevel.checkpoint()
                while self._late:
                    # A cancelled request was the last of its batch: answer the rest.
                    await self._send(self._late.popleft(), "a batch")
        finally:
            self._workers -= 1
            if self._workers == 0:
                self._wake_writer()  # it may be waiting for the last worker to go

    async def _park(self) -> None:
        """Wait, idle, until :meth:`_call_standby` (or the shutdown) wakes this worker."""
        task = trio.lowlevel.current_task()
        idle = self._idle_workers
        idle.append(task)

        def abort(_: Any) -> trio.lowlevel.Abort:
            idle.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def _call_standby(self) -> None:
        """Wake an idle worker (or start one, up to the cap) to take the next
        queued request: a standby, counted until it looks at the queue."""
        if self._idle_workers:
            self._standby += 1
            trio.lowlevel.reschedule(self._idle_workers.pop())
        elif self._workers < self._max_workers and self._nursery is not None:
            self._standby += 1
            self._workers += 1
            self._nursery.start_soon(self._worker)

    def _wake_idle_workers(self) -> None:
        """At shutdown: every idle worker looks at the queue once more and returns."""
        while self._idle_workers:
            self._standby += 1
            trio.lowlevel.reschedule(self._idle_workers.pop())

    async def _serve(self, req: Request, scope: trio.CancelScope, started: _Started | None = None) -> bool:
        """Serve one request inside its worker's ``scope`` (cancelled by the peer's
        ``notifications/cancelled``: Cancelled then propagates to the worker).
        True when the request was cancelled (``scope`` is then used up, even
        if the handler swallowed the Cancelled). ``started``: a plain handler
        that waited (see :meth:`_step_plain`), admitted since, resumed here."""
        ident = req.id
        slot = self._inflight.get(ident)
        if slot is None or slot.cancelled:
            self._inflight.pop(ident, None)
            last = self._settle(ident, None)
            if last is not None:
                await self._send(last, "a batch")  # the rest of its batch
            return False
        self._running += 1
        # The handler's messages (and the response) relate to this request;
        # each worker serves one request at a time, so no reset is needed.
        RELATED_REQUEST.set(ident)
        reply: Any = None
        slot.scope = scope
        try:
            if started is not None:
                result = await _resume(*started)
            elif req.method == "ping":
                result = _EMPTY_RESULT
            else:
                result = await self.dispatcher.handle_request(InboundRequest(self, req))  # type: ignore[arg-type]
            reply = Response(id=ident, result=result)
        except Exception as exc:
            reply = self._error_answer(req, exc)
        except BaseExceptionGroup as group:
            # Errors raised together with Cancelled (a handler's nursery whose
            # cleanup failed while it was being cancelled). Let only the
            # Cancelled part reach the worker's scope: the errors would go on
            # past it and end the whole session.
            errors, rest = group.split(Exception)
            if errors is None or rest is None:
                raise
            log.error("%s: handler for %s failed while cancelled", self.name, req.method, exc_info=errors)
            raise rest from None
        finally:
            self._running -= 1
            slot.scope = None
            self._inflight.pop(ident, None)
            if reply is None or slot.cancelled:
                # A cancelled request is never answered (the rest of its batch is).
                last = self._settle(ident, None)
                if last is not None:
                    self._late.append(last)  # sent by the worker, out of the cancelled scope
        if slot.cancelled or reply is None:
            return True
        self._served += 1
        if self._batches:
            out = self._settle(ident, reply)
            if out is None:
                return False  # its batch is answered when the last of it is done
        else:
            out = reply
        if self._serving_here:
            # Served by the read loop without waiting: written with the rest of its read.
            self._reader_out.append(out)
            self._unwritten += 1
        elif self._gathers and (self._answers or self._inflight):
            # Others are being served: hand it to the answer writer, to go with theirs.
            self._answers.append(out)
            self._unwritten += 1
            writer = self._writer
            if writer is not None:
                self._writer = None
                trio.lowlevel.reschedule(writer)
        else:
            await self._send(out, req.method)  # alone: no task switch for one answer
        return False

    def _step_plain(self, req: Request, coro: Coroutine[Any, Any, Any]) -> Any:
        """Step the plain handler of ``req`` (the dispatcher's ``start_plain``)
        in the read loop's task, with no envelope and no in-flight entry: one
        that finishes without waiting (most) is answered with the rest of the
        read (see :meth:`_write_here`) and :data:`_DONE` returned. One that
        waits returns the trap it yielded: the caller admits it then (an
        in-flight entry: cancellable from now on), and resumes it as a worker
        (``_serve_here(req, scope, (coro, trap))``)."""
        RELATED_REQUEST.set(req.id)  # as _serve: what the handler sends relates to it
        try:
            trap = coro.send(None)
        except StopIteration as done:
            reply: Any = Response(id=req.id, result=done.value)
        except Exception as exc:
            reply = self._error_answer(req, exc)
        else:
            return trap
        self._served += 1
        self._reader_out.append(reply)
        self._unwritten += 1
        return _DONE

    async def _serve_here(
        self, req: Request, scope: trio.CancelScope, started: _Started | None = None
    ) -> bool:
        """Serve ``req`` in the read loop's task, inside the read loop's
        ``scope``; its answer joins the read's others (see :meth:`_write_here`).
        The handler is stepped by hand: one that finishes without waiting
        (most) costs no task switch at all. One that waits makes this task a
        worker until it is done, and a relief reader (a new task) reads on
        meanwhile: the read loop never waits for a handler. Returns False in
        that case, once the handler is done (this task reads no more); a
        peer's cancellation of it ends ``scope``."""
        coro = self._serve(req, scope, started)
        self._serving_here = True
        try:
            trap = coro.send(None)
        except StopIteration:
            return True
        finally:
            self._serving_here = False
        self._hand_off_reading()
        try:
            await _resume(coro, trap)
        finally:
            self._workers -= 1
            if self._queue and self._standby == 0:
                self._call_standby()  # requests queued meanwhile: a worker in its place
            if self._workers == 0:
                self._wake_writer()  # it may be waiting for the last worker to go
        return False

    def _hand_off_reading(self) -> None:
        """The read loop's handler waits: count this task as a worker, give
        its answers so far to the answer writer, start a relief reader."""
        self._workers += 1
        out = self._reader_out
        if out:
            self._answers.extend(out)  # counted in _unwritten already
            out.clear()
            self._wake_writer()
        assert self._nursery is not None
        self._nursery.start_soon(self._relief_reader)

    async def _write_here(self) -> None:
        """Write the answers the read loop served itself, with one write."""
        out = self._reader_out
        batch = out[:]
        out.clear()
        try:
            # The read loop's wait for input is its cancel point: a stream
            # with send_lines skips one of its own here.
            await self._write_lines(batch)
        except TransportError:
            pass  # the read loop sees the broken transport and shuts down
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
            for item in batch:  # one cannot be encoded: each on its own (see _send)
                await self._send(item, "a request")
        finally:
            self._unwritten -= len(batch)

    def _wake_writer(self) -> None:
        writer = self._writer
        if writer is not None:
            self._writer = None
            trio.lowlevel.reschedule(writer)

    async def _answer_writer(self) -> None:
        """Write the answers handed over, each scheduling turn's with one write;
        return once the peer is shut and its last worker is gone."""

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._writer = None
            return trio.lowlevel.Abort.SUCCEEDED

        send_batch = self.stream.send_batch  # type: ignore[attr-defined]
        while True:
            if not self._answers and not self._requests:
                if self._closed_reason is not None and self._workers == 0:
                    return
                self._writer = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(abort)
            batch, self._answers = self._answers, []
            requests, self._requests = self._requests, []
            try:
                # Our requests are encoded already (msgspec.Raw): they cannot fail here.
                await send_batch([line for _, line in requests] + batch if requests else batch)
            except TransportError as exc:
                # The read loop sees the broken transport and shuts down; the
                # calls whose requests were not written fail now.
                self._write_failure = exc.reason
                self._fail_requests(requests, exc)
            except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
                # One of the answers cannot be encoded: each on its own (the
                # culprit becomes a -32603 answer, see _send).
                if requests:
                    await self._send_requests(requests)
                for out in batch:
                    await self._send(out, "a request")
            finally:
                self._unwritten -= len(batch)

    async def _send_requests(self, requests: list[tuple[int | str, msgspec.Raw]]) -> None:
        try:
            await self.stream.send_batch([line for _, line in requests])  # type: ignore[attr-defined]
        except TransportError as exc:
            self._write_failure = exc.reason
            self._fail_requests(requests, exc)

    def _fail_requests(self, requests: list[tuple[int | str, msgspec.Raw]], exc: TransportError) -> None:
        for ident, _ in requests:
            reply = self._pending.pop(ident, None)
            if reply is not None:
                error = ConnectionClosed(f"connection closed: {exc.reason}")
                error.__cause__ = exc
                deliver(reply, outcome.Error(error))

    async def _send(self, out: Any, what: str) -> None:
        """Send a worker's answer (or a batch's array of them): over a stream
        with ``send_batch``, without a schedule point of the stream's own (the
        worker yields on its own schedule, see :meth:`_worker`)."""
        try:
            if self._gathers:
                await self.stream.send_batch([out])  # type: ignore[attr-defined]
            else:
                await self.stream.send(out)
        except TransportError:
            pass  # the read loop sees the broken transport and shuts down
        except Exception as exc:
            # The transport could not encode the answer (the handler returned
            # something the codec cannot write): answer -32603 rather than
            # let one handler's result take the whole session down.
            log.exception("%s: could not send the answer to %s", self.name, what)
            fallback = _encodable(out, f"could not encode the answer to {what}: {describe(exc)}")
            try:
                await self.stream.send(fallback)
            except TransportError:
                pass

    def _error_answer(self, req: Request, exc: Exception) -> ErrorResponse:
        """The answer to ``req`` whose handler raised ``exc``: its own error,
        or -32603 for anything unexpected (logged)."""
        if isinstance(exc, McpError):
            return error_response(req.id, exc)
        log.error("%s: handler for %s failed", self.name, req.method, exc_info=exc)
        return error_response(req.id, InternalError(describe(exc)))

    async def serve_inline(self, req: Request, sink: NotificationSink) -> Response | ErrorResponse:
        """Serve ``req`` in the calling task and return its answer: the same
        dispatcher and error mapping as a worker, the caller's cancel scope
        instead of the worker's; what the handler notifies goes to ``sink``, in
        order, instead of the transport. For requests that depend on no earlier
        message (the stateless era): an inline in-memory pair (see
        :meth:`request`), or a Streamable HTTP request served in its own ASGI
        task. Raises :class:`TransportClosed` once the peer is closed."""
        if self._closed_reason is not None:
            raise TransportClosed(self._closed_reason)
        self._running += 1
        token = _INLINE_SINK.set((self, sink))
        related = RELATED_REQUEST.set(req.id)  # as a worker does: what the handler sends relates to it
        try:
            if req.method == "ping":
                result: Any = _EMPTY_RESULT
            else:
                result = await self.dispatcher.handle_request(InboundRequest(self, req))  # type: ignore[arg-type]
            reply: Response | ErrorResponse = Response(id=req.id, result=result)
        except Exception as exc:
            reply = self._error_answer(req, exc)
        finally:
            RELATED_REQUEST.reset(related)
            _INLINE_SINK.reset(token)
            self._running -= 1
        self._served += 1
        return reply

    async def _notification_loop(self) -> None:
        async for note in self._notif_recv:
            try:
                await self.dispatcher.handle_notification(note.method, note.params)
            except Exception:
                log.exception("%s: notification handler for %s failed", self.name, note.method)

    async def _outbox_loop(self) -> None:
        async for msg in self._outbox_recv:
            try:
                await self.stream.send(msg)
            except TransportError:
                return

    def _settle(self, ident: int | str, reply: Any) -> Any:
        """What to send now for request ``ident`` finishing with ``reply``
        (None: no answer): the reply itself, nothing (None) while the rest of
        its batch runs, or the batch's whole array once this was its last."""
        batch = self._batches.pop(ident, None)
        if batch is None:
            return reply
        batch.waiting.discard(ident)
        if reply is not None:
            batch.replies.append(reply)
        if batch.waiting or not batch.replies:
            return None
        return batch.replies
