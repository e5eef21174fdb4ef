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
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Final, Protocol

import attrs
import msgspec
import outcome
import trio
from msgspec import UNSET, Struct

from .._util import DEFAULT_WARNING_INTERVAL, RepeatedWarnings, check_positive, describe, numeric_fields
from ..protocol import (
    ConnectionClosed,
    ErrorResponse,
    InternalError,
    InvalidMessage,
    InvalidRequest,
    McpError,
    MethodNotFound,
    Notification,
    Request,
    Response,
    ServerOverloaded,
    coerce,
    encode,
    error_response,
)
from ..transports import MessageStream, TransportClosed, TransportError
from ..transports._base import RELATED_REQUEST
from ._actor import ExitReason

__all__ = [
    "NON_CANCELLABLE",
    "Dispatcher",
    "InboundRequest",
    "Peer",
    "PeerLimits",
    "PeerStatistics",
    "ProgressCallback",
    "oversized_batch",
]

log = logging.getLogger("trio_mcp.peer")

#: Requests never served inline (see :meth:`Peer.request`): ``initialize``
#: starts the session, ``subscriptions/listen`` is a stream, not a call.
ALWAYS_FRAMED: Final = frozenset({"initialize", "subscriptions/listen"})

#: Where the notifications of a request served inline go (see :meth:`Peer.request`).
NotificationSink = Callable[[Notification], Awaitable[None]]
#: What serves a request inline: ``await serve(request, sink)`` -> its answer.
InlineServer = Callable[[Request, NotificationSink], Awaitable[Any]]

#: While a peer serves a request inline (in the caller's task): that serving
#: peer, and the sink its notifications go to instead of its transport (the
#: calling peer, in order, before the answer).
_INLINE_SINK: ContextVar[tuple[Peer, NotificationSink] | None] = ContextVar(
    "trio_mcp_inline_sink", default=None
)

#: Frames one wake-up of the read loop (or requests one worker) may take
#: without a schedule point, so a burst cannot starve other tasks.
_DRAIN_BUDGET: Final = 32

#: Requests a peer's ``notifications/cancelled`` never interrupts.
NON_CANCELLABLE: Final = frozenset({"initialize"})

ProgressCallback = Callable[[float, "float | None", "str | None"], Awaitable[None]]

_EMPTY_RESULT: Final = msgspec.Raw(b"{}")


@attrs.frozen(kw_only=True)
class PeerLimits:
    """Every bound of a peer, named. All are counts of messages unless noted."""

    #: Handler workers serving inbound requests at once.
    max_concurrent_handlers: int = 64
    #: Inbound requests waiting for a worker; one more is answered at once
    #: with ServerOverloaded (-32001) instead of being queued.
    max_queued_requests: int = 256
    #: Inbound notifications waiting for the (single, in-order) notification
    #: worker; one more is dropped and counted in ``notifications_dropped``.
    #: Also bounds the progress notifications waiting for one caller's
    #: ``on_progress`` callback.
    max_queued_notifications: int = 1024
    #: Error answers produced by the read loop (parse errors, overload)
    #: waiting to be written; when full, the read loop stops reading until
    #: there is room (the other side is not reading our answers), counted in
    #: ``reads_paused``. No answer is ever dropped.
    max_queued_replies: int = 256
    #: Messages in one inbound JSON-RPC batch; a larger batch is refused at
    #: once with one -32600 error (id null) and none of it is served.
    max_batch_items: int = 1024
    #: Seconds a shielded ``notifications/cancelled`` send may take.
    cancel_send_timeout: float = 1.0
    #: Seconds between two log lines about the same repeated problem (dropped
    #: notifications): the ones in between are counted and summarized.
    warning_interval: float = DEFAULT_WARNING_INTERVAL
    #: Seconds in-flight handlers may run on after the other side closed its
    #: end cleanly (EOF) before they are cancelled.
    drain_grace: float = 2.0
    #: Seconds ``aclose`` may spend closing the transport.
    close_timeout: float = 2.0

    def __attrs_post_init__(self) -> None:
        check_positive(self, numeric_fields(self))


@attrs.frozen
class PeerStatistics:
    """A snapshot of a peer's counters (see :meth:`Peer.statistics`)."""

    pending_calls: int
    handlers_running: int
    workers: int
    requests_queued: int
    notifications_queued: int
    requests_served: int
    requests_overloaded: int
    requests_cancelled_by_peer: int
    notifications_dropped: int
    #: Times the read loop stopped reading until the other side took our answers.
    reads_paused: int
    unmatched_responses: int
    invalid_frames: int


class Dispatcher(Protocol):
    """What a role actor gives the peer."""

    async def handle_request(self, request: InboundRequest) -> Any:
        """Return the result (Struct, builtins or Raw) or raise McpError."""

    async def handle_notification(self, method: str, params: Any) -> None:
        """Handle one notification, in arrival order."""

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        """Optionally handle a notification synchronously in the read loop
        (for state changes that must precede later requests, such as
        ``notifications/initialized``). Return True if handled. Must not block."""


class _NullDispatcher:
    async def handle_request(self, request: InboundRequest) -> Any:
        raise MethodNotFound(f"Method not found: {request.method}")

    async def handle_notification(self, method: str, params: Any) -> None:
        return None

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        return False


class _Reply:
    """A one-slot reply: the read loop fills it without ever blocking.

    A call made with ``on_progress`` also gets its progress notifications
    here (bounded), so the caller runs its callback for each of them, in
    order, before it returns the answer that followed them on the wire.
    """

    __slots__ = ("progress", "task", "value")

    def __init__(self) -> None:
        self.value: outcome.Outcome[Any] | None = None
        self.task: trio.lowlevel.Task | None = None
        self.progress: deque[tuple[float, Any, Any]] | None = None

    def deliver(self, value: outcome.Outcome[Any]) -> None:
        if self.value is not None:
            return
        self.value = value
        task = self.task
        if task is not None:
            self.task = None
            trio.lowlevel.reschedule(task, value)

    def deliver_progress(self, item: tuple[float, Any, Any], limit: int) -> bool:
        queue = self.progress
        if queue is None or len(queue) >= limit:
            return False
        queue.append(item)
        task = self.task
        if task is not None:
            self.task = None
            trio.lowlevel.reschedule(task, outcome.Value(None))
        return True

    async def _park(self) -> Any:
        self.task = trio.lowlevel.current_task()

        def abort(_: Any) -> trio.lowlevel.Abort:
            self.task = None
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)

    async def wait(self) -> Any:
        if self.value is not None:
            await trio.lowlevel.checkpoint()
            return self.value.unwrap()
        return await self._park()

    async def wait_reporting(self, callback: ProgressCallback, name: str) -> Any:
        queue = self.progress
        assert queue is not None
        while True:
            while queue:
                progress, total, message = queue.popleft()
                try:
                    await callback(progress, total, message)
                except Exception:
                    log.exception("%s: progress callback failed", name)
            if self.value is not None:
                return await self.wait()
            # Woken with None for more progress, or handed the answer (then
            # nothing was queued since we parked: progress would have woken us).
            msg = await self._park()
            if msg is not None:
                return msg


class _Batch:
    """The answers of one inbound JSON-RPC batch, gathered into one array."""

    __slots__ = ("replies", "waiting")

    def __init__(self) -> None:
        self.waiting: set[int | str] = set()
        self.replies: list[Any] = []


class _Slot:
    """An admitted inbound request's cancellation state."""

    __slots__ = ("cancellable", "cancelled", "scope")

    def __init__(self, cancellable: bool) -> None:
        self.scope: trio.CancelScope | None = None
        self.cancelled = False
        self.cancellable = cancellable


class _Meta(Struct):
    meta: dict[str, Any] = msgspec.field(default_factory=dict, name="_meta")


class InboundRequest:
    """A request being served; handed to the dispatcher."""

    __slots__ = ("_meta", "id", "method", "params", "peer")

    def __init__(self, peer: Peer, request: Request) -> None:
        self.peer = peer
        self.id = request.id
        self.method = request.method
        self.params = request.params
        self._meta: dict[str, Any] | None = None

    @property
    def meta(self) -> dict[str, Any]:
        """The request's ``_meta`` object (decoded on first use)."""
        if self._meta is None:
            params = self.params
            if params is UNSET or params is None:
                self._meta = {}
            elif isinstance(params, dict):
                meta = params.get("_meta")
                self._meta = meta if isinstance(meta, dict) else {}
            elif isinstance(params, Struct):
                meta = getattr(params, "meta", UNSET)
                self._meta = meta if isinstance(meta, dict) else {}
            else:
                try:
                    self._meta = coerce(params, _Meta).meta
                except (msgspec.ValidationError, msgspec.DecodeError):
                    self._meta = {}
        return self._meta

    @property
    def progress_token(self) -> int | str | None:
        token = self.meta.get("progressToken")
        return token if type(token) in (int, str) else None

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the caller asked for progress."""
        token = self.progress_token
        if token is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.peer.notify("notifications/progress", params)


class Peer:
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
        self.dispatcher: Dispatcher = dispatcher or _NullDispatcher()
        self.limits = limits or PeerLimits()
        self._next_id = 1
        #: Answer an inbound JSON-RPC batch with one array (JSON-RPC 2.0), not
        #: item by item. Off until the protocol in use has batches (MCP
        #: 2025-03-26 only: the session actors set it on negotiating it).
        self.batch_arrays = False
        #: Requests of a JSON-RPC batch still running -> their batch.
        self._batches: dict[int | str, _Batch] = {}
        self._current_batch: _Batch | None = None
        self._pending: dict[int | str, _Reply] = {}
        self._progress: dict[int | str, _Reply] = {}
        self._inflight: dict[int | str, _Slot] = {}
        # Admitted requests not finished yet: running or waiting for a worker.
        # Counting these (not the queue's buffer, which also holds requests
        # that a just-spawned worker has not picked up yet) keeps a burst
        # from being refused while workers are still free.
        self._capacity = self.limits.max_concurrent_handlers + self.limits.max_queued_requests
        self._queue_send, self._queue_recv = trio.open_memory_channel[Request](self._capacity)
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
        self._nursery: trio.Nursery | None = None
        self._workers = 0
        self._idle = 0
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
                # Streams that accept direct hand-over define set_direct on
                # their class (never through wrappers that watch receive()).
                if getattr(type(self.stream), "set_direct", None) is not None:
                    self.stream.set_direct(self._direct)  # type: ignore[attr-defined]
                if getattr(type(self.stream), "set_inline", None) is not None:
                    self.stream.set_inline(self.serve_inline)  # type: ignore[attr-defined]
                task_status.started(self)
                try:
                    reason = await self._read_loop()
                except TransportError as exc:
                    self._shut(f"transport failed: {exc.reason}")
                    nursery.cancel_scope.cancel()
                    # Raised below, outside the nursery: raised in here it
                    # would come out wrapped in an ExceptionGroup.
                    failure = exc
                except BaseException:
                    self._shut("peer stopped")
                    raise
                else:
                    self._shut(reason.detail or "connection closed")
                    if self._local_close:
                        nursery.cancel_scope.cancel()
                    else:
                        # Clean EOF: let admitted handlers finish, within a bound.
                        nursery.cancel_scope.deadline = trio.current_time() + self.limits.drain_grace
        finally:
            self._shut("peer stopped")
            self._stopped.set()
        if failure is not None:
            raise failure
        if reason is None:  # aclose() cancelled the read loop before it saw the close
            reason = ExitReason("closed", "closed locally")
        return reason

    async def _read_loop(self) -> ExitReason:
        receive = self.stream.receive
        # Streams that can hand over already-buffered frames without a
        # schedule point let one wake-up dispatch a whole burst.
        receive_nowait = getattr(self.stream, "receive_nowait", None)
        dispatch = self._dispatch
        # The stream may gather the answers of a batch itself (a Streamable
        # HTTP session does): then the peer answers item by item.
        stream_gathers = getattr(self.stream, "answers_batches", False)
        max_batch = self.limits.max_batch_items
        held = self._held
        while True:
            try:
                frame = await receive()
                budget = _DRAIN_BUDGET if receive_nowait is not None else 0
                while True:
                    if type(frame) is list:
                        refusal = oversized_batch(frame, max_batch)
                        if refusal is not None:
                            self._invalid += 1
                            self._answer_now(refusal)
                        elif self.batch_arrays and not stream_gathers:
                            self._dispatch_batch(frame)
                        else:
                            self._dispatch_each(frame)
                    else:
                        dispatch(frame)
                    if held:
                        await self._queue_held()
                    if budget == 0:
                        if receive_nowait is not None:
                            await trio.lowlevel.checkpoint()  # a long burst: let others run
                        break
                    budget -= 1
                    try:
                        frame = receive_nowait()  # type: ignore[misc]
                    except trio.WouldBlock:
                        break
            except trio.EndOfChannel:
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

    def _shut(self, reason: str) -> None:
        """Stop accepting work and fail every pending call (idempotent)."""
        if self._closed_reason is not None:
            return
        self._closed_reason = reason
        self._warnings.flush()
        if getattr(type(self.stream), "set_direct", None) is not None:
            self.stream.set_direct(None)  # type: ignore[attr-defined]
        if getattr(type(self.stream), "set_inline", None) is not None:
            self.stream.set_inline(None)  # type: ignore[attr-defined]
        self._queue_send.close()
        self._notif_send.close()
        self._outbox_send.close()
        self._batches.clear()
        pending, self._pending = self._pending, {}
        for reply in pending.values():
            # One outcome (and exception) per caller: an outcome unwraps once.
            reply.deliver(outcome.Error(ConnectionClosed(f"connection closed: {reason}")))

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
            reply = self._pending.pop(msg.id, None)
            if reply is None:
                self._unmatched += 1  # e.g. answered after we cancelled it
            else:
                reply.deliver(outcome.Value(msg))
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

    def _admit(self, req: Request) -> None:
        ident = req.id
        if ident in self._inflight:
            self._reply_nowait(error_response(ident, InvalidRequest(f"Duplicate request id {ident!r}")))
            return
        if len(self._inflight) >= self._capacity:
            self._overloaded += 1
            self._reply_nowait(error_response(ident, ServerOverloaded()))
            return
        try:
            self._queue_send.send_nowait(req)
        except trio.WouldBlock:
            self._overloaded += 1
            self._reply_nowait(error_response(ident, ServerOverloaded()))
            return
        except trio.ClosedResourceError:
            return  # shutting down
        self._inflight[ident] = _Slot(req.method not in NON_CANCELLABLE)
        batch = self._current_batch
        if batch is not None:
            batch.waiting.add(ident)
            self._batches[ident] = batch
        if self._idle > 0:
            self._idle -= 1
        elif self._workers < self.limits.max_concurrent_handlers and self._nursery is not None:
            self._workers += 1
            self._nursery.start_soon(self._worker)

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

    def _reply_nowait(self, msg: Any) -> None:
        """An answer the read loop gives at once (part of the batch being read, if any)."""
        batch = self._current_batch
        if batch is not None:
            batch.replies.append(msg)
            return
        self._answer_now(msg)

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

    def _answer_now(self, msg: Any) -> None:
        """Queue an answer of the read loop; when the outbox is full, hold it
        for the read loop to queue before it reads on (see :meth:`_queue_held`)."""
        try:
            self._outbox_send.send_nowait(msg)
        except trio.WouldBlock:
            self._held.append(msg)
        except trio.ClosedResourceError:
            pass

    # -------------------------------------------------------------- workers

    async def _worker(self) -> None:
        """Serve admitted requests one at a time.

        A worker runs its requests inside one cancel scope of its own, not one
        per request (the cheap path: cancellations are rare). A peer's
        ``notifications/cancelled`` cancels the scope of the worker serving
        that request; the worker then opens a fresh scope for the next one.
        """
        receive = self._queue_recv.receive
        receive_nowait = self._queue_recv.receive_nowait
        serve = self._serve
        try:
            while True:
                with trio.CancelScope() as scope:
                    streak = 0
                    while not scope.cancel_called:
                        try:
                            req = receive_nowait()
                            streak += 1
                            if streak >= _DRAIN_BUDGET:  # stay fair to other tasks
                                streak = 0
                                await trio.lowlevel.checkpoint()
                        except trio.WouldBlock:
                            streak = 0
                            self._idle += 1
                            try:
                                req = await receive()
                            except (trio.EndOfChannel, trio.ClosedResourceError):
                                return
                        except (trio.EndOfChannel, trio.ClosedResourceError):
                            return
                        await serve(req, scope)
                while self._late:
                    # A cancelled request was the last of its batch: answer the rest.
                    await self._send(self._late.popleft(), "a batch")
        finally:
            self._workers -= 1

    async def _serve(self, req: Request, scope: trio.CancelScope) -> None:
        """Serve one request inside its worker's ``scope`` (cancelled by the peer's
        ``notifications/cancelled``: Cancelled then propagates to the worker)."""
        ident = req.id
        slot = self._inflight.get(ident)
        if slot is None or slot.cancelled:
            self._inflight.pop(ident, None)
            last = self._settle(ident, None)
            if last is not None:
                await self._send(last, "a batch")  # the rest of its batch
            return
        self._running += 1
        # The handler's messages (and the response) relate to this request;
        # each worker serves one request at a time, so no reset is needed.
        RELATED_REQUEST.set(ident)
        reply: Any = None
        slot.scope = scope
        try:
            if req.method == "ping":
                result = _EMPTY_RESULT
            else:
                result = await self.dispatcher.handle_request(InboundRequest(self, req))
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
            return
        self._served += 1
        out = self._settle(ident, reply)
        if out is None:
            return  # its batch is answered when the last of it is done
        await self._send(out, req.method)

    async def _send(self, out: Any, what: str) -> None:
        """Send a worker's answer (or a batch's array of them)."""
        try:
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
                result = await self.dispatcher.handle_request(InboundRequest(self, req))
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

    # ------------------------------------------------------------ outbound

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
        ident = self._next_id
        self._next_id = ident + 1
        reply = _Reply()
        if on_progress is not None:
            params = _with_progress_token(params, ident)
            reply.progress = deque()
            self._progress[ident] = reply
        self._pending[ident] = reply
        # The initialize request is never cancelled (MCP lifecycle).
        cancellable = cancellable and method not in NON_CANCELLABLE
        sent = False
        try:
            await self.stream.send(Request(id=ident, method=method, params=params))
            sent = True
            if on_progress is None:
                msg = await reply.wait()
            else:
                msg = await reply.wait_reporting(on_progress, self.name)
        except trio.Cancelled:
            if sent and cancellable and reply.value is None and self._closed_reason is None:
                await self._send_cancelled(ident, "cancelled by the caller")
            raise
        except TransportError as exc:
            raise ConnectionClosed(f"connection closed: {exc.reason}") from None
        finally:
            self._pending.pop(ident, None)
            if on_progress is not None:
                self._progress.pop(ident, None)
        return _answer(msg, method, result_type)

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
        ident = self._next_id
        self._next_id = ident + 1
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
        return PeerStatistics(
            pending_calls=len(self._pending),
            handlers_running=self._running,
            workers=self._workers,
            requests_queued=self._queue_send.statistics().current_buffer_used,
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


def oversized_batch(items: list[Any], limit: int) -> ErrorResponse | None:
    """The one error that refuses a JSON-RPC batch of more than ``limit``
    messages (:attr:`PeerLimits.max_batch_items`), or None if it is accepted.
    Transports that gather batches themselves (Streamable HTTP) use it too."""
    if len(items) <= limit:
        return None
    return error_response(
        None,
        InvalidRequest(f"Invalid Request: a batch of {len(items)} messages; at most {limit} are accepted"),
    )


def _encodable(out: Any, problem: str) -> Any:
    """``out`` (an answer, or a batch's array of them) with every answer the
    codec cannot write replaced by a -32603 error."""
    if type(out) is not list:
        return error_response(out.id, InternalError(problem))
    fixed = []
    for reply in out:
        try:
            encode(reply)
            fixed.append(reply)
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
            fixed.append(error_response(reply.id, InternalError(problem)))
    return fixed


def _answer(msg: Response | ErrorResponse, method: str, result_type: Any) -> Any:
    """A call's result (decoded to ``result_type`` if given), or its error raised."""
    if type(msg) is Response:
        if result_type is None:
            return msg.result
        try:
            return coerce(msg.result, result_type)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise InternalError(f"malformed result for {method}: {exc}") from None
    raise msg.error.to_exception()  # type: ignore[union-attr]


def _progress_of(params: Any) -> tuple[int | str, tuple[float, Any, Any] | None] | None:
    """(token, (progress, total, message)) of ``notifications/progress``
    params; the item is None when ``progress`` is not a number, the whole
    None when there is no usable token."""
    try:
        data = coerce(params, dict[str, Any])
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    token = data.get("progressToken")
    if type(token) is not int and type(token) is not str:
        return None
    progress = data.get("progress")
    if type(progress) is not int and type(progress) is not float:
        return token, None
    return token, (progress, data.get("total"), data.get("message"))


def _with_progress_token(params: Any, token: int | str) -> Any:
    if params is UNSET or params is None:
        return {"_meta": {"progressToken": token}}
    if isinstance(params, dict):
        meta = dict(params.get("_meta") or {})
        meta["progressToken"] = token
        return {**params, "_meta": meta}
    if isinstance(params, Struct) and "meta" in params.__struct_fields__:
        meta = params.meta if isinstance(params.meta, dict) else {}  # type: ignore[attr-defined]
        return msgspec.structs.replace(params, meta={**meta, "progressToken": token})
    data = coerce(params, dict[str, Any])
    return _with_progress_token(data, token)
