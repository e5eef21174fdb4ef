"""The request headers the 2026-07-28 era mirrors from the body.

A stateless Streamable HTTP request carries, besides its body,
``MCP-Protocol-Version`` (the ``_meta`` protocol version), ``Mcp-Method`` (the
JSON-RPC method) and, for ``tools/call`` / ``prompts/get`` / ``resources/read``,
``Mcp-Name`` (``params.name`` or ``params.uri``), so that intermediaries can
route without parsing bodies. A value that is not printable ASCII travels as
``=?base64?<base64 of its UTF-8>?=``. A server answers a missing or mismatching
header with HTTP 400 and JSON-RPC error -32020.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Final

import msgspec

from ...protocol import META_PROTOCOL_VERSION, MODERN_VERSIONS, Notification, Request, coerce

__all__ = [
    "METHOD_HEADER",
    "NAME_HEADER",
    "NAME_BEARING",
    "modern_headers",
    "header_mismatch",
    "encode_header_value",
    "decode_header_value",
]

METHOD_HEADER: Final = "mcp-method"
NAME_HEADER: Final = "mcp-name"
VERSION_HEADER: Final = "mcp-protocol-version"
#: Method → the params field mirrored in ``Mcp-Name``.
NAME_BEARING: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

_SAFE: Final = re.compile(r"^[\x20-\x7e]*$")
_B64: Final = re.compile(r"^=\?base64\?(.*)\?=$")


def encode_header_value(value: str) -> str:
    """As is when printable ASCII (and not padded with spaces), else base64-wrapped."""
    if _SAFE.match(value) and value == value.strip() and not _B64.match(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def decode_header_value(value: str | None) -> str | None:
    """The value a header stands for; None when absent or undecodable."""
    if value is None:
        return None
    match = _B64.match(value)
    if match is None:
        return value
    try:
        return base64.b64decode(match.group(1), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


class _Params(msgspec.Struct):
    meta: dict[str, Any] = msgspec.field(default_factory=dict, name="_meta")
    name: Any = None
    uri: Any = None


def _params(message: Any) -> _Params:
    try:
        params = coerce(message.params, _Params)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return _Params()
    return params if isinstance(params.meta, dict) else _Params()


def modern_headers(message: Any) -> dict[str, str]:
    """The mirrored headers for a stateless (2026-era) request or notification;
    empty for anything else."""
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
