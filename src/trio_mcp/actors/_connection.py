"""A client connection that survives its server.

The transport and the session of one connection are supervised together
(one-for-all: one child that owns both). When the transport drops — the
server process exits or is killed, stdout closes, garbage arrives, the HTTP or
WebSocket connection is lost, or the health check times out — every in-flight
call fails at once with :class:`ConnectionClosed`; the pair restarts with
backoff, re-initializes, restores what the user set up (resource
subscriptions, log level, roots), refreshes the tool / prompt / resource
lists, and publishes events. Calls made while it reconnects wait up to
``ConnectionSettings.reconnect_wait`` seconds, then fail clearly.

By default a connection gives up (after ``start_retries`` failed first
starts, or more than ``max_restarts`` restarts within ``max_seconds``) and
raises :class:`ConnectionClosed`. With ``retry_forever=True`` (what the
gateway uses) it never gives up: every failure is retried, the delay growing
up to ``backoff.maximum``, for as long as the connection runs; ``run``
reports started at once and :meth:`Connection.wait_settled` waits for the
first attempt's outcome; while its last start attempt failed, calls fail at
once with the reason instead of waiting.

A transport is any actor whose ``run(task_status=...)`` reports a
:class:`MessageStream` (``StdioTransport``, ``StreamableHttpTransport``, …);
the connection takes a factory, because each restart needs a fresh one.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs
import msgspec
import trio

from ..protocol import (
    CallToolResult,
    ConnectionClosed,
    GetPromptResult,
    McpError,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Root,
    Tool,
)
from ..supervision import (
    Backoff,
    ChildSpec,
    OnStartFailure,
    Restart,
    RestartScheduled,
    StartFailed,
    Supervisor,
    SupervisorEscalation,
)
from ..transports import TransportError
from ._actor import ExitReason
from ._client import ClientSession

__all__ = [
    "Connected",
    "Connection",
    "ConnectionEvent",
    "ConnectionFailed",
    "ConnectionSettings",
    "Disconnected",
    "HealthCheckFailed",
    "ListsRefreshed",
    "ReconnectScheduled",
    "TransportActor",
    "TransportFactory",
]

log = logging.getLogger("trio_mcp.connection")


class TransportActor(Protocol):
    async def run(self, *, task_status: trio.TaskStatus[Any] = ...) -> Any: ...


TransportFactory = Callable[[], TransportActor]


@attrs.frozen(kw_only=True)
class ConnectionSettings:
    """How a connection restarts and checks its server."""

    #: Delay between restarts: exponential with full jitter; the attempt
    #: counter resets after the connection stayed up ``reset_after`` seconds.
    backoff: Backoff = Backoff(initial=0.1, maximum=10.0, multiplier=2.0, reset_after=30.0)  # noqa: RUF009 (frozen)
    #: More than ``max_restarts`` restarts within ``max_seconds`` gives up.
    max_restarts: int = 10
    max_seconds: float = 60.0
    #: Attempts of a first start that fails (missing binary, failed handshake)
    #: before the connection gives up: no crash loop.
    start_retries: int = 2
    #: Seconds one start (spawn + handshake + restore) may take.
    start_timeout: float = 30.0
    #: Seconds between health pings (None: no health check).
    ping_interval: float | None = None
    #: Seconds a health ping may take before the server is restarted.
    ping_timeout: float = 10.0
    #: Seconds a call waits for a reconnect before it fails.
    reconnect_wait: float = 10.0
    #: Seconds the pair gets to shut down before it is cancelled hard.
    shutdown_grace: float = 5.0
    #: Bound of the events channel; when full, the oldest event is dropped.
    event_buffer: int = 256
    #: Never give up: ``start_retries`` and ``max_restarts`` are ignored and
    #: every failure is retried after a backoff delay capped at
    #: ``backoff.maximum``; ``run`` reports started before the first connect.
    retry_forever: bool = False


# ----------------------------------------------------------------- events


@attrs.frozen
class Connected:
    """The pair is up: initialized and restored."""

    name: str
    server: str
    protocol_version: str | None
    connects: int


@attrs.frozen
class Disconnected:
    """The pair went down; ``reason`` says why."""

    name: str
    reason: str


@attrs.frozen
class ReconnectScheduled:
    """The pair restarts in ``delay`` seconds (attempt ``attempt``)."""

    name: str
    delay: float
    attempt: int


@attrs.frozen
class ListsRefreshed:
    """The server's lists were fetched again (after a connect or a list change)."""

    name: str
    tools: int
    prompts: int
    resources: int


@attrs.frozen
class ConnectionFailed:
    """The connection gave up (start failures or restart intensity)."""

    name: str
    reason: str


ConnectionEvent = Connected | Disconnected | ReconnectScheduled | ListsRefreshed | ConnectionFailed


class HealthCheckFailed(ConnectionClosed):
    """The server did not answer a health ping in time."""


class _Lost(Exception):
    """The pair's transport or session ended: restart it."""


class Connection:
    """A supervised client connection to one server. ``await nursery.start(conn.run)``
    returns once the first connect succeeded (or raises its start failure)."""

    def __init__(
        self,
        transport: TransportFactory,
        *,
        name: str = "server",
        settings: ConnectionSettings | None = None,
        roots: Sequence[Root] | None = None,
        **client_options: Any,
    ) -> None:
        self.name = name
        self.settings = settings or ConnectionSettings()
        self._factory = transport
        self._client_options = client_options
        self._roots: list[Root] | None = list(roots) if roots is not None else None
        self._subscriptions: set[str] = set()
        self._log_level: str | None = None
        self._session: ClientSession | None = None
        #: Set (and replaced) at every state change: connected, lost, gave up.
        self._changed = trio.Event()
        self._failed: str | None = None
        self._connects = 0
        self._disconnects = 0
        #: Why the last start attempt failed (cleared by a connect): calls fail at once meanwhile.
        self._start_error: str | None = None
        self._last_error: str | None = None
        self._restarts = 0
        self._connected_at: float | None = None
        self._transport: TransportActor | None = None
        self._settled = trio.Event()
        self.tools: list[Tool] = []
        self.prompts: list[Prompt] = []
        self.resources: list[Resource] = []
        self.resource_templates: list[ResourceTemplate] = []
        self._events_send, self._events_recv = trio.open_memory_channel[ConnectionEvent](
            self.settings.event_buffer
        )
        self._events_dropped = 0
        self._user_tools_changed = client_options.pop("on_tools_changed", None)
        self._user_prompts_changed = client_options.pop("on_prompts_changed", None)
        self._user_resources_changed = client_options.pop("on_resources_changed", None)

    # ------------------------------------------------------------------ run

    async def run(self, *, task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED) -> ExitReason:
        s = self.settings
        forever = s.retry_forever
        spec = ChildSpec(
            id=self.name,
            start=self._pair,
            restart=Restart.PERMANENT,
            shutdown_grace=s.shutdown_grace,
            start_timeout=s.start_timeout,
            start_retries=sys.maxsize if forever else s.start_retries,
            on_start_failure=OnStartFailure.ESCALATE,
            backoff=s.backoff,
        )
        supervisor = Supervisor(
            [spec], max_restarts=sys.maxsize if forever else s.max_restarts, max_seconds=s.max_seconds
        )
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch, supervisor)
                if forever:
                    nursery.start_soon(supervisor.run)
                else:
                    await nursery.start(supervisor.run)
                task_status.started(self)
        except SupervisorEscalation as exc:
            reason = _describe(exc.__cause__ or exc)
            self._give_up(reason)
            raise ConnectionClosed(f"{self.name}: gave up: {reason}") from exc
        except BaseExceptionGroup as group:
            esc = group.subgroup(SupervisorEscalation)
            if esc is None:
                raise
            first = esc.exceptions[0]
            reason = _describe(first.__cause__ or first)
            self._give_up(reason)
            raise ConnectionClosed(f"{self.name}: gave up: {reason}") from None
        finally:
            if self._failed is None:
                self._failed = "connection closed"  # a clean close: no ConnectionFailed event
                self._state_changed()
            self._settled.set()
            self._events_send.close()
        return ExitReason("closed", "connection closed")

    def _give_up(self, reason: str) -> None:
        if self._failed is None:
            self._failed = reason
            self._emit(ConnectionFailed(self.name, reason))
        self._state_changed()

    def _state_changed(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _watch(self, supervisor: Supervisor) -> None:
        async for event in supervisor.events():
            if isinstance(event, RestartScheduled):
                self._restarts += 1
                self._emit(ReconnectScheduled(self.name, event.delay, event.attempt))
            elif isinstance(event, StartFailed):
                reason = f"start failed: {_describe(event.exc)}"
                self._start_error = self._last_error = reason
                self._settled.set()
                self._state_changed()
                self._emit(Disconnected(self.name, reason))
                if event.retry_delay is not None:
                    self._restarts += 1
                    self._emit(ReconnectScheduled(self.name, event.retry_delay, event.attempt))

    async def _pair(self, *, task_status: trio.TaskStatus[ClientSession] = trio.TASK_STATUS_IGNORED) -> None:
        """One life of the pair: transport + session, restored. Raises to restart."""
        session: ClientSession | None = None
        try:
            async with trio.open_nursery() as nursery:
                self._transport = transport = self._factory()
                stream = await nursery.start(transport.run)
                session = ClientSession(
                    stream,
                    roots=self._roots,
                    on_tools_changed=self._tools_changed,
                    on_prompts_changed=self._prompts_changed,
                    on_resources_changed=self._resources_changed,
                    name=self.name,
                    **self._client_options,
                )
                await nursery.start(session.run)
                await self._restore(session)
                self._connects += 1
                self._session = session
                self._start_error = None
                self._connected_at = trio.current_time()
                self._settled.set()
                self._state_changed()
                task_status.started(session)
                info = session.server_info
                self._emit(
                    Connected(self.name, info.name if info else "?", session.protocol_version, self._connects)
                )
                if self.settings.ping_interval is not None:
                    nursery.start_soon(self._health, session)
                await session.peer.wait_stopped()
                raise _Lost(session.peer._closed_reason or "connection lost")
        except BaseException as exc:
            if session is not None and self._session is session:
                self._session = None
                self._connected_at = None
                self._last_error = _describe(exc)
                self._state_changed()
                self._disconnects += 1
                self._emit(Disconnected(self.name, self._last_error))
            raise

    async def _restore(self, session: ClientSession) -> None:
        if self._log_level is not None and session.supports("logging/setLevel"):
            await session.set_logging_level(self._log_level)
        for uri in sorted(self._subscriptions):
            await session.subscribe_resource(uri)
        await self._refresh(session)

    async def _refresh(self, session: ClientSession) -> None:
        if session.supports("tools/list"):
            self.tools = await session.list_all_tools()
        if session.supports("prompts/list"):
            self.prompts = await session.list_all_prompts()
        if session.supports("resources/list"):
            self.resources = await session.list_all_resources()
            self.resource_templates = await session.list_all_resource_templates()
        self._emit(ListsRefreshed(self.name, len(self.tools), len(self.prompts), len(self.resources)))

    async def _health(self, session: ClientSession) -> None:
        s = self.settings
        assert s.ping_interval is not None
        while True:
            await trio.sleep(s.ping_interval)
            with trio.move_on_after(s.ping_timeout) as scope:
                await session.ping()
            if scope.cancelled_caught:
                raise HealthCheckFailed(f"{self.name}: no answer to a ping within {s.ping_timeout} s")

    async def _tools_changed(self) -> None:
        session = self._session
        if session is not None:
            self.tools = await session.list_all_tools()
            self._emit(ListsRefreshed(self.name, len(self.tools), len(self.prompts), len(self.resources)))
        if self._user_tools_changed is not None:
            await self._user_tools_changed()

    async def _prompts_changed(self) -> None:
        session = self._session
        if session is not None:
            self.prompts = await session.list_all_prompts()
            self._emit(ListsRefreshed(self.name, len(self.tools), len(self.prompts), len(self.resources)))
        if self._user_prompts_changed is not None:
            await self._user_prompts_changed()

    async def _resources_changed(self) -> None:
        session = self._session
        if session is not None:
            self.resources = await session.list_all_resources()
            self._emit(ListsRefreshed(self.name, len(self.tools), len(self.prompts), len(self.resources)))
        if self._user_resources_changed is not None:
            await self._user_resources_changed()

    # --------------------------------------------------------------- events

    def _emit(self, event: ConnectionEvent) -> None:
        try:
            self._events_send.send_nowait(event)
        except trio.WouldBlock:
            # Drop the oldest, keep the newest: supervision never blocks on a reader.
            try:
                self._events_recv.receive_nowait()
            except trio.WouldBlock:
                pass
            self._events_dropped += 1
            try:
                self._events_send.send_nowait(event)
            except (trio.WouldBlock, trio.ClosedResourceError):
                pass
        except trio.ClosedResourceError:
            pass

    def events(self) -> trio.MemoryReceiveChannel[ConnectionEvent]:
        """The connection's events (one shared, bounded channel)."""
        return self._events_recv

    def statistics(self) -> dict[str, Any]:
        return {
            "connected": self._session is not None,
            "connects": self._connects,
            "disconnects": self._disconnects,
            "restarts": self._restarts,
            "events_dropped": self._events_dropped,
            "failed": self._failed,
        }

    @property
    def state(self) -> str:
        """``connected``; ``starting`` (no connect yet, first attempt under way);
        ``down`` (the last start attempt failed; retried after a backoff);
        ``reconnecting`` (lost, restarting); ``failed`` (gave up or closed)."""
        if self._failed is not None:
            return "failed"
        if self.connected:
            return "connected"
        if self._start_error is not None:
            return "down"
        return "starting" if self._connects == 0 else "reconnecting"

    @property
    def restarts(self) -> int:
        """Restarts scheduled so far (after a loss or a failed start attempt)."""
        return self._restarts

    @property
    def last_error(self) -> str | None:
        """Why the server was last lost or failed to start (None: never)."""
        if self._failed is not None and self._failed != "connection closed":
            return self._failed
        return self._last_error

    @property
    def uptime(self) -> float | None:
        """Seconds since the current session connected (None when not connected)."""
        return None if self._connected_at is None else trio.current_time() - self._connected_at

    @property
    def pid(self) -> int | None:
        """The server process of the current transport, when it has one."""
        value = getattr(self._transport, "pid", None)
        return value if isinstance(value, int) else None

    async def wait_changed(self) -> None:
        """Wait for the next change of :attr:`state` (bounded by the caller's scope)."""
        await self._changed.wait()

    async def wait_connected(self) -> None:
        """Wait until a session is up (bounded by the caller's scope); raises
        :class:`ConnectionClosed` once the connection gave up or closed."""
        while not self.connected:
            if self._failed is not None:
                raise ConnectionClosed(f"{self.name}: connection gave up: {self._failed}")
            await self._changed.wait()

    async def wait_settled(self) -> None:
        """Wait for the first attempt's outcome: connected, a failed start, or closed."""
        await self._settled.wait()

    # -------------------------------------------------------------- sessions

    @property
    def connected(self) -> bool:
        return self._session is not None and not self._session.peer.closed

    @property
    def live_session(self) -> ClientSession | None:
        """The current session when it is up, else None (never waits)."""
        session = self._session
        return None if session is None or session.peer.closed else session

    async def session(self) -> ClientSession:
        """The live session, waiting up to ``reconnect_wait`` for a reconnect."""
        with trio.move_on_after(self.settings.reconnect_wait):
            while True:
                changed = self._changed
                if self._failed is not None:
                    raise ConnectionClosed(f"{self.name}: connection gave up: {self._failed}")
                session = self._session
                if session is not None and not session.peer.closed:
                    return session
                if self._start_error is not None and self.settings.retry_forever:
                    raise ConnectionClosed(f"{self.name}: server down (retrying): {self._start_error}")
                await changed.wait()
        raise ConnectionClosed(f"{self.name}: not reconnected within {self.settings.reconnect_wait} s")

    # ------------------------------------------------- the user-facing calls

    async def forward(self, method: str, params: Any, *, on_progress: Any = None) -> Any:
        """Send a request as it is and return its result undecoded (a proxy's
        call: ``params`` may hold ``msgspec.Raw`` fields; the result is the
        ``msgspec.Raw`` the server sent). An error answer raises its McpError."""
        session = self._session
        if session is None or session.peer.closed:
            session = await self.session()
        if session.era == "modern":
            # Version and capabilities ride in _meta, which the session adds to
            # plain params: Raw fields become builtins first.
            plain = msgspec.json.decode(
                params if type(params) is msgspec.Raw else msgspec.json.encode(params)
            )
            return await session._call(method, plain, msgspec.Raw, on_progress)
        return await session.peer.request(method, params, on_progress=on_progress)

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, **options: Any
    ) -> CallToolResult:
        return await (await self.session()).call_tool(name, arguments, **options)

    async def read_resource(self, uri: str) -> ReadResourceResult:
        return await (await self.session()).read_resource(uri)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> GetPromptResult:
        return await (await self.session()).get_prompt(name, arguments)

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        return await (await self.session()).complete(*args, **kwargs)

    async def list_tools(self) -> list[Tool]:
        self.tools = await (await self.session()).list_all_tools()
        return self.tools

    async def ping(self) -> None:
        await (await self.session()).ping()

    async def subscribe_resource(self, uri: str) -> None:
        """Subscribe now and again after every reconnect."""
        self._subscriptions.add(uri)
        await (await self.session()).subscribe_resource(uri)

    async def unsubscribe_resource(self, uri: str) -> None:
        self._subscriptions.discard(uri)
        await (await self.session()).unsubscribe_resource(uri)

    async def set_logging_level(self, level: str) -> None:
        """Set now and again after every reconnect."""
        self._log_level = level
        await (await self.session()).set_logging_level(level)

    async def set_roots(self, roots: Sequence[Root]) -> None:
        """Replace the roots (kept across reconnects) and tell the server."""
        if self._roots is None:
            raise RuntimeError("this connection was opened without roots; pass roots=[...]")
        self._roots = list(roots)
        session = self._session
        if session is not None and not session.peer.closed:
            try:
                await session.set_roots(roots)
            except McpError:
                pass  # the next connect offers the new roots anyway

    @property
    def subscriptions(self) -> frozenset[str]:
        return frozenset(self._subscriptions)

    @property
    def log_level(self) -> str | None:
        return self._log_level


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _describe(exc: BaseException) -> str:
    """The most informative one-line reason: groups are searched for their
    real cause (a transport failure before a bare "lost", never Cancelled);
    start failures name what made them fail."""
    leaves = [e for e in _leaves(exc) if not isinstance(e, trio.Cancelled)] or _leaves(exc)
    ranked = sorted(
        leaves, key=lambda e: 0 if isinstance(e, TransportError) else 1 if not isinstance(e, _Lost) else 2
    )
    best = ranked[0]
    while best.__cause__ is not None and type(best).__name__ in ("StartFailure", "SupervisorEscalation"):
        best = best.__cause__
        if isinstance(best, BaseExceptionGroup):
            return _describe(best)
    text = str(best)
    return f"{type(best).__name__}: {text}" if text else type(best).__name__
