"""The client role actor: one MCP session with one server.

:class:`ClientSession` owns a :class:`Peer`, performs the ``initialize``
handshake (offering the newest version, accepting an older one it supports),
exposes a typed method for every server feature, answers server-to-client
requests (sampling, elicitation, roots) through handlers the user supplies,
and routes notifications to callbacks. Deadlines come from the caller's
cancel scope; a cancelled call sends ``notifications/cancelled``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

import msgspec
import trio
from msgspec import UNSET

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
    InitializeRequestParams,
    InitializeResult,
    InvalidParams,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListRootsResult,
    ListToolsResult,
    LoggingMessageNotificationParams,
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
    Tool,
    UnsubscribeRequestParams,
    UnsupportedProtocolVersion,
    coerce,
)
from ..transports import MessageStream
from ._actor import ExitReason
from ._peer import InboundRequest, Peer, PeerLimits, ProgressCallback
from ._server import METHOD_CAPABILITY, _declared

__all__ = ["ClientSession", "open_session", "DEFAULT_CLIENT_INFO"]

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


class ClientSession:
    """A client's session with one server. Start with ``nursery.start(session.run)``:
    it returns (``started``) once the handshake is done."""

    def __init__(
        self,
        stream: MessageStream,
        *,
        client_info: Implementation = DEFAULT_CLIENT_INFO,
        protocol_version: str = LATEST_HANDSHAKE_VERSION,
        sampling_handler: SamplingHandler | None = None,
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
    ) -> None:
        if protocol_version not in HANDSHAKE_VERSIONS:
            raise ValueError(f"protocol_version must be one of {HANDSHAKE_VERSIONS}")
        self.name = name
        self.peer = Peer(stream, self, limits=limits, name=name)
        self.client_info = client_info
        self.offered_version = protocol_version
        self.sampling_handler = sampling_handler
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
        self.protocol_version: str | None = None
        self.instructions: str | None = None

    # ---------------------------------------------------------------- run

    def capabilities(self) -> ClientCapabilities:
        caps: dict[str, Any] = {}
        if self.sampling_handler is not None:
            caps["sampling"] = SamplingCapability()
        if self.elicitation_handler is not None:
            modes = {m: {} for m in self.elicitation_modes}
            caps["elicitation"] = ElicitationCapability(**modes)
        if self._roots is not None:
            caps["roots"] = RootsCapability(list_changed=True)
        return ClientCapabilities(**caps)

    async def run(self, *, task_status: trio.TaskStatus[ClientSession] = trio.TASK_STATUS_IGNORED) -> ExitReason:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.peer.run)
            try:
                await self._initialize()
            except BaseException:
                await self.peer.aclose()
                raise
            task_status.started(self)
            await self.peer.wait_stopped()
        return ExitReason("closed", "session ended")

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
        self.protocol_version = result.protocol_version
        self.server_info = result.server_info
        self.server_capabilities = result.capabilities
        self.instructions = None if result.instructions is UNSET else result.instructions
        await self.peer.notify("notifications/initialized")

    async def aclose(self) -> None:
        await self.peer.aclose()

    # ----------------------------------------------------- server features

    def supports(self, method: str) -> bool:
        gate = METHOD_CAPABILITY.get(method)
        return gate is None or _declared(self.server_capabilities, gate)

    async def _call(self, method: str, params: Any, result_type: Any, on_progress: ProgressCallback | None = None) -> Any:
        if not self.supports(method):
            raise MethodNotFound(
                f"the server did not declare the {METHOD_CAPABILITY[method]!r} capability needed for {method}"
            )
        return await self.peer.request(method, params, result_type=result_type, on_progress=on_progress)

    async def ping(self) -> None:
        await self.peer.request("ping")

    async def list_tools(self, cursor: str | None = None) -> ListToolsResult:
        return await self._call("tools/list", _page(cursor), ListToolsResult)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        meta: dict[str, Any] | None = None,
    ) -> CallToolResult:
        params = CallToolRequestParams(
            name=name, arguments=UNSET if arguments is None else arguments, meta=UNSET if meta is None else meta
        )
        return await self._call("tools/call", params, CallToolResult, on_progress)

    async def list_resources(self, cursor: str | None = None) -> ListResourcesResult:
        return await self._call("resources/list", _page(cursor), ListResourcesResult)

    async def list_resource_templates(self, cursor: str | None = None) -> ListResourceTemplatesResult:
        return await self._call("resources/templates/list", _page(cursor), ListResourceTemplatesResult)

    async def read_resource(self, uri: str) -> ReadResourceResult:
        return await self._call("resources/read", ReadResourceRequestParams(uri=uri), ReadResourceResult)

    async def subscribe_resource(self, uri: str) -> None:
        await self._call("resources/subscribe", SubscribeRequestParams(uri=uri), None)

    async def unsubscribe_resource(self, uri: str) -> None:
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
            raise RuntimeError("this session was opened without roots; pass roots=[...] to offer the capability")
        self._roots = list(roots)
        await self.peer.notify("notifications/roots/list_changed")

    # ----------------------------------------- server -> client (dispatcher)

    async def handle_request(self, request: InboundRequest) -> Any:
        method = request.method
        if method == "sampling/createMessage" and self.sampling_handler is not None:
            params = _decode(request.params, CreateMessageRequestParams, method)
            return await self.sampling_handler(params)
        if method == "elicitation/create" and self.elicitation_handler is not None:
            params = _decode(request.params, ElicitRequestParams, method)
            mode = "form" if params.mode is UNSET else params.mode
            if mode not in self.elicitation_modes:
                raise InvalidParams(f"elicitation mode {mode!r} is not supported by this client")
            return await self.elicitation_handler(params)
        if method == "roots/list" and self._roots is not None:
            return ListRootsResult(roots=list(self._roots))
        raise MethodNotFound(f"Method not found: {method}")

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        return False

    async def handle_notification(self, method: str, params: Any) -> None:
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


def _page(cursor: str | None) -> Any:
    return UNSET if cursor is None else PaginatedRequestParams(cursor=cursor)


def _decode(params: Any, type_: Any, method: str) -> Any:
    try:
        return coerce(params, type_)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise InvalidParams(f"Invalid params for {method}: {exc}") from None


@asynccontextmanager
async def open_session(stream: MessageStream, **options: Any) -> AsyncIterator[ClientSession]:
    """Run a :class:`ClientSession` over ``stream`` for the ``async with`` body."""
    session = ClientSession(stream, **options)
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)
        try:
            yield session
        finally:
            await session.aclose()
            nursery.cancel_scope.cancel()
