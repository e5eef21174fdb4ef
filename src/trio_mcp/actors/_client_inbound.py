"""What a client session's server sends it: requests and notifications.

:class:`_Inbound` (a mixin of :class:`~._client.ClientSession`) is the
session's peer's dispatcher: it answers the server's requests (sampling,
elicitation, roots) with the handlers the user gave, routes notifications to
their callbacks, and in the stateless era keeps the ``subscriptions/listen``
stream open for the list changes and resources asked for.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio
from msgspec import UNSET

from ..protocol import (
    LATEST_HANDSHAKE_VERSION,
    CreateMessageRequestParams,
    ElicitRequestParams,
    InvalidParams,
    ListRootsResult,
    LoggingMessageNotificationParams,
    McpError,
    MethodNotFound,
    Root,
    ServerCapabilities,
    SubscriptionFilter,
    SubscriptionsListenRequestParams,
    adapt,
    coerce,
)
from ._peer import InboundRequest, Peer
from ._server import _declared

if TYPE_CHECKING:
    from ._client import ElicitationHandler, LogHandler, NotificationHandler, SamplingHandler, UriHandler

__all__ = ["LISTEN_ACK_TIMEOUT"]

log = logging.getLogger("trio_mcp.client")

#: Seconds to wait for ``notifications/subscriptions/acknowledged``.
LISTEN_ACK_TIMEOUT: Final = 10.0


class _Inbound:
    """The dispatcher half of :class:`~._client.ClientSession` (see the module
    doc), which owns the state named below."""

    name: str
    peer: Peer
    era: str | None
    protocol_version: str | None
    server_capabilities: ServerCapabilities
    sampling_handler: SamplingHandler | None
    sampling_tools: bool
    elicitation_handler: ElicitationHandler | None
    elicitation_modes: Sequence[str]
    on_log: LogHandler | None
    on_tools_changed: Callable[[], Awaitable[None]] | None
    on_prompts_changed: Callable[[], Awaitable[None]] | None
    on_resources_changed: Callable[[], Awaitable[None]] | None
    on_resource_updated: UriHandler | None
    on_notification: NotificationHandler | None
    _roots: list[Root] | None
    _nursery: trio.Nursery | None
    _listen_scope: trio.CancelScope | None
    _listen_ack: trio.Event
    _modern_subscriptions: set[str]

    if TYPE_CHECKING:

        def _modern_meta(self, extra: dict[str, Any] | None = None) -> dict[str, Any]: ...

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


def _decode(params: Any, type_: Any, method: str) -> Any:
    try:
        return coerce(params, type_)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise InvalidParams(f"Invalid params for {method}: {exc}") from None
