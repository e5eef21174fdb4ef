"""The request headers the 2026-07-28 era mirrors from the body.

A stateless Streamable HTTP request carries, besides its body,
``MCP-Protocol-Version`` (the ``_meta`` protocol version), ``Mcp-Method`` (the
JSON-RPC method) and, for ``tools/call`` / ``prompts/get`` / ``resources/read``,
``Mcp-Name`` (``params.name`` or ``params.uri``), so that intermediaries can
route without parsing bodies. A value that is not printable ASCII travels as
``=?base64?<base64 of its UTF-8>?=``. A server answers a missing or mismatching
header with HTTP 400 and JSON-RPC error -32020.

Custom parameter headers (SEP-2243)
-----------------------------------
A tool's input schema may annotate a property with ``"x-mcp-header": "Name"``;
a ``tools/call`` of that tool then also carries ``Mcp-Param-Name`` with the
argument's value (strings as they are, integers in decimal, booleans as
``true`` / ``false``, each encoded like the other header values; no header
when the argument is absent or null). An annotation is valid only on a
property reached from the root through ``properties`` alone (no ``items``,
composition keyword, ``$defs``...), of type ``string``, ``integer`` or
``boolean``, named by an HTTP token (RFC 9110), unique case-insensitively
within the schema. A client drops a tool with an invalid annotation from
what it lists; a server does not enforce one.

The client side: :func:`param_header_map` (the annotations of a schema, or
:class:`InvalidParamHeader`), :func:`param_headers` (the headers of one call),
and :data:`PARAM_HEADERS`, the channel from the session, which knows schemas,
to the transport, which does not. The server side: :func:`param_header_mismatch`.

This module imports nothing heavier than the protocol package: the client
session imports it on first use, without the HTTP stack.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any, Final

import attrs
import msgspec

from ...protocol import META_PROTOCOL_VERSION, MODERN_VERSIONS, Notification, Request, coerce

__all__ = [
    "METHOD_HEADER",
    "NAME_BEARING",
    "NAME_HEADER",
    "PARAM_HEADERS",
    "PARAM_PREFIX",
    "X_MCP_HEADER",
    "InvalidParamHeader",
    "ParamHeaders",
    "call_param_headers",
    "decode_header_value",
    "encode_header_value",
    "header_mismatch",
    "modern_headers",
    "param_header_map",
    "param_header_mismatch",
    "param_headers",
]

METHOD_HEADER: Final = "mcp-method"
NAME_HEADER: Final = "mcp-name"
VERSION_HEADER: Final = "mcp-protocol-version"
#: Method → the params field mirrored in ``Mcp-Name``.
NAME_BEARING: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    # the tasks extension (SEP-2663): the task id
    "tasks/get": "task_id",
    "tasks/update": "task_id",
    "tasks/cancel": "task_id",
}
#: The (lowercase) prefix of the custom parameter headers.
PARAM_PREFIX: Final = "mcp-param-"
#: The input-schema annotation naming a property's header.
X_MCP_HEADER: Final = "x-mcp-header"

_SAFE: Final = re.compile(r"^[\x20-\x7e]*$")
_B64: Final = re.compile(r"^=\?base64\?(.*)\?=$")
#: RFC 9110 §5.6.2 ``token``: what a field name may be made of.
_TOKEN: Final = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_HEADER_TYPES: Final = frozenset({"string", "integer", "boolean"})
#: A decimal integer, optionally with a zero fraction (``42``, ``-7``, ``42.0``).
_INTEGRAL: Final = re.compile(r"^-?[0-9]+(?:\.0+)?$")

# JSON Schema keywords whose values are subschemas, by shape. ``properties``
# is walked apart: it alone keeps a property statically reachable.
_ONE_SCHEMA: Final = frozenset(
    {
        "items",
        "additionalItems",
        "contains",
        "additionalProperties",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_SCHEMA_LIST: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SCHEMA_MAP: Final = frozenset(
    {
        "patternProperties",
        "dependentSchemas",
        "dependencies",
        "$defs",
        "definitions",
    }
)


def encode_header_value(value: str) -> str:
    """As is when printable ASCII (and not padded with spaces), else base64-wrapped."""
    if _SAFE.match(value) and value == value.strip() and not _B64.match(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def decode_header_value(value: str | None) -> str | None:
    """The value a header stands for; None when absent or undecodable (bad
    base64, non-canonical base64, not UTF-8). Without the exact
    ``=?base64?…?=`` wrapper a value is literal."""
    if value is None:
        return None
    match = _B64.match(value)
    if match is None:
        return value
    payload = match.group(1)
    try:
        raw = base64.b64decode(payload, validate=True)
        if base64.b64encode(raw).decode() != payload:
            return None  # e.g. stray bits in the last character: never what an encoder sends
        return raw.decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


class _Params(msgspec.Struct):
    meta: dict[str, Any] = msgspec.field(default_factory=dict, name="_meta")
    name: Any = None
    uri: Any = None
    task_id: Any = msgspec.field(default=None, name="taskId")


def _params(message: Any) -> _Params:
    try:
        params = coerce(message.params, _Params)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return _Params()
    return params if isinstance(params.meta, dict) else _Params()


def modern_headers(message: Any) -> dict[str, str]:
    """The mirrored headers for a stateless (2026-era) request or notification;
    empty for anything else. A ``tools/call`` also gets the ``Mcp-Param-*``
    headers its sender published in :data:`PARAM_HEADERS`."""
    if type(message) not in (Request, Notification):
        return {}
    params = _params(message)
    version = params.meta.get(META_PROTOCOL_VERSION)
    if version not in MODERN_VERSIONS:
        return {}
    headers = {VERSION_HEADER: version, METHOD_HEADER: encode_header_value(message.method)}
    field = NAME_BEARING.get(message.method)
    if field is not None:
        value = getattr(params, field)
        if isinstance(value, str):
            headers[NAME_HEADER] = encode_header_value(value)
        if message.method == "tools/call" and type(message) is Request:
            headers.update(call_param_headers(message))
    return headers


def header_mismatch(headers: dict[str, str], message: Any) -> str | None:
    """Why a stateless request's headers do not mirror its body (None when they do).
    ``headers`` are keyed by lowercase name."""
    params = _params(message)
    version = params.meta.get(META_PROTOCOL_VERSION)
    if headers.get(VERSION_HEADER, "").strip() != version:
        return f"the MCP-Protocol-Version header does not match _meta[{META_PROTOCOL_VERSION!r}]"
    method = decode_header_value(headers.get(METHOD_HEADER))
    if method is None:
        return "the Mcp-Method header is missing or malformed"
    if method != message.method:
        return f"the Mcp-Method header ({method!r}) does not match the body's method ({message.method!r})"
    field = NAME_BEARING.get(message.method)
    if field is not None:
        value = getattr(params, field)
        if value is not None:
            name = decode_header_value(headers.get(NAME_HEADER))
            if name is None:
                return f"the Mcp-Name header is missing or malformed (the body has params.{field})"
            if name != value:
                return f"the Mcp-Name header does not match params.{field}"
    return None


# ------------------------------------------------------------------ SEP-2243


class InvalidParamHeader(ValueError):
    """An ``x-mcp-header`` annotation breaks a rule: the tool definition is invalid."""


#: ``{property path: header name}``: the annotations of one input schema. A
#: path is the chain of ``properties`` keys from the root (one key for a
#: top-level property).
ParamHeaderMap = dict[tuple[str, ...], str]


def _positions(schema: Any) -> Iterator[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every subschema of ``schema`` with its ``properties`` path (None once the
    walk went through any other keyword). Iterative: no recursion limit on
    hostile input; ``$ref`` is never followed, instance data
    (``default``, ``enum``, ``const``, ``examples``) never entered."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, node
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    stack.append((None if path is None else (*path, name), sub))
            elif key in _SCHEMA_MAP and isinstance(value, dict):
                stack.extend((None, sub) for sub in value.values())
            elif key in _SCHEMA_LIST and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif key in _ONE_SCHEMA:
                stack.append((None, value))


def param_header_map(input_schema: Any) -> ParamHeaderMap:
    """The ``x-mcp-header`` annotations of a tool's input schema; raises
    :class:`InvalidParamHeader` (saying which rule) when one is invalid."""
    found: ParamHeaderMap = {}
    seen: dict[str, str] = {}
    for path, node in _positions(input_schema):
        if X_MCP_HEADER not in node:
            continue
        name = node[X_MCP_HEADER]
        if not path:
            raise InvalidParamHeader(
                f"{X_MCP_HEADER} {name!r} is not on a property reachable through `properties` alone"
            )
        where = ".".join(path)
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise InvalidParamHeader(f"property {where!r}: {X_MCP_HEADER} {name!r} is not an HTTP token")
        kind = node.get("type")
        if not isinstance(kind, str) or kind not in _HEADER_TYPES:
            raise InvalidParamHeader(
                f"property {where!r}: {X_MCP_HEADER} is only allowed on string, integer and boolean "
                f"properties (type {kind!r})"
            )
        other = seen.get(name.lower())
        if other is not None:
            raise InvalidParamHeader(f"property {where!r}: {X_MCP_HEADER} {name!r} is also used by {other!r}")
        seen[name.lower()] = where
        found[path] = name
    return found


def _value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _render(value: Any) -> str | None:
    """A header's text for an argument value; None for what has none."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    if type(value) is float:
        return str(int(value)) if value.is_integer() else repr(value)
    if type(value) is str:
        return value
    return None


def param_headers(header_map: ParamHeaderMap, arguments: Any) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers (lowercase names) of a call with ``arguments``;
    none for an argument that is absent, null or not a primitive."""
    headers: dict[str, str] = {}
    for path, name in header_map.items():
        text = _render(_value_at(arguments, path))
        if text is not None:
            headers[PARAM_PREFIX + name.lower()] = encode_header_value(text)
    return headers


@attrs.frozen(eq=False)
class ParamHeaders:
    """The ``Mcp-Param-*`` headers of one ``tools/call``: that of ``tool``
    with these very ``arguments``."""

    tool: str
    arguments: Any
    headers: Mapping[str, str]


#: The ``Mcp-Param-*`` headers of the ``tools/call`` the current task is
#: making, set by the :class:`~trio_mcp.ClientSession` around a stateless
#: ``call_tool`` (it remembers the ``x-mcp-header`` annotations of the tools it
#: listed; the transport knows no schemas). The Streamable HTTP transport reads
#: it in ``send``, which runs in the caller's task, and adds the headers to the
#: POST of a stateless ``tools/call`` request naming the same tool with the same
#: arguments (so a call made meanwhile by the same task, e.g. from a sampling
#: handler, never gets them); other transports ignore it.
PARAM_HEADERS: ContextVar[ParamHeaders | None] = ContextVar("trio_mcp_param_headers", default=None)


def _call_fields(params: Any) -> tuple[Any, Any]:
    if isinstance(params, dict):
        return params.get("name"), params.get("arguments")
    return getattr(params, "name", None), getattr(params, "arguments", None)


def call_param_headers(message: Request) -> dict[str, str]:
    """The :data:`PARAM_HEADERS` published for this ``tools/call`` request, if any."""
    published = PARAM_HEADERS.get()
    if published is None:
        return {}
    name, arguments = _call_fields(message.params)
    if name != published.tool or not (arguments is published.arguments or arguments == published.arguments):
        return {}
    return dict(published.headers)


def param_header_mismatch(
    input_schema: Any, arguments: Any, headers: Mapping[str, str], *, duplicated: frozenset[str] = frozenset()
) -> str | None:
    """Why a stateless ``tools/call``'s ``Mcp-Param-*`` headers do not mirror
    its arguments under the tool's ``input_schema`` (None when they do).

    ``headers`` are keyed by lowercase name; ``duplicated`` names headers that
    came more than once. A header and its argument go together: both absent
    (null counts as absent), or both present and equal once decoded (integers
    compare as numbers: ``42.0`` is ``42``). A schema with an invalid
    annotation is not enforced (clients do not call such tools)."""
    try:
        header_map = param_header_map(input_schema)
    except InvalidParamHeader:
        return None
    return param_map_mismatch(header_map, input_schema, arguments, headers, duplicated=duplicated)


def param_map_mismatch(
    header_map: ParamHeaderMap,
    input_schema: Any,
    arguments: Any,
    headers: Mapping[str, str],
    *,
    duplicated: frozenset[str] = frozenset(),
) -> str | None:
    """:func:`param_header_mismatch` with the annotations already extracted."""
    for path, name in header_map.items():
        key = PARAM_PREFIX + name.lower()
        title = f"the Mcp-Param-{name} header"
        where = ".".join(path)
        raw = headers.get(key)
        if raw is not None and key in duplicated:
            return f"{title} is sent more than once"
        value = _value_at(arguments, path)
        text = None if value is None else _render(value)
        if text is None:
            if raw is not None:
                return f"{title} is present but argument {where!r} is absent (or not a primitive)"
            continue
        if raw is None:
            return f"{title} is missing (argument {where!r} is in the body)"
        decoded = decode_header_value(raw.strip(" \t"))
        if decoded is None:
            return f"{title} is malformed (bad base64)"
        if _integer_typed(input_schema, path) and type(value) in (int, float) and text.lstrip("-").isdigit():
            if _INTEGRAL.match(decoded) is None or int(decoded.partition(".")[0]) != int(text):
                return f"{title} does not match argument {where!r}"
        elif decoded != text:
            return f"{title} does not match argument {where!r}"
    return None


def _integer_typed(schema: Any, path: tuple[str, ...]) -> bool:
    node = schema
    for key in path:
        node = node.get("properties", {}).get(key) if isinstance(node, dict) else None
    return isinstance(node, dict) and node.get("type") == "integer"
