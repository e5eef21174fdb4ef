"""Content blocks (text, image, audio, resource link, embedded resource,
tool use and tool result) and resource contents: tagged on ``type``."""

from __future__ import annotations

import base64
from typing import Any, TypeAlias

from msgspec import UNSET, UnsetType

from ._common import Icon, McpStruct, Meta, Role, meta_field

__all__ = [
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
]

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
    meta: Meta = meta_field()

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
    meta: Meta = meta_field()


class ImageContent(McpStruct, tag_field="type", tag="image", frozen=True, kw_only=True):
    """``data`` is base64."""

    data: str
    mime_type: str
    annotations: Annotations | UnsetType = UNSET
    meta: Meta = meta_field()


class AudioContent(McpStruct, tag_field="type", tag="audio", frozen=True, kw_only=True):
    """``data`` is base64. Since 2025-03-26."""

    data: str
    mime_type: str
    annotations: Annotations | UnsetType = UNSET
    meta: Meta = meta_field()


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
    meta: Meta = meta_field()


class EmbeddedResource(McpStruct, tag_field="type", tag="resource", frozen=True, kw_only=True):
    resource: ResourceContents
    annotations: Annotations | UnsetType = UNSET
    meta: Meta = meta_field()


#: A content block of tool results and prompt messages (tagged on ``type``).
ContentBlock: TypeAlias = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource


class ToolUseContent(McpStruct, tag_field="type", tag="tool_use", frozen=True, kw_only=True):
    """A tool call made by the model during sampling. Since 2025-11-25."""

    id: str
    name: str
    input: dict[str, Any]
    meta: Meta = meta_field()


class ToolResultContent(McpStruct, tag_field="type", tag="tool_result", frozen=True, kw_only=True):
    """The result of a :class:`ToolUseContent`, fed back in sampling. Since 2025-11-25."""

    tool_use_id: str
    content: list[ContentBlock]
    structured_content: Any | UnsetType = UNSET
    is_error: bool | UnsetType = UNSET
    meta: Meta = meta_field()


#: A content block of sampling messages (tagged on ``type``).
SamplingMessageContentBlock: TypeAlias = (
    TextContent | ImageContent | AudioContent | ToolUseContent | ToolResultContent
)
#: Sampling message content: one block, or (since 2025-11-25) a list of blocks.
SamplingContent: TypeAlias = SamplingMessageContentBlock | list[SamplingMessageContentBlock]
