"""Payloads of what a client offers: sampling, roots and elicitation."""

from __future__ import annotations

from typing import Any, Literal

from msgspec import UNSET, UnsetType, field

from ._common import (
    ElicitAction,
    IncludeContext,
    McpStruct,
    Meta,
    NotificationParams,
    RequestParams,
    Role,
    meta_field,
)
from ._content import SamplingContent
from ._server_types import Tool

__all__ = [
    "ModelHint",
    "ModelPreferences",
    "ToolChoice",
    "SamplingMessage",
    "CreateMessageRequestParams",
    "CreateMessageResult",
    "Root",
    "ListRootsResult",
    "EnumOption",
    "MultiSelectItems",
    "PrimitiveSchemaDefinition",
    "ElicitRequestedSchema",
    "ElicitRequestParams",
    "ElicitResult",
    "ElicitationCompleteNotificationParams",
]

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
    meta: Meta = meta_field()


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
    meta: Meta = meta_field()


# --------------------------------------------------------------------------
# Roots


class Root(McpStruct, frozen=True, kw_only=True):
    uri: str
    name: str | UnsetType = UNSET
    meta: Meta = meta_field()


class ListRootsResult(McpStruct, frozen=True, kw_only=True):
    """A client result: no ``resultType`` (also a 2026 input response)."""

    roots: list[Root]
    meta: Meta = meta_field()


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
    meta: Meta = meta_field()


class ElicitationCompleteNotificationParams(NotificationParams, frozen=True, kw_only=True):
    """``notifications/elicitation/complete`` (2025-11-25)."""

    elicitation_id: str
