"""The shared vocabulary of the MCP payload types: aliases and constants,
the reserved ``_meta`` keys, the base Structs of params and results,
implementation info, capabilities, the typed request ``_meta``, and the
notifications every feature uses (cancelled, progress).

Conventions: see :mod:`trio_mcp.protocol._types`."""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType, field

__all__ = [
    "ProgressToken",
    "Cursor",
    "Role",
    "LoggingLevel",
    "LOGGING_LEVELS",
    "ResultType",
    "RESULT_COMPLETE",
    "RESULT_INPUT_REQUIRED",
    "CacheScope",
    "IncludeContext",
    "ElicitAction",
    "META_PROGRESS_TOKEN",
    "META_PROTOCOL_VERSION",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_SERVER_INFO",
    "META_SUBSCRIPTION_ID",
    "McpStruct",
    "RequestParams",
    "PaginatedRequestParams",
    "InputResponseRequestParams",
    "NotificationParams",
    "Result",
    "PaginatedResult",
    "CacheableResult",
    "EmptyResult",
    "Icon",
    "Implementation",
    "RequestMeta",
    "request_meta",
    "RootsCapability",
    "SamplingCapability",
    "ElicitationCapability",
    "ClientCapabilities",
    "PromptsCapability",
    "ResourcesCapability",
    "ToolsCapability",
    "ServerCapabilities",
    "CancelledNotificationParams",
    "ProgressNotificationParams",
]

# --------------------------------------------------------------------------
# Aliases and constants

ProgressToken: TypeAlias = int | str
Cursor: TypeAlias = str
Role: TypeAlias = Literal["user", "assistant"]
LoggingLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
#: Logging levels, least severe first (RFC 5424 order).
LOGGING_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
#: ``resultType`` is an open string in the schema; these are the known values.
ResultType: TypeAlias = str
RESULT_COMPLETE: Final = "complete"
RESULT_INPUT_REQUIRED: Final = "input_required"
CacheScope: TypeAlias = Literal["public", "private"]
IncludeContext: TypeAlias = Literal["none", "thisServer", "allServers"]
ElicitAction: TypeAlias = Literal["accept", "decline", "cancel"]

#: Reserved ``_meta`` keys.
META_PROGRESS_TOKEN: Final = "progressToken"
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"

Meta: TypeAlias = dict[str, Any] | UnsetType


def meta_field() -> Any:
    """The ``meta`` field of a payload: ``_meta`` on the wire, absent while unset."""
    return field(default=UNSET, name="_meta")


# --------------------------------------------------------------------------
# Base classes


class McpStruct(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, rename="camel"):
    """Base of every MCP payload Struct."""


class RequestParams(McpStruct, frozen=True, kw_only=True):
    """Params of a request with no other fields (``ping``, ``roots/list``,
    ``server/discover``). In 2026-07-28 ``_meta`` is required and carries the
    protocol version and client capabilities (see :func:`request_meta`)."""

    meta: Meta = meta_field()


class PaginatedRequestParams(RequestParams, frozen=True, kw_only=True):
    """Params of the ``*/list`` requests."""

    cursor: Cursor | UnsetType = UNSET


class InputResponseRequestParams(RequestParams, frozen=True, kw_only=True):
    """Params of a request that may be retried after an
    :class:`InputRequiredResult` (2026-07-28).

    ``input_responses`` maps the keys of the server's ``inputRequests`` to the
    client's results (:class:`CreateMessageResult`, :class:`ListRootsResult`
    or :class:`ElicitResult`); the server knows which type each key holds and
    decodes it with :func:`trio_mcp.protocol.coerce`. ``request_state`` echoes
    the server's opaque state.
    """

    input_responses: dict[str, Any] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET


class NotificationParams(McpStruct, frozen=True, kw_only=True):
    """Params of a notification with no other fields."""

    meta: Meta = meta_field()


class Result(McpStruct, omit_defaults=False, frozen=True, kw_only=True):
    """Base of server results.

    ``result_type`` is always encoded (required by 2026-07-28, harmless before);
    every other field defaults to UNSET and is omitted while unset.
    """

    meta: Meta = meta_field()
    result_type: ResultType | UnsetType = RESULT_COMPLETE


class PaginatedResult(Result, frozen=True, kw_only=True):
    next_cursor: Cursor | UnsetType = UNSET


class CacheableResult(Result, frozen=True, kw_only=True):
    """A result with a 2026 caching hint: ``ttl_ms`` (0: immediately stale) and
    ``cache_scope`` (``"private"``: never shared across authorization contexts).
    Both are always encoded; the defaults are the conservative choice."""

    ttl_ms: int | UnsetType = 0
    cache_scope: CacheScope | UnsetType = "private"


class EmptyResult(Result, frozen=True, kw_only=True):
    """A result with no fields (``ping``, ``logging/setLevel``, subscribe...)."""


# --------------------------------------------------------------------------
# Metadata


class Icon(McpStruct, frozen=True, kw_only=True):
    src: str
    mime_type: str | UnsetType = UNSET
    sizes: list[str] | UnsetType = UNSET
    theme: Literal["light", "dark"] | UnsetType = UNSET


class Implementation(McpStruct, frozen=True, kw_only=True):
    """Name and version of an MCP client or server (``clientInfo`` / ``serverInfo``)."""

    name: str
    version: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    website_url: str | UnsetType = UNSET


# --------------------------------------------------------------------------
# Capabilities


class RootsCapability(McpStruct, frozen=True, kw_only=True):
    list_changed: bool | UnsetType = UNSET


class SamplingCapability(McpStruct, frozen=True, kw_only=True):
    context: dict[str, Any] | UnsetType = UNSET
    tools: dict[str, Any] | UnsetType = UNSET


class ElicitationCapability(McpStruct, frozen=True, kw_only=True):
    """An empty object means form mode only (backward compatible)."""

    form: dict[str, Any] | UnsetType = UNSET
    url: dict[str, Any] | UnsetType = UNSET


class ClientCapabilities(McpStruct, frozen=True, kw_only=True):
    """What a client supports. In 2026-07-28 sent with every request in ``_meta``."""

    experimental: dict[str, dict[str, Any]] | UnsetType = UNSET
    roots: RootsCapability | UnsetType = UNSET
    sampling: SamplingCapability | UnsetType = UNSET
    elicitation: ElicitationCapability | UnsetType = UNSET
    #: 2025-11-25 tasks extension, kept opaque.
    tasks: dict[str, Any] | UnsetType = UNSET
    extensions: dict[str, dict[str, Any]] | UnsetType = UNSET


class PromptsCapability(McpStruct, frozen=True, kw_only=True):
    list_changed: bool | UnsetType = UNSET


class ResourcesCapability(McpStruct, frozen=True, kw_only=True):
    subscribe: bool | UnsetType = UNSET
    list_changed: bool | UnsetType = UNSET


class ToolsCapability(McpStruct, frozen=True, kw_only=True):
    list_changed: bool | UnsetType = UNSET


class ServerCapabilities(McpStruct, frozen=True, kw_only=True):
    experimental: dict[str, dict[str, Any]] | UnsetType = UNSET
    logging: dict[str, Any] | UnsetType = UNSET
    completions: dict[str, Any] | UnsetType = UNSET
    prompts: PromptsCapability | UnsetType = UNSET
    resources: ResourcesCapability | UnsetType = UNSET
    tools: ToolsCapability | UnsetType = UNSET
    #: 2025-11-25 tasks extension, kept opaque.
    tasks: dict[str, Any] | UnsetType = UNSET
    extensions: dict[str, dict[str, Any]] | UnsetType = UNSET


class RequestMeta(McpStruct, frozen=True, kw_only=True):
    """Typed view of a request's ``_meta`` (2026-07-28 per-request fields).

    ``params.meta`` stays a plain dict on the wire types; build one with
    :func:`request_meta` and read one with :meth:`from_meta`.
    """

    progress_token: ProgressToken | UnsetType = UNSET
    protocol_version: str | UnsetType = field(default=UNSET, name=META_PROTOCOL_VERSION)
    client_capabilities: ClientCapabilities | UnsetType = field(default=UNSET, name=META_CLIENT_CAPABILITIES)
    client_info: Implementation | UnsetType = field(default=UNSET, name=META_CLIENT_INFO)
    log_level: LoggingLevel | UnsetType = field(default=UNSET, name=META_LOG_LEVEL)

    @classmethod
    def from_meta(cls, meta: dict[str, Any] | UnsetType) -> RequestMeta:
        """Read the reserved keys of a ``_meta`` dict (others are ignored).

        Raises :class:`msgspec.ValidationError` if a reserved key is malformed.
        """
        if meta is UNSET:
            return cls()
        return msgspec.convert(meta, cls)


def request_meta(
    *,
    protocol_version: str | UnsetType = UNSET,
    client_capabilities: ClientCapabilities | UnsetType = UNSET,
    client_info: Implementation | UnsetType = UNSET,
    log_level: LoggingLevel | UnsetType = UNSET,
    progress_token: ProgressToken | UnsetType = UNSET,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build a request ``_meta`` dict (plain builtins) from typed fields."""
    meta: dict[str, Any] = dict(extra) if extra else {}
    if progress_token is not UNSET:
        meta[META_PROGRESS_TOKEN] = progress_token
    if protocol_version is not UNSET:
        meta[META_PROTOCOL_VERSION] = protocol_version
    if client_capabilities is not UNSET:
        meta[META_CLIENT_CAPABILITIES] = msgspec.to_builtins(client_capabilities)
    if client_info is not UNSET:
        meta[META_CLIENT_INFO] = msgspec.to_builtins(client_info)
    if log_level is not UNSET:
        meta[META_LOG_LEVEL] = log_level
    return meta


# --------------------------------------------------------------------------
# Notifications


class CancelledNotificationParams(NotificationParams, frozen=True, kw_only=True):
    request_id: int | str
    reason: str | UnsetType = UNSET


class ProgressNotificationParams(NotificationParams, frozen=True, kw_only=True):
    progress_token: ProgressToken
    progress: float
    total: float | UnsetType = UNSET
    message: str | UnsetType = UNSET
