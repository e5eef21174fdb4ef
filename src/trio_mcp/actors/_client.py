"""The client role actor: one MCP session with one server.

:class:`ClientSession` owns a :class:`Peer`, performs the ``initialize``
handshake (offering the newest version, accepting an older one it supports),
exposes a typed method for every server feature, answers server-to-client
requests (sampling, elicitation, roots) through handlers the user supplies,
and routes notifications to callbacks. Deadlines come from the caller's
cancel scope; a cancelled call sends ``notifications/cancelled``.

Here: the session's life and its API (the server's features). Which era it
speaks, its handshake and the stateless requests are in :mod:`._client_era`;
what the server sends it (requests, notifications, the stateless
``subscriptions/listen`` stream) in :mod:`._client_inbound`.

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
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Final, NoReturn, TypeVar, overload

import msgspec
import trio
from msgspec import UNSET

from .._util import collapse_groups
from ..protocol import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    CompleteRequestParams,
    CompleteResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitationCapability,
    ElicitRequestParams,
    ElicitResult,
    GetPromptRequestParams,
    GetPromptResult,
    Implementation,
    InvalidParams,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
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
    Tool,
    UnsubscribeRequestParams,
)
from ..transports import MessageStream, TransportError
from ._actor import ExitReason
from ._client_call import ClientCall, ClientMiddleware
from ._client_era import DISCOVER_PROBE_TIMEOUT, ERA_CACHE, MAX_INPUT_ROUNDS, Era, _EraCache, _Negotiation
from ._client_inbound import LISTEN_ACK_TIMEOUT, _Inbound
from ._instrument import Instrumentation, instrument
from ._middleware import run_chain
from ._peer import Peer, PeerLimits, ProgressCallback
from ._server import METHOD_CAPABILITY, _declared

__all__ = [
    "DEFAULT_CLIENT_INFO",
    "DISCOVER_PROBE_TIMEOUT",
    "ERA_CACHE",
    "LISTEN_ACK_TIMEOUT",
    "MAX_INPUT_ROUNDS",
    "ClientSession",
    "Era",
    "_EraCache",
    "open_session",
]

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
#: The input-schema annotation of SEP-2243 custom headers.
_X_MCP_HEADER: Final = "x-mcp-header"

_R = TypeVar("_R")


class ClientSession(_Negotiation, _Inbound):
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
        cache = self._supports
        known = cache[1].get(method) if cache[0] is self.server_capabilities else None
        if not (known or (known is None and self.supports(method))):
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

    def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Awaitable[CallToolResult]:
        """Call the tool ``name``; await the result. (Not a coroutine function
        itself: it returns the call to await, one frame less at each of the
        call's resumptions; any error is raised when it is awaited.)"""
        params = CallToolRequestParams(
            name=name,
            arguments=UNSET if arguments is None else arguments,
            meta=UNSET if meta is None else meta,
        )
        if not self._param_maps or self.era != "modern":
            try:
                return self._call("tools/call", params, CallToolResult, on_progress)
            except McpError as exc:
                return _raise(exc)
        return self._call_tool_with_headers(name, arguments, params, on_progress)

    async def _call_tool_with_headers(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        params: CallToolRequestParams,
        on_progress: ProgressCallback | None,
    ) -> CallToolResult:
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


async def _raise(exc: BaseException) -> NoReturn:
    raise exc


def _page(cursor: str | None) -> Any:
    return UNSET if cursor is None else PaginatedRequestParams(cursor=cursor)


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
