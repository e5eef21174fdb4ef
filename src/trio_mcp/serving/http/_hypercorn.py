"""How :class:`HttpServer` runs hypercorn: its trio worker's connections,
with an HTTP/1.1 protocol that writes a sized answer in one socket write.

Stock hypercorn (0.18) turns an ASGI answer into three writes on the
socket: the head on ``http.response.start``, the body, then the end of the
message (empty for a ``content-length`` answer, still a locked, shielded,
checkpointing ``send_all``). :class:`OneWriteH11Protocol` holds the head of
a final answer that has a ``content-length`` until the next thing the
connection sends (its first body chunk, the end of an empty body, or
anything else, such as closing) and writes them together; it never writes
empty data. An answer without a length (an SSE stream, a chunked body) and
a ``1xx`` go out at once, as before: only bytes the client could not use
without the body that follows are ever held.

The protocol class is chosen per connection by :class:`Connection`, a
subclass of hypercorn's own ``TCPServer`` that :func:`serve` (hypercorn's
trio worker loop for plain-TCP binds, without the ASGI lifespan, which
:class:`HttpServer` runs itself) hands to ``trio.serve_listeners``: nothing
global changes, so any other hypercorn server in the process (the benchmark
floor, an :class:`~trio_mcp.transports.sse.SseServer`) stays stock. HTTP/2
(prior knowledge or an ``h2c`` upgrade) switches to hypercorn's own
``H2Protocol`` as before.

This leans on hypercorn's internals (``TCPServer.protocol``,
``ProtocolWrapper.protocol``, ``H11Protocol.send`` and ``stream_send``):
``pyproject.toml`` pins the minor version, and
``tests/serving/http/test_hypercorn.py`` counts the writes per answer.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config
from hypercorn.events import Event, RawData
from hypercorn.protocol import ProtocolWrapper
from hypercorn.protocol.events import Event as StreamEvent
from hypercorn.protocol.events import Response
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import repr_socket_addr

__all__ = ["Connection", "IdleTimer", "OneWriteH11Protocol", "serve"]

_LENGTH = b"content-length"


def _sized(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, _ in headers:
        if name.lower() == _LENGTH:
            return True
    return False


class OneWriteH11Protocol(H11Protocol):
    """hypercorn's HTTP/1.1 protocol, writing a sized answer's head together
    with what follows it, and no empty writes (see the module)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        #: The connection's own write (``TCPServer.protocol_send``).
        self._write: Callable[[Event], Awaitable[None]] = self.send
        self.send = self._send
        self._holding = False
        self._held = b""

    async def stream_send(self, event: StreamEvent) -> None:
        if type(event) is Response and event.status_code >= 200 and _sized(event.headers):
            self._holding = True
            try:
                await super().stream_send(event)
            finally:
                self._holding = False
        else:
            await super().stream_send(event)

    async def _send(self, event: Event) -> None:
        held = self._held
        if type(event) is RawData:
            if held:
                self._held = b""
                event = RawData(data=held + event.data)
            if self._holding:
                self._held = event.data
            elif event.data:
                await self._write(event)
            return
        if held:  # closing, or idle again: what is held goes first
            self._held = b""
            await self._write(RawData(data=held))
        await self._write(event)


class IdleTimer:
    """A connection's keep-alive timeout, in place of hypercorn's
    ``idle_task`` (a ``SingleTask``, which starts a task each time the
    connection turns idle, under a lock, and cancels it when a request
    comes): one task for the connection's life, whose deadline moves.

    Idle (:meth:`restart`), the connection closes ``keep_alive_timeout``
    seconds on, or at once when the server stops; busy (:meth:`stop`), never
    by this timer (after its answer the protocol closes a connection of a
    server that stops). :meth:`end` ends the task when the connection's
    reading is over."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._idle = False
        self._deadline = math.inf
        self._scope: trio.CancelScope | None = None
        self._started = False
        self._ended = False

    async def restart(self, task_group: Any, action: object) -> None:
        self._idle = True
        self._deadline = deadline = trio.current_time() + self._connection.config.keep_alive_timeout
        if self._scope is not None:
            self._scope.deadline = deadline
        elif not self._started:
            self._started = True
            task_group._nursery.start_soon(self._watch)

    async def stop(self) -> None:
        self._idle = False
        if self._scope is not None:
            self._scope.deadline = math.inf

    def end(self) -> None:
        self._ended = True
        if self._scope is not None:
            self._scope.cancel()

    async def _watch(self) -> None:
        terminated = self._connection.context.terminated
        while not self._ended:
            with trio.CancelScope(deadline=self._deadline if self._idle else math.inf) as scope:
                self._scope = scope
                await terminated.wait()
            self._scope = None
            if self._ended:
                return
            stopping = terminated.is_set()
            if self._idle and (stopping or trio.current_time() >= self._deadline):
                with trio.CancelScope(shield=True):
                    await self._connection._initiate_server_close()
                return
            if stopping:
                return  # busy: closed after its answer
            # served a request between the deadline and this task's turn: watch on


class Connection(TCPServer):
    """hypercorn's trio connection, serving HTTP/1.1 with
    :class:`OneWriteH11Protocol`, its keep-alive timeout an :class:`IdleTimer`."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._timer = IdleTimer(self)
        self.idle_task = self._timer  # type: ignore[assignment]  # the same two methods

    async def _read_data(self) -> None:
        try:
            await super()._read_data()
        finally:
            self._timer.end()

    @property
    def protocol(self) -> ProtocolWrapper:
        return self._wrapper

    @protocol.setter
    def protocol(self, wrapper: ProtocolWrapper) -> None:
        # TCPServer.run makes the wrapper, which makes a stock H11Protocol
        # (or H2Protocol, by ALPN): swap the former for ours before use.
        if type(wrapper.protocol) is H11Protocol:
            wrapper.protocol = OneWriteH11Protocol(
                wrapper.app,
                wrapper.config,
                wrapper.context,
                wrapper.task_group,
                wrapper.state,
                wrapper.ssl,
                wrapper.client,
                wrapper.server,
                wrapper.send,
            )
        self._wrapper = wrapper


async def serve(
    app: Any,
    config: Config,
    shutdown_trigger: Callable[[], Awaitable[object]],
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the ASGI ``app`` on ``config.bind`` (plain TCP: ``host:port``
    or ``fd://N``) with :class:`Connection` s until ``shutdown_trigger``
    returns; then stop accepting and give the open connections
    ``config.graceful_timeout`` seconds. Reports the bound URLs."""
    sockets = config.create_sockets()
    if sockets.secure_sockets or sockets.quic_sockets:
        raise ValueError("serve() serves plain TCP binds only")
    listeners = []
    binds = []
    for sock in sockets.insecure_sockets:
        sock.listen(config.backlog)
        listeners.append(trio.SocketListener(trio.socket.from_stdlib_socket(sock)))
        binds.append(f"http://{repr_socket_addr(sock.family, sock.getsockname())}")
    context = WorkerContext(None)
    handler = partial(Connection, ASGIWrapper(app), config, context, ConnectionState({}))
    async with trio.open_nursery() as connections:
        async with trio.open_nursery() as accepting:
            accepting.start_soon(
                partial(trio.serve_listeners, handler, listeners, handler_nursery=connections)
            )
            task_status.started(binds)
            await shutdown_trigger()
            accepting.cancel_scope.cancel()
        await context.terminated.set()  # idle connections close, the others when done
        connections.cancel_scope.deadline = trio.current_time() + config.graceful_timeout
