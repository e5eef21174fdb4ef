"""The MCP method registry: one :class:`MethodSpec` per method of every version.

A spec says who may send the method, how to decode its params and result, which
capability gates it and in which protocol versions it exists::

    spec = lookup("tools/call")
    params = coerce(request.params, spec.params_type)
    if not method_available(request.method, version, sender="client"): ...

Versions are ISO dates and compare lexically; ``since`` / ``until`` are
inclusive. From 2026-07-28 the server-to-client requests (sampling, roots,
elicitation) are no longer wire requests: they travel inside an
:class:`~trio_mcp.protocol.InputRequiredResult` (``input_request_since``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import attrs
import msgspec
from msgspec import UNSET

from ._types import (
    CallToolRequestParams,
    CallToolResult,
    CancelledNotificationParams,
    CompleteRequestParams,
    CompleteResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    DiscoverResult,
    ElicitationCompleteNotificationParams,
    ElicitRequestParams,
    ElicitResult,
    EmptyResult,
    GetPromptRequestParams,
    GetPromptResult,
    InitializeRequestParams,
    InitializeResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListRootsResult,
    ListToolsResult,
    LoggingMessageNotificationParams,
    NotificationParams,
    PaginatedRequestParams,
    ProgressNotificationParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    RequestParams,
    ResourceUpdatedNotificationParams,
    SetLevelRequestParams,
    SubscribeRequestParams,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)
from ._versions import (
    LATEST_HANDSHAKE_VERSION,
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
    is_modern,
)
from ._versions import SUPPORTED_VERSIONS as _KNOWN_VERSIONS

__all__ = [
    "BOTH_DIRECTIONS",
    "CLIENT_TO_SERVER",
    "METHODS",
    "SERVER_TO_CLIENT",
    "Direction",
    "MethodKind",
    "MethodSpec",
    "Side",
    "has_capability",
    "lookup",
    "method_available",
    "methods_for",
    "register_methods",
]

MethodKind = Literal["request", "notification"]
Side = Literal["client", "server"]
Direction = Literal["client_to_server", "server_to_client", "both"]
CLIENT_TO_SERVER: Final[Direction] = "client_to_server"
SERVER_TO_CLIENT: Final[Direction] = "server_to_client"
BOTH_DIRECTIONS: Final[Direction] = "both"


@attrs.frozen(kw_only=True)
class MethodSpec:
    """Everything the runtime needs to know about one method."""

    method: str
    kind: MethodKind
    #: Who sends it (in the handshake era; see ``modern_direction``).
    direction: Direction
    params_type: type[msgspec.Struct]
    #: ``None`` for notifications.
    result_type: type[msgspec.Struct] | None = None
    #: Capability gating the method: side first, then wire names,
    #: e.g. ``("server", "tools")`` or ``("server", "resources", "listChanged")``.
    capability: tuple[str, ...] | None = None
    #: First version in which ``capability`` gates the method (completions: 2025-03-26).
    capability_since: str = V2024_11_05
    #: ``False`` for ``initialize``, which is never cancelled.
    cancellable: bool = True
    since: str = V2024_11_05
    #: Last version with the method; ``None``: still current.
    until: str | None = None
    #: Direction from 2026-07-28 when it differs (progress: server to client only).
    modern_direction: Direction | None = None
    #: Version from which the request travels inside ``InputRequiredResult``.
    input_request_since: str | None = None
    #: From 2026-07-28 the result may be an ``InputRequiredResult``.
    may_require_input: bool = False
    #: The extension that adds the method (``None``: the core protocol).
    extension: str | None = None

    @property
    def is_request(self) -> bool:
        return self.kind == "request"

    def available(self, version: str) -> bool:
        """Whether the method exists on the wire in ``version``."""
        return self.since <= version and (self.until is None or version <= self.until)

    def direction_in(self, version: str) -> Direction | None:
        """Who sends it in ``version``; ``None`` if it does not exist there."""
        if not self.available(version):
            return None
        if self.modern_direction is not None and is_modern(version):
            return self.modern_direction
        return self.direction

    def sendable_by(self, sender: Side, version: str) -> bool:
        direction = self.direction_in(version)
        if direction is None:
            return False
        if direction == BOTH_DIRECTIONS:
            return True
        return direction == (CLIENT_TO_SERVER if sender == "client" else SERVER_TO_CLIENT)

    def capability_in(self, version: str) -> tuple[str, ...] | None:
        """The gating capability path in ``version`` (``None``: ungated)."""
        if self.capability is None or version < self.capability_since:
            return None
        return self.capability

    def input_request_available(self, version: str) -> bool:
        """Whether the method can be sent as an input request in ``version``."""
        return self.input_request_since is not None and version >= self.input_request_since


def _request(
    method: str,
    direction: Direction,
    params_type: type[msgspec.Struct],
    result_type: type[msgspec.Struct],
    **kw: Any,
) -> MethodSpec:
    return MethodSpec(
        method=method,
        kind="request",
        direction=direction,
        params_type=params_type,
        result_type=result_type,
        **kw,
    )


def _notification(
    method: str, direction: Direction, params_type: type[msgspec.Struct], **kw: Any
) -> MethodSpec:
    return MethodSpec(
        method=method,
        kind="notification",
        direction=direction,
        params_type=params_type,
        cancellable=False,
        **kw,
    )


_C2S: Direction = CLIENT_TO_SERVER
_S2C: Direction = SERVER_TO_CLIENT
_BOTH: Direction = BOTH_DIRECTIONS
_LAST_HS = LATEST_HANDSHAKE_VERSION

_SPECS: tuple[MethodSpec, ...] = (
    # lifecycle
    _request(
        "initialize", _C2S, InitializeRequestParams, InitializeResult, cancellable=False, until=_LAST_HS
    ),
    _request("ping", _BOTH, RequestParams, EmptyResult, until=_LAST_HS),
    _request("server/discover", _C2S, RequestParams, DiscoverResult, since=V2026_07_28),
    _notification("notifications/initialized", _C2S, NotificationParams, until=_LAST_HS),
    # resources
    _request(
        "resources/list",
        _C2S,
        PaginatedRequestParams,
        ListResourcesResult,
        capability=("server", "resources"),
    ),
    _request(
        "resources/templates/list",
        _C2S,
        PaginatedRequestParams,
        ListResourceTemplatesResult,
        capability=("server", "resources"),
    ),
    _request(
        "resources/read",
        _C2S,
        ReadResourceRequestParams,
        ReadResourceResult,
        capability=("server", "resources"),
        may_require_input=True,
    ),
    _request(
        "resources/subscribe",
        _C2S,
        SubscribeRequestParams,
        EmptyResult,
        capability=("server", "resources", "subscribe"),
        until=_LAST_HS,
    ),
    _request(
        "resources/unsubscribe",
        _C2S,
        UnsubscribeRequestParams,
        EmptyResult,
        capability=("server", "resources", "subscribe"),
        until=_LAST_HS,
    ),
    _notification(
        "notifications/resources/updated",
        _S2C,
        ResourceUpdatedNotificationParams,
        capability=("server", "resources", "subscribe"),
    ),
    _notification(
        "notifications/resources/list_changed",
        _S2C,
        NotificationParams,
        capability=("server", "resources", "listChanged"),
    ),
    # prompts
    _request(
        "prompts/list", _C2S, PaginatedRequestParams, ListPromptsResult, capability=("server", "prompts")
    ),
    _request(
        "prompts/get",
        _C2S,
        GetPromptRequestParams,
        GetPromptResult,
        capability=("server", "prompts"),
        may_require_input=True,
    ),
    _notification(
        "notifications/prompts/list_changed",
        _S2C,
        NotificationParams,
        capability=("server", "prompts", "listChanged"),
    ),
    # tools
    _request("tools/list", _C2S, PaginatedRequestParams, ListToolsResult, capability=("server", "tools")),
    _request(
        "tools/call",
        _C2S,
        CallToolRequestParams,
        CallToolResult,
        capability=("server", "tools"),
        may_require_input=True,
    ),
    _notification(
        "notifications/tools/list_changed",
        _S2C,
        NotificationParams,
        capability=("server", "tools", "listChanged"),
    ),
    # logging
    _request(
        "logging/setLevel",
        _C2S,
        SetLevelRequestParams,
        EmptyResult,
        capability=("server", "logging"),
        until=_LAST_HS,
    ),
    _notification(
        "notifications/message", _S2C, LoggingMessageNotificationParams, capability=("server", "logging")
    ),
    # completion
    _request(
        "completion/complete",
        _C2S,
        CompleteRequestParams,
        CompleteResult,
        capability=("server", "completions"),
        capability_since=V2025_03_26,
    ),
    # server-to-client requests (input requests from 2026-07-28)
    _request(
        "sampling/createMessage",
        _S2C,
        CreateMessageRequestParams,
        CreateMessageResult,
        capability=("client", "sampling"),
        until=_LAST_HS,
        input_request_since=V2026_07_28,
    ),
    _request(
        "roots/list",
        _S2C,
        RequestParams,
        ListRootsResult,
        capability=("client", "roots"),
        until=_LAST_HS,
        input_request_since=V2026_07_28,
    ),
    _request(
        "elicitation/create",
        _S2C,
        ElicitRequestParams,
        ElicitResult,
        capability=("client", "elicitation"),
        since=V2025_06_18,
        until=_LAST_HS,
        input_request_since=V2026_07_28,
    ),
    _notification(
        "notifications/roots/list_changed",
        _C2S,
        NotificationParams,
        capability=("client", "roots", "listChanged"),
        until=_LAST_HS,
    ),
    _notification(
        "notifications/elicitation/complete",
        _S2C,
        ElicitationCompleteNotificationParams,
        capability=("client", "elicitation", "url"),
        since=V2025_11_25,
        until=V2025_11_25,
    ),
    # both eras
    _notification("notifications/cancelled", _BOTH, CancelledNotificationParams),
    _notification("notifications/progress", _BOTH, ProgressNotificationParams, modern_direction=_S2C),
    # stateless era
    _request(
        "subscriptions/listen",
        _C2S,
        SubscriptionsListenRequestParams,
        SubscriptionsListenResult,
        since=V2026_07_28,
    ),
    _notification(
        "notifications/subscriptions/acknowledged",
        _S2C,
        SubscriptionsAcknowledgedNotificationParams,
        since=V2026_07_28,
    ),
)

#: Every known method, by name.
METHODS: Final[dict[str, MethodSpec]] = {spec.method: spec for spec in _SPECS}


def register_methods(specs: Sequence[MethodSpec]) -> None:
    """Add the methods of an extension to :data:`METHODS` (see ``register_extension``)."""
    for spec in specs:
        METHODS[spec.method] = spec
    _available.clear()


def lookup(method: str) -> MethodSpec | None:
    """The spec of ``method``, or ``None`` for an unknown method."""
    return METHODS.get(method)


#: method_available() answers for known methods and versions (a bounded set).
_available: dict[tuple[str, str, Side | None], bool] = {}


def method_available(method: str, version: str, *, sender: Side | None = None) -> bool:
    """Whether ``method`` exists on the wire in ``version`` (and, given
    ``sender``, whether that side may send it)."""
    key = (method, version, sender)
    known = _available.get(key)
    if known is not None:
        return known
    spec = METHODS.get(method)
    if spec is None:
        return False
    known = spec.available(version) if sender is None else spec.sendable_by(sender, version)
    if version in _KNOWN_VERSIONS:  # never grows with versions a peer made up
        _available[key] = known
    return known


def methods_for(
    version: str, *, kind: MethodKind | None = None, sender: Side | None = None
) -> list[MethodSpec]:
    """The specs of every method available in ``version``, optionally filtered."""
    return [
        spec
        for spec in _SPECS
        if (kind is None or spec.kind == kind)
        and (spec.sendable_by(sender, version) if sender is not None else spec.available(version))
    ]


_wire_fields: dict[type, dict[str, str]] = {}


def _wire_to_attr(cls: type[msgspec.Struct]) -> dict[str, str]:
    table = _wire_fields.get(cls)
    if table is None:
        table = _wire_fields[cls] = dict(zip(cls.__struct_encode_fields__, cls.__struct_fields__))
    return table


def has_capability(capabilities: Any, path: Sequence[str]) -> bool:
    """Whether ``capabilities`` (a capabilities Struct, a dict from the wire,
    or ``None``) declares ``path``, given in wire names without the side:
    ``has_capability(server_caps, ("resources", "subscribe"))``.

    An object counts as declared when present (``{}`` included); a boolean
    flag only when true.
    """
    node: Any = capabilities
    for key in path:
        if node is None or node is UNSET:
            return False
        if isinstance(node, msgspec.Struct):
            attr = _wire_to_attr(type(node)).get(key)
            node = UNSET if attr is None else getattr(node, attr)
        elif isinstance(node, Mapping):
            node = node.get(key, UNSET)
        else:
            return False
    if node is None or node is UNSET:
        return False
    if isinstance(node, bool):
        return node
    return True
