"""Stateless requests (2026-07-28 era): requests that carry their version
and client capabilities in ``_meta`` and no ``Mcp-Session-Id``.

The validation ladder (envelope, mirrored headers, removed methods, the
``Mcp-Param-*`` headers of a ``tools/call``), and the inline path: a
request of a shared app is served in its POST's own ASGI task by one
server session that serves them all (:meth:`~trio_mcp.actors.Peer.serve_inline`),
its notifications travelling on that POST's SSE stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio
from msgspec import Struct

from ...actors._server import ServerSession
from ...protocol import (
    HANDSHAKE_VERSIONS,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
    V2025_03_26,
    ErrorResponse,
    Frame,
    HeaderMismatch,
    Notification,
    Request,
    Response,
    coerce,
    encode,
    error_response,
)
from ...transports._asgi import HttpError, Scope, Send, respond, start_event_stream
from ...transports._base import REQUEST_HEADERS, TransportClosed
from ...transports.http._sse import PING, format_event
from ._config import ERROR_STATUS, VERSION_HEADER, Mode, answer_mode
from ._stateless_checks import (
    ParamHeaderCheck,
    mirrors_plainly,
    rejection,
    request_parts,
    typed_request,
)
from ._watch import Guard

if TYPE_CHECKING:
    from ._app import StreamableHttpApp

__all__ = ["StatelessPath", "rejection", "request_parts", "typed_request"]


class _MetaOnly(Struct):
    meta: dict[str, Any] = msgspec.field(default_factory=dict, name="_meta")


class _NoWire:
    """The stream of the server session that serves stateless requests in
    their own ASGI tasks: what it says while serving one goes into that
    request's answer (see :meth:`~trio_mcp.actors.Peer.serve_inline`);
    anything else has nowhere to go."""

    async def send(self, message: Any) -> None:
        raise TransportClosed(
            "a stateless request's server session speaks only through that request's answer"
        )

    async def receive(self) -> Frame:
        await trio.lowlevel.checkpoint()
        raise trio.EndOfChannel

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


_JSON_TYPE: Final = (b"content-type", b"application/json")


class _InlineAnswer:
    """The HTTP answer of a stateless request served in its own ASGI task:
    one JSON body, or an SSE stream carrying the handler's notifications,
    then the answer (``sse`` mode, or ``auto`` mode once the handler
    notifies). No event ids: nothing of a stateless request can be resumed.
    The stream starts with the first thing it carries (a notification, a
    keep-alive comment, the answer), so an answer that comes first goes out
    like a JSON one: the response's start, then one body write that ends it.
    Runs in the POST's :class:`Guard` scope; an SSE stream's keep-alive
    comments come from the POST's watcher."""

    __slots__ = ("app", "error_status", "guard", "lock", "mode", "send", "sse_ok", "started")

    def __init__(
        self,
        app: StreamableHttpApp,
        send: Send,
        mode: Mode,
        sse_ok: bool,
        guard: Guard,
        error_status: bool,
    ) -> None:
        self.app = app
        self.error_status = error_status
        self.send = send
        self.mode: Mode = mode
        self.sse_ok = sse_ok
        self.guard = guard
        self.started = False
        #: Serialises the SSE writes (the handler's, the watcher's pings); made with the stream.
        self.lock: trio.Lock | None = None
        if mode == "sse":
            guard.keep_alive(self._ping, app.settings.ping_interval)

    async def start_sse(self) -> None:
        self.mode = "sse"
        self.started = True
        self.lock = lock = trio.Lock()
        self.app._sse_connections += 1
        self.guard.keep_alive(self._ping, self.app.settings.ping_interval)
        async with lock:
            with trio.fail_after(self.app.settings.write_timeout):
                await start_event_stream(self.send)

    async def notify(self, note: Notification) -> None:
        """A notification of the handler (progress, a log message)."""
        if not self.started:
            if self.mode == "json" or not self.sse_ok:
                self.app._dropped += 1  # a JSON answer cannot carry it
                return
            await self._guarded(self.start_sse())
        await self._guarded(self._write(format_event(None, encode(note))))

    async def _guarded(self, write: Any) -> None:
        try:
            await write
        except trio.TooSlowError:
            # The client does not read: give up the request (the handler is
            # cancelled at its next checkpoint).
            self.end()

    def end(self) -> None:
        """Give up the request: cancel its handler (or its answer's write)."""
        self.guard.scope.cancel()

    async def _write(self, data: bytes, more: bool = True) -> None:
        assert self.lock is not None  # only on a started SSE stream
        async with self.lock:
            with trio.fail_after(self.app.settings.write_timeout):
                await self.send({"type": "http.response.body", "body": data, "more_body": more})

    async def _ping(self) -> None:
        """A keep-alive comment, from the POST's watcher (see :class:`Guard`)."""
        if not self.started:
            await self._guarded(self.start_sse())
        await self._guarded(self._write(PING))

    async def finish(self, reply: Response | ErrorResponse) -> None:
        """Write the answer and end the response, bounded by ``write_timeout``
        and out of reach of the disconnect watcher (see :meth:`Guard.writing`)."""
        self.guard.writing(self.app.settings.write_timeout)
        if self.started:
            await self._write(format_event(None, encode(reply)), more=False)  # with the end
            return
        if self.mode == "sse":  # the answer first: the whole stream, its length known
            self.started = True
            self.app._sse_connections += 1
            body = format_event(None, encode(reply))
            await start_event_stream(self.send, [(b"content-length", b"%d" % len(body))])
            await self.send({"type": "http.response.body", "body": body, "more_body": False})
            return
        status = 200
        if self.error_status and type(reply) is ErrorResponse:
            status = ERROR_STATUS.get(reply.error.code, 200)  # the stateless era gives errors a status
        body = encode(reply)
        send = self.send  # (respond, unrolled: one JSON answer)
        headers = [(b"content-length", b"%d" % len(body)), _JSON_TYPE]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


def _made_for(app: Any) -> tuple[Any, ...]:
    """What a long-lived server session of ``app`` depends on: its methods
    (the capabilities it declares) and its middleware; a new one is made
    when they change. Methods are only ever added (a handler registered
    again replaces its method's), so the mapping and its size tell."""
    handlers = app.request_handlers
    return (handlers, len(handlers), getattr(app, "middleware", ()))


class StatelessPath:
    """The stateless requests of one :class:`StreamableHttpApp`: which POSTs
    are stateless, the ``Mcp-Param-*`` check, and the inline path."""

    def __init__(self, app: StreamableHttpApp) -> None:
        self.app = app
        #: The server session serving stateless requests inline (see serve_inline).
        self._stateless: Any = None
        self._stateless_methods: tuple[Any, ...] = ()
        #: With ``stateless=True``: a server session per handshake version, and
        #: the app's methods they were made for.
        self._handshake: dict[str, Any] = {}
        self._handshake_methods: tuple[Any, ...] = ()
        #: Stateless requests being answered inline (cancelled when the server stops).
        self._inline_answers: set[_InlineAnswer] = set()
        #: The ``Mcp-Param-*`` check of a stateless ``tools/call``.
        self.params = ParamHeaderCheck()

    def end(self) -> None:
        """The server stops: cancel every request being answered inline."""
        for answer in list(self._inline_answers):
            answer.end()
        self._stateless = None
        self._handshake.clear()

    def is_stateless(self, headers: dict[str, str], requests: list[Request]) -> bool:
        version = headers.get(VERSION_HEADER)
        if version is not None:
            # Any version but a handshake one, without a session: a stateless
            # request (an unknown version is answered -32022 with what we support).
            return version.strip() not in HANDSHAKE_VERSIONS
        if not requests:
            return False
        for req in requests:
            try:
                meta = coerce(req.params, _MetaOnly).meta
            except (msgspec.ValidationError, msgspec.DecodeError):
                return False
            if meta.get(META_PROTOCOL_VERSION) not in MODERN_VERSIONS:
                return False
        return True

    async def serve_post(
        self,
        request: Request,
        scope: Scope,
        headers: dict[str, str],
        json_ok: bool,
        sse_ok: bool,
        guard: Guard,
        send: Send,
    ) -> None:
        """A POST of one stateless request (not ``subscriptions/listen``) to a
        shared app, served in this ASGI task by the one server session that
        serves them all (:meth:`~trio_mcp.actors.Peer.serve_inline`): no
        session actor and no channels per request. Its params are decoded
        once (:func:`typed_request`) for the validation ladder, the session
        and the handler. The handler's notifications go on this request's SSE
        stream (``auto`` mode switches to SSE for the first one); the client
        going away cancels the handler."""
        request, parts = typed_request(request, self.app._shared)
        if not mirrors_plainly(headers, request, parts):
            rejected = rejection(headers, request, parts)
            if rejected is not None:
                status, error = rejected
                await respond(send, status, encode(error_response(request.id, error)))
                return
        self.app.check_taking_work()
        server = self.server()
        if request.method == "tools/call" and headers.get(VERSION_HEADER, "").strip() in MODERN_VERSIONS:
            # Last rung: the Mcp-Param-* headers against the tool's schema (-32020).
            problem = await self.params.problem(server, scope, headers, request, parts)
            if problem is not None:
                await respond(send, 400, encode(error_response(request.id, HeaderMismatch(problem))))
                return
        await self._answer(server, request, headers, json_ok, sse_ok, guard, send, error_status=True)

    async def serve_handshake(
        self,
        frame: Frame | list[Frame],
        requests: list[Request],
        headers: dict[str, str],
        json_ok: bool,
        sse_ok: bool,
        guard: Guard,
        send: Send,
    ) -> None:
        """A handshake-era POST to a server with ``stateless=True``: answered on
        its own, without a session. ``initialize`` is answered by a fresh server
        session (no ``Mcp-Session-Id``); every other request by a server session
        of the shared app that takes the version of ``MCP-Protocol-Version`` (or
        2025-03-26 without it) as negotiated, with a client that declared no
        capabilities. Notifications and responses are accepted (``202``) and
        dropped: there is no session for them."""
        self.app.check_taking_work()
        if type(frame) is list:
            raise HttpError(
                400, "Invalid Request: this server is stateless and takes no batches", code=-32600
            )
        if not requests:
            await respond(send, 202, b"")
            return
        request = requests[0]
        app = self.app._shared
        if request.method == "initialize":
            server = ServerSession(app, _NoWire(), limits=app.limits, name="http:stateless")
        else:
            version = headers.get(VERSION_HEADER, "").strip() or V2025_03_26
            server = self._handshake_server(version)
        await self._answer(server, request, headers, json_ok, sse_ok, guard, send, error_status=False)

    def _handshake_server(self, version: str) -> Any:
        app = self.app._shared
        methods = _made_for(app)
        if methods != self._handshake_methods:
            self._handshake.clear()  # a session works out its capabilities once
            self._handshake_methods = methods
        server = self._handshake.get(version)
        if server is None:
            server = ServerSession(app, _NoWire(), limits=app.limits, name=f"http:stateless:{version}")
            server.assume_initialized(version)
            self._handshake[version] = server
        return server

    async def _answer(
        self,
        server: Any,
        request: Request,
        headers: dict[str, str],
        json_ok: bool,
        sse_ok: bool,
        guard: Guard,
        send: Send,
        *,
        error_status: bool,
    ) -> None:
        """Serve ``request`` in this task with ``server`` and write its answer,
        in the POST's ``guard`` scope: the client going away cancels the
        handler (noticed once it has run ``disconnect_watch_delay``)."""
        app = self.app
        mode = answer_mode(app.settings.json_response, json_ok, sse_ok)
        app.response_started()
        answer = _InlineAnswer(app, send, mode, sse_ok, guard, error_status)
        self._inline_answers.add(answer)
        guard.watch.add(guard)  # (watch_after_delay)
        try:
            token = REQUEST_HEADERS.set((server.peer, headers))
            try:
                reply = await server.peer.serve_inline(request, answer.notify)
            finally:
                REQUEST_HEADERS.reset(token)
            await answer.finish(reply)
        except (trio.TooSlowError, TransportClosed):
            pass  # the client does not read, or the server stopped: drop the connection
        finally:
            self._inline_answers.discard(answer)
            if answer.started:
                self.app._sse_connections -= 1
            self.app.response_ended()

    def server(self) -> Any:
        """The server session of the shared app that serves stateless requests
        in their own ASGI tasks (made on first use)."""
        app = self.app._shared
        methods = _made_for(app)
        server = self._stateless
        if server is None or methods != self._stateless_methods:
            # A new one when the app's handlers change: a session works out
            # the capabilities it declares (and gates) once.
            server = self._stateless = ServerSession(app, _NoWire(), limits=app.limits, name="http:stateless")
            server.task_nursery = self.app._nursery  # tasks outlive the request that started them
            self._stateless_methods = methods
        return server
