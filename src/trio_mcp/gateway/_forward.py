"""The gateway's forwarding path for ``tools/call``: a proxy's work, no more.

A session of the gateway (``Gateway.serve`` / ``start_session``) reads its
client through a :class:`ForwardingStream`. A plain ``tools/call`` (params
as JSON, a known tool of a connected handshake-era server) is taken there,
in the session's read loop, and never reaches a handler worker:

* the call is routed and its params rewritten as bytes (the server's own
  tool name, the client's ``arguments`` as they came), and the request is
  written to the server's stream: at once when it is the only call out,
  else with every other request of the same scheduling turn in one write;
* the server's answer is taken by that server's peer (its read loop, see
  :meth:`Peer.expect <trio_mcp.actors._peer.Peer.expect>`) and handed back
  from there with the client's id, its result passed through as JSON, in the
  same way (one write per scheduling turn, or at once when alone).

The rules of the handler path hold: every call has a deadline (the server's
timeout; one heap of deadlines and one timer task per session, instead of a
cancel scope per call) and, past it, the client gets an ``isError`` result
naming the server while the server gets ``notifications/cancelled``; the
client's ``notifications/cancelled`` reaches the server; progress is
relayed with the client's token; a server lost mid-call answers its calls
with an ``isError`` result at once; at most ``max_concurrent_handlers +
max_queued_requests`` calls (and answers not written yet) are out, beyond
which the client gets -32001 (overloaded) at once.

Everything else (other methods, task-augmented calls, stateless-era
requests, unknown or hidden tools, servers down or restarting, JSON-RPC
batches) goes to the session as before: the handler path
(``Gateway._call_tool``) gives the same answers, with its errors.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import msgspec
import outcome
import trio
from msgspec import UNSET, Raw

from ..actors._client import ClientSession
from ..actors._peer import PeerLimits
from ..protocol import (
    META_PROTOCOL_VERSION,
    CallToolResult,
    ErrorResponse,
    Frame,
    InvalidRequest,
    McpError,
    Notification,
    Request,
    Response,
    ServerOverloaded,
    TextContent,
    coerce,
    error_response,
)
from ..transports import MessageStream, TransportError

if TYPE_CHECKING:
    from ..actors._server import ServerSession
    from ._gateway import Gateway

__all__ = ["ForwardingStream"]

_encode: Final = msgspec.json.Encoder().encode


class _ForwardedCall(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``tools/call`` params as a proxy reads them: the name decoded, the
    arguments kept as the client's JSON (``msgspec.Raw``)."""

    name: str
    arguments: Raw | msgspec.UnsetType = UNSET
    meta: dict[str, Any] | msgspec.UnsetType = msgspec.field(default=UNSET, name="_meta")
    #: 2025-11-25 task augmentation: such a call goes through the handler path.
    task: Any = UNSET


read_call: Final = msgspec.json.Decoder(_ForwardedCall)


def forwarded_params(tool: str, arguments: Raw | msgspec.UnsetType, token: int | None = None) -> Raw:
    """``tools/call`` params as JSON: the server's own tool name, the client's
    arguments as they came, and (``token``) our progress token."""
    body = b'{"name":' + _encode(tool)
    if arguments is not UNSET:
        body += b',"arguments":' + bytes(arguments)
    if token is not None:
        body += b',"_meta":{"progressToken":%d}' % token
    return Raw(body + b"}")


def failed_call(text: str) -> CallToolResult:
    """A call that failed at the gateway, as the model reads it."""
    return CallToolResult(content=[TextContent(text=text)], is_error=True)


class _Writer:
    """Messages for one stream, written by one task: what is queued in one
    scheduling turn goes out in one write (``send_batch``), and a message sent
    when nothing else is queued or being written goes out at once, in the
    caller's task, where the stream can (``send_nowait``)."""

    __slots__ = ("_batch", "_busy", "_nowait", "_task", "closed", "queue", "stream")

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.queue: list[Any] = []
        self.closed = False
        self._task: trio.lowlevel.Task | None = None
        self._busy = False
        self._nowait = getattr(stream, "send_nowait", None)
        self._batch = getattr(stream, "send_batch", None)

    def send_soon(self, message: Any, *, alone: bool = False) -> None:
        nowait = self._nowait
        if alone and nowait is not None and not self.queue and not self._busy and nowait(message):
            return
        self.queue.append(message)
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    async def write(self, messages: list[Any]) -> None:
        """Write ``messages`` now (one write where the stream can)."""
        if self._batch is not None:
            await self._batch(messages)
        else:
            for message in messages:
                await self.stream.send(message)

    def _wake(self) -> None:
        task = self._task
        if task is not None:
            self._task = None
            trio.lowlevel.reschedule(task)

    async def run(self) -> None:
        """Write what is queued until closed (or the stream breaks)."""

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._task = None
            return trio.lowlevel.Abort.SUCCEEDED

        while True:
            if not self.queue:
                if self.closed:
                    return
                self._task = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(abort)
                continue
            batch, self.queue = self.queue, []
            self._busy = True
            try:
                await self.write(batch)
            except TransportError:
                # The stream is gone: its reader sees it and ends the session
                # (a server's calls then fail through its peer).
                self.closed = True
                self.queue.clear()
                return
            finally:
                self._busy = False


class _Call:
    """One forwarded call: what its server's peer delivers the answer to."""

    __slots__ = (
        "backend_id",
        "deadline",
        "done",
        "front",
        "front_id",
        "public",
        "server",
        "token",
        "upstream",
    )

    def __init__(
        self, front: ForwardingStream, front_id: int | str, server: str, public: str, upstream: _Upstream
    ) -> None:
        self.front = front
        self.front_id = front_id
        self.server = server
        self.public = public
        self.upstream = upstream
        self.backend_id = 0
        self.deadline = math.inf
        #: The client's progress token (None: it asked for none).
        self.token: Any = None
        self.done = False

    def deliver(self, value: outcome.Outcome[Any]) -> None:
        if not self.done:
            self.front._answered(self, value)

    def deliver_progress(self, item: tuple[float, Any, Any], limit: int) -> bool:
        return self.done or self.front._relay_progress(self, item)

    def __lt__(self, other: _Call) -> bool:  # heap ties (equal deadlines): any order
        return False


class _Upstream:
    """One server session as the forwarding path sees it: its peer and a writer."""

    __slots__ = ("peer", "session", "writer")

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self.peer = session.peer
        self.writer = _Writer(session.peer.stream)


class _Deadlines:
    """The deadlines of a session's forwarded calls: one heap, one timer task
    that sleeps until the earliest. A finished call stays in the heap until
    it comes to the top or the heap is compacted (when it holds more than
    twice the calls still out), so finishing a call costs nothing here."""

    def __init__(self, expire: Callable[[_Call], None], live: Callable[[], int]) -> None:
        self._heap: list[tuple[float, _Call]] = []
        self._expire = expire
        self._live = live
        #: When the timer wakes next (it may be earlier than the heap's top).
        self._armed = math.inf
        self._scope: trio.CancelScope | None = None

    def add(self, call: _Call) -> None:
        heap = self._heap
        heapq.heappush(heap, (call.deadline, call))
        if call.deadline < self._armed and self._scope is not None:
            self._scope.cancel()  # the timer sleeps past this one: wake it to re-arm
        elif len(heap) > 2 * self._live() + 64:
            self._heap = [entry for entry in heap if not entry[1].done]
            heapq.heapify(self._heap)

    def calls(self) -> list[_Call]:
        return [call for _, call in self._heap if not call.done]

    async def run(self) -> None:
        while True:
            heap = self._heap
            now = trio.current_time()
            while heap and (heap[0][1].done or heap[0][0] <= now):
                _, call = heapq.heappop(heap)
                if not call.done:
                    self._expire(call)
            self._armed = heap[0][0] if heap else math.inf
            with trio.CancelScope(deadline=self._armed) as scope:
                self._scope = scope
                await trio.sleep_forever()
            self._scope = None


class ForwardingStream:
    """The gateway session's stream: the client's stream with plain tool
    calls taken out and forwarded (see the module). Everything else passes
    through, both ways."""

    def __init__(self, stream: MessageStream, gateway: Gateway, limits: PeerLimits | None = None) -> None:
        limits = limits or PeerLimits()
        self._inner = stream
        self._gateway = gateway
        self._session: ServerSession | None = None
        self._on = False
        self._calls: dict[int | str, _Call] = {}
        self._capacity = limits.max_concurrent_handlers + limits.max_queued_requests
        self._cancel_send_timeout = limits.cancel_send_timeout
        self._writer = _Writer(stream)
        self._upstreams: dict[str, _Upstream] = {}
        self._deadlines = _Deadlines(self._expire, self._calls.__len__)
        self._nursery: trio.Nursery | None = None
        # statistics
        self._forwarded = 0
        self._overloaded = 0
        self._cancelled = 0
        self._timed_out = 0
        self._progress_dropped = 0

    # ------------------------------------------------------ the stream

    async def receive(self) -> Frame:
        while True:
            frame = await self._inner.receive()
            if not self._on or not self._take(frame):
                return frame

    def receive_nowait(self) -> Frame:
        receive_nowait = self._inner.receive_nowait  # type: ignore[attr-defined]
        while True:
            frame: Frame = receive_nowait()
            if not self._on or not self._take(frame):
                return frame

    async def send(self, message: Any) -> None:
        await self._inner.send(message)

    async def aclose(self) -> None:
        await self._inner.aclose()

    @classmethod
    def over(
        cls, stream: MessageStream, gateway: Gateway, limits: PeerLimits | None = None
    ) -> ForwardingStream:
        """The forwarding stream over ``stream``, able to write batches when it is."""
        kind = _Gathering if getattr(type(stream), "send_batch", None) is not None else cls
        return kind(stream, gateway, limits)

    def statistics(self) -> dict[str, int]:
        inner = getattr(self._inner, "statistics", None)
        return {
            **(inner() if inner is not None else {}),
            "calls_forwarded": self._forwarded,
            "calls_out": len(self._calls),
            "calls_overloaded": self._overloaded,
            "calls_cancelled": self._cancelled,
            "calls_timed_out": self._timed_out,
            "progress_dropped": self._progress_dropped,
        }

    # ------------------------------------------------------- lifecycle

    async def serve(
        self, session: ServerSession, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run ``session`` (made over this stream) with the forwarding path."""
        self._session = session
        # A traced session sees every request through its dispatcher: none is taken from it.
        self._on = session.peer.dispatcher is session
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._writer.run)
                nursery.start_soon(self._deadlines.run)
                try:
                    await session.run(task_status=task_status)
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            self._on = False
            with trio.move_on_after(self._cancel_send_timeout, shield=True):
                await self._abandon()

    async def _abandon(self) -> None:
        """The session ended: the calls still out are cancelled at their servers."""
        calls = self._deadlines.calls()
        self._calls.clear()
        for upstream in self._upstreams.values():
            upstream.writer.close()
            mine = [c for c in calls if c.upstream is upstream]
            for call in mine:
                call.done = True
                upstream.peer.forget(call.backend_id)
            if mine and not upstream.peer.closed:
                try:
                    await upstream.writer.write([_cancelled(c.backend_id, "client gone") for c in mine])
                except TransportError:
                    pass

    # --------------------------------------------------- from the client

    def _take(self, frame: Any) -> bool:
        """Forward (or cancel) ``frame`` here; False: it goes to the session."""
        kind = type(frame)
        if kind is Request:
            return frame.method == "tools/call" and self._forward(frame)
        if kind is Notification and frame.method == "notifications/cancelled" and self._calls:
            return self._client_cancelled(frame.params)
        return False

    def _forward(self, req: Request) -> bool:
        params = req.params
        session = self._session
        if type(params) is not Raw or session is None or not session.initialized:
            return False
        try:
            call = read_call.decode(params)
        except msgspec.ValidationError:
            return False  # the handler path gives the error
        token = None
        meta = call.meta
        if meta is not UNSET:
            if META_PROTOCOL_VERSION in meta:
                return False  # a stateless-era request
            token = meta.get("progressToken")
            if token is not None and type(token) is not int and type(token) is not str:
                return False
        if call.task is not UNSET:
            return False
        route = self._gateway.forwarding_route(call.name)
        if route is None:
            return False
        server, tool, backend = route
        ident = req.id
        calls = self._calls
        if ident in calls:
            self._writer.send_soon(
                error_response(ident, InvalidRequest(f"Duplicate request id {ident!r}")), alone=not calls
            )
            return True
        if len(calls) + len(self._writer.queue) >= self._capacity:
            if len(self._writer.queue) >= self._capacity:
                return False  # the client reads no answers: the session's backpressure applies
            self._overloaded += 1
            self._writer.send_soon(error_response(ident, ServerOverloaded()))
            return True
        upstream = self._upstream(server, backend)
        forwarded = _Call(self, ident, server, call.name, upstream)
        forwarded.token = token
        try:
            forwarded.backend_id = backend_id = upstream.peer.expect(forwarded, progress=token is not None)
        except McpError:
            return False  # closed just now: the handler path waits for the restart
        alone = not calls
        calls[ident] = forwarded
        request = Request(
            id=backend_id,
            method="tools/call",
            params=forwarded_params(tool, call.arguments, None if token is None else backend_id),
        )
        upstream.writer.send_soon(request, alone=alone)
        forwarded.deadline = trio.current_time() + self._gateway.call_timeout(server)
        self._deadlines.add(forwarded)
        self._gateway.count_call(server)
        self._forwarded += 1
        return True

    def _upstream(self, server: str, backend: ClientSession) -> _Upstream:
        upstream = self._upstreams.get(server)
        if upstream is None or upstream.session is not backend:
            if upstream is not None:
                upstream.writer.close()  # a session of the server's past life
            upstream = self._upstreams[server] = _Upstream(backend)
            assert self._nursery is not None
            self._nursery.start_soon(upstream.writer.run)
        return upstream

    def _client_cancelled(self, params: Any) -> bool:
        try:
            data = coerce(params, dict[str, Any])
        except (msgspec.ValidationError, msgspec.DecodeError):
            return False
        ident = data.get("requestId")
        if type(ident) is not int and type(ident) is not str:
            return False
        call = self._calls.pop(ident, None)
        if call is None:
            return False  # not a forwarded call: the session looks
        self._cancelled += 1
        reason = data.get("reason")
        self._drop(call, reason if isinstance(reason, str) else "cancelled by the client")
        return True

    def _drop(self, call: _Call, reason: str) -> None:
        """``call`` is no longer wanted: its server is told so."""
        call.done = True
        upstream = call.upstream
        upstream.peer.forget(call.backend_id)
        if not upstream.writer.closed:
            upstream.writer.send_soon(_cancelled(call.backend_id, reason))

    # --------------------------------------------------- to the client

    def _answered(self, call: _Call, value: outcome.Outcome[Any]) -> None:
        """The server answered (or its session ended): the client's answer."""
        calls = self._calls
        calls.pop(call.front_id, None)
        call.done = True
        if call.token is not None:
            call.upstream.peer.forget(call.backend_id)  # its progress entry
        ident = call.front_id
        if type(value) is outcome.Value:
            msg = value.value
            if type(msg) is Response:
                out: Any = Response(id=ident, result=msg.result)
            else:
                out = ErrorResponse(id=ident, error=msg.error)
                self._gateway.count_error(call.server)
        else:
            error = value.error  # type: ignore[attr-defined]
            why = error.message if isinstance(error, McpError) else str(error)
            out = Response(id=ident, result=failed_call(f"server {call.server!r} is unavailable: {why}"))
            self._gateway.count_error(call.server)
        self._writer.send_soon(out, alone=not calls)

    def _expire(self, call: _Call) -> None:
        """``call`` passed its deadline: the client gets an error result, the server a cancellation."""
        self._calls.pop(call.front_id, None)
        self._timed_out += 1
        timeout = self._gateway.call_timeout(call.server)
        self._drop(call, f"no answer within {timeout} s")
        self._gateway.count_error(call.server)
        text = f"server {call.server!r} did not answer tools/call {call.public!r} within {timeout} s"
        self._writer.send_soon(Response(id=call.front_id, result=failed_call(text)), alone=not self._calls)

    def _relay_progress(self, call: _Call, item: tuple[float, Any, Any]) -> bool:
        if len(self._writer.queue) >= self._capacity:
            self._progress_dropped += 1
            return False
        progress, total, message = item
        params: dict[str, Any] = {"progressToken": call.token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._writer.send_soon(Notification(method="notifications/progress", params=params))
        return True


class _Gathering(ForwardingStream):
    """A forwarding stream over one that writes several messages at once (stdio)."""

    async def send_batch(self, messages: list[Any]) -> None:
        await self._inner.send_batch(messages)  # type: ignore[attr-defined]


def _cancelled(ident: int, reason: str) -> Notification:
    return Notification(method="notifications/cancelled", params={"requestId": ident, "reason": reason})
