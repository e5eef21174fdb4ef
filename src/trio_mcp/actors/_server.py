"""The server role actor: one MCP session over one message stream.

A :class:`ServerSession` owns a :class:`Peer`, answers ``initialize`` with
version negotiation, enforces the lifecycle and the declared capabilities,
and dispatches every other request to a handler table supplied by the
application (:class:`ServerApp`; :class:`trio_mcp.server.Server` is the
usual one). Handlers get a :class:`Context` through which they report
progress, log, and ask the client for sampling, elicitation and roots.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from functools import partial
from typing import Any, Final, Protocol, cast

import attrs
import msgspec
import trio
from msgspec import UNSET

from ..protocol import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    METHODS,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    ClientCapabilities,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    Implementation,
    InitializeRequestParams,
    InitializeResult,
    InvalidParams,
    InvalidRequest,
    ListRootsResult,
    LoggingMessageNotificationParams,
    McpError,
    MethodNotFound,
    MissingClientCapability,
    Request,
    Root,
    ServerCapabilities,
    SetLevelRequestParams,
    SubscriptionFilter,
    adapt,
    coerce,
)
from ..protocol._types import LoggingLevel
from ..transports import MessageStream
from ._actor import ExitReason
from ._context import _LEVEL_RANK, LOG_LEVELS, Context
from ._instrument import instrument
from ._middleware import ServerMiddleware, run_chain
from ._peer import InboundRequest, Peer, PeerLimits
from ._peer_inbound import _no_meta
from ._server_modern import _MODERN_ONLY, _ModernServing
from ._server_modern import _declared as _declared  # noqa: PLC0414 - re-exported for the client session

__all__ = [
    "LOG_LEVELS",
    "METHOD_CAPABILITY",
    "Context",
    "RequestHandler",
    "ServerApp",
    "ServerSession",
]

log = logging.getLogger("trio_mcp.server")
#: Which server capability gates each client request (dotted wire names; from the registry).
METHOD_CAPABILITY: Final[Mapping[str, str]] = {
    name: ".".join(spec.capability[1:])
    for name, spec in METHODS.items()
    if spec.kind == "request" and spec.capability and spec.capability[0] == "server"
}

#: Which server capability each server notification needs (from the registry).
_NOTIFICATION_CAPABILITY: Final[Mapping[str, str]] = {
    name: ".".join(spec.capability[1:])
    for name, spec in METHODS.items()
    if spec.kind == "notification" and spec.capability and spec.capability[0] == "server"
}

#: Requests that never take the straight path of :meth:`ServerSession.handle_request`.
_NOT_PLAIN: Final = frozenset({"initialize", "logging/setLevel"}) | _MODERN_ONLY

#: Requests served before ``notifications/initialized`` arrives.
_PRE_INITIALIZED: Final = frozenset({"ping", "logging/setLevel"})


def _decoder(params_type: Any) -> Callable[[msgspec.Raw], Any]:
    """The cached decoder of raw params into ``params_type``."""
    decode = _DECODERS.get(params_type)
    if decode is None:
        decode = _DECODERS[params_type] = msgspec.json.Decoder(params_type).decode
    return decode


_DECODERS: dict[Any, Callable[[msgspec.Raw], Any]] = {}


@attrs.frozen
class RequestHandler:
    """A low-level handler: ``fn(context, params)`` with params decoded to ``params_type``."""

    params_type: Any
    fn: Callable[[Context, Any], Awaitable[Any]]
    #: The handler returns its own ``InputRequiredResult`` rounds and reads
    #: ``requestState`` itself (stateless era): it is passed through unchecked.
    own_request_state: bool = False
    #: Optional plain path: ``plain(session, request)`` -> the handler's
    #: coroutine (returning the result as sent, adapted to
    #: ``session.protocol_version``), or None to take the general path. Asked
    #: only for an initialized session without middleware, with raw params;
    #: it must answer exactly as ``fn`` would (see :meth:`ServerSession.start_plain`).
    plain: Callable[[ServerSession, Request], Coroutine[Any, Any, Any] | None] | None = None


class ServerApp(Protocol):
    """What a session needs from the application it serves."""

    info: Implementation
    instructions: str | None

    @property
    def request_handlers(self) -> Mapping[str, RequestHandler]: ...

    def capabilities(self) -> ServerCapabilities: ...

    def _attach(self, session: ServerSession) -> None: ...

    def _detach(self, session: ServerSession) -> None: ...


class ServerSession(_ModernServing):
    """One client's session with a server app. Start with ``nursery.start(session.run)``."""

    #: Bound of the queue of notifications posted from synchronous code
    #: (``post_nowait``); when full, further posts are dropped and counted.
    notification_queue_size: int = 64

    def __init__(
        self,
        app: ServerApp,
        stream: MessageStream,
        *,
        limits: PeerLimits | None = None,
        name: str = "server",
    ) -> None:
        self.app = app
        self.name = name
        self.peer = Peer(stream, self, limits=limits, name=name)
        self.protocol_version: str | None = None
        self.client_info: Implementation | None = None
        self.client_capabilities = ClientCapabilities()
        self.log_level: str | None = None
        self.subscriptions: set[str] = set()
        self._capabilities = app.capabilities()
        #: The app's middleware, fixed for this session (see ``actors._middleware``);
        #: without any, requests go straight to the handlers.
        self._middleware: tuple[ServerMiddleware, ...] = tuple(getattr(app, "middleware", ()))
        if self._middleware:
            self.handle_request = self._handle_through_middleware  # type: ignore[method-assign]
        #: Gated methods whose capability this session does not declare.
        self._undeclared = frozenset(
            m for m, gate in METHOD_CAPABILITY.items() if not _declared(self._capabilities, gate)
        )
        self._initialize_answered = False
        self._early_initialized = False
        self._initialized = False
        #: Per-session storage for the application (handlers reach it as ``ctx.session.state``).
        self.state: dict[str, Any] = {}
        self._initialized_event = trio.Event()
        self._listeners: dict[int | str, SubscriptionFilter] = {}
        # The last decoded client capabilities / info of a stateless request,
        # by identity of the raw object (a strong reference: ids never recur).
        self._caps_cache: tuple[Any, bytes, ClientCapabilities] | None = None
        self._info_cache: tuple[Any, bytes, Implementation] | None = None
        self._post_send, self._post_recv = trio.open_memory_channel[tuple[str, Any]](
            self.notification_queue_size
        )
        self.notifications_dropped = 0
        #: Where this session's tasks run (its own nursery while it runs; a
        #: stateless HTTP server lends its own), and who owns them.
        self.task_nursery: trio.Nursery | None = None
        self.task_owner = f"session:{secrets.token_hex(8)}"
        # Tracing and other observers (``app.instrumentation``, else the process defaults).
        instrument(self, getattr(app, "instrumentation", None))

    # ----------------------------------------------------------------- run

    async def run(
        self, *, task_status: trio.TaskStatus[ServerSession] = trio.TASK_STATUS_IGNORED
    ) -> ExitReason:
        self.app._attach(self)
        try:
            async with trio.open_nursery() as nursery:
                # Before the peer starts: its reader may serve a whole burst
                # (a task-augmented call among it) before this task resumes.
                if self.task_nursery is None:
                    self.task_nursery = nursery
                await nursery.start(self.peer.run)
                nursery.start_soon(self._post_loop)
                task_status.started(self)
                await self.peer.wait_stopped()
                nursery.cancel_scope.cancel()
        finally:
            self.app._detach(self)
            self._post_send.close()
        return ExitReason("closed", "session ended")

    async def aclose(self) -> None:
        await self.peer.aclose()

    @property
    def initialized(self) -> bool:
        return self._initialized

    async def wait_initialized(self) -> None:
        await self._initialized_event.wait()

    # ------------------------------------------------------------ dispatch

    async def handle_request(self, request: InboundRequest) -> Any:
        method = request.method
        params = request.params
        if (
            self._initialized
            and method not in _NOT_PLAIN
            and type(params) is msgspec.Raw
            and _no_meta(params)
        ):
            # The common case, straight through: an initialized session's
            # request with raw params and no ``_meta`` (so not the stateless era).
            handler = self.app.request_handlers.get(method)
            if handler is not None and method not in self._undeclared:
                try:
                    decoded = (_DECODERS.get(handler.params_type) or _decoder(handler.params_type))(params)
                except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                    raise InvalidParams(f"Invalid params for {method}: {exc}") from None
                result = await handler.fn(Context(self, request), decoded)
                return adapt(result, self.protocol_version or LATEST_HANDSHAKE_VERSION)
        if method == "initialize":
            return self._initialize(request)
        if method in _MODERN_ONLY or META_PROTOCOL_VERSION in request.meta:
            return await self._handle_modern(request)
        if not self._initialize_answered:
            raise InvalidRequest(f"Session not initialized: {method!r} received before 'initialize'")
        if not self._initialized and method not in _PRE_INITIALIZED:
            raise InvalidRequest(f"{method!r} received before 'notifications/initialized'")
        if method == "logging/setLevel":
            return self._set_level(request)
        handler, params = self._resolve(request)
        result = await handler.fn(Context(self, request), params)
        return adapt(result, self.protocol_version or LATEST_HANDSHAKE_VERSION)

    def start_plain(self, request: Request) -> Coroutine[Any, Any, Any] | None:
        """The peer's plain path (see ``_peer_inbound.PlainStarter``): the
        coroutine of the handler's own plain path (``RequestHandler.plain``)
        for an initialized session's request with raw params, when no
        middleware is installed; else None (the general path)."""
        if not self._initialized or self._middleware:
            return None
        method = request.method
        handler = self.app.request_handlers.get(method)
        if handler is None or handler.plain is None or method in self._undeclared:
            return None
        if type(request.params) is not msgspec.Raw:
            return None
        return handler.plain(self, request)

    async def _handle_through_middleware(self, request: InboundRequest) -> Any:
        last = partial(ServerSession.handle_request, self, request)
        return await run_chain(self._middleware, Context(self, request), last)

    def _resolve(self, request: InboundRequest) -> tuple[RequestHandler, Any]:
        """The app's handler of ``request`` (declared) and its decoded params."""
        method = request.method
        handler = self.app.request_handlers.get(method)
        if handler is None:
            raise MethodNotFound(f"Method not found: {method}")
        if method in self._undeclared:
            raise MethodNotFound(
                f"Method not found: {method} (capability {METHOD_CAPABILITY[method]!r} not declared)"
            )
        try:
            return handler, coerce(request.params, handler.params_type)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise InvalidParams(f"Invalid params for {method}: {exc}") from None

    def _initialize(self, request: InboundRequest) -> Any:
        if self._initialize_answered:
            raise InvalidRequest("Session already initialized")
        try:
            params = coerce(request.params, InitializeRequestParams)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise InvalidParams(f"Invalid initialize params: {exc}") from None
        requested = params.protocol_version
        version = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION
        self.protocol_version = version
        self.peer.batch_arrays = version == V2025_03_26  # the one version with JSON-RPC batches
        self.client_info = params.client_info
        self.client_capabilities = params.capabilities
        self._initialize_answered = True
        if self._early_initialized:
            self._mark_initialized()
        info = self.app.info
        instructions = self.app.instructions
        caps = self._capabilities
        if caps.tasks is not UNSET and version < V2025_11_25:
            caps = msgspec.structs.replace(caps, tasks=UNSET)
        result = InitializeResult(
            protocol_version=version,
            capabilities=caps,
            server_info=info,
            instructions=UNSET if instructions is None else instructions,
        )
        return adapt(result, version)

    def _set_level(self, request: InboundRequest) -> Any:
        try:
            params = coerce(request.params, SetLevelRequestParams)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise InvalidParams(f"Invalid params for logging/setLevel: {exc}") from None
        self.log_level = params.level
        return {}

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        if method == "notifications/initialized":
            if self._initialize_answered:
                self._mark_initialized()
            else:
                # Pipelined right behind ``initialize`` (whose handler has not
                # run yet): honour it once the handshake is answered.
                self._early_initialized = True
            return True
        return False

    def _mark_initialized(self) -> None:
        self._initialized = True
        self._initialized_event.set()

    def assume_initialized(self, version: str) -> None:
        """Serve as if ``initialize`` had negotiated ``version`` with a client
        that declared no capabilities (a stateless HTTP server: no handshake
        reaches this session)."""
        if version not in HANDSHAKE_VERSIONS:
            raise ValueError(f"not a handshake-era protocol version: {version!r}")
        self.protocol_version = version
        self._initialize_answered = True
        self._mark_initialized()

    async def handle_notification(self, method: str, params: Any) -> None:
        handler = getattr(self.app, "notification_handlers", {}).get(method)
        if handler is not None:
            await handler(self, params)
            return
        fallback = getattr(self.app, "handle_notification", None)
        if fallback is not None:
            await fallback(self, method, params)

    # ----------------------------------------------------- server -> client

    def client_supports(self, capability: str) -> bool:
        name, _, flag = capability.partition(".")
        value = getattr(self.client_capabilities, name, UNSET)
        if value is UNSET or value is None:
            return False
        if flag:
            sub = getattr(value, flag, UNSET)
            return sub is not UNSET and sub is not None
        return True

    def _require(self, capability: str, what: str) -> None:
        if not self.client_supports(capability):
            raise MissingClientCapability(
                f"The client did not declare the {capability!r} capability, so the server cannot {what}",
                data={"requiredCapabilities": [capability]},
            )

    def should_log(self, level: str) -> bool:
        threshold = self.log_level
        return threshold is None or _LEVEL_RANK.get(level, 0) >= _LEVEL_RANK[threshold]

    async def send_log(self, level: str, data: Any, *, logger: str | None = None) -> None:
        if level not in _LEVEL_RANK:
            raise ValueError(f"unknown log level {level!r}; one of {', '.join(LOG_LEVELS)}")
        if not self.should_log(level) or not _declared(self._capabilities, "logging"):
            return
        params = LoggingMessageNotificationParams(
            level=cast(LoggingLevel, level), data=data, logger=UNSET if logger is None else logger
        )
        await self.peer.notify("notifications/message", params)

    async def notify(self, method: str, params: Any = UNSET) -> None:
        """Send a notification once the session is initialized (dropped before)."""
        if self._initialized:
            await self.peer.notify(method, params)

    def post_nowait(self, method: str, params: Any = UNSET) -> None:
        """Queue a notification from synchronous code (e.g. a registration):
        to the handshake session once initialized, and to every
        ``subscriptions/listen`` stream whose filter wants it."""
        gate = _NOTIFICATION_CAPABILITY.get(method)
        if gate is not None and not _declared(self._capabilities, gate):
            return  # never announce what this session was not offered
        if self._initialized and (
            method != "notifications/resources/updated" or _uri(params) in self.subscriptions
        ):
            self._post(method, params)
        for sub_id, wanted in self._listeners.items():
            if _wants(wanted, method, params):
                data = dict(params) if isinstance(params, dict) else {}
                data["_meta"] = {META_SUBSCRIPTION_ID: sub_id}
                self._post(method, data)

    def _post(self, method: str, params: Any) -> None:
        try:
            self._post_send.send_nowait((method, params))
        except trio.WouldBlock:
            self.notifications_dropped += 1
        except trio.ClosedResourceError:
            pass

    def wants_resource(self, uri: str) -> bool:
        """Whether this session (handshake subscription or a listen stream) follows ``uri``."""
        if uri in self.subscriptions:
            return True
        return any(
            w.resource_subscriptions is not UNSET and uri in w.resource_subscriptions
            for w in self._listeners.values()
        )

    async def _post_loop(self) -> None:
        async for method, params in self._post_recv:
            try:
                await self.peer.notify(method, params)
            except McpError:
                return

    async def create_message(self, params: CreateMessageRequestParams) -> CreateMessageResult:
        self._require("sampling", "request sampling")
        if params.tools is not UNSET or params.tool_choice is not UNSET:
            if (self.protocol_version or "") < V2025_11_25:
                raise MissingClientCapability("sampling with tools needs protocol 2025-11-25 or later")
            self._require("sampling.tools", "offer tools in a sampling request")
        params = adapt(params, self.protocol_version or LATEST_HANDSHAKE_VERSION)
        result: CreateMessageResult = await self.peer.request(
            "sampling/createMessage", params, result_type=CreateMessageResult
        )
        return result

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult:
        mode = params.mode if params.mode is not UNSET else "form"
        if self.protocol_version is not None and self.protocol_version < V2025_06_18:
            raise MissingClientCapability(
                f"elicitation needs protocol {V2025_06_18} or later; this session speaks {self.protocol_version}"
            )
        caps = self.client_capabilities.elicitation
        if caps is UNSET:
            self._require("elicitation", "elicit input")
        if mode == "url":
            if self.protocol_version is not None and self.protocol_version < V2025_11_25:
                raise MissingClientCapability("URL elicitation needs protocol 2025-11-25")
            self._require("elicitation.url", "elicit through a URL")
        elif caps is not UNSET and (caps.form is UNSET and caps.url is not UNSET):
            self._require("elicitation.form", "elicit a form")
        try:
            params = adapt(params, self.protocol_version or LATEST_HANDSHAKE_VERSION)
        except ValueError as exc:
            raise MissingClientCapability(str(exc)) from None
        answer: ElicitResult = await self.peer.request("elicitation/create", params, result_type=ElicitResult)
        return answer

    async def list_roots(self) -> list[Root]:
        self._require("roots", "list its roots")
        result: ListRootsResult = await self.peer.request("roots/list", result_type=ListRootsResult)
        return list(result.roots)


def _uri(params: Any) -> Any:
    return params.get("uri") if isinstance(params, dict) else getattr(params, "uri", None)


def _wants(wanted: SubscriptionFilter, method: str, params: Any) -> bool:
    if method == "notifications/tools/list_changed":
        return wanted.tools_list_changed is True
    if method == "notifications/prompts/list_changed":
        return wanted.prompts_list_changed is True
    if method == "notifications/resources/list_changed":
        return wanted.resources_list_changed is True
    if method == "notifications/resources/updated":
        return wanted.resource_subscriptions is not UNSET and _uri(params) in wanted.resource_subscriptions
    return False
