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
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar, cast

import attrs
import msgspec
import trio
from msgspec import UNSET

from ..protocol import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    METHODS,
    MODERN_VERSIONS,
    SUPPORTED_VERSIONS,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    DiscoverResult,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    Implementation,
    InitializeRequestParams,
    InitializeResult,
    InputRequiredResult,
    InvalidParams,
    InvalidRequest,
    ListRootsRequest,
    ListRootsResult,
    LoggingMessageNotificationParams,
    McpError,
    MethodNotFound,
    MissingClientCapability,
    ResourceNotFound,
    Root,
    SamplingMessage,
    ServerCapabilities,
    SetLevelRequestParams,
    SubscriptionFilter,
    SubscriptionsListenRequestParams,
    TextContent,
    UnsupportedProtocolVersion,
    adapt,
    coerce,
    has_capability,
    is_modern,
    method_available,
)
from ..protocol._types import LoggingLevel
from ..transports import MessageStream
from ..transports._base import REQUEST_HEADERS
from ._actor import ExitReason
from ._instrument import instrument
from ._middleware import ServerMiddleware, run_chain
from ._modern import InputNeeded, ModernRequest, ProtocolFailure, RequestStateError, RequestStateKeys
from ._peer import InboundRequest, Peer, PeerLimits

if TYPE_CHECKING:
    from ..auth.resource import AccessToken

__all__ = [
    "LOG_LEVELS",
    "METHOD_CAPABILITY",
    "Context",
    "RequestHandler",
    "ServerApp",
    "ServerSession",
]

log = logging.getLogger("trio_mcp.server")
_T = TypeVar("_T")

#: Logging levels, least severe first (RFC 5424 order).
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_LEVEL_RANK: Final = {name: i for i, name in enumerate(LOG_LEVELS)}

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

#: Requests served before ``notifications/initialized`` arrives.
_PRE_INITIALIZED: Final = frozenset({"ping", "logging/setLevel"})


@attrs.frozen
class RequestHandler:
    """A low-level handler: ``fn(context, params)`` with params decoded to ``params_type``."""

    params_type: Any
    fn: Callable[[Context, Any], Awaitable[Any]]
    #: The handler returns its own ``InputRequiredResult`` rounds and reads
    #: ``requestState`` itself (stateless era): it is passed through unchecked.
    own_request_state: bool = False


class ServerApp(Protocol):
    """What a session needs from the application it serves."""

    info: Implementation
    instructions: str | None

    @property
    def request_handlers(self) -> Mapping[str, RequestHandler]: ...

    def capabilities(self) -> ServerCapabilities: ...

    def _attach(self, session: ServerSession) -> None: ...

    def _detach(self, session: ServerSession) -> None: ...


def _declared(caps: ServerCapabilities, path: str) -> bool:
    """Whether ``caps`` declares the dotted wire-name ``path`` (e.g. ``resources.subscribe``)."""
    return has_capability(caps, path.split("."))


class ServerSession:
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
        self._caps_cache: tuple[Any, ClientCapabilities] | None = None
        self._info_cache: tuple[Any, Implementation | None] | None = None
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
                await nursery.start(self.peer.run)
                nursery.start_soon(self._post_loop)
                if self.task_nursery is None:
                    self.task_nursery = nursery
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

    async def _handle_through_middleware(self, request: InboundRequest) -> Any:
        last = partial(ServerSession.handle_request, self, request)
        return await run_chain(self._middleware, Context(self, request), last)

    def _resolve(self, request: InboundRequest) -> tuple[Any, Any]:
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

    async def _handle_modern(self, request: InboundRequest) -> Any:
        """A stateless 2026-era request: version and capabilities ride in ``_meta``."""
        method = request.method
        meta = request.meta
        version = meta.get(META_PROTOCOL_VERSION)
        if not isinstance(version, str):
            raise InvalidParams(
                f"{method}: _meta[{META_PROTOCOL_VERSION!r}] is required in this protocol era"
            )
        if version not in MODERN_VERSIONS:
            raise UnsupportedProtocolVersion(
                f"Unsupported protocol version {version!r}",
                data={"supported": list(SUPPORTED_VERSIONS), "requested": version},
            )
        raw_caps = meta.get(META_CLIENT_CAPABILITIES)
        if not isinstance(raw_caps, dict):
            raise InvalidParams(
                f"{method}: _meta[{META_CLIENT_CAPABILITIES!r}] is required in this protocol era"
            )
        cache = self._caps_cache
        if cache is not None and cache[0] is raw_caps:
            caps = cache[1]  # the same object again (in-memory zero-copy clients share theirs)
        else:
            try:
                caps = msgspec.convert(raw_caps, ClientCapabilities)
            except msgspec.ValidationError as exc:
                raise InvalidParams(f"{method}: invalid client capabilities: {exc}") from None
            self._caps_cache = (raw_caps, caps)
        level = meta.get(META_LOG_LEVEL)
        if level is not None and (not isinstance(level, str) or level not in _LEVEL_RANK):
            raise InvalidParams(
                f"{method}: _meta[{META_LOG_LEVEL!r}] must be one of {', '.join(LOG_LEVELS)}, not {level!r}"
            )
        client_info = None
        raw_info = meta.get(META_CLIENT_INFO)
        if isinstance(raw_info, dict):
            cached_info = self._info_cache
            if cached_info is not None and cached_info[0] is raw_info:
                client_info = cached_info[1]
            else:
                try:
                    client_info = msgspec.convert(raw_info, Implementation)
                except msgspec.ValidationError:
                    client_info = None
                self._info_cache = (raw_info, client_info)
        if method == "server/discover":
            return self._discover()
        if not method_available(method, version, sender="client"):
            raise MethodNotFound(f"Method not found: {method} (not part of protocol {version})")
        if method == "subscriptions/listen":
            return await self._listen(request, version)
        handler, params = self._resolve(request)
        try:
            modern = ModernRequest(
                version=version,
                capabilities=caps,
                log_level=level,
                client_info=client_info,
                own_state=handler.own_request_state,
                input_responses=getattr(params, "input_responses", UNSET),
                request_state=getattr(params, "request_state", UNSET),
                keys=self._state_keys(),
            )
        except RequestStateError as exc:
            raise InvalidParams(str(exc)) from None
        try:
            return await handler.fn(Context(self, request, modern), params)
        except InputNeeded as need:
            return InputRequiredResult(input_requests=need.requests, request_state=need.state)
        except ProtocolFailure as failure:
            raise failure.error from None
        except ResourceNotFound as exc:
            # This era reports an unknown resource as invalid params.
            raise InvalidParams(exc.message, data=exc.data) from None
        except BaseExceptionGroup as group:
            # A question asked from a child task arrives inside a group.
            for leaf in _group_leaves(group):
                if isinstance(leaf, InputNeeded):
                    return InputRequiredResult(input_requests=leaf.requests, request_state=leaf.state)
                if isinstance(leaf, ProtocolFailure):
                    raise leaf.error from None
            raise

    def _state_keys(self) -> RequestStateKeys:
        """The app's ``requestState`` keys; a random one for this process
        when it was given none (kept on the app, so every session agrees)."""
        keys = getattr(self.app, "request_state_keys", None)
        if keys is None:
            keys = RequestStateKeys.random()
            try:
                self.app.request_state_keys = keys  # type: ignore[attr-defined]
            except AttributeError:
                pass
        return keys

    def _discover(self) -> DiscoverResult:
        instructions = self.app.instructions
        caps = self._capabilities
        if caps.tasks is not UNSET:  # the 2025-11-25 slot: an extension from 2026-07-28
            caps = msgspec.structs.replace(caps, tasks=UNSET)
        return DiscoverResult(
            supported_versions=list(SUPPORTED_VERSIONS),
            capabilities=caps,
            instructions=UNSET if instructions is None else instructions,
            meta={META_SERVER_INFO: msgspec.to_builtins(self.app.info)},
        )

    async def _listen(self, request: InboundRequest, version: str) -> Any:
        """``subscriptions/listen``: acknowledge, then stream matching
        notifications until the client cancels (never answered then)."""
        try:
            params = coerce(request.params, SubscriptionsListenRequestParams)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise InvalidParams(f"Invalid params for subscriptions/listen: {exc}") from None
        wanted = params.notifications
        honoured = SubscriptionFilter(
            tools_list_changed=True
            if wanted.tools_list_changed is True and _declared(self._capabilities, "tools")
            else UNSET,
            prompts_list_changed=True
            if wanted.prompts_list_changed is True and _declared(self._capabilities, "prompts")
            else UNSET,
            resources_list_changed=True
            if wanted.resources_list_changed is True and _declared(self._capabilities, "resources")
            else UNSET,
            resource_subscriptions=list(wanted.resource_subscriptions)
            if wanted.resource_subscriptions is not UNSET and _declared(self._capabilities, "resources")
            else UNSET,
        )
        sub_id = request.id
        # Register and queue the acknowledgement in one step: a change made
        # from now on is delivered after it, none is lost in between.
        self._listeners[sub_id] = honoured
        self._post(
            "notifications/subscriptions/acknowledged",
            {"notifications": honoured, "_meta": {META_SUBSCRIPTION_ID: sub_id}},
        )
        try:
            await trio.sleep_forever()
        finally:
            self._listeners.pop(sub_id, None)

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


class Context:
    """What a handler sees of its request and session. Never part of a tool's schema."""

    __slots__ = ("modern", "request", "session", "task")

    def __init__(
        self, session: ServerSession, request: InboundRequest, modern: ModernRequest | None = None
    ) -> None:
        self.session = session
        self.request = request
        #: Per-request state of a stateless (2026-era) request, else None.
        self.modern = modern
        #: The task this context runs in (a ``TaskHandle``), else None.
        self.task: Any = None

    @property
    def _detached(self) -> bool:
        """A stateless request's task: its request was answered, nothing may travel on it."""
        return self.task is not None and self.modern is not None

    async def _ask(
        self, request: Any, capability: str, result_type: type[_T], direct: Callable[[], Awaitable[_T]]
    ) -> _T:
        if self.task is not None:
            answer: _T = await self.task.ask(request, capability, result_type, direct)
            return answer
        if self.modern is not None:
            return self.modern.ask(request, capability, result_type)
        return await direct()

    @property
    def request_id(self) -> int | str:
        return self.request.id

    @property
    def meta(self) -> dict[str, Any]:
        return self.request.meta

    @property
    def method(self) -> str:
        return self.request.method

    @property
    def params(self) -> dict[str, Any]:
        """The request's params as plain JSON values (decoded on each use)."""
        params = self.request.params
        if type(params) is msgspec.Raw:
            decoded = msgspec.json.decode(params)
        else:
            decoded = {} if params is UNSET or params is None else msgspec.to_builtins(params)
        return decoded if isinstance(decoded, dict) else {}

    @property
    def request_headers(self) -> Mapping[str, str] | None:
        """The headers of the HTTP request that carried this request (lower-case
        names), or None when it did not come over HTTP."""
        peer = self.session.peer
        inline = REQUEST_HEADERS.get()
        if inline is not None and inline[0] is peer:
            return inline[1]
        of = getattr(peer.stream, "request_headers", None)
        return None if of is None else of(self.request.id)

    @property
    def auth(self) -> AccessToken | None:
        """The verified access token this request came with (subject, scopes,
        client id, claims), when the server checks tokens
        (:class:`~trio_mcp.auth.resource.ResourceServer`); else None. In a
        session's task, after its request was answered: the session's latest token."""
        found: AccessToken | None = getattr(self.request_headers, "auth", None)
        if found is None:
            found = getattr(self.session.peer.stream, "auth", None)
        return found

    @property
    def progress_token(self) -> int | str | None:
        return self.request.progress_token

    @property
    def protocol_version(self) -> str | None:
        return self.modern.version if self.modern is not None else self.session.protocol_version

    @property
    def client_capabilities(self) -> ClientCapabilities:
        return self.modern.capabilities if self.modern is not None else self.session.client_capabilities

    @property
    def client_info(self) -> Implementation | None:
        return self.modern.client_info if self.modern is not None else self.session.client_info

    @property
    def app(self) -> Any:
        return self.session.app

    @property
    def state(self) -> Any:
        """What the app's lifespan yielded (``None`` without a lifespan)."""
        return getattr(self.session.app, "state", None)

    async def start_task(self, work: Callable[[Context], Awaitable[Any]]) -> Any:
        """Answer this request with a task running ``work(ctx)`` in the
        background (a handler's ``return await ctx.start_task(work)``; the app
        needs tasks). The request's input-required rounds may come first."""
        from ._tasks import start_task

        params = self.request.params
        task = params.get("task", UNSET) if isinstance(params, dict) else getattr(params, "task", UNSET)
        return await start_task(self, work, task_param=task)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress if the caller asked for it (else a no-op)."""
        if self._detached:
            return
        await self.request.report_progress(progress, total, message)

    async def log(self, level: str, data: Any, *, logger: str | None = None) -> None:
        if self._detached:
            return
        if self.modern is not None:
            # Stateless era: only at or above the level this request asked for.
            threshold = self.modern.log_level
            if level not in _LEVEL_RANK:
                raise ValueError(f"unknown log level {level!r}; one of {', '.join(LOG_LEVELS)}")
            if threshold is None or _LEVEL_RANK[level] < _LEVEL_RANK[threshold]:
                return
            params = LoggingMessageNotificationParams(
                level=cast(LoggingLevel, level), data=data, logger=UNSET if logger is None else logger
            )
            await self.session.peer.notify("notifications/message", params)
            return
        await self.session.send_log(level, data, logger=logger)

    async def debug(self, message: Any, *, logger: str | None = None) -> None:
        await self.log("debug", message, logger=logger)

    async def info(self, message: Any, *, logger: str | None = None) -> None:
        await self.log("info", message, logger=logger)

    async def warning(self, message: Any, *, logger: str | None = None) -> None:
        await self.log("warning", message, logger=logger)

    async def error(self, message: Any, *, logger: str | None = None) -> None:
        await self.log("error", message, logger=logger)

    async def sample(
        self,
        messages: str | list[SamplingMessage] | list[dict[str, Any]],
        *,
        max_tokens: int = 1000,
        system_prompt: str | None = None,
        temperature: float | None = None,
        **extra: Any,
    ) -> CreateMessageResult:
        """Ask the client's LLM for a completion (needs the sampling capability)."""
        if isinstance(messages, str):
            msgs: Any = [SamplingMessage(role="user", content=TextContent(text=messages))]
        else:
            msgs = [
                m if isinstance(m, SamplingMessage) else msgspec.convert(m, SamplingMessage) for m in messages
            ]
        fields: dict[str, Any] = {"messages": msgs, "max_tokens": max_tokens, **extra}
        if system_prompt is not None:
            fields["system_prompt"] = system_prompt
        if temperature is not None:
            fields["temperature"] = temperature
        params = CreateMessageRequestParams(**fields)
        return await self._ask(
            CreateMessageRequest(params=params),
            "sampling",
            CreateMessageResult,
            lambda: self.session.create_message(params),
        )

    async def elicit(self, message: str, schema: Any) -> ElicitResult:
        """Ask the user to fill a form. ``schema`` is a flat object JSON schema
        (dict) or a Struct / dataclass type whose fields are primitives."""
        requested = schema if isinstance(schema, dict) else _elicitation_schema(schema)
        params = msgspec.convert(
            {"message": message, "requestedSchema": requested, "mode": "form"}
            if (self.protocol_version or "") >= V2025_11_25
            else {"message": message, "requestedSchema": requested},
            ElicitRequestParams,
        )
        return await self._ask(
            ElicitRequest(params=params),
            _form_capability(self.client_capabilities),
            ElicitResult,
            lambda: self.session.elicit(params),
        )

    async def elicit_url(self, message: str, url: str, elicitation_id: str) -> ElicitResult:
        """Send the user to a URL (out-of-band interaction; 2025-11-25)."""
        params = ElicitRequestParams(message=message, mode="url", url=url, elicitation_id=elicitation_id)
        return await self._ask(
            ElicitRequest(params=params), "elicitation.url", ElicitResult, lambda: self.session.elicit(params)
        )

    async def list_roots(self) -> list[Root]:
        """The client's roots (needs the roots capability)."""
        if self.task is None and self.modern is None:
            return await self.session.list_roots()

        async def direct() -> ListRootsResult:
            return ListRootsResult(roots=await self.session.list_roots())

        result: ListRootsResult = await self._ask(ListRootsRequest(), "roots", ListRootsResult, direct)
        return result.roots


def _form_capability(caps: ClientCapabilities) -> str:
    """``elicitation`` declared as ``{}`` means forms; ``{url: {}}`` alone does not."""
    elicitation = caps.elicitation
    if elicitation is not UNSET and elicitation.form is UNSET and elicitation.url is not UNSET:
        return "elicitation.form"
    return "elicitation"


def _group_leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for inner in group.exceptions for leaf in _group_leaves(inner)]
    return [group]


#: Requests that exist only in the stateless era.
_MODERN_ONLY: Final = frozenset(
    m for m, spec in METHODS.items() if spec.kind == "request" and is_modern(spec.since)
)


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


def _elicitation_schema(tp: Any) -> dict[str, Any]:
    """A flat elicitation form schema from a Struct / dataclass / TypedDict type."""
    (schema,), components = msgspec.json.schema_components([tp], ref_template="{name}")
    if "$ref" in schema:
        schema = components[schema["$ref"]]
    props: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        if "$ref" in prop:  # enums are components
            prop = {**components[prop.pop("$ref")], **prop}
        if prop.get("title") == name:
            prop.pop("title")
        if "enum" in prop and "type" not in prop:
            values = prop["enum"]
            if not all(isinstance(v, str) for v in values):
                raise TypeError(f"elicitation field {name!r}: enum values must be strings")
            prop["type"] = "string"
        if prop.get("type") not in ("string", "number", "integer", "boolean") and not (
            prop.get("type") == "array" and isinstance(prop.get("items"), dict)
        ):
            raise TypeError(f"elicitation field {name!r} must be a primitive (str, int, float, bool, enum)")
        props[name] = prop
    out: dict[str, Any] = {"type": "object", "properties": props}
    if schema.get("required"):
        out["required"] = list(schema["required"])
    return out
