"""Payloads of what a server offers: the handshake and discovery results,
resources, prompts, tools, logging and completion."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from msgspec import UNSET, UnsetType

from ._common import (
    CacheableResult,
    ClientCapabilities,
    Cursor,
    Icon,
    Implementation,
    InputResponseRequestParams,
    LoggingLevel,
    McpStruct,
    Meta,
    NotificationParams,
    RequestParams,
    Result,
    Role,
    ServerCapabilities,
    meta_field,
)
from ._content import Annotations, ContentBlock, ResourceContents

__all__ = [
    "InitializeRequestParams",
    "InitializeResult",
    "DiscoverResult",
    "Resource",
    "ResourceTemplate",
    "ListResourcesResult",
    "ListResourceTemplatesResult",
    "ReadResourceRequestParams",
    "ReadResourceResult",
    "SubscribeRequestParams",
    "UnsubscribeRequestParams",
    "ResourceUpdatedNotificationParams",
    "PromptArgument",
    "Prompt",
    "PromptMessage",
    "ListPromptsResult",
    "GetPromptRequestParams",
    "GetPromptResult",
    "ToolAnnotations",
    "ToolExecution",
    "Tool",
    "ListToolsResult",
    "CallToolRequestParams",
    "CallToolResult",
    "SetLevelRequestParams",
    "LoggingMessageNotificationParams",
    "PromptReference",
    "ResourceTemplateReference",
    "ResourceReference",
    "Reference",
    "CompletionArgument",
    "CompletionContext",
    "CompleteRequestParams",
    "Completion",
    "CompleteResult",
]

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
    meta: Meta = meta_field()


class ResourceTemplate(McpStruct, frozen=True, kw_only=True):
    uri_template: str
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    annotations: Annotations | UnsetType = UNSET
    meta: Meta = meta_field()


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
    meta: Meta = meta_field()


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
    meta: Meta = meta_field()


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
