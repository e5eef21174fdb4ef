"""Typed protocol errors carrying JSON-RPC error codes.

One exception class per well-known code; :func:`error_from_code` maps a wire
error back to the most specific class so that callers can ``except`` on it.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "CONNECTION_CLOSED",
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "MISSING_CLIENT_CAPABILITY",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "SERVER_OVERLOADED",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "URL_ELICITATION_REQUIRED",
    "ConnectionClosed",
    "HeaderMismatch",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "McpError",
    "MethodNotFound",
    "MissingClientCapability",
    "ParseError",
    "ResourceNotFound",
    "ServerOverloaded",
    "UnsupportedProtocolVersion",
    "UrlElicitationRequired",
    "error_from_code",
]

# JSON-RPC 2.0
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Implementation-defined server errors (-32000 .. -32099)
SERVER_OVERLOADED = -32001  # handler admission queue full; retry later
RESOURCE_NOT_FOUND = -32002  # MCP: resources/read of an unknown URI
REQUEST_CANCELLED = -32800  # local only: never sent for a cancelled request
CONNECTION_CLOSED = -32000
URL_ELICITATION_REQUIRED = -32042  # MCP 2025-11-25
HEADER_MISMATCH = -32020  # MCP 2026-07-28, Streamable HTTP
MISSING_CLIENT_CAPABILITY = -32021  # MCP 2026-07-28
UNSUPPORTED_PROTOCOL_VERSION = -32022  # MCP 2026-07-28


class McpError(Exception):
    """An error with a JSON-RPC ``code``, ``message`` and optional ``data``.

    Raised by handlers to answer a request with that error; raised to callers
    when the peer answered with an error.
    """

    code: ClassVar[int] = INTERNAL_ERROR
    default_message: ClassVar[str] = "Internal error"

    def __init__(self, message: str | None = None, *, data: Any = None, code: int | None = None) -> None:
        self.message = message if message is not None else self.default_message
        self.data = data
        if code is not None:
            self.code = code  # type: ignore[misc]  # per-instance override
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r})"

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class ParseError(McpError):
    """The bytes were not valid JSON (-32700)."""

    code = PARSE_ERROR
    default_message = "Parse error"


class InvalidRequest(McpError):
    """Not a valid JSON-RPC request, or not valid in this state (-32600)."""

    code = INVALID_REQUEST
    default_message = "Invalid request"


class MethodNotFound(McpError):
    """The method does not exist or its capability is not declared (-32601)."""

    code = METHOD_NOT_FOUND
    default_message = "Method not found"


class InvalidParams(McpError):
    """The params do not fit the method (-32602)."""

    code = INVALID_PARAMS
    default_message = "Invalid params"


class InternalError(McpError):
    """The handler failed (-32603)."""

    code = INTERNAL_ERROR
    default_message = "Internal error"


class ServerOverloaded(McpError):
    """Too many requests in flight; retry later (-32001)."""

    code = SERVER_OVERLOADED
    default_message = "Server overloaded: too many requests in flight"


class ResourceNotFound(McpError):
    """``resources/read`` of an unknown URI (-32002)."""

    code = RESOURCE_NOT_FOUND
    default_message = "Resource not found"


class UrlElicitationRequired(McpError):
    """The server needs a URL elicitation first (-32042)."""

    code = URL_ELICITATION_REQUIRED
    default_message = "URL elicitation required"


class MissingClientCapability(McpError):
    """The request needs a client capability that was not declared (-32021)."""

    code = MISSING_CLIENT_CAPABILITY
    default_message = "Missing required client capability"


class HeaderMismatch(McpError):
    """Streamable HTTP headers that do not mirror the request body (-32020)."""

    code = HEADER_MISMATCH
    default_message = "Header mismatch"


class UnsupportedProtocolVersion(McpError):
    """The protocol version is not supported (-32022)."""

    code = UNSUPPORTED_PROTOCOL_VERSION
    default_message = "Unsupported protocol version"


class ConnectionClosed(McpError):
    """The transport closed (or the peer stopped) before an answer arrived."""

    code = CONNECTION_CLOSED
    default_message = "Connection closed"


_BY_CODE: dict[int, type[McpError]] = {
    cls.code: cls
    for cls in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        ServerOverloaded,
        ResourceNotFound,
        UrlElicitationRequired,
        MissingClientCapability,
        HeaderMismatch,
        UnsupportedProtocolVersion,
        ConnectionClosed,
    )
}


def error_from_code(code: int, message: str, data: Any = None) -> McpError:
    """Build the most specific :class:`McpError` for a wire error."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return McpError(message, data=data, code=code)
    return cls(message, data=data)
