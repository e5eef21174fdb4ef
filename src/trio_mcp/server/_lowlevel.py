"""The low-level server: a handler table, capabilities derived from it,
the live sessions, and a lifespan. Full control, no decorators' magic.

::

    server = LowLevelServer("demo")

    async def list_tools(ctx, params):
        return ListToolsResult(tools=[...])

    server.set_request_handler("tools/list", PaginatedRequestParams, list_tools)

:class:`~trio_mcp.server.MCPServer` builds on it.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import trio
from msgspec import UNSET

from .._util import collapse_groups
from ..actors import PeerLimits
from ..actors._instrument import Instrumentation
from ..actors._middleware import ServerMiddleware
from ..actors._modern import RequestStateKeys
from ..actors._server import METHOD_CAPABILITY, Context, RequestHandler, ServerSession
from ..protocol import (
    TASKS_EXTENSION_ID,
    Icon,
    Implementation,
    InvalidParams,
    PromptsCapability,
    ResourcesCapability,
    ServerCapabilities,
    ToolsCapability,
)
from ..transports import MessageStream

if TYPE_CHECKING:  # the task runtime is imported when a server serves tasks
    from ..actors._tasks import TaskRuntime

__all__ = ["DEFAULT_PAGE_SIZE", "Lifespan", "LowLevelServer", "paginate"]

T = TypeVar("T")
Lifespan = Callable[["LowLevelServer"], AbstractAsyncContextManager[Any]]

_NO_SCOPES: frozenset[str] = frozenset()

#: Items per page of the ``*/list`` methods.
DEFAULT_PAGE_SIZE = 100
RESOURCE_UPDATED = "notifications/resources/updated"


class LowLevelServer:
    """A server application: handlers keyed by method, shared by all sessions."""

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        title: str | None = None,
        description: str | None = None,
        instructions: str | None = None,
        icons: Sequence[Icon] | None = None,
        website_url: str | None = None,
        lifespan: Lifespan | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        limits: PeerLimits | None = None,
        tasks: TaskRuntime | bool = False,
        extensions: dict[str, dict[str, Any]] | None = None,
        middleware: Sequence[ServerMiddleware] = (),
        instrumentation: Sequence[Instrumentation] | None = None,
        request_state_keys: RequestStateKeys | Iterable[str | bytes] | None = None,
    ) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self.info = Implementation(
            name=name,
            version=version,
            title=UNSET if title is None else title,
            description=UNSET if description is None else description,
            icons=UNSET if not icons else list(icons),
            website_url=UNSET if website_url is None else website_url,
        )
        self.instructions = instructions
        self.request_handlers: dict[str, RequestHandler] = {}
        #: ``fn(session, params)`` per client notification method.
        self.notification_handlers: dict[str, Callable[[ServerSession, Any], Awaitable[None]]] = {}
        self.page_size = page_size
        self.limits = limits
        #: Around every request of every session, first outermost (see
        #: :meth:`add_middleware`); a session takes the chain it finds when it starts.
        self.middleware: tuple[ServerMiddleware, ...] = tuple(middleware)
        #: What observes each session (tracing): None for the process defaults
        #: (see ``trio_mcp.actors._instrument``), ``()`` for nothing.
        self.instrumentation: tuple[Instrumentation, ...] | None = (
            None if instrumentation is None else tuple(instrumentation)
        )
        self.lifespan = lifespan
        self.state: Any = None
        self.sessions: set[ServerSession] = set()
        #: Called with every broadcast made here (method, params), before the
        #: sessions of this process get it: a cluster backend forwards it to
        #: the other processes, which call :meth:`deliver_broadcast`.
        self.broadcast_relay: Callable[[str, Any], None] | None = None
        self._lifespan_users = 0
        self._lifespan_lock = trio.Lock()
        self._lifespan_exit: Any = None
        #: Extensions declared (SEP-2133): identifier -> settings, in ``capabilities.extensions``.
        self.extensions: dict[str, dict[str, Any]] = dict(extensions or {})
        #: The task runtime (``tasks=True`` for the default one), or None.
        self.tasks: TaskRuntime | None = None
        #: OAuth scopes a request of the method needs (see :meth:`scopes_for`).
        self.method_scopes: dict[str, frozenset[str]] = {}

        #: The HMAC keys of the 2026-07-28 era's ``requestState`` (the first
        #: signs, all are accepted); None: a random key for this process,
        #: made at the first use. Processes serving this app behind one
        #: endpoint need the same keys (see :meth:`set_request_state_keys`).
        self.request_state_keys: RequestStateKeys | None = None
        if request_state_keys is not None:
            self.set_request_state_keys(request_state_keys)
        if tasks:
            if tasks is True:  # the default runtime, imported only when tasks are served
                from ..actors._tasks import TaskRuntime

                tasks = TaskRuntime()
            self.enable_tasks(tasks)

    def enable_tasks(self, runtime: TaskRuntime) -> TaskRuntime:
        """Serve tasks (``tasks/*``, task-capable tools) with ``runtime``: the
        2025-11-25 ``tasks`` capability and the 2026-07-28 extension."""
        self.tasks = runtime
        runtime.install(self)
        self.extensions[TASKS_EXTENSION_ID] = runtime.extension_settings()
        return runtime

    def set_request_state_keys(self, keys: RequestStateKeys | Iterable[str | bytes]) -> RequestStateKeys:
        """Sign ``requestState`` with the first of ``keys`` and accept any of
        them (rotation: put the new key first, drop the old one once the
        states it signed are no longer retried). Text keys count by their
        UTF-8 bytes; each must be at least 32 bytes long (``ValueError``)."""
        self.request_state_keys = RequestStateKeys.of(keys)
        return self.request_state_keys

    # ------------------------------------------------------------ handlers

    def add_middleware(self, middleware: ServerMiddleware) -> ServerMiddleware:
        """Add ``async def middleware(ctx, call_next)`` at the inside of the chain
        (it runs after those added before); usable as a decorator. Sessions
        started from now on run it (see ``trio_mcp.actors._middleware``)."""
        self.middleware = (*self.middleware, middleware)
        return middleware

    def set_request_handler(
        self,
        method: str,
        params_type: Any,
        fn: Callable[[Context, Any], Awaitable[Any]],
        *,
        own_request_state: bool = False,
    ) -> None:
        """Serve ``method`` with ``fn(context, params)``; params decoded to ``params_type``.

        ``own_request_state``: in the stateless era the handler answers with
        its own ``InputRequiredResult`` rounds and reads ``params.request_state``
        itself, so the session passes the state through instead of checking it
        as one of its own (see ``Context.sample`` for the managed way)."""
        self.request_handlers[method] = RequestHandler(params_type, fn, own_request_state)

    def set_notification_handler(
        self, method: str, fn: Callable[[ServerSession, Any], Awaitable[None]]
    ) -> None:
        """Handle a client notification (e.g. ``notifications/roots/list_changed``)
        with ``fn(session, params)``; notifications are handled in arrival order."""
        self.notification_handlers[method] = fn

    def on_notification(self, method: str) -> Callable[[Any], Any]:
        """Decorator form of :meth:`set_notification_handler`."""

        def register(fn: Any) -> Any:
            self.set_notification_handler(method, fn)
            return fn

        return register

    def capabilities(self) -> ServerCapabilities:
        """Declared from what is registered."""
        h = self.request_handlers
        caps: dict[str, Any] = {"logging": {}}
        if "tools/list" in h:
            caps["tools"] = ToolsCapability(list_changed=True)
        if "prompts/list" in h:
            caps["prompts"] = PromptsCapability(list_changed=True)
        if any(m in h for m in ("resources/list", "resources/templates/list", "resources/read")):
            caps["resources"] = ResourcesCapability(
                subscribe=True if "resources/subscribe" in h else UNSET, list_changed=True
            )
        if "completion/complete" in h:
            caps["completions"] = {}
        if "tasks/get" in h:  # a task runtime, or a gateway forwarding tasks
            from ..actors._tasks import HANDSHAKE_TASKS_CAPABILITY

            caps["tasks"] = dict(HANDSHAKE_TASKS_CAPABILITY)
        if self.extensions:
            caps["extensions"] = {k: dict(v) for k, v in self.extensions.items()}
        return ServerCapabilities(**caps)

    def gated_methods(self) -> dict[str, str]:
        return {m: c for m, c in METHOD_CAPABILITY.items() if m in self.request_handlers}

    # ------------------------------------------------------- authorization

    def scopes_for(self, method: str, target: str | None) -> frozenset[str]:
        """The OAuth scopes a request needs besides those every request needs
        (``target``: the tool or prompt named, or the resource URI). The
        Streamable HTTP server with a :class:`~trio_mcp.auth.resource.ResourceServer`
        answers ``403 insufficient_scope`` before the handler runs when the
        token lacks one. Here: :attr:`method_scopes`; :class:`MCPServer` adds
        the ``scopes=`` of its decorators."""
        return self.method_scopes.get(method, _NO_SCOPES)

    def declared_scopes(self) -> frozenset[str]:
        """Every scope some request may need (published in the metadata)."""
        return frozenset().union(*self.method_scopes.values())

    # ------------------------------------------------------------ sessions

    def _attach(self, session: ServerSession) -> None:
        self.sessions.add(session)

    def _detach(self, session: ServerSession) -> None:
        self.sessions.discard(session)

    def broadcast_nowait(self, method: str, params: Any = UNSET) -> None:
        """Queue a notification to every initialized session (never blocks the
        event loop; from a sync handler's worker thread it hops to the loop),
        and hand it to :attr:`broadcast_relay` when one is set."""
        if _hopped_to_trio(self.broadcast_nowait, method, params):
            return
        relay = self.broadcast_relay
        if relay is not None:
            relay(method, params)
        self.deliver_broadcast(method, params)

    def notify_resource_updated(self, uri: str) -> None:
        """Tell the sessions subscribed to ``uri`` that it changed (callable
        from a sync handler's worker thread too), and the relay if any."""
        if _hopped_to_trio(self.notify_resource_updated, uri):
            return
        relay = self.broadcast_relay
        if relay is not None:
            relay(RESOURCE_UPDATED, {"uri": uri})
        self.deliver_broadcast(RESOURCE_UPDATED, {"uri": uri})

    def deliver_broadcast(self, method: str, params: Any = UNSET) -> None:
        """Hand a broadcast to this process's sessions only (what the relay of
        another process calls for a broadcast made there)."""
        if method == RESOURCE_UPDATED:
            uri = params.get("uri") if isinstance(params, dict) else None
            for session in list(self.sessions):
                if session.wants_resource(uri):  # type: ignore[arg-type]
                    session.post_nowait(method, params)
            return
        for session in list(self.sessions):
            session.post_nowait(method, params)

    # ------------------------------------------------------------ lifespan

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Any]:
        """Enter the lifespan (once, shared by nested users); yields its state."""
        async with self._lifespan_lock:
            if self._lifespan_users == 0 and self.lifespan is not None:
                cm = self.lifespan(self)
                self.state = await cm.__aenter__()
                self._lifespan_exit = cm
            self._lifespan_users += 1
        try:
            yield self.state
        finally:
            with trio.CancelScope(shield=True):
                async with self._lifespan_lock:
                    self._lifespan_users -= 1
                    if self._lifespan_users == 0 and self._lifespan_exit is not None:
                        cm, self._lifespan_exit = self._lifespan_exit, None
                        await cm.__aexit__(None, None, None)

    async def serve(self, stream: MessageStream, *, name: str = "server") -> None:
        """Serve one session over ``stream`` until it ends."""
        with collapse_groups():
            async with self.running():
                await ServerSession(self, stream, limits=self.limits, name=name).run()

    async def start_session(
        self, stream: MessageStream, nursery: trio.Nursery, *, name: str = "server"
    ) -> ServerSession:
        """Start a session in ``nursery``; returns once it is serving."""
        session: ServerSession = await nursery.start(
            ServerSession(self, stream, limits=self.limits, name=name).run
        )
        return session


def _hopped_to_trio(fn: Callable[..., None], *args: Any) -> bool:
    """In a worker thread of trio's (a sync handler): run ``fn(*args)`` in
    the trio loop's thread and say so. In the loop's thread, or with no trio
    run at all (registering at import time): False, the caller goes on."""
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        pass
    else:
        return False  # the loop's own thread
    try:
        trio.from_thread.run_sync(fn, *args)
    except RuntimeError as exc:
        if "wasn't created by Trio" not in str(exc):
            raise
        return False  # no trio run: nothing is listening yet
    return True


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode()).decode()
        if not text.startswith("o:"):
            raise ValueError
        offset = int(text[2:])
        if offset < 0:
            raise ValueError
        return offset
    except (ValueError, UnicodeDecodeError):
        raise InvalidParams(f"Invalid cursor {cursor!r}") from None


def paginate(items: Sequence[T], cursor: Any, page_size: int) -> tuple[list[T], str | Any]:
    """One page of ``items`` and the next opaque cursor (``UNSET`` at the end)."""
    start = 0 if cursor is UNSET or cursor is None else decode_cursor(cursor)
    if start > len(items):
        raise InvalidParams(f"Invalid cursor {cursor!r}: past the end")
    end = start + page_size
    page = list(items[start:end])
    return page, (encode_cursor(end) if end < len(items) else UNSET)
