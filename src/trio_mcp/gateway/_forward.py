"""The gateway's forwarding path for ``tools/call``: a proxy's work, no more.

A session of the gateway (``Gateway.serve`` / ``start_session``) reads its
client through a :class:`ForwardingStream`. A plain ``tools/call`` (params
as JSON, a known tool of a connected handshake-era server) is taken there,
in the session's read loop, and never reaches a handler worker:

* the call is routed (a route per tool name and session, made once and
  checked per call by identity: the server's session, tool list and
  configuration entry are still the same) and its params rewritten as
  bytes (the server's own tool name, the client's ``arguments`` as they
  came), and the request is written to the server's stream: at once when
  it is the only call out, else with every other request of the same
  scheduling turn in one write;
* the server's answer is taken by that server's peer (its read loop, see
  :meth:`Peer.expect <trio_mcp.actors._peer.Peer.expect>`) and handed back
  from there with the client's id, its result passed through as JSON, in the
  same way (one write per scheduling turn, or at once when alone).

Over stdio both ways, such a call and its answer do not even become frames:
the streams' taps take them as lines, read only as headers (the arguments and
the result kept as the JSON they came as), and pass them on with their ids
(and the tool's name) set: the lines of a read are decoded in one call and
the lines for each side written as JSON lines made in one call
(:mod:`._splice`, :meth:`ForwardingStream.take`).

The rules of the handler path hold: every call has a deadline (the server's
timeout; a FIFO queue of deadlines per timeout and one timer task per
session, instead of a cancel scope per call: see :class:`._pacing.Deadlines`) and, past it, the client gets an ``isError`` result
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

from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio
from msgspec import UNSET, Raw

from ..actors._peer import PeerLimits
from ..protocol import (
    META_PROTOCOL_VERSION,
    Frame,
    InvalidRequest,
    McpError,
    Notification,
    Request,
    Response,
    ServerOverloaded,
    coerce,
    encode_lines,
    error_response,
)
from ..transports import MessageStream, TransportError
from ._pacing import Deadlines, Writer
from ._routes import Call, Route, Upstream, failed_call
from ._splice import Answer, messages, read_heads

if TYPE_CHECKING:
    from ..actors._server import ServerSession
    from ._gateway import Gateway

__all__ = ["ForwardingStream"]

_encode: Final = msgspec.json.Encoder().encode

#: Routes (public tool names) a session remembers; past this, it starts again.
_MAX_ROUTES: Final = 4096


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
        self._calls: dict[int | str, Call] = {}
        self._capacity = limits.max_concurrent_handlers + limits.max_queued_requests
        self._cancel_send_timeout = limits.cancel_send_timeout
        self._writer = Writer(stream)
        self._upstreams: dict[str, Upstream] = {}
        self._routes: dict[str, Route] = {}
        self._deadlines = Deadlines(self._expire, self._calls.__len__)
        self._nursery: trio.Nursery | None = None
        self._clock: trio.abc.Clock | None = None
        self._ready = False  # the session is initialized
        #: The time the current read began (the deadlines of its calls count from it).
        self._now = 0.0
        # The byte path (see ._splice): the reads of the client's stream so
        # far, the answers to write to the client.
        self._reads = 0
        self._answers: list[Answer] = []
        # statistics
        self._forwarded = 0
        self._spliced = 0
        self._overloaded = 0
        self._cancelled = 0
        self._timed_out = 0
        self._progress_dropped = 0

    # ------------------------------------------------------ the stream

    async def receive(self) -> Frame:
        inner = self._inner
        nowait = getattr(inner, "receive_nowait", None)
        while True:
            frame = await inner.receive()
            if not self._on:
                return frame
            assert self._clock is not None
            self._now = self._clock.current_time()
            if not self._take(frame):
                return frame
            if nowait is not None:
                try:
                    return self.receive_nowait()  # the rest of this read
                except trio.WouldBlock:
                    pass

    def receive_nowait(self) -> Frame:
        receive_nowait = self._inner.receive_nowait  # type: ignore[attr-defined]
        forward = self._forward
        if self._on:
            assert self._clock is not None
            self._now = self._clock.current_time()  # once per burst: the deadlines of its calls
        while True:
            frame: Frame = receive_nowait()
            if not self._on:
                return frame
            if type(frame) is Request and frame.method == "tools/call":
                if not forward(frame):
                    return frame
            elif not self._take(frame):
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
            "calls_spliced": self._spliced,
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
        self._clock = trio.lowlevel.current_clock()
        # A traced session sees every request through its dispatcher: none is taken from it.
        self._on = session.peer.dispatcher is session
        tapped = self._on and getattr(type(self._inner), "set_tap", None) is not None
        if tapped:
            self._inner.set_tap(self)  # type: ignore[attr-defined]
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
            if tapped:
                self._inner.set_tap(None)  # type: ignore[attr-defined]
            with trio.move_on_after(self._cancel_send_timeout, shield=True):
                await self._abandon()

    async def _abandon(self) -> None:
        """The session ended: the calls still out are cancelled at their servers."""
        calls = list(self._calls.values())
        self._calls.clear()
        for upstream in self._upstreams.values():
            upstream.writer.close()
            mine = [c for c in calls if c.route.upstream is upstream]
            for call in mine:
                call.done = True
                call.route.forget(call.backend_id)
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

    def take(self, chunk: bytes, ascii: bool) -> tuple[int, list[bytes]]:
        """The complete lines of a read of the client's stream (its tap, see
        :mod:`._splice`): the plain calls of routed tools of servers with
        tapped streams go to them, their ids and tool names set, up to the
        first line that is not one; that line and the rest are returned
        (decoded, they go the frame path)."""
        if not self._ready:
            session = self._session
            if not self._on or session is None or not session.initialized:
                return 0, chunk.split(b"\n")
            self._ready = True
        heads, lines = read_heads(chunk, ascii)
        assert self._clock is not None
        self._now = now = self._clock.current_time()
        self._reads = reads = self._reads + 1
        routes = self._routes
        calls = self._calls
        room = self._capacity - len(self._writer.queue) - len(calls)  # calls this read may add
        taken = 0
        # The route of the last head, and what its calls need, in locals: the
        # calls of a read mostly go to one tool.
        name: str | None = None
        route: Route | None = None
        for head in heads:
            params = head.params
            if params.name != name:
                name = params.name
                route = routes.get(name)
                if route is None or route.checked != reads:
                    route = self._check(name, reads, now)
                    if route is None:
                        break  # the handler path (or the frame path) gives the answer
                ids, tool, deadline = route.ids, route.tool, route.deadline
                at_tap, due, out = route.calls, route.due.append, route.heads.append
            ident = head.id
            if ident in calls or taken >= room:
                break  # the frame path gives the error
            backend_id = next(ids)  # type: ignore[arg-type]
            calls[ident] = call = Call(self, ident, route, None, backend_id, deadline, False)  # type: ignore[arg-type]
            at_tap[backend_id] = call  # type: ignore[index]
            due(call)
            head.id = backend_id  # the call as its server gets it: its id, its tool's name there
            params.name = tool
            out(head)
            taken += 1
        if taken:
            self._forwarded += taken
            self._spliced += taken
            for upstream in self._upstreams.values():
                if upstream.heads:
                    upstream.flush()
            self._deadlines.settle()
            if lines is None and taken == len(heads):
                return taken, []
        return taken, (messages(chunk) if lines is None else lines)[taken:]

    def _check(self, public: str, reads: int, now: float) -> Route | None:
        """The route of ``public`` for the byte path in this read (checked once
        per read: nothing changes in the middle of one); None: not this path."""
        route = self._routes.get(public)
        if route is None or not route.valid(self._gateway):
            route = self._route(public)
        if route is None or route.tap is None or route.tap.closed:
            return None
        route.checked = reads
        route.ids = route.tap.ids
        route.deadline = now + route.timeout
        return route

    def _write_answers(self) -> None:
        """The answers the servers' taps took in one read of theirs, to the client (one write)."""
        answers, self._answers = self._answers, []
        self._writer.send_data(encode_lines(answers))

    def _forward(self, req: Request) -> bool:
        params = req.params
        if type(params) is not Raw:
            return False
        if not self._ready:
            session = self._session
            if session is None or not session.initialized:
                return False
            self._ready = True
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
        route = self._routes.get(call.name)
        if route is None or not route.valid(self._gateway):
            route = self._route(call.name)
            if route is None:
                return False
        ident = req.id
        calls = self._calls
        writer = self._writer
        if ident in calls:
            writer.send_soon(
                error_response(ident, InvalidRequest(f"Duplicate request id {ident!r}")), alone=not calls
            )
            return True
        if len(calls) + len(writer.queue) >= self._capacity:
            if len(writer.queue) >= self._capacity:
                return False  # the client reads no answers: the session's backpressure applies
            self._overloaded += 1
            writer.send_soon(error_response(ident, ServerOverloaded()))
            return True
        forwarded = Call(self, ident, route, token)
        try:
            forwarded.backend_id = backend_id = route.peer.expect(forwarded, progress=token is not None)
        except McpError:
            return False  # closed just now: the handler path waits for the restart
        # The params as JSON, made here: the server's tool name, the client's
        # arguments as they came (and our progress token).
        arguments = call.arguments
        if token is None and type(arguments) is Raw:
            body = b'%s,"arguments":%s}' % (route.head, arguments)  # the common case: one copy
        else:
            body = route.head
            if type(arguments) is Raw:
                body += b',"arguments":' + arguments
            if token is not None:
                body += b',"_meta":{"progressToken":%d}' % backend_id
            body += b"}"
        request = Request(id=backend_id, method="tools/call", params=Raw(body))
        route.upstream.writer.send_soon(request, alone=not calls)
        calls[ident] = forwarded
        timeout = route.timeout
        forwarded.deadline = self._now + timeout
        self._deadlines.add(forwarded, timeout)
        route.counts.calls += 1
        self._forwarded += 1
        return True

    def _route(self, public: str) -> Route | None:
        """A new route for ``public`` (None: the handler path takes its calls)."""
        found = self._gateway.forwarding_route(public)
        if found is None:
            self._routes.pop(public, None)
            return None
        server, tool, conn, backend = found
        upstream = self._upstreams.get(server)
        if upstream is None or upstream.session is not backend:
            if upstream is not None:
                upstream.writer.close()  # a session of the server's past life
            upstream = self._upstreams[server] = Upstream(backend, self._gateway.counts(server))
            assert self._nursery is not None
            self._nursery.start_soon(upstream.writer.run)
        if len(self._routes) >= _MAX_ROUTES:
            self._routes.clear()  # names of tools gone by: start again
        route = Route(public, server, tool, conn, upstream, self._gateway, self._deadlines)
        self._routes[public] = route
        return route

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

    def _drop(self, call: Call, reason: str) -> None:
        """``call`` is no longer wanted: its server is told so."""
        call.done = True
        upstream = call.route.upstream
        call.route.forget(call.backend_id)
        if not upstream.writer.closed:
            upstream.writer.send_soon(_cancelled(call.backend_id, reason))

    # --------------------------------------------------- to the client

    def _expire(self, call: Call) -> None:
        """``call`` passed its deadline: the client gets an error result, the server a cancellation."""
        self._calls.pop(call.front_id, None)
        self._timed_out += 1
        route = call.route
        timeout = route.timeout
        self._drop(call, f"no answer within {timeout} s")
        route.counts.errors += 1
        text = f"server {route.server!r} did not answer tools/call {route.public!r} within {timeout} s"
        self._writer.send_soon(Response(id=call.front_id, result=failed_call(text)), alone=not self._calls)

    def _relay_progress(self, call: Call, item: tuple[float, Any, Any]) -> bool:
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
