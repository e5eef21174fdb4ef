"""The JSON-RPC peer actor: one session over one message stream.

Responsibilities: request ids and pending calls, a capped pool of handler
workers for inbound requests, notifications (in order, on one worker),
``ping``, progress, and cancellation both ways. It knows JSON-RPC, not MCP
roles: a *dispatcher* (the server or client actor) answers requests and
notifications.

The read loop never awaits a consumer:

* a response goes to its caller through a one-slot reply (the parked caller
  task is rescheduled, or the value waits in the slot);
* a request enters the admission queue with ``send_nowait``; when the queue
  is full the peer answers at once with :class:`ServerOverloaded`;
* a notification enters the notification queue with ``send_nowait``; when
  that queue is full it is dropped and counted (see :class:`PeerLimits`);
* error answers that the read loop itself produces go through a bounded
  outbox served by its own task. When that outbox is full the other side is
  not reading our answers: the read loop then waits for room (backpressure:
  it stops reading from a peer that does not read) instead of dropping an
  answer. Every request gets an answer.

Blocking the read loop would also block responses, and deadlock handlers that
wait on the peer.

Here: the actor, its read loop and dispatch, and outbound calls. Its bounds
are in :mod:`._peer_limits`, its handler pool in :mod:`._peer_pool`, its
outbound calls in :mod:`._peer_outbound`, what a dispatcher gets in
:mod:`._peer_inbound`, a caller's reply in :mod:`._peer_calls`.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

import msgspec
import outcome
import trio

from .._util import RepeatedWarnings
from ..protocol import (
    ConnectionClosed,
    ErrorResponse,
    InvalidMessage,
    InvalidRequest,
    Notification,
    Request,
    Response,
    ServerOverloaded,
    error_response,
)
from ..transports import MessageStream, TransportError
from ..transports._base import RELATED_REQUEST
from ._actor import ExitReason
from ._peer_calls import ProgressCallback, _Reply, deliver
from ._peer_inbound import Dispatcher, InboundRequest, _Batch, _NullDispatcher, _Slot
from ._peer_limits import PeerLimits, oversized_batch
from ._peer_outbound import NON_CANCELLABLE, _Outbound
from ._peer_pool import _DONE, _HANDED_OFF, _READ_BUDGET, _HandlerPool, _taker

if TYPE_CHECKING:  # imported when the statistics are first asked for
    from ._peer_statistics import PeerStatistics

__all__ = [
    "NON_CANCELLABLE",
    "Dispatcher",
    "InboundRequest",
    "Peer",
    "PeerLimits",
    "ProgressCallback",
    "oversized_batch",
]

log = logging.getLogger("trio_mcp.peer")

_Task = trio.lowlevel.Task
_reschedule = trio.lowlevel.reschedule
_Value = outcome.Value


class Peer(_Outbound, _HandlerPool):
    """A JSON-RPC session over a :class:`MessageStream`.

    Start with ``await nursery.start(peer.run)``. ``run`` returns an
    :class:`ExitReason` when the stream ends cleanly or :meth:`aclose` is
    called, and raises :class:`TransportError` when the transport breaks.
    Either way every pending call has already failed with
    :class:`ConnectionClosed`.
    """

    def __init__(
        self,
        stream: MessageStream,
        dispatcher: Dispatcher | None = None,
        *,
        limits: PeerLimits | None = None,
        name: str = "peer",
    ) -> None:
        self.name = name
        self.stream = stream
        #: The stream can have the other end serve a request in this task
        #: (an in-memory pair; see :meth:`request`).
        self._can_inline = getattr(type(stream), "inline_in_order", None) is not None
        self._send_nowait = stream.send_nowait if getattr(type(stream), "send_nowait", None) else None  # type: ignore[attr-defined]
        self.dispatcher: Dispatcher = dispatcher or _NullDispatcher()
        self.limits = limits or PeerLimits()
        self._next_id = 1
        #: Prepended to the ids of the requests this peer sends, which are then
        #: strings (a cluster node serving a session owned elsewhere marks its
        #: requests so that their answers find their way back to it).
        self.id_prefix = ""
        #: Answer an inbound JSON-RPC batch with one array (JSON-RPC 2.0), not
        #: item by item. Off until the protocol in use has batches (MCP
        #: 2025-03-26 only: the session actors set it on negotiating it).
        self.batch_arrays = False
        #: Requests of a JSON-RPC batch still running -> their batch.
        self._batches: dict[int | str, _Batch] = {}
        self._current_batch: _Batch | None = None
        self._pending: dict[int | str, Any] = {}
        #: result type -> its decoder (see Peer.request's gathered calls).
        self._progress: dict[int | str, _Reply] = {}
        self._inflight: dict[int | str, _Slot] = {}
        # Admitted requests not finished yet: running or waiting for a worker.
        # Counting these (not the queue's buffer, which also holds requests
        # that a just-spawned worker has not picked up yet) keeps a burst
        # from being refused while workers are still free.
        self._capacity = self.limits.max_concurrent_handlers + self.limits.max_queued_requests
        #: Admitted requests no worker has taken yet (bounded by ``_capacity``:
        #: see :meth:`_admit`), the workers waiting for one, and the workers
        #: woken (or started) to take one that have not looked yet.
        self._queue: deque[Request] = deque()
        self._idle_workers: list[trio.lowlevel.Task] = []
        self._standby = 0
        self._max_workers = self.limits.max_concurrent_handlers
        self._notif_send, self._notif_recv = trio.open_memory_channel[Notification](
            self.limits.max_queued_notifications
        )
        self._outbox_send, self._outbox_recv = trio.open_memory_channel[Any](self.limits.max_queued_replies)
        #: Answers of the read loop that found the outbox full: the read loop
        #: waits to queue them before it reads on (bounded by one frame's items).
        self._held: list[Any] = []
        #: Batch arrays completed by a cancelled request, sent by its worker
        #: once out of the cancelled scope (at most one per worker).
        self._late: deque[Any] = deque()
        #: Workers hand their answers to one writer that gathers them into one
        #: write per scheduling turn, over streams that can (see _peer_pool).
        self._gathers = getattr(type(stream), "send_batch", None) is not None
        self._answers: list[Any] = []
        #: Our requests handed to the same writer, (id, encoded), not written yet.
        self._requests: list[tuple[int | str, msgspec.Raw]] = []
        #: Why the writer could not write (then requests are sent by their callers).
        self._write_failure: str | None = None
        self._unwritten = 0
        self._writer: trio.lowlevel.Task | None = None
        #: The read loop serves a lone request itself while its handler does
        #: not wait (see :meth:`_serve_here`), over streams that gather answers;
        #: its answers wait here for the end of the read's burst (one write).
        self._serves_in_reader = self._gathers
        #: How the read loop writes the answers it served (None: it serves none).
        lines: Any = getattr(stream, "send_lines", None) or getattr(stream, "send_batch", None)
        self._write_lines = lines
        self._reader_out: list[Any] = []
        self._serving_here = False
        #: How reading ended, when it ended in a relief reader (see _relief_reader).
        self._read_result: outcome.Outcome[ExitReason] | None = None
        self._read_done = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._workers = 0
        self._running = 0
        self._closed_reason: str | None = None
        self._local_close = False
        self._started = False
        self._stopped = trio.Event()
        # statistics
        self._served = 0
        self._overloaded = 0
        self._cancelled_by_peer = 0
        self._notifications_dropped = 0
        self._reads_paused = 0
        self._warnings = RepeatedWarnings(log, interval=self.limits.warning_interval)
        self._unmatched = 0
        self._invalid = 0

    # ------------------------------------------------------------------ run

    async def run(self, *, task_status: trio.TaskStatus[Peer] = trio.TASK_STATUS_IGNORED) -> ExitReason:
        if self._started:
            raise RuntimeError("a Peer runs once")
        self._started = True
        reason: ExitReason | None = None
        failure: TransportError | None = None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._notification_loop)
                nursery.start_soon(self._outbox_loop)
                if self._gathers:
                    nursery.start_soon(self._answer_writer)
                # Streams that accept direct hand-over define set_direct on
                # their class (never through wrappers that watch receive()).
                if getattr(type(self.stream), "set_direct", None) is not None:
                    self.stream.set_direct(self._direct)  # type: ignore[attr-defined]
                if getattr(type(self.stream), "set_inline", None) is not None:
                    self.stream.set_inline(self.serve_inline)  # type: ignore[attr-defined]
                task_status.started(self)
                try:
                    reason = await self._read_loop()
                    if reason is _HANDED_OFF:
                        # Reading went on in a relief reader: how did it end?
                        await self._read_done.wait()
                        assert self._read_result is not None
                        reason = self._read_result.unwrap()
                except TransportError as exc:
                    self._reading_failed(exc)
                    # Raised below, outside the nursery: raised in here it
                    # would come out wrapped in an ExceptionGroup.
                    failure = exc
                except BaseException:
                    self._shut("peer stopped")
                    raise
                else:
                    self._reading_ended(reason)
        finally:
            self._shut("peer stopped")
            self._stopped.set()
        if reason is None and failure is None and self._read_result is not None:
            # A relief reader saw the end while this task was still serving.
            if type(self._read_result) is outcome.Error:
                failure = self._read_result.error  # type: ignore[assignment]
            else:
                reason = self._read_result.unwrap()
        if failure is not None:
            raise failure
        if reason is None:  # aclose() cancelled the read loop before it saw the close
            reason = ExitReason("closed", "closed locally")
        return reason

    def _reading_ended(self, reason: ExitReason) -> None:
        """The read loop ended cleanly (wherever it ran; idempotent)."""
        self._shut(reason.detail or "connection closed")
        assert self._nursery is not None
        if self._local_close:
            self._nursery.cancel_scope.cancel()
        else:
            # Clean EOF: let admitted handlers finish, within a bound.
            scope = self._nursery.cancel_scope
            scope.deadline = min(scope.deadline, trio.current_time() + self.limits.drain_grace)

    def _reading_failed(self, exc: TransportError) -> None:
        """The transport broke under the read loop (wherever it ran; idempotent)."""
        self._shut(f"transport failed: {exc.reason}", exc)
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()

    async def _relief_reader(self) -> None:
        """Read on for a read loop whose own handler waits (see _serve_here);
        how reading ends is left for :meth:`run` (and acted on at once)."""
        try:
            reason = await self._read_loop()
        except TransportError as exc:
            self._reading_failed(exc)
            self._read_result = outcome.Error(exc)
        else:
            if reason is _HANDED_OFF:
                return  # its own handler waited: reading went on elsewhere again
            self._reading_ended(reason)
            self._read_result = outcome.Value(reason)
        self._read_done.set()

    async def _read_loop(self) -> ExitReason:
        # The handlers this task serves itself run in this one scope (no
        # scope per request): a peer's cancellation can only reach one that
        # waits, and then this task reads no more (see _serve_here).
        with trio.CancelScope() as scope:
            return await self._read(scope)
        return _HANDED_OFF  # its waiting handler was cancelled by the peer

    async def _read(self, scope: trio.CancelScope) -> ExitReason:
        receive = self.stream.receive
        # Streams that can hand over already-buffered frames without a
        # schedule point let one wake-up dispatch a whole burst.
        take = _taker(self.stream)
        dispatch = self._dispatch
        # The stream may gather the answers of a batch itself (a Streamable
        # HTTP session does): then the peer answers item by item.
        stream_gathers = getattr(self.stream, "answers_batches", False)
        max_batch = self.limits.max_batch_items
        held = self._held
        serves_here = self._serves_in_reader
        queue = self._queue
        out = self._reader_out
        inflight = self._inflight
        capacity = self._capacity
        # The dispatcher's plain path, if it has one (see _peer_inbound.PlainStarter).
        plain = getattr(self.dispatcher, "start_plain", None) if serves_here else None
        while True:
            try:
                frame = await receive()
                budget = _READ_BUDGET if take is not None else 0
                while True:
                    if (
                        type(frame) is Request
                        and serves_here
                        and not queue
                        and not held
                        and self._workers < self._max_workers
                    ):
                        # Nothing waits for a worker: serve it here, in this turn.
                        started = None
                        if (
                            plain is not None
                            and frame.id not in inflight
                            and len(inflight) + self._unwritten < capacity
                            and self._closed_reason is None
                        ):
                            started = plain(frame)
                        if started is not None:
                            # No envelope, no slot: a handler that does not wait
                            # cannot be cancelled (its task reads nothing meanwhile).
                            trap = self._step_plain(frame, started)
                            if trap is not _DONE:  # it waits: admitted now, resumed as a worker
                                inflight[frame.id] = _Slot(frame.method not in NON_CANCELLABLE)
                                if not await self._serve_here(frame, scope, (started, trap)):
                                    return _HANDED_OFF
                        elif self._register(frame) and not await self._serve_here(frame, scope):
                            return _HANDED_OFF  # it waited: a relief reader reads on
                    elif type(frame) is list:
                        refusal = oversized_batch(frame, max_batch)
                        if refusal is not None:
                            self._invalid += 1
                            self._answer_now(refusal)
                        elif self.batch_arrays and not stream_gathers:
                            self._dispatch_batch(frame)
                        else:
                            self._dispatch_each(frame)
                    elif type(frame) is Response:
                        # An answer (the commonest frame a client reads): its
                        # parked caller rescheduled at once when that is the entry.
                        entry = self._pending.pop(frame.id, None)
                        if type(entry) is _Task:
                            _reschedule(entry, _Value(frame))
                        else:
                            self._answered(frame, entry)
                    else:
                        dispatch(frame)
                    if held:
                        await self._queue_held()
                    if budget == 0:
                        if out:
                            await self._write_here()
                        if take is not None:
                            await trio.lowlevel.checkpoint()  # a long burst: let others run
                        break
                    budget -= 1
                    frame = take()  # type: ignore[misc]  # budget > 0: take is set
                    if frame is None:
                        break  # the end of the read (an exception less than receive_nowait)
                if out:
                    await self._write_here()  # the answers of this burst, one write
            except trio.EndOfChannel:
                if self._reader_out:
                    await self._write_here()
                if self._local_close:
                    return ExitReason("closed", "closed locally")
                return ExitReason("eof", "the other side closed the connection")
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                if self._local_close:
                    return ExitReason("closed", "closed locally")
                raise TransportError("stream closed under the reader") from None

    async def _queue_held(self) -> None:
        """Queue the answers that found the outbox full, waiting for room:
        the other side is not reading our answers, so we stop reading its
        requests until it does (backpressure instead of a dropped answer)."""
        self._reads_paused += 1
        held = self._held
        try:
            for msg in held:
                await self._outbox_send.send(msg)
        except trio.ClosedResourceError:
            pass  # shutting down
        finally:
            held.clear()

    def _shut(self, reason: str, cause: TransportError | None = None) -> None:
        """Stop accepting work and fail every pending call (idempotent), each
        with a ConnectionClosed whose ``__cause__`` is the transport's failure."""
        if self._closed_reason is not None:
            return
        self._closed_reason = reason
        self._warnings.flush()
        self._wake_writer()  # it returns once the workers are gone
        if getattr(type(self.stream), "set_direct", None) is not None:
            self.stream.set_direct(None)  # type: ignore[attr-defined]
        if getattr(type(self.stream), "set_inline", None) is not None:
            self.stream.set_inline(None)  # type: ignore[attr-defined]
        self._wake_idle_workers()  # they return once the queue is empty
        self._notif_send.close()
        self._outbox_send.close()
        self._batches.clear()
        pending, self._pending = self._pending, {}
        for reply in pending.values():
            # One outcome (and exception) per caller: an outcome unwraps once.
            error = ConnectionClosed(f"connection closed: {reason}")
            error.__cause__ = cause
            deliver(reply, outcome.Error(error))

    # ------------------------------------------------------------- dispatch

    def _direct(self, msg: Any) -> bool:
        """A frame handed over by an in-memory transport from the sender's
        task (nothing was queued ahead of it): a request is admitted, a
        response delivered to its caller, exactly as the read loop would."""
        if self._closed_reason is not None:
            return False
        kind = type(msg)
        if kind is Request:
            if self._held or msg.id in self._inflight or len(self._inflight) >= self._capacity:
                return False  # it gets an answer now: the read loop sends it, with backpressure
            self._admit(msg)
            return True
        if msg.id in self._pending:
            self._dispatch(msg)
            return True
        return False  # unmatched: the read loop accounts for it

    async def serve_here(self, req: Request, scope: trio.CancelScope) -> bool:
        """Serve ``req`` in the calling task inside ``scope``, as a worker would
        (admitted, cancelled through ``scope`` by the peer's cancel notification,
        answered through the transport), when :meth:`_direct` would admit it
        and a worker could start it now; False (nothing done) otherwise. For a transport whose sender waits for
        the answer anyway (a Streamable HTTP POST answered as JSON)."""
        if self._closed_reason is not None or self._held or self._queue or self._workers >= self._max_workers:
            return False  # closing, something waits ahead of it, or no worker may start now
        if req.id in self._inflight or len(self._inflight) + self._unwritten >= self._capacity:
            return False
        self._inflight[req.id] = _Slot(req.method not in NON_CANCELLABLE)
        self._workers += 1  # the caller is a worker meanwhile (the cap counts it)
        token = RELATED_REQUEST.set(None)
        try:
            await self._serve(req, scope)
        finally:
            RELATED_REQUEST.reset(token)
            self._workers -= 1
            if self._queue and self._standby == 0:
                self._call_standby()  # what queued up meanwhile gets a worker
            if self._workers == 0:
                self._wake_writer()
        return True

    def _dispatch_each(self, items: list[Any]) -> None:
        for item in items:
            self._dispatch(item)

    def _dispatch_batch(self, items: list[Any]) -> None:
        """A JSON-RPC batch: its requests are admitted together and answered
        with one array once the last of them is done (in the order they
        finish; a cancelled one has no answer in it, a batch of notifications
        none at all). Immediate error answers (invalid items, overload) join
        the array."""
        batch = _Batch()
        self._current_batch = batch
        try:
            self._dispatch_each(items)
        finally:
            self._current_batch = None
        if not batch.waiting and batch.replies:
            self._answer_now(batch.replies)

    def _dispatch(self, msg: Any) -> None:
        kind = type(msg)
        if kind is Response or kind is ErrorResponse:
            self._answered(msg, self._pending.pop(msg.id, None))
        elif kind is Request:
            self._admit(msg)
        elif kind is Notification:
            self._notification(msg)
        elif kind is InvalidMessage:
            self._invalid += 1
            if msg.answer:
                self._reply_nowait(error_response(msg.id, msg.error))
        else:  # pragma: no cover - transports only produce the above
            log.warning("%s: ignoring unexpected frame %r", self.name, msg)

    def _answered(self, msg: Response | ErrorResponse, entry: Any) -> None:
        """Hand an answer to its pending call's entry (None: no call waits)."""
        if entry is None:
            self._unmatched += 1  # e.g. answered after we cancelled it
            log.debug("%s: dropped an answer to id %r: no call waits for it", self.name, msg.id)
        else:
            deliver(entry, outcome.Value(msg))

    def _admit(self, req: Request) -> None:
        """Admit ``req`` for a worker (or answer it at once: see :meth:`_register`)."""
        if self._register(req):
            self._queue.append(req)
            if self._standby == 0:
                self._call_standby()

    def _register(self, req: Request) -> bool:
        """Count ``req`` in flight, or answer it at once (a duplicate id, no
        capacity left) and return False (also when shutting down)."""
        ident = req.id
        if ident in self._inflight:
            self._reply_nowait(error_response(ident, InvalidRequest(f"Duplicate request id {ident!r}")))
            return False
        if len(self._inflight) + self._unwritten >= self._capacity:
            self._overloaded += 1
            self._reply_nowait(error_response(ident, ServerOverloaded()))
            return False
        if self._closed_reason is not None:
            return False  # shutting down
        self._inflight[ident] = _Slot(req.method not in NON_CANCELLABLE)
        batch = self._current_batch
        if batch is not None:
            batch.waiting.add(ident)
            self._batches[ident] = batch
        return True

    def _notification(self, note: Notification) -> None:
        method = note.method
        if method == "notifications/cancelled":
            self._peer_cancelled(note.params)
            return
        if method == "notifications/progress" and self._progress and self._route_progress(note.params):
            return
        if self.dispatcher.handle_notification_inline(method, note.params):
            return
        try:
            self._notif_send.send_nowait(note)
        except trio.WouldBlock:
            self._notifications_dropped += 1
            self._warnings.warning(
                "dropped notifications", "%s: notification queue full, dropped %s", self.name, method
            )
        except trio.ClosedResourceError:
            pass

    def _reply_nowait(self, msg: Any) -> None:
        """An answer the read loop gives at once (part of the batch being read, if any)."""
        batch = self._current_batch
        if batch is not None:
            batch.replies.append(msg)
            return
        self._answer_now(msg)

    def _answer_now(self, msg: Any) -> None:
        """Queue an answer of the read loop; when the outbox is full, hold it
        for the read loop to queue before it reads on (see :meth:`_queue_held`)."""
        try:
            self._outbox_send.send_nowait(msg)
        except trio.WouldBlock:
            self._held.append(msg)
        except trio.ClosedResourceError:
            pass

    # ----------------------------------------------------------- lifecycle

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    async def aclose(self) -> None:
        """Close the transport, fail pending calls, stop handlers (bounded)."""
        self._local_close = True
        self._shut("closed locally")
        with trio.move_on_after(self.limits.close_timeout, shield=True):
            try:
                await self.stream.aclose()
            except TransportError:
                pass
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    def statistics(self) -> PeerStatistics:
        from ._peer_statistics import PeerStatistics

        return PeerStatistics(
            pending_calls=len(self._pending),
            handlers_running=self._running,
            workers=self._workers,
            requests_queued=len(self._queue),
            notifications_queued=self._notif_send.statistics().current_buffer_used,
            requests_served=self._served,
            requests_overloaded=self._overloaded,
            requests_cancelled_by_peer=self._cancelled_by_peer,
            notifications_dropped=self._notifications_dropped,
            reads_paused=self._reads_paused,
            unmatched_responses=self._unmatched,
            invalid_frames=self._invalid,
        )

    def __repr__(self) -> str:
        return f"<Peer {self.name} {'closed' if self.closed else 'open'}>"
