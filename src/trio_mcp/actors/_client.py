"""The client role actor: one MCP session with one server.

:class:`ClientSession` owns a :class:`Peer`, performs the ``initialize``
handshake (offering the newest version, accepting an older one it supports),
exposes a typed method for every server feature, answers server-to-client
requests (sampling, elicitation, roots) through handlers the user supplies,
and routes notifications to callbacks. Deadlines come from the caller's
cancel scope; a cancelled call sends ``notifications/cancelled``.

Stateless era (2026-07-28) specifics:

* Version retry: a ``server/discover`` or a stateless request answered
  -32022 (UnsupportedProtocolVersion) with ``data.supported`` is retried once
  with the newest version both sides speak. A stateless one: the request is
  sent again with it. A handshake one: the session falls back to
  ``initialize`` with it (not when pinned to ``era="modern"``, which then
  fails as before) and the request is sent in the handshake era.
* Custom parameter headers (SEP-2243): ``list_tools`` / ``list_all_tools``
  remember each tool's ``x-mcp-header`` annotations and leave out (and log)
  the tools whose annotations are invalid; ``call_tool`` then publishes the
  call's ``Mcp-Param-*`` headers for the transport
  (:data:`trio_mcp.transports.http._headers.PARAM_HEADERS`, imported on first
  use). Call a tool after listing it for its headers to be sent.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Final, Literal, TypeVar, cast, overload

import msgspec
import trio
from msgspec import UNSET

from .._util import collapse_groups
from ..protocol import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_VERSIONS,
    RESULT_INPUT_REQUIRED,
    V2025_03_26,
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    CompleteRequestParams,
    CompleteResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    DiscoverResult,
    ElicitationCapability,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    GetPromptRequestParams,
    GetPromptResult,
    Implementation,
    InitializeRequestParams,
    InitializeResult,
    InputRequiredResult,
    InvalidParams,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListRootsRequest,
    ListRootsResult,
    ListToolsResult,
    LoggingMessageNotificationParams,
    McpError,
    MethodNotFound,
    PaginatedRequestParams,
    Prompt,
    PromptReference,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    ResourceTemplateReference,
    Root,
    RootsCapability,
    SamplingCapability,
    ServerCapabilities,
    SetLevelRequestParams,
    SubscribeRequestParams,
    SubscriptionFilter,
    SubscriptionsListenRequestParams,
    Tool,
    UnsubscribeRequestParams,
    UnsupportedProtocolVersion,
    adapt,
    coerce,
    result_type_of,
)
from ..transports import MessageStream, TransportError
from ._actor import ExitReason
from ._instrument import Instrumentation, instrument
from ._middleware import ClientCall, ClientMiddleware, run_chain
from ._peer import InboundRequest, Peer, PeerLimits, ProgressCallback
from ._server import METHOD_CAPABILITY, _declared

__all__ = ["DEFAULT_CLIENT_INFO", "ERA_CACHE", "ClientSession", "Era", "open_session"]

log = logging.getLogger("trio_mcp.client")

DEFAULT_CLIENT_INFO: Final = Implementation(name="trio-mcp", version="0.1.0")

SamplingHandler = Callable[[CreateMessageRequestParams], Awaitable[CreateMessageResult]]
ElicitationHandler = Callable[[ElicitRequestParams], Awaitable[ElicitResult]]
LogHandler = Callable[[LoggingMessageNotificationParams], Awaitable[None]]
NotificationHandler = Callable[[str, Any], Awaitable[None]]
UriHandler = Callable[[str], Awaitable[None]]
Callback = Callable[[], Awaitable[None]]

#: The most pages a ``list_all_*`` helper follows before it gives up (a
#: server returning cursors forever must not hang the caller).
MAX_PAGES: Final = 10_000
#: The most input-required rounds one stateless request may take.
MAX_INPUT_ROUNDS: Final = 16
#: Seconds the ``server/discover`` probe may take before the client falls
#: back to ``initialize`` (a server that ignores unknown requests).
DISCOVER_PROBE_TIMEOUT: Final = 5.0
#: The input-schema annotation of SEP-2243 custom headers.
_X_MCP_HEADER: Final = "x-mcp-header"

#: Seconds to wait for ``notifications/subscriptions/acknowledged``.
LISTEN_ACK_TIMEOUT: Final = 10.0

Era = Literal["auto", "handshake", "modern"]


class _EraCache:
    """Verdicts of era probes, per server key (bounded, oldest evicted)."""

    max_entries = 256

    def __init__(self) -> None:
        self._verdicts: dict[str, str] = {}

    def get(self, key: str | None) -> str | None:
        return None if key is None else self._verdicts.get(key)

    def set(self, key: str | None, era: str) -> None:
        if key is None:
            return
        self._verdicts.pop(key, None)
        if len(self._verdicts) >= self.max_entries:
            self._verdicts.pop(next(iter(self._verdicts)))
        self._verdicts[key] = era

    def forget(self, key: str | None) -> None:
        if key is not None:
            self._verdicts.pop(key, None)

    def clear(self) -> None:
        self._verdicts.clear()


#: Era verdicts shared by every client in this process.
_R = TypeVar("_R")

ERA_CACHE: Final = _EraCache()


class ClientSession:
    """A client's session with one server. Start with ``nursery.start(session.run)``:
    it returns (``started``) once the handshake is done."""

    def __init__(
        self,
        stream: MessageStream,
        *,
        client_info: Implementation = DEFAULT_CLIENT_INFO,
        protocol_version: str = LATEST_HANDSHAKE_VERSION,
        era: Era = "handshake",
        server_key: str | None = None,
        discover_timeout: float = DISCOVER_PROBE_TIMEOUT,
        sampling_handler: SamplingHandler | None = None,
        sampling_tools: bool = False,
        elicitation_handler: ElicitationHandler | None = None,
        elicitation_modes: Sequence[str] = ("form", "url"),
        roots: Sequence[Root] | None = None,
        on_log: LogHandler | None = None,
        on_tools_changed: Callback | None = None,
        on_prompts_changed: Callback | None = None,
        on_resources_changed: Callback | None = None,
        on_resource_updated: UriHandler | None = None,
        on_notification: NotificationHandler | None = None,
        limits: PeerLimits | None = None,
        name: str = "client",
        extensions: dict[str, dict[str, Any]] | None = None,
        middleware: Sequence[ClientMiddleware] = (),
        instrumentation: Sequence[Instrumentation] | None = None,
    ) -> None:
        if protocol_version not in HANDSHAKE_VERSIONS:
            raise ValueError(f"protocol_version must be one of {HANDSHAKE_VERSIONS}")
        if era not in ("auto", "handshake", "modern"):
            raise ValueError("era must be 'auto', 'handshake' or 'modern'")
        self.era_setting: Era = era
        #: Seconds the ``server/discover`` probe of ``era="auto"`` may take.
        self.discover_timeout = discover_timeout
        self.server_key = server_key
        #: "handshake" or "modern" once connected.
        self.era: str | None = None
        self._log_level: str | None = None
        self._meta_cache: tuple[Any, dict[str, Any]] | None = None
        self._listen_scope: trio.CancelScope | None = None
        self._listen_filter = SubscriptionFilter()
        self._modern_subscriptions: set[str] = set()
        self._nursery: trio.Nursery | None = None
        #: Tool name -> its ``x-mcp-header`` annotations ({property path: header
        #: name}), from the tools/list pages of the stateless era.
        self._param_maps: dict[str, dict[tuple[str, ...], str]] = {}
        #: Held while a -32022 answer is acted upon (one renegotiation at a time).
        self._renegotiating = trio.Lock()
        self.name = name
        self.peer = Peer(stream, self, limits=limits, name=name)
        self.client_info = client_info
        self.offered_version = protocol_version
        self.sampling_handler = sampling_handler
        #: Declare ``sampling.tools``: the sampling handler accepts ``tools`` / ``toolChoice``.
        self.sampling_tools = sampling_tools
        self.elicitation_handler = elicitation_handler
        self.elicitation_modes = tuple(elicitation_modes)
        self._roots: list[Root] | None = list(roots) if roots is not None else None
        self.on_log = on_log
        self.on_tools_changed = on_tools_changed
        self.on_prompts_changed = on_prompts_changed
        self.on_resources_changed = on_resources_changed
        self.on_resource_updated = on_resource_updated
        self.on_notification = on_notification
        self.server_info: Implementation | None = None
        self.server_capabilities = ServerCapabilities()
        #: supports() answers for one capabilities object (replaced, never mutated).
        self._supports: tuple[ServerCapabilities, dict[str, bool]] = (self.server_capabilities, {})
        self.protocol_version: str | None = None
        self.instructions: str | None = None
        #: Extensions this client declares (SEP-2133): identifier -> settings.
        self.extensions: dict[str, dict[str, Any]] = dict(extensions or {})
        self._tasks: Any = None
        #: Around every call of the session's API, first outermost (see ``actors._middleware``).
        self.middleware = tuple(middleware)
        if self.middleware:
            self._call = self._call_through_middleware  # type: ignore[method-assign]
        # Tracing and other observers (None: the process defaults; see ``actors._instrument``).
        instrument(self, instrumentation)

    @property
    def tasks(self) -> Any:
        """Call tools as tasks and follow them (a :class:`~trio_mcp.actors.TaskClient`)."""
        if self._tasks is None:
            from ._client_tasks import TaskClient

            self._tasks = TaskClient(self)
        return self._tasks

    # ---------------------------------------------------------------- run

    def capabilities(self) -> ClientCapabilities:
        caps: dict[str, Any] = {}
        if self.sampling_handler is not None:
            caps["sampling"] = SamplingCapability(tools={} if self.sampling_tools else UNSET)
        if self.elicitation_handler is not None:
            modes: dict[str, Any] = {m: {} for m in self.elicitation_modes}
            caps["elicitation"] = ElicitationCapability(**modes)
        if self._roots is not None:
            caps["roots"] = RootsCapability(list_changed=True)
        if self.extensions:
            caps["extensions"] = {k: dict(v) for k, v in self.extensions.items()}
        return ClientCapabilities(**caps)

    async def run(
        self, *, task_status: trio.TaskStatus[ClientSession] = trio.TASK_STATUS_IGNORED
    ) -> ExitReason:
        connected = False

        async def run_peer(*, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                await self.peer.run(task_status=task_status)
            except TransportError:
                if connected:
                    raise  # a live session's transport broke: that is how this actor ends
                # Before the handshake is done, the handshake's own ConnectionClosed
                # (which names this failure) is the one error the caller gets.

        with collapse_groups(causes=(TransportError,)):
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(run_peer)
                try:
                    await self._connect()
                except BaseException:
                    await self.peer.aclose()
                    raise
                connected = True
                task_status.started(self)
                await self.peer.wait_stopped()
                nursery.cancel_scope.cancel()
        return ExitReason("closed", "session ended")

    async def _connect(self) -> None:
        """Pick the era: pinned, cached, or probed with ``server/discover``
        (falling back to ``initialize`` on anything but a modern answer)."""
        era = self.era_setting
        if era == "auto":
            era = cast(Era, ERA_CACHE.get(self.server_key) or "auto")
        cached = self.era_setting == "auto" and era != "auto"
        if era == "handshake":
            try:
                await self._initialize()
            except McpError:
                if not cached:
                    raise
                ERA_CACHE.forget(self.server_key)  # the verdict went stale: probe again
                if not await self._discover(strict=False):
                    raise
        elif era == "modern":
            if not await self._discover(strict=not cached):
                ERA_CACHE.forget(self.server_key)  # the verdict went stale: the server left the era
                await self._initialize()
        elif not await self._discover(strict=False):
            await self._initialize()
        if self.era == "modern" and (
            self.on_tools_changed or self.on_prompts_changed or self.on_resources_changed
        ):
            await self._relisten()  # list changes arrive in both eras without asking
        ERA_CACHE.set(self.server_key, self.era or "handshake")

    def _modern_meta(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``_meta`` every stateless request carries. Built once and
        shared (read-only) until the version or log level changes."""
        cached = self._meta_cache
        key = (self.protocol_version, self._log_level)
        if cached is None or cached[0] != key:
            meta: dict[str, Any] = {
                META_PROTOCOL_VERSION: self.protocol_version or MODERN_VERSIONS[-1],
                META_CLIENT_CAPABILITIES: msgspec.to_builtins(self.capabilities()),
                META_CLIENT_INFO: msgspec.to_builtins(self.client_info),
            }
            if self._log_level is not None:
                meta[META_LOG_LEVEL] = self._log_level
            cached = self._meta_cache = (key, meta)
        if extra:
            return {**cached[1], **extra}
        return cached[1]

    async def _discover(
        self, *, strict: bool, version: str = MODERN_VERSIONS[-1], retry: bool = True
    ) -> bool:
        """Probe; True when the server answered as a modern server. A -32022
        answer naming the versions the server supports is retried once with
        the newest common one (a handshake one: False, and ``initialize``
        offers it, unless ``strict``)."""
        params = {"_meta": self._modern_meta({META_PROTOCOL_VERSION: version})}
        try:
            # Bounded when probing (a server that ignores unknown requests must
            # not stall the fallback); not when the era is pinned: then this is
            # simply the first request (an OAuth login may run inside it), and
            # its deadline is the caller's cancel scope.
            with trio.fail_after(self.discover_timeout if not strict else math.inf):
                raw = await self.peer.request("server/discover", params, stateless=True)
            result = coerce(raw, DiscoverResult)
        except UnsupportedProtocolVersion as exc:
            choice = self._common_version(exc) if retry else None
            if choice in MODERN_VERSIONS:
                log.info("%s: server/discover with %s refused; retrying with %s", self.name, version, choice)
                return await self._discover(strict=strict, version=choice, retry=False)
            if choice is not None and not strict:
                log.info("%s: the server speaks %s: falling back to initialize", self.name, choice)
                self.offered_version = choice
                return False
            if strict:
                raise UnsupportedProtocolVersion(
                    f"the server does not speak the stateless era: {exc}", data=exc.data
                ) from None
            return False
        except (McpError, msgspec.ValidationError, msgspec.DecodeError, trio.TooSlowError) as exc:
            if strict:
                raise UnsupportedProtocolVersion(
                    f"the server does not speak the stateless era: {exc}"
                ) from None
            return False
        common = [v for v in MODERN_VERSIONS if v in result.supported_versions]
        if not common:
            if strict:
                raise UnsupportedProtocolVersion(
                    f"the server supports {result.supported_versions}; this client speaks {list(MODERN_VERSIONS)}",
                    data={"supported": list(MODERN_VERSIONS), "requested": result.supported_versions},
                )
            return False
        self.era = "modern"
        self.protocol_version = common[-1]
        self.server_capabilities = result.capabilities
        self.instructions = None if result.instructions is UNSET else result.instructions
        info = result.meta.get(META_SERVER_INFO) if isinstance(result.meta, dict) else None
        if isinstance(info, dict):
            try:
                self.server_info = msgspec.convert(info, Implementation)
            except msgspec.ValidationError:
                pass
        return True

    def _common_version(self, exc: McpError) -> str | None:
        """The newest version this client and the server (``data.supported`` of a
        -32022 answer) both speak: a stateless one first, else a handshake one
        no newer than ``protocol_version`` (what this client was told to offer)."""
        data = exc.data
        supported = data.get("supported") if isinstance(data, dict) else None
        if not isinstance(supported, list):
            return None
        modern = [v for v in MODERN_VERSIONS if v in supported]
        if modern:
            return modern[-1]
        handshake = [v for v in HANDSHAKE_VERSIONS if v in supported and v <= self.offered_version]
        return handshake[-1] if handshake else None

    async def _renegotiate(self, exc: UnsupportedProtocolVersion, sent: str | None) -> str | None:
        """After a stateless request sent with version ``sent`` was answered
        -32022: "modern" (send it again, ``protocol_version`` is now the
        common stateless version), "handshake" (the session fell back to
        ``initialize``) or None (nothing in common: give up)."""
        async with self._renegotiating:
            if self.era != "modern":
                return "handshake"  # another request already fell back
            if self.protocol_version != sent:
                return "modern"  # another request already switched versions
            choice = self._common_version(exc)
            if choice in MODERN_VERSIONS:
                log.info("%s: %s refused by the server; retrying with %s", self.name, sent, choice)
                self.protocol_version = choice
                return "modern"
            if choice is None or self.era_setting == "modern":
                return None
            log.info(
                "%s: the server no longer speaks %s; falling back to initialize with %s",
                self.name,
                sent,
                choice,
            )
            await self._fall_back_to_handshake(choice)
            return "handshake"

    async def _fall_back_to_handshake(self, version: str) -> None:
        if self._listen_scope is not None:
            self._listen_scope.cancel()
            self._listen_scope = None
        self.offered_version = version
        await self._initialize()
        ERA_CACHE.set(self.server_key, "handshake")
        subscribed, self._modern_subscriptions = sorted(self._modern_subscriptions), set()
        for uri in subscribed:  # what subscriptions/listen watched, the handshake way
            try:
                await self._call("resources/subscribe", SubscribeRequestParams(uri=uri), None)
            except McpError as exc:
                log.warning("%s: resource %r no longer watched: %s", self.name, uri, exc)

    async def _initialize(self) -> None:
        params = InitializeRequestParams(
            protocol_version=self.offered_version,
            capabilities=self.capabilities(),
            client_info=self.client_info,
        )
        result: InitializeResult = await self.peer.request(
            "initialize", params, result_type=InitializeResult, cancellable=False
        )
        if result.protocol_version not in HANDSHAKE_VERSIONS:
            raise UnsupportedProtocolVersion(
                f"server answered protocol version {result.protocol_version!r}; "
                f"this client supports {', '.join(HANDSHAKE_VERSIONS)}",
                data={"supported": list(HANDSHAKE_VERSIONS), "requested": result.protocol_version},
            )
        self.era = "handshake"
        self.protocol_version = result.protocol_version
        self.peer.batch_arrays = result.protocol_version == V2025_03_26  # the one version with batches
        self.server_info = result.server_info
        self.server_capabilities = result.capabilities
        self.instructions = None if result.instructions is UNSET else result.instructions
        await self.peer.notify("notifications/initialized")

    async def aclose(self) -> None:
        await self.peer.aclose()

    # ----------------------------------------------------- server features

    def supports(self, method: str) -> bool:
        """Whether the server's declared capabilities allow ``method``."""
        caps = self.server_capabilities
        cache = self._supports
        if cache[0] is not caps:  # new capabilities (discover, initialize, refresh)
            cache = self._supports = (caps, {})
        known = cache[1].get(method)
        if known is None:
            gate = METHOD_CAPABILITY.get(method)
            known = gate is None or _declared(caps, gate)
            if gate is not None:  # gated methods only: a bounded set
                cache[1][method] = known
        return known

    @overload
    def _call(
        self, method: str, params: Any, result_type: type[_R], on_progress: ProgressCallback | None = None
    ) -> Awaitable[_R]: ...
    @overload
    def _call(
        self, method: str, params: Any, result_type: None, on_progress: ProgressCallback | None = None
    ) -> Awaitable[Any]: ...
    def _call(
        self,
        method: str,
        params: Any,
        result_type: type[_R] | None,
        on_progress: ProgressCallback | None = None,
    ) -> Awaitable[Any]:
        # Not a coroutine: its caller awaits the peer's request itself (one
        # frame less to create, and to pass through at each resumption).
        if not self.supports(method):
            raise MethodNotFound(
                f"the server did not declare the {METHOD_CAPABILITY[method]!r} capability needed for {method}"
            )
        if self.era != "modern":
            return self.peer.request(method, params, result_type=result_type, on_progress=on_progress)
        return self._call_modern(method, params, result_type, on_progress)

    async def _call_through_middleware(
        self, method: str, params: Any, result_type: Any, on_progress: ProgressCallback | None = None
    ) -> Any:
        last = partial(ClientSession._call, self, method, params, result_type, on_progress)
        return await run_chain(self.middleware, ClientCall(self, method, params), last)

    async def _call_modern(
        self, method: str, params: Any, result_type: Any, on_progress: ProgressCallback | None
    ) -> Any:
        """A stateless request: ``_meta`` carries version and capabilities;
        input-required results are answered by the same handlers as the
        handshake era's server-to-client requests, then retried."""
        own: Any = None
        if isinstance(params, msgspec.Struct) and "input_responses" in params.__struct_fields__:
            # tools/call, prompts/get, resources/read: stay a Struct (no dict round trip)
            own = params.meta if isinstance(params.meta, dict) else None  # type: ignore[attr-defined]
            data: Any = msgspec.structs.replace(params, meta=self._modern_meta(own))
            base: Any = None
        else:
            base = _params_dict(params)
            data = dict(base)
            data["_meta"] = self._modern_meta(base.get("_meta"))
        renegotiated = False
        rounds = 0
        while rounds < MAX_INPUT_ROUNDS:
            sent = self.protocol_version
            try:
                raw = await self.peer.request(method, data, on_progress=on_progress, stateless=True)
            except UnsupportedProtocolVersion as exc:
                if renegotiated:
                    raise
                renegotiated = True
                outcome = await self._renegotiate(exc, sent)
                if outcome is None:
                    raise
                if outcome == "handshake":  # the same call again (the middleware saw it once)
                    return await ClientSession._call(self, method, params, result_type, on_progress)
                # The same round again, under the new version.
                if base is None:
                    data = msgspec.structs.replace(data, meta=self._modern_meta(own))
                else:
                    data = {**data, "_meta": self._modern_meta(base.get("_meta"))}
                continue
            rounds += 1
            if result_type_of(raw) != RESULT_INPUT_REQUIRED:
                if result_type is None:
                    return None
                try:
                    return coerce(raw, result_type)
                except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                    raise InvalidParams(f"malformed result for {method}: {exc}") from None
            need = coerce(raw, InputRequiredResult)
            responses: dict[str, Any] = {}
            for key, question in ({} if need.input_requests is UNSET else need.input_requests).items():
                responses[key] = await self._answer(question)
            # A fresh object each round: what was sent is never changed.
            if base is None:
                data = msgspec.structs.replace(
                    data, input_responses=responses, request_state=need.request_state
                )
            else:
                data = {**data, "inputResponses": responses}
                if need.request_state is not UNSET:
                    data["requestState"] = need.request_state
                else:
                    data.pop("requestState", None)
        raise InvalidParams(f"{method}: more than {MAX_INPUT_ROUNDS} input-required rounds")

    async def _answer(self, question: Any) -> Any:
        # A tagged InputRequest: the tag is the method it stands for.
        method = type(question).__struct_config__.tag
        if isinstance(question, CreateMessageRequest) and self.sampling_handler is not None:
            return await self.sampling_handler(question.params)
        if isinstance(question, ElicitRequest) and self.elicitation_handler is not None:
            return await self.elicitation_handler(question.params)
        if isinstance(question, ListRootsRequest) and self._roots is not None:
            return ListRootsResult(roots=list(self._roots))
        raise MethodNotFound(f"the server asked for {method}, which this client does not offer")

    async def ping(self) -> None:
        """Liveness check: ``ping`` (handshake era) or ``server/discover`` (stateless era)."""
        if self.era == "modern":
            await self.peer.request("server/discover", {"_meta": self._modern_meta()}, stateless=True)
        else:
            await self.peer.request("ping")

    async def list_tools(self, cursor: str | None = None) -> ListToolsResult:
        """One page of tools. Stateless era: without the tools whose
        ``x-mcp-header`` annotations are invalid (logged); the annotations of
        the others are remembered for ``call_tool``."""
        result: ListToolsResult = await self._call("tools/list", _page(cursor), ListToolsResult)
        if self.era == "modern":
            kept = self._absorb_tools(result.tools)
            if len(kept) != len(result.tools):
                result = msgspec.structs.replace(result, tools=kept)
        return result

    def _absorb_tools(self, tools: list[Tool]) -> list[Tool]:
        kept = []
        for tool in tools:
            if not _mentions(tool.input_schema, _X_MCP_HEADER):
                self._param_maps.pop(tool.name, None)
                kept.append(tool)
                continue
            codec = _param_codec()
            try:
                self._param_maps[tool.name] = codec.param_header_map(tool.input_schema)
            except codec.InvalidParamHeader as exc:
                self._param_maps.pop(tool.name, None)
                log.warning(
                    "%s: leaving out tool %r: invalid %s annotation: %s",
                    self.name,
                    tool.name,
                    _X_MCP_HEADER,
                    exc,
                )
                continue
            kept.append(tool)
        return kept

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        meta: dict[str, Any] | None = None,
    ) -> CallToolResult:
        params = CallToolRequestParams(
            name=name,
            arguments=UNSET if arguments is None else arguments,
            meta=UNSET if meta is None else meta,
        )
        if not self._param_maps or self.era != "modern":
            return await self._call("tools/call", params, CallToolResult, on_progress)
        # Publish this call's Mcp-Param-* headers for the transport (None for a
        # tool without annotations, hiding those of an enclosing call).
        codec = _param_codec()
        header_map = self._param_maps.get(name)
        published = None
        if header_map:
            headers = codec.param_headers(header_map, arguments or {})
            published = codec.ParamHeaders(name, params.arguments, headers)
        token = codec.PARAM_HEADERS.set(published)
        try:
            return await self._call("tools/call", params, CallToolResult, on_progress)
        finally:
            codec.PARAM_HEADERS.reset(token)

    async def list_resources(self, cursor: str | None = None) -> ListResourcesResult:
        return await self._call("resources/list", _page(cursor), ListResourcesResult)

    async def list_resource_templates(self, cursor: str | None = None) -> ListResourceTemplatesResult:
        return await self._call("resources/templates/list", _page(cursor), ListResourceTemplatesResult)

    async def read_resource(self, uri: str) -> ReadResourceResult:
        return await self._call("resources/read", ReadResourceRequestParams(uri=uri), ReadResourceResult)

    async def subscribe_resource(self, uri: str) -> None:
        if self.era == "modern":
            self._modern_subscriptions.add(uri)
            await self._relisten()
            return
        await self._call("resources/subscribe", SubscribeRequestParams(uri=uri), None)

    async def unsubscribe_resource(self, uri: str) -> None:
        if self.era == "modern":
            self._modern_subscriptions.discard(uri)
            await self._relisten()
            return
        await self._call("resources/unsubscribe", UnsubscribeRequestParams(uri=uri), None)

    def _wanted_filter(self) -> SubscriptionFilter:
        caps = self.server_capabilities
        return SubscriptionFilter(
            tools_list_changed=True
            if self.on_tools_changed is not None and _declared(caps, "tools")
            else UNSET,
            prompts_list_changed=True
            if self.on_prompts_changed is not None and _declared(caps, "prompts")
            else UNSET,
            resources_list_changed=True
            if self.on_resources_changed is not None and _declared(caps, "resources")
            else UNSET,
            resource_subscriptions=sorted(self._modern_subscriptions)
            if self._modern_subscriptions
            else UNSET,
        )

    async def _relisten(self) -> None:
        """(Re)open the ``subscriptions/listen`` stream with the current filter
        and wait until the server acknowledged it."""
        if self._listen_scope is not None:
            self._listen_scope.cancel()
            self._listen_scope = None
        wanted = self._wanted_filter()
        if wanted == SubscriptionFilter() or self._nursery is None:
            return
        acknowledged = trio.Event()
        self._listen_ack = acknowledged
        scope = trio.CancelScope()
        self._listen_scope = scope

        async def listen() -> None:
            with scope:
                params = SubscriptionsListenRequestParams(notifications=wanted, meta=self._modern_meta())
                try:
                    await self.peer.request("subscriptions/listen", params)
                except McpError as exc:
                    if not self.peer.closed:
                        log.warning("%s: subscriptions/listen ended: %s", self.name, exc)
                finally:
                    acknowledged.set()

        self._nursery.start_soon(listen)
        # Bounded: a server that never acknowledges leaves the stream open
        # (notifications still arrive once it does), it does not hang us.
        with trio.move_on_after(LISTEN_ACK_TIMEOUT):
            await acknowledged.wait()

    async def open_listen(self) -> None:
        """Open the notification stream of the stateless era for the
        callbacks given (list changes) and the subscribed resources."""
        if self.era == "modern":
            await self._relisten()

    async def list_prompts(self, cursor: str | None = None) -> ListPromptsResult:
        return await self._call("prompts/list", _page(cursor), ListPromptsResult)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> GetPromptResult:
        params = GetPromptRequestParams(name=name, arguments=UNSET if arguments is None else arguments)
        return await self._call("prompts/get", params, GetPromptResult)

    async def complete(
        self,
        ref: PromptReference | ResourceTemplateReference,
        argument: str,
        value: str,
        *,
        context: dict[str, str] | None = None,
    ) -> CompleteResult:
        raw: dict[str, Any] = {"ref": ref, "argument": {"name": argument, "value": value}}
        if context:
            raw["context"] = {"arguments": context}
        params = msgspec.convert(msgspec.to_builtins(raw), CompleteRequestParams)
        return await self._call("completion/complete", params, CompleteResult)

    async def set_logging_level(self, level: str) -> None:
        """Handshake era: ``logging/setLevel``. Stateless era: every later
        request carries the level in ``_meta``."""
        if self.era == "modern":
            self._log_level = level
            return
        await self._call("logging/setLevel", SetLevelRequestParams(level=level), None)  # type: ignore[arg-type]

    async def list_all_tools(self) -> list[Tool]:
        return await self._all(self.list_tools, "tools")

    async def list_all_resources(self) -> list[Resource]:
        return await self._all(self.list_resources, "resources")

    async def list_all_resource_templates(self) -> list[ResourceTemplate]:
        return await self._all(self.list_resource_templates, "resource_templates")

    async def list_all_prompts(self) -> list[Prompt]:
        return await self._all(self.list_prompts, "prompts")

    async def _all(self, fetch: Callable[[str | None], Awaitable[Any]], field: str) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            page = await fetch(cursor)
            items.extend(getattr(page, field))
            nxt = page.next_cursor
            if nxt is UNSET or nxt is None or nxt == "":
                return items
            if nxt in seen:
                raise InvalidParams(f"server repeated cursor {nxt!r} while listing {field}")
            seen.add(nxt)
            cursor = nxt
        raise InvalidParams(f"more than {MAX_PAGES} pages while listing {field}")

    # ---------------------------------------------------------------- roots

    @property
    def roots(self) -> list[Root] | None:
        return None if self._roots is None else list(self._roots)

    async def set_roots(self, roots: Sequence[Root]) -> None:
        """Replace the roots and tell the server (``roots/list_changed``)."""
        if self._roots is None:
            raise RuntimeError(
                "this session was opened without roots; pass roots=[...] to offer the capability"
            )
        self._roots = list(roots)
        await self.peer.notify("notifications/roots/list_changed")

    # ----------------------------------------- server -> client (dispatcher)

    async def handle_request(self, request: InboundRequest) -> Any:
        method = request.method
        version = self.protocol_version or LATEST_HANDSHAKE_VERSION
        if method == "sampling/createMessage" and self.sampling_handler is not None:
            params = _decode(request.params, CreateMessageRequestParams, method)
            if params.tools is not UNSET and not self.sampling_tools:
                raise InvalidParams(
                    "this client did not declare sampling.tools: tools in sampling are not allowed"
                )
            return adapt(await self.sampling_handler(params), version)
        if method == "elicitation/create" and self.elicitation_handler is not None:
            params = _decode(request.params, ElicitRequestParams, method)
            mode = "form" if params.mode is UNSET else params.mode
            if mode not in self.elicitation_modes:
                raise InvalidParams(f"elicitation mode {mode!r} is not supported by this client")
            return adapt(await self.elicitation_handler(params), version)
        if method == "roots/list" and self._roots is not None:
            return ListRootsResult(roots=list(self._roots))
        raise MethodNotFound(f"Method not found: {method}")

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        return False

    async def handle_notification(self, method: str, params: Any) -> None:
        if method == "notifications/subscriptions/acknowledged":
            ack = getattr(self, "_listen_ack", None)
            if ack is not None:
                ack.set()
            return
        if method == "notifications/message" and self.on_log is not None:
            await self.on_log(coerce(params, LoggingMessageNotificationParams))
        elif method == "notifications/tools/list_changed" and self.on_tools_changed is not None:
            await self.on_tools_changed()
        elif method == "notifications/prompts/list_changed" and self.on_prompts_changed is not None:
            await self.on_prompts_changed()
        elif method == "notifications/resources/list_changed" and self.on_resources_changed is not None:
            await self.on_resources_changed()
        elif method == "notifications/resources/updated" and self.on_resource_updated is not None:
            uri = coerce(params, dict[str, Any]).get("uri")
            if isinstance(uri, str):
                await self.on_resource_updated(uri)
        elif self.on_notification is not None:
            await self.on_notification(method, params)

    def statistics(self) -> Any:
        return self.peer.statistics()


def _param_codec() -> Any:
    """The SEP-2243 helpers (:mod:`trio_mcp.transports.http._headers`), imported
    on first use: only sessions that met an ``x-mcp-header`` pay for the HTTP stack."""
    from ..transports.http import _headers

    return _headers


def _mentions(schema: Any, key: str) -> bool:
    """Whether ``key`` is a key of any object nested in ``schema`` (iterative)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if key in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _params_dict(params: Any) -> dict[str, Any]:
    if params is UNSET or params is None:
        return {}
    if isinstance(params, dict):
        return dict(params)
    return cast(dict[str, Any], msgspec.to_builtins(params))


def _page(cursor: str | None) -> Any:
    return UNSET if cursor is None else PaginatedRequestParams(cursor=cursor)


def _decode(params: Any, type_: Any, method: str) -> Any:
    try:
        return coerce(params, type_)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise InvalidParams(f"Invalid params for {method}: {exc}") from None


@asynccontextmanager
async def open_session(stream: MessageStream, **options: Any) -> AsyncIterator[ClientSession]:
    """Run a :class:`ClientSession` over ``stream`` for the ``async with`` body.

    A failure comes out as one typed error: a call's :class:`ConnectionClosed`
    (its cause the :class:`TransportError` that broke the session), or the
    ``TransportError`` itself when the body was not calling; never a group."""
    session = ClientSession(stream, **options)
    with collapse_groups(causes=(TransportError,)):
        async with trio.open_nursery() as nursery:
            await nursery.start(session.run)
            try:
                yield session
            finally:
                await session.aclose()
                nursery.cancel_scope.cancel()
