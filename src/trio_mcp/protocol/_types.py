"""MCP payload types: ``params`` and ``result`` Structs of every protocol version.

One set of Structs covers the union of all supported versions, from the
``initialize`` handshake era (2024-11-05 .. 2025-11-25) to the stateless era
(2026-07-28). Fields added by later versions are optional and omitted from the
wire while unset; :func:`trio_mcp.protocol.adapt` downgrades an object for an
older peer.

Conventions:

- Every Struct is frozen, keyword-only and camel-cased on the wire
  (``mime_type`` <-> ``mimeType``); ``meta`` is the ``_meta`` object.
- Absent fields are :data:`msgspec.UNSET`; ``None`` only where the schema
  admits ``null``.
- Results carry the 2026 fields ``resultType`` (default ``"complete"``) and,
  for cacheable results, ``ttlMs`` (default ``0``) and ``cacheScope``
  (default ``"private"``) *always*, so a result is valid for the newest
  version as built. Handshake-era schemas tolerate these extra fields;
  :func:`trio_mcp.protocol.strip_modern` removes them for older peers, and
  decoding a legacy result (which lacks them) yields the same defaults, which
  is the meaning the 2026 spec gives to their absence.
- Content blocks, completion references and 2026 input requests are tagged
  unions (on ``type`` / ``method``). Untagged unions of objects that msgspec
  cannot express are single Structs with optional fields:
  :class:`ResourceContents` (text | blob), :class:`ElicitRequestParams`
  (form | URL mode) and :class:`PrimitiveSchemaDefinition` (the elicitation
  field schemas); each has convenience constructors.
- Unknown fields are ignored when decoding, so newer peers never break older
  code; unknown *capabilities* are therefore dropped on decode; use
  ``experimental`` or ``extensions`` for non-standard ones.
"""

from __future__ import annotations

import base64
from typing import Any, Final, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType, field

__all__ = [
    # aliases and constants
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
    # base classes
    "McpStruct",
    "RequestParams",
    "PaginatedRequestParams",
    "InputResponseRequestParams",
    "NotificationParams",
    "Result",
    "PaginatedResult",
    "CacheableResult",
    "EmptyResult",
    # metadata
    "Icon",
    "Implementation",
    "RequestMeta",
    "request_meta",
    # capabilities
    "RootsCapability",
    "SamplingCapability",
    "ElicitationCapability",
    "ClientCapabilities",
    "PromptsCapability",
    "ResourcesCapability",
    "ToolsCapability",
    "ServerCapabilities",
    # content
    "Annotations",
    "TextContent",
    "ImageContent",
    "AudioContent",
    "ResourceLink",
    "EmbeddedResource",
    "ToolUseContent",
    "ToolResultContent",
    "ContentBlock",
    "SamplingMessageContentBlock",
    "SamplingContent",
    "ResourceContents",
    # lifecycle
    "InitializeRequestParams",
    "InitializeResult",
    "DiscoverResult",
    # resources
    "Resource",
    "ResourceTemplate",
    "ListResourcesResult",
    "ListResourceTemplatesResult",
    "ReadResourceRequestParams",
    "ReadResourceResult",
    "SubscribeRequestParams",
    "UnsubscribeRequestParams",
    "ResourceUpdatedNotificationParams",
    # prompts
    "PromptArgument",
    "Prompt",
    "PromptMessage",
    "ListPromptsResult",
    "GetPromptRequestParams",
    "GetPromptResult",
    # tools
    "ToolAnnotations",
    "ToolExecution",
    "Tool",
    "ListToolsResult",
    "CallToolRequestParams",
    "CallToolResult",
    # logging
    "SetLevelRequestParams",
    "LoggingMessageNotificationParams",
    # completion
    "PromptReference",
    "ResourceTemplateReference",
    "ResourceReference",
    "Reference",
    "CompletionArgument",
    "CompletionContext",
    "CompleteRequestParams",
    "Completion",
    "CompleteResult",
    # sampling
    "ModelHint",
    "ModelPreferences",
    "ToolChoice",
    "SamplingMessage",
    "CreateMessageRequestParams",
    "CreateMessageResult",
    # roots
    "Root",
    "ListRootsResult",
    # elicitation
    "EnumOption",
    "MultiSelectItems",
    "PrimitiveSchemaDefinition",
    "ElicitRequestedSchema",
    "ElicitRequestParams",
    "ElicitResult",
    "ElicitationCompleteNotificationParams",
    # notifications
    "CancelledNotificationParams",
    "ProgressNotificationParams",
    # stateless era (2026-07-28)
    "CreateMessageRequest",
    "ListRootsRequest",
    "ElicitRequest",
    "InputRequest",
    "InputRequests",
    "InputResponses",
    "InputRequiredResult",
    "SubscriptionFilter",
    "SubscriptionsListenRequestParams",
    "SubscriptionsListenResult",
    "SubscriptionsAcknowledgedNotificationParams",
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


def _meta() -> Any:
    return field(default=UNSET, name="_meta")


# --------------------------------------------------------------------------
# Base classes


class McpStruct(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, rename="camel"):
    """Base of every MCP payload Struct."""


class RequestParams(McpStruct, frozen=True, kw_only=True):
    """Params of a request with no other fields (``ping``, ``roots/list``,
    ``server/discover``). In 2026-07-28 ``_meta`` is required and carries the
    protocol version and client capabilities (see :func:`request_meta`)."""

    meta: Meta = _meta()


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

    meta: Meta = _meta()


class Result(McpStruct, omit_defaults=False, frozen=True, kw_only=True):
    """Base of server results.

    ``result_type`` is always encoded (required by 2026-07-28, harmless before);
    every other field defaults to UNSET and is omitted while unset.
    """

    meta: Meta = _meta()
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
# Content


class Annotations(McpStruct, frozen=True, kw_only=True):
    audience: list[Role] | UnsetType = UNSET
    priority: float | UnsetType = UNSET
    last_modified: str | UnsetType = UNSET


class ResourceContents(McpStruct, frozen=True, kw_only=True):
    """Contents of a resource: exactly one of ``text`` or ``blob`` (base64).

    Models the schema's ``TextResourceContents | BlobResourceContents`` (an
    untagged union msgspec cannot express); build with :meth:`from_text` /
    :meth:`from_blob`.
    """

    uri: str
    mime_type: str | UnsetType = UNSET
    text: str | UnsetType = UNSET
    blob: str | UnsetType = UNSET
    meta: Meta = _meta()

    def __post_init__(self) -> None:
        if (self.text is UNSET) == (self.blob is UNSET):
            raise ValueError("ResourceContents needs exactly one of `text` or `blob`")

    @classmethod
    def from_text(
        cls, uri: str, text: str, *, mime_type: str | UnsetType = UNSET, meta: Meta = UNSET
    ) -> ResourceContents:
        """``TextResourceContents``."""
        return cls(uri=uri, text=text, mime_type=mime_type, meta=meta)

    @classmethod
    def from_blob(
        cls,
        uri: str,
        data: bytes | str,
        *,
        mime_type: str | UnsetType = UNSET,
        meta: Meta = UNSET,
    ) -> ResourceContents:
        """``BlobResourceContents``; ``bytes`` are base64-encoded, ``str`` is
        taken as already base64."""
        if not isinstance(data, str):
            data = base64.b64encode(data).decode("ascii")
        return cls(uri=uri, blob=data, mime_type=mime_type, meta=meta)

    @property
    def is_text(self) -> bool:
        return self.text is not UNSET

    def blob_bytes(self) -> bytes:
        """The decoded ``blob`` (``b""`` for text contents)."""
        return b"" if self.blob is UNSET else base64.b64decode(self.blob)


class TextContent(McpStruct, tag_field="type", tag="text", frozen=True, kw_only=True):
    text: str
    annotations: Annotations | UnsetType = UNSET
    meta: Meta = _meta()


class ImageContent(McpStruct, tag_field="type", tag="image", frozen=True, kw_only=True):
    """``data`` is base64."""

    data: str
    mime_type: str
    annotations: Annotations | UnsetType = UNSET
    meta: Meta = _meta()


class AudioContent(McpStruct, tag_field="type", tag="audio", frozen=True, kw_only=True):
    """``data`` is base64. Since 2025-03-26."""

    data: str
    mime_type: str
    annotations: Annotations | UnsetType = UNSET
    meta: Meta = _meta()


class ResourceLink(McpStruct, tag_field="type", tag="resource_link", frozen=True, kw_only=True):
    """A link to a resource (not its contents). Since 2025-06-18."""

    uri: str
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    size: int | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    annotations: Annotations | UnsetType = UNSET
    meta: Meta = _meta()


class EmbeddedResource(McpStruct, tag_field="type", tag="resource", frozen=True, kw_only=True):
    resource: ResourceContents
    annotations: Annotations | UnsetType = UNSET
    meta: Meta = _meta()


#: A content block of tool results and prompt messages (tagged on ``type``).
ContentBlock: TypeAlias = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource


class ToolUseContent(McpStruct, tag_field="type", tag="tool_use", frozen=True, kw_only=True):
    """A tool call made by the model during sampling. Since 2025-11-25."""

    id: str
    name: str
    input: dict[str, Any]
    meta: Meta = _meta()


class ToolResultContent(McpStruct, tag_field="type", tag="tool_result", frozen=True, kw_only=True):
    """The result of a :class:`ToolUseContent`, fed back in sampling. Since 2025-11-25."""

    tool_use_id: str
    content: list[ContentBlock]
    structured_content: Any | UnsetType = UNSET
    is_error: bool | UnsetType = UNSET
    meta: Meta = _meta()


#: A content block of sampling messages (tagged on ``type``).
SamplingMessageContentBlock: TypeAlias = (
    TextContent | ImageContent | AudioContent | ToolUseContent | ToolResultContent
)
#: Sampling message content: one block, or (since 2025-11-25) a list of blocks.
SamplingContent: TypeAlias = SamplingMessageContentBlock | list[SamplingMessageContentBlock]


# --------------------------------------------------------------------------
# Lifecycle


class InitializeRequestParams(RequestParams, frozen=True, kw_only=True):
    protocol_version: str
    capabilities: ClientCapabilities
    client_info: Implementation


class InitializeResult(Result, frozen=True, kw_only=True):
    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | UnsetType = UNSET


class DiscoverResult(CacheableResult, frozen=True, kw_only=True):
    """Result of ``server/discover`` (2026-07-28). The server's
    :class:`Implementation` goes in ``_meta`` under :data:`META_SERVER_INFO`."""

    supported_versions: list[str]
    capabilities: ServerCapabilities
    instructions: str | UnsetType = UNSET


# --------------------------------------------------------------------------
# Resources


class Resource(McpStruct, frozen=True, kw_only=True):
    uri: str
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    size: int | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    annotations: Annotations | UnsetType = UNSET
    meta: Meta = _meta()


class ResourceTemplate(McpStruct, frozen=True, kw_only=True):
    uri_template: str
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    annotations: Annotations | UnsetType = UNSET
    meta: Meta = _meta()


class ListResourcesResult(CacheableResult, frozen=True, kw_only=True):
    resources: list[Resource]
    next_cursor: Cursor | UnsetType = UNSET


class ListResourceTemplatesResult(CacheableResult, frozen=True, kw_only=True):
    resource_templates: list[ResourceTemplate]
    next_cursor: Cursor | UnsetType = UNSET


class ReadResourceRequestParams(InputResponseRequestParams, frozen=True, kw_only=True):
    uri: str


class ReadResourceResult(CacheableResult, frozen=True, kw_only=True):
    contents: list[ResourceContents]


class SubscribeRequestParams(RequestParams, frozen=True, kw_only=True):
    uri: str


class UnsubscribeRequestParams(RequestParams, frozen=True, kw_only=True):
    uri: str


class ResourceUpdatedNotificationParams(NotificationParams, frozen=True, kw_only=True):
    uri: str


# --------------------------------------------------------------------------
# Prompts


class PromptArgument(McpStruct, frozen=True, kw_only=True):
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    required: bool | UnsetType = UNSET


class Prompt(McpStruct, frozen=True, kw_only=True):
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    arguments: list[PromptArgument] | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    meta: Meta = _meta()


class PromptMessage(McpStruct, frozen=True, kw_only=True):
    role: Role
    content: ContentBlock


class ListPromptsResult(CacheableResult, frozen=True, kw_only=True):
    prompts: list[Prompt]
    next_cursor: Cursor | UnsetType = UNSET


class GetPromptRequestParams(InputResponseRequestParams, frozen=True, kw_only=True):
    name: str
    arguments: dict[str, str] | UnsetType = UNSET


class GetPromptResult(Result, frozen=True, kw_only=True):
    messages: list[PromptMessage]
    description: str | UnsetType = UNSET


# --------------------------------------------------------------------------
# Tools


class ToolAnnotations(McpStruct, frozen=True, kw_only=True):
    title: str | UnsetType = UNSET
    read_only_hint: bool | UnsetType = UNSET
    destructive_hint: bool | UnsetType = UNSET
    idempotent_hint: bool | UnsetType = UNSET
    open_world_hint: bool | UnsetType = UNSET


class ToolExecution(McpStruct, frozen=True, kw_only=True):
    """2025-11-25 (tasks extension): whether a tool may run as a task."""

    task_support: Literal["forbidden", "optional", "required"] | UnsetType = UNSET


class Tool(McpStruct, frozen=True, kw_only=True):
    """A tool. ``input_schema`` is a JSON Schema object with ``"type": "object"``."""

    name: str
    input_schema: dict[str, Any]
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    output_schema: dict[str, Any] | UnsetType = UNSET
    annotations: ToolAnnotations | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    execution: ToolExecution | UnsetType = UNSET
    meta: Meta = _meta()


class ListToolsResult(CacheableResult, frozen=True, kw_only=True):
    tools: list[Tool]
    next_cursor: Cursor | UnsetType = UNSET


class CallToolRequestParams(InputResponseRequestParams, frozen=True, kw_only=True):
    name: str
    arguments: dict[str, Any] | UnsetType = UNSET
    #: 2025-11-25: run the call as a task (a ``TaskMetadata`` object, e.g. ``{"ttl": 60000}``).
    task: dict[str, Any] | UnsetType = UNSET


class CallToolResult(Result, frozen=True, kw_only=True):
    """``structured_content`` is any JSON value in 2026-07-28, an object in
    2025-06-18 / 2025-11-25 (:func:`adapt` drops non-objects there)."""

    content: list[ContentBlock]
    structured_content: Any | UnsetType = UNSET
    is_error: bool | UnsetType = UNSET


# --------------------------------------------------------------------------
# Logging


class SetLevelRequestParams(RequestParams, frozen=True, kw_only=True):
    level: LoggingLevel


class LoggingMessageNotificationParams(NotificationParams, frozen=True, kw_only=True):
    level: LoggingLevel
    data: Any
    logger: str | UnsetType = UNSET


# --------------------------------------------------------------------------
# Completion


class PromptReference(McpStruct, tag_field="type", tag="ref/prompt", frozen=True, kw_only=True):
    name: str
    title: str | UnsetType = UNSET


class ResourceTemplateReference(McpStruct, tag_field="type", tag="ref/resource", frozen=True, kw_only=True):
    """``uri`` is a URI or URI template."""

    uri: str


#: The 2024-11-05 / 2025-03-26 name of :class:`ResourceTemplateReference`.
ResourceReference = ResourceTemplateReference
Reference: TypeAlias = PromptReference | ResourceTemplateReference


class CompletionArgument(McpStruct, frozen=True, kw_only=True):
    name: str
    value: str


class CompletionContext(McpStruct, frozen=True, kw_only=True):
    arguments: dict[str, str] | UnsetType = UNSET


class CompleteRequestParams(RequestParams, frozen=True, kw_only=True):
    ref: Reference
    argument: CompletionArgument
    context: CompletionContext | UnsetType = UNSET


class Completion(McpStruct, frozen=True, kw_only=True):
    """At most 100 ``values``."""

    values: list[str]
    total: int | UnsetType = UNSET
    has_more: bool | UnsetType = UNSET


class CompleteResult(Result, frozen=True, kw_only=True):
    completion: Completion


# --------------------------------------------------------------------------
# Sampling


class ModelHint(McpStruct, frozen=True, kw_only=True):
    name: str | UnsetType = UNSET


class ModelPreferences(McpStruct, frozen=True, kw_only=True):
    hints: list[ModelHint] | UnsetType = UNSET
    cost_priority: float | UnsetType = UNSET
    speed_priority: float | UnsetType = UNSET
    intelligence_priority: float | UnsetType = UNSET


class ToolChoice(McpStruct, frozen=True, kw_only=True):
    mode: Literal["auto", "required", "none"] | UnsetType = UNSET


class SamplingMessage(McpStruct, frozen=True, kw_only=True):
    role: Role
    content: SamplingContent
    meta: Meta = _meta()


class CreateMessageRequestParams(RequestParams, frozen=True, kw_only=True):
    messages: list[SamplingMessage]
    max_tokens: int
    model_preferences: ModelPreferences | UnsetType = UNSET
    system_prompt: str | UnsetType = UNSET
    include_context: IncludeContext | UnsetType = UNSET
    temperature: float | UnsetType = UNSET
    stop_sequences: list[str] | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET
    tools: list[Tool] | UnsetType = UNSET
    tool_choice: ToolChoice | UnsetType = UNSET


class CreateMessageResult(McpStruct, frozen=True, kw_only=True):
    """A client result: no ``resultType`` (also a 2026 input response)."""

    role: Role
    content: SamplingContent
    model: str
    stop_reason: str | UnsetType = UNSET
    meta: Meta = _meta()


# --------------------------------------------------------------------------
# Roots


class Root(McpStruct, frozen=True, kw_only=True):
    uri: str
    name: str | UnsetType = UNSET
    meta: Meta = _meta()


class ListRootsResult(McpStruct, frozen=True, kw_only=True):
    """A client result: no ``resultType`` (also a 2026 input response)."""

    roots: list[Root]
    meta: Meta = _meta()


# --------------------------------------------------------------------------
# Elicitation


class EnumOption(McpStruct, frozen=True, kw_only=True):
    """One titled option of an enum field (``{"const": ..., "title": ...}``)."""

    const: str
    title: str


class MultiSelectItems(McpStruct, frozen=True, kw_only=True):
    """``items`` of a multi-select field: ``enum`` (untitled) or ``any_of`` (titled)."""

    type: Literal["string"] | UnsetType = UNSET
    enum: list[str] | UnsetType = UNSET
    any_of: list[EnumOption] | UnsetType = UNSET


class PrimitiveSchemaDefinition(McpStruct, frozen=True, kw_only=True):
    """Schema of one elicitation form field.

    One Struct for the schema's untagged union ``StringSchema | NumberSchema |
    BooleanSchema | (Untitled|Titled)(Single|Multi)SelectEnumSchema |
    LegacyTitledEnumSchema``: ``type`` plus the optional keywords of each
    variant. Build with :meth:`string`, :meth:`number`, :meth:`boolean`,
    :meth:`single_select` or :meth:`multi_select`.
    """

    type: Literal["string", "number", "integer", "boolean", "array"]
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    default: bool | int | float | str | list[str] | UnsetType = UNSET
    # string
    format: str | UnsetType = UNSET
    min_length: int | UnsetType = UNSET
    max_length: int | UnsetType = UNSET
    # number / integer
    minimum: float | UnsetType = UNSET
    maximum: float | UnsetType = UNSET
    # single select
    enum: list[str] | UnsetType = UNSET
    enum_names: list[str] | UnsetType = UNSET
    one_of: list[EnumOption] | UnsetType = UNSET
    # multi select
    items: MultiSelectItems | UnsetType = UNSET
    min_items: int | UnsetType = UNSET
    max_items: int | UnsetType = UNSET

    @classmethod
    def string(cls, **kw: Any) -> PrimitiveSchemaDefinition:
        """``StringSchema`` (``format``: date, date-time, email, uri)."""
        return cls(type="string", **kw)

    @classmethod
    def number(cls, *, integer: bool = False, **kw: Any) -> PrimitiveSchemaDefinition:
        """``NumberSchema``."""
        return cls(type="integer" if integer else "number", **kw)

    @classmethod
    def boolean(cls, **kw: Any) -> PrimitiveSchemaDefinition:
        """``BooleanSchema``."""
        return cls(type="boolean", **kw)

    @classmethod
    def single_select(cls, options: list[str] | dict[str, str], **kw: Any) -> PrimitiveSchemaDefinition:
        """``UntitledSingleSelectEnumSchema`` from a list of values, or
        ``TitledSingleSelectEnumSchema`` from a ``{value: title}`` dict."""
        if isinstance(options, dict):
            return cls(type="string", one_of=[EnumOption(const=k, title=v) for k, v in options.items()], **kw)
        return cls(type="string", enum=list(options), **kw)

    @classmethod
    def multi_select(cls, options: list[str] | dict[str, str], **kw: Any) -> PrimitiveSchemaDefinition:
        """``UntitledMultiSelectEnumSchema`` / ``TitledMultiSelectEnumSchema``
        (since 2025-11-25)."""
        if isinstance(options, dict):
            items = MultiSelectItems(any_of=[EnumOption(const=k, title=v) for k, v in options.items()])
        else:
            items = MultiSelectItems(type="string", enum=list(options))
        return cls(type="array", items=items, **kw)


class ElicitRequestedSchema(McpStruct, omit_defaults=False, frozen=True, kw_only=True):
    """The flat object schema of an elicitation form (``type`` is always sent)."""

    properties: dict[str, PrimitiveSchemaDefinition]
    type: Literal["object"] = "object"
    required: list[str] | UnsetType = UNSET
    schema: str | UnsetType = field(default=UNSET, name="$schema")


class ElicitRequestParams(RequestParams, frozen=True, kw_only=True):
    """Params of ``elicitation/create``: form mode or (since 2025-11-25) URL mode.

    One Struct for the schema's ``ElicitRequestFormParams |
    ElicitRequestURLParams`` (``mode`` is optional for form mode, so the union
    is untagged). Build with :meth:`form_mode` / :meth:`url_mode`. Handshake
    versions require ``elicitation_id`` in URL mode.
    """

    message: str
    mode: Literal["form", "url"] | UnsetType = UNSET
    requested_schema: ElicitRequestedSchema | UnsetType = UNSET
    url: str | UnsetType = UNSET
    elicitation_id: str | UnsetType = UNSET

    @property
    def is_url_mode(self) -> bool:
        return self.mode == "url"

    @classmethod
    def form_mode(
        cls,
        message: str,
        properties: dict[str, PrimitiveSchemaDefinition],
        *,
        required: list[str] | UnsetType = UNSET,
        meta: Meta = UNSET,
    ) -> ElicitRequestParams:
        """``ElicitRequestFormParams``."""
        schema = ElicitRequestedSchema(properties=properties, required=required)
        return cls(message=message, mode="form", requested_schema=schema, meta=meta)

    @classmethod
    def url_mode(
        cls,
        message: str,
        url: str,
        *,
        elicitation_id: str | UnsetType = UNSET,
        meta: Meta = UNSET,
    ) -> ElicitRequestParams:
        """``ElicitRequestURLParams``."""
        return cls(message=message, mode="url", url=url, elicitation_id=elicitation_id, meta=meta)


class ElicitResult(McpStruct, frozen=True, kw_only=True):
    """A client result: no ``resultType`` (also a 2026 input response).

    ``content`` values are strings, integers, booleans or (multi-select, since
    2025-11-25) string lists; floats are accepted on decode although the
    schemas only admit integers.
    """

    action: ElicitAction
    content: dict[str, str | int | float | bool | list[str]] | UnsetType = UNSET
    meta: Meta = _meta()


class ElicitationCompleteNotificationParams(NotificationParams, frozen=True, kw_only=True):
    """``notifications/elicitation/complete`` (2025-11-25)."""

    elicitation_id: str


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


# --------------------------------------------------------------------------
# Stateless era (2026-07-28)


class CreateMessageRequest(
    McpStruct, tag_field="method", tag="sampling/createMessage", frozen=True, kw_only=True
):
    """A sampling input request inside :class:`InputRequiredResult`."""

    params: CreateMessageRequestParams


class ListRootsRequest(McpStruct, tag_field="method", tag="roots/list", frozen=True, kw_only=True):
    """A roots input request inside :class:`InputRequiredResult`."""

    params: RequestParams | UnsetType = UNSET


class ElicitRequest(McpStruct, tag_field="method", tag="elicitation/create", frozen=True, kw_only=True):
    """An elicitation input request inside :class:`InputRequiredResult`."""

    params: ElicitRequestParams


#: A server-to-client request embedded in a result (tagged on ``method``).
InputRequest: TypeAlias = CreateMessageRequest | ListRootsRequest | ElicitRequest
InputRequests: TypeAlias = dict[str, InputRequest]
#: Values are :class:`CreateMessageResult`, :class:`ListRootsResult` or
#: :class:`ElicitResult` (untagged: decode per key with ``coerce``).
InputResponses: TypeAlias = dict[str, Any]


class InputRequiredResult(Result, frozen=True, kw_only=True):
    """The server needs client input before it can complete the request: the
    client fulfils ``input_requests`` and retries with ``inputResponses`` and
    ``requestState``. At least one of the two fields must be set."""

    result_type: ResultType | UnsetType = RESULT_INPUT_REQUIRED
    input_requests: dict[str, InputRequest] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET


class SubscriptionFilter(McpStruct, frozen=True, kw_only=True):
    """Notification types opted in to on a ``subscriptions/listen`` stream."""

    tools_list_changed: bool | UnsetType = UNSET
    prompts_list_changed: bool | UnsetType = UNSET
    resources_list_changed: bool | UnsetType = UNSET
    resource_subscriptions: list[str] | UnsetType = UNSET


class SubscriptionsListenRequestParams(RequestParams, frozen=True, kw_only=True):
    notifications: SubscriptionFilter


class SubscriptionsListenResult(Result, frozen=True, kw_only=True):
    """Sent when the server ends a subscription; ``_meta`` must carry
    :data:`META_SUBSCRIPTION_ID` (the listen request's id)."""

    meta: dict[str, Any] = field(name="_meta")


class SubscriptionsAcknowledgedNotificationParams(NotificationParams, frozen=True, kw_only=True):
    """First notification on a subscription stream: what the server honours.
    ``_meta`` carries :data:`META_SUBSCRIPTION_ID`."""

    notifications: SubscriptionFilter
