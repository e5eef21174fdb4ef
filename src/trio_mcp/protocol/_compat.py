"""Downgrade outgoing payloads for peers speaking an older protocol version.

Payload Structs are built for the newest version. :func:`adapt` returns an
object valid under an older version's schema, changing only what that schema
would reject (the schemas never forbid additional properties, so most fields
added later are harmless and stay):

- content blocks the version does not know become a :class:`TextContent`
  describing them: audio before 2025-03-26, ``resource_link`` before
  2025-06-18, sampling ``tool_use`` / ``tool_result`` blocks before 2025-11-25;
- before 2025-11-25 multi-block sampling content is split into one message per
  block (requests) or joined into one text block (results);
- ``structuredContent`` that is not an object, and ``outputSchema`` without
  ``"type": "object"``, are dropped for 2025-06-18 and 2025-11-25;
- elicitation: titled and multi-select enum fields become the legacy enum /
  a described string field before 2025-11-25; multi-select answers are joined;
- handshake versions: the 2026 result fields ``resultType``, ``ttlMs`` and
  ``cacheScope`` are removed by :func:`strip_modern` (the handshake schemas
  would accept them; older peers simply have no use for them).

Objects that cannot be expressed at all raise :class:`ValueError` (URL-mode
elicitation before 2025-11-25, or without ``elicitation_id`` in 2025-11-25).
For the newest version :func:`adapt` returns its argument at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw
from msgspec.structs import replace

from ._jsonrpc import Notification, Request, Response
from ._types import (
    RESULT_COMPLETE,
    AudioContent,
    CacheableResult,
    CallToolResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    GetPromptResult,
    ImageContent,
    InputRequiredResult,
    ListToolsResult,
    PrimitiveSchemaDefinition,
    PromptMessage,
    ResourceLink,
    Result,
    SamplingMessage,
    TextContent,
    Tool,
    ToolResultContent,
    ToolUseContent,
)
from ._versions import LATEST_VERSION, V2025_03_26, V2025_06_18, V2025_11_25, is_modern

__all__ = ["adapt", "describe_block", "result_type_of", "strip_modern"]

_NEWEST: Final = LATEST_VERSION

# Content block types each version accepts where the schema says ContentBlock
# (tool results, prompt messages) or a sampling block.
_CONTENT_UNKNOWN: Final = (
    (V2025_03_26, (AudioContent, ResourceLink)),
    (V2025_06_18, (ResourceLink,)),
)
_SAMPLING_KNOWN: Final = (
    (V2025_03_26, (TextContent, ImageContent)),
    (V2025_11_25, (TextContent, ImageContent, AudioContent)),
)


def _content_unknown(version: str) -> tuple[type, ...]:
    for before, types in _CONTENT_UNKNOWN:
        if version < before:
            return types
    return ()


def _sampling_known(version: str) -> tuple[type, ...] | None:
    """Sampling block types of ``version``; ``None``: all, lists allowed."""
    for before, types in _SAMPLING_KNOWN:
        if version < before:
            return types
    return None


def describe_block(block: Any) -> TextContent:
    """A text block standing in for a block the peer's version cannot carry."""
    if isinstance(block, TextContent):
        return block
    annotations = getattr(block, "annotations", UNSET)
    meta = getattr(block, "meta", UNSET)
    if isinstance(block, ResourceLink):
        label = block.title if block.title is not UNSET else block.name
        text = f"[Resource: {label}]({block.uri})"
        if block.description is not UNSET:
            text += f" {block.description}"
    elif isinstance(block, (AudioContent, ImageContent)):
        kind = "audio" if isinstance(block, AudioContent) else "image"
        text = f"[{kind} content omitted: {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    elif isinstance(block, ToolUseContent):
        args = msgspec.json.encode(block.input).decode()
        text = f"[Tool call {block.name} (id {block.id}): {args}]"
    elif isinstance(block, ToolResultContent):
        parts = [describe_block(inner).text for inner in block.content]
        status = "error" if block.is_error is True else "result"
        text = f"[Tool {status} for call {block.tool_use_id}]" + ("\n" + "\n".join(parts) if parts else "")
    else:
        resource = getattr(block, "resource", None)
        if resource is not None and getattr(resource, "text", UNSET) is not UNSET:
            return TextContent(text=resource.text, annotations=annotations, meta=meta)
        text = f"[{type(block).__name__} omitted]"
    return TextContent(text=text, annotations=annotations, meta=meta)


def _adapt_blocks(blocks: list[Any], version: str) -> list[Any]:
    unknown = _content_unknown(version)
    if not unknown or not any(isinstance(b, unknown) for b in blocks):
        return blocks
    return [describe_block(b) if isinstance(b, unknown) else b for b in blocks]


def _adapt_block(block: Any, version: str) -> Any:
    unknown = _content_unknown(version)
    return describe_block(block) if unknown and isinstance(block, unknown) else block


def _sampling_blocks(content: Any, version: str) -> list[Any] | Any:
    """Sampling content for ``version``: a single block, or a list of
    single blocks when the content was a list the version cannot carry."""
    known = _sampling_known(version)
    if known is None:
        return content
    if isinstance(content, list):
        return [b if isinstance(b, known) else describe_block(b) for b in content]
    return content if isinstance(content, known) else describe_block(content)


def _join(blocks: list[Any]) -> Any:
    if len(blocks) == 1:
        return blocks[0]
    text = "\n".join(describe_block(b).text for b in blocks)
    return TextContent(text=text)


# ---------------------------------------------------------------- strip_modern

_MODERN_RESULT_FIELDS: Final = {"result_type": UNSET}
_MODERN_CACHEABLE_FIELDS: Final = {"result_type": UNSET, "ttl_ms": UNSET, "cache_scope": UNSET}


def strip_modern(obj: Any) -> Any:
    """``obj`` without the 2026-only result fields (``resultType``, ``ttlMs``,
    ``cacheScope``). Other objects, and :class:`InputRequiredResult` (which has
    no meaning without them), are returned unchanged."""
    if not isinstance(obj, Result) or isinstance(obj, InputRequiredResult):
        return obj
    if isinstance(obj, CacheableResult):
        if obj.result_type is UNSET and obj.ttl_ms is UNSET and obj.cache_scope is UNSET:
            return obj
        return replace(obj, **_MODERN_CACHEABLE_FIELDS)
    if obj.result_type is UNSET:
        return obj
    return replace(obj, **_MODERN_RESULT_FIELDS)


# ---------------------------------------------------------------- per-type rules


def _structured_content_ok(value: Any, version: str) -> bool:
    # An object in 2025-06-18 and 2025-11-25; undeclared (anything goes) before.
    return version < V2025_06_18 or isinstance(value, dict)


def _tool(tool: Tool, version: str) -> Tool:
    schema = tool.output_schema
    if schema is UNSET or version < V2025_06_18 or schema.get("type") == "object":
        return tool
    return replace(tool, output_schema=UNSET)


def _call_tool_result(result: CallToolResult, version: str) -> CallToolResult:
    content = _adapt_blocks(result.content, version)
    structured = result.structured_content
    drop = structured is not UNSET and not _structured_content_ok(structured, version)
    if content is result.content and not drop:
        return result
    return replace(result, content=content, structured_content=UNSET if drop else structured)


def _prompt_message(message: PromptMessage, version: str) -> PromptMessage:
    content = _adapt_block(message.content, version)
    return message if content is message.content else replace(message, content=content)


def _get_prompt_result(result: GetPromptResult, version: str) -> GetPromptResult:
    messages = [_prompt_message(m, version) for m in result.messages]
    if all(a is b for a, b in zip(messages, result.messages)):
        return result
    return replace(result, messages=messages)


def _list_tools_result(result: ListToolsResult, version: str) -> ListToolsResult:
    tools = [_tool(t, version) for t in result.tools]
    if all(a is b for a, b in zip(tools, result.tools)):
        return result
    return replace(result, tools=tools)


def _sampling_message(message: SamplingMessage, version: str) -> SamplingMessage:
    content = _sampling_blocks(message.content, version)
    if isinstance(content, list) and _sampling_known(version) is not None:
        content = _join(content)
    return message if content is message.content else replace(message, content=content)


def _create_message_params(params: CreateMessageRequestParams, version: str) -> CreateMessageRequestParams:
    messages = params.messages
    if _sampling_known(version) is not None:
        split: list[SamplingMessage] = []
        for message in messages:
            content = _sampling_blocks(message.content, version)
            if content is message.content:
                split.append(message)
            elif isinstance(content, list):  # one message per block, same role
                split.extend(replace(message, content=block) for block in content)
            else:
                split.append(replace(message, content=content))
        if any(a is not b for a, b in zip(split, messages)) or len(split) != len(messages):
            messages = split
    tools = params.tools
    if tools is not UNSET and version >= V2025_06_18:
        new_tools = [_tool(t, version) for t in tools]
        if any(a is not b for a, b in zip(new_tools, tools)):
            tools = new_tools
    if messages is params.messages and tools is params.tools:
        return params
    return replace(params, messages=messages, tools=tools)


def _create_message_result(result: CreateMessageResult, version: str) -> CreateMessageResult:
    content = _sampling_blocks(result.content, version)
    if isinstance(content, list) and _sampling_known(version) is not None:
        content = _join(content)
    return result if content is result.content else replace(result, content=content)


def _legacy_field(schema: PrimitiveSchemaDefinition) -> PrimitiveSchemaDefinition:
    """A 2025-11-25 enum field expressed with the 2025-06-18 vocabulary."""
    if schema.one_of is not UNSET:  # titled single select -> enum + enumNames
        return replace(
            schema,
            one_of=UNSET,
            enum=[o.const for o in schema.one_of],
            enum_names=[o.title for o in schema.one_of],
        )
    if schema.type == "array":  # multi-select: a described free-text field
        items = schema.items
        options: list[str] = []
        if items is not UNSET:
            if items.enum is not UNSET:
                options = list(items.enum)
            elif items.any_of is not UNSET:
                options = [o.const for o in items.any_of]
        hint = "Comma-separated values from: " + ", ".join(options)
        description = hint if schema.description is UNSET else f"{schema.description} ({hint})"
        return PrimitiveSchemaDefinition(type="string", title=schema.title, description=description)
    return schema


def _elicit_params(params: ElicitRequestParams, version: str) -> ElicitRequestParams:
    if version >= V2025_11_25:
        if params.mode == "url" and params.elicitation_id is UNSET:
            raise ValueError("URL-mode elicitation needs an elicitation_id in MCP 2025-11-25")
        return params
    if params.mode == "url" or params.requested_schema is UNSET:
        raise ValueError(f"URL-mode elicitation is not available in MCP {version}")
    schema = params.requested_schema
    fields = {name: _legacy_field(s) for name, s in schema.properties.items()}
    if all(fields[name] is s for name, s in schema.properties.items()):
        return params
    return replace(params, requested_schema=replace(schema, properties=fields))


def _elicit_result(result: ElicitResult, version: str) -> ElicitResult:
    content = result.content
    if version >= V2025_11_25 or content is UNSET or not any(isinstance(v, list) for v in content.values()):
        return result
    joined = {k: ", ".join(v) if isinstance(v, list) else v for k, v in content.items()}
    return replace(result, content=joined)


def _request(message: Request, version: str) -> Request:
    params = adapt(message.params, version)
    return message if params is message.params else replace(message, params=params)


def _notification(message: Notification, version: str) -> Notification:
    params = adapt(message.params, version)
    return message if params is message.params else replace(message, params=params)


def _response(message: Response, version: str) -> Response:
    result = adapt(message.result, version)
    return message if result is message.result else replace(message, result=result)


_Rule = Callable[[Any, str], Any]

_RULES: Final[dict[type, _Rule]] = {
    CallToolResult: _call_tool_result,
    GetPromptResult: _get_prompt_result,
    PromptMessage: _prompt_message,
    ListToolsResult: _list_tools_result,
    Tool: _tool,
    SamplingMessage: _sampling_message,
    CreateMessageRequestParams: _create_message_params,
    CreateMessageResult: _create_message_result,
    ElicitRequestParams: _elicit_params,
    ElicitResult: _elicit_result,
    Request: _request,
    Notification: _notification,
    Response: _response,
}

_adapters: dict[type, _Rule | None] = {}


def _adapter(cls: type) -> _Rule | None:
    try:
        return _adapters[cls]
    except KeyError:
        pass
    rule = _RULES.get(cls)
    if issubclass(cls, Result) and not issubclass(cls, InputRequiredResult):

        def adapter(obj: Any, version: str, _rule: _Rule | None = rule) -> Any:
            if _rule is not None:
                obj = _rule(obj, version)
            return obj if is_modern(version) else strip_modern(obj)

        rule = adapter
    _adapters[cls] = rule
    return rule


def adapt(obj: Any, version: str) -> Any:
    """``obj`` (params, result, or a Request / Notification / Response
    envelope) made valid for ``version``; ``obj`` itself when nothing changes.

    Dicts and ``msgspec.Raw`` payloads are passed through untouched.
    Raises ValueError for objects ``version`` cannot express.
    """
    if version >= _NEWEST:
        return obj
    cls = type(obj)
    if (
        cls is CallToolResult  # the commonest result: from 2025-06-18 on, with object (or no)
        and version >= V2025_06_18  # structured content, only its 2026-only field goes
        and (obj.structured_content is UNSET or type(obj.structured_content) is dict)
    ):
        return obj if obj.result_type is UNSET else replace(obj, result_type=UNSET)
    rule = _adapter(cls)
    return obj if rule is None else rule(obj, version)


# ---------------------------------------------------------------- result kinds


class _ResultTypeProbe(msgspec.Struct, rename="camel"):
    result_type: str = RESULT_COMPLETE


_probe_decoder: Final = msgspec.json.Decoder(_ResultTypeProbe)


def result_type_of(result: Any) -> str:
    """The ``resultType`` of a result payload (``Raw``, Struct or dict);
    ``"complete"`` when absent, as the 2026 spec prescribes."""
    if type(result) is Raw:
        value = _probe_decoder.decode(result).result_type
    elif isinstance(result, dict):
        value = result.get("resultType", RESULT_COMPLETE)
    else:
        value = getattr(result, "result_type", RESULT_COMPLETE)
    return value if isinstance(value, str) else RESULT_COMPLETE
