"""Turning what user functions return into MCP content.

The rules, in one place:

- ``str`` is text (:class:`TextContent`); it is never structured output on
  its own.
- ``bytes`` (and ``bytearray`` / ``memoryview``) become an
  :class:`EmbeddedResource` holding a base64 blob, MIME type
  ``application/octet-stream``, under the opaque URI :data:`BYTES_URI`. Wrap
  bytes in :class:`Image` / :class:`Audio` to send media instead, or return an
  ``EmbeddedResource`` yourself to choose the URI.
- Content blocks pass through; :class:`ResourceContents` is embedded.
- Lists and tuples are concatenated item by item, except a list holding
  only data (no text, bytes, media or content) which becomes one JSON text.
- Anything else (Structs, dataclasses, attrs classes, dicts, numbers, bools)
  becomes JSON text; values msgspec cannot encode fall back to ``str(value)``.
- ``None`` is no content.

For tools, :func:`to_tool_result` adds ``structuredContent`` when the tool
has an output schema (see :func:`trio_mcp.server._schema.output_schema_for`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..protocol import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    ResourceContents,
    ResourceLink,
    TextContent,
)

if TYPE_CHECKING:
    from ._schema import OutputSchema

__all__ = [
    "BYTES_URI",
    "to_content",
    "to_prompt_messages",
    "to_resource_contents",
    "to_tool_result",
]

#: URI of the embedded resource made from a bare ``bytes`` return value.
BYTES_URI: Final = "urn:trio-mcp:bytes"
OCTET_STREAM: Final = "application/octet-stream"
JSON_MIME: Final = "application/json"
TEXT_MIME: Final = "text/plain"

_CONTENT_BLOCKS: Final = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)


class _Media:
    """What :class:`Image` and :class:`Audio` share, as the conversions here
    see them. Those two (attrs classes, in :mod:`._media`) are imported on
    first use: a server that never sends media does not build them."""

    __slots__ = ()

    mime_type: str | None

    def to_content(self) -> ContentBlock:
        raise NotImplementedError

    def encoded(self) -> tuple[str, str]:
        """``(base64 data, MIME type)``."""
        raise NotImplementedError


def __getattr__(name: str) -> Any:
    if name in ("Image", "Audio"):
        from . import _media

        return getattr(_media, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------
# Helpers

_BYTES_TYPES: Final = (bytes, bytearray, memoryview)


def _is_content_like(value: Any) -> bool:
    """Text, bytes, media or content: things a list is concatenated for."""
    return isinstance(value, (str, *_BYTES_TYPES, *_CONTENT_BLOCKS, _Media, ResourceContents))


def _is_block_like(value: Any) -> bool:
    """Media or content blocks: never structured output."""
    return isinstance(value, (*_CONTENT_BLOCKS, _Media, ResourceContents))


def _to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value, str_keys=True)


def _json_text(value: Any) -> str:
    try:
        return msgspec.json.encode(value).decode("utf-8")
    except (TypeError, ValueError, OverflowError):
        return str(value)


def _blob_resource(data: bytes, mime_type: str = OCTET_STREAM) -> EmbeddedResource:
    return EmbeddedResource(resource=ResourceContents.from_blob(BYTES_URI, data, mime_type=mime_type))


# --------------------------------------------------------------------------
# Tools


def to_content(value: Any) -> list[ContentBlock]:
    """Content blocks for any value a tool (or prompt) returns; see the
    module docstring for the rules."""
    if value is None:
        return []
    if isinstance(value, _CONTENT_BLOCKS):
        return [value]
    if isinstance(value, str):
        return [TextContent(text=value)]
    if isinstance(value, _BYTES_TYPES):
        return [_blob_resource(bytes(value))]
    if isinstance(value, _Media):
        return [value.to_content()]
    if isinstance(value, ResourceContents):
        return [EmbeddedResource(resource=value)]
    if isinstance(value, CallToolResult):
        return list(value.content)
    if isinstance(value, (list, tuple)):
        if not any(_is_content_like(item) for item in value):
            return [TextContent(text=_json_text(value))] if value else []
        out: list[ContentBlock] = []
        for item in value:
            out.extend(to_content(item))
        return out
    return [TextContent(text=_json_text(value))]


def to_tool_result(value: Any, output: OutputSchema | None = None) -> CallToolResult:
    """The ``tools/call`` result for a tool's return value.

    A :class:`CallToolResult` passes through untouched. With an output
    schema, any value that is not media / content becomes
    ``structuredContent`` (as JSON builtins; ``{"result": value}`` when the
    schema is wrapped) plus, for older clients, one text block holding the
    JSON of the value itself (unwrapped). Without one, the value is converted
    with :func:`to_content` and has no ``structuredContent``.
    """
    if isinstance(value, CallToolResult):
        return value
    if output is not None and not _is_block_like(value):
        is_list = isinstance(value, (list, tuple))
        if not (is_list and any(_is_block_like(item) for item in value)):
            try:
                data = _to_builtins(value)
            except (TypeError, ValueError):
                data = msgspec.UNSET
            if data is not msgspec.UNSET:
                if output.wrapped:
                    return CallToolResult(
                        content=[TextContent(text=_json_text(data))], structured_content={"result": data}
                    )
                if data is not None:
                    text = TextContent(text=_json_text(data))
                    return CallToolResult(content=[text], structured_content=data)
    return CallToolResult(content=to_content(value))


# --------------------------------------------------------------------------
# Prompts

_ROLES: Final = frozenset({"user", "assistant"})


def _prompt_content(content: Any) -> ContentBlock:
    if isinstance(content, _CONTENT_BLOCKS):
        return content
    if isinstance(content, str):
        return TextContent(text=content)
    if isinstance(content, _Media):
        return content.to_content()
    if isinstance(content, ResourceContents):
        return EmbeddedResource(resource=content)
    if isinstance(content, dict):
        try:
            block: ContentBlock = msgspec.convert(content, ContentBlock)
            return block
        except msgspec.ValidationError as exc:
            raise TypeError(f"invalid prompt message content {content!r}: {exc}") from None
    raise TypeError(
        f"a prompt message content must be text, a content block or a dict, not {type(content).__name__}"
    )


def _message(role: Any, content: Any) -> PromptMessage:
    if role not in _ROLES:
        raise ValueError(f"a prompt message role must be 'user' or 'assistant', not {role!r}")
    return PromptMessage(role=role, content=_prompt_content(content))


def to_prompt_messages(value: Any) -> list[PromptMessage]:
    """Prompt messages for a prompt function's return value.

    ``str``, content blocks and :class:`Image` / :class:`Audio` become one
    ``user`` message; :class:`PromptMessage` passes through; a dict
    ``{"role": ..., "content": ...}`` (content as text, a content block or a
    content dict) is one message; lists and tuples are concatenated; ``None``
    is no message. Anything else raises :class:`TypeError`.
    """
    if value is None:
        return []
    if isinstance(value, PromptMessage):
        return [value]
    if isinstance(value, (str, _Media, ResourceContents, *_CONTENT_BLOCKS)):
        return [_message("user", value)]
    if isinstance(value, dict):
        if "role" not in value or "content" not in value:
            raise TypeError(f"a prompt message dict needs 'role' and 'content', got keys {sorted(value)}")
        return [_message(value["role"], value["content"])]
    if isinstance(value, (list, tuple)):
        out: list[PromptMessage] = []
        for item in value:
            out.extend(to_prompt_messages(item))
        return out
    raise TypeError(
        f"a prompt must return text, PromptMessage(s), message dicts or content, not {type(value).__name__}"
    )


# --------------------------------------------------------------------------
# Resources


def to_resource_contents(uri: str, value: Any, mime_type: str | None = None) -> list[ResourceContents]:
    """The ``resources/read`` contents for a resource function's return value.

    ``str`` is text (``mime_type`` or ``text/plain``); bytes are a base64 blob
    (``mime_type`` or ``application/octet-stream``); :class:`Image` /
    :class:`Audio` are blobs of their own MIME type; ``ResourceContents`` pass
    through (with their own URI); text / image / audio / embedded content
    blocks are unwrapped; lists and tuples of those give many contents;
    ``None`` gives none; anything else (including a list of plain data) is
    one JSON text (``application/json``).
    """
    if value is None:
        return []
    if isinstance(value, ResourceContents):
        return [value]
    if isinstance(value, str):
        return [ResourceContents.from_text(uri, value, mime_type=mime_type or TEXT_MIME)]
    if isinstance(value, _BYTES_TYPES):
        return [ResourceContents.from_blob(uri, bytes(value), mime_type=mime_type or OCTET_STREAM)]
    if isinstance(value, _Media):
        data, media_mime = value.encoded()
        return [ResourceContents.from_blob(uri, data, mime_type=value.mime_type or media_mime)]
    if isinstance(value, TextContent):
        return [ResourceContents.from_text(uri, value.text, mime_type=mime_type or TEXT_MIME)]
    if isinstance(value, (ImageContent, AudioContent)):
        return [ResourceContents.from_blob(uri, value.data, mime_type=value.mime_type)]
    if isinstance(value, EmbeddedResource):
        return [value.resource]
    if isinstance(value, (list, tuple)) and any(_is_content_like(item) for item in value):
        out: list[ResourceContents] = []
        for item in value:
            out.extend(to_resource_contents(uri, item, mime_type))
        return out
    return [ResourceContents.from_text(uri, _json_text(value), mime_type=mime_type or JSON_MIME)]
