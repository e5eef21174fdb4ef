"""CORS: pages on an allowed origin may call the MCP endpoint from a browser.

A request whose ``Origin`` passed the origin check gets
``Access-Control-Allow-Origin`` (that origin) on its answer, and the MCP
response headers are exposed to the page's script
(``Access-Control-Expose-Headers``). A preflight (``OPTIONS`` with
``Access-Control-Request-Method``) is answered ``204`` with the methods and
the MCP request headers allowed. A refused origin gets ``403`` and no CORS
header. Requests without ``Origin`` (not from a browser) are unchanged.
"""

from __future__ import annotations

from typing import Final

from ...transports._asgi import Send
from ...transports.http._headers import PARAM_PREFIX

__all__ = ["ALLOWED_REQUEST_HEADERS", "EXPOSED_HEADERS", "is_preflight", "preflight_headers", "with_cors"]

#: Response headers a page's script may read.
EXPOSED_HEADERS: Final = ("mcp-session-id", "mcp-protocol-version", "www-authenticate")

#: Request headers a page may send (and every ``Mcp-Param-*``).
ALLOWED_REQUEST_HEADERS: Final = frozenset(
    {
        "accept",
        "authorization",
        "content-type",
        "last-event-id",
        "mcp-method",
        "mcp-name",
        "mcp-protocol-version",
        "mcp-session-id",
    }
)

_EXPOSE: Final = ", ".join(EXPOSED_HEADERS).encode()
_METHODS: Final = b"GET, POST, DELETE, OPTIONS"


def with_cors(send: Send, origin: str) -> Send:
    """``send``, adding the CORS headers of ``origin`` to the response start."""
    extra = [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-expose-headers", _EXPOSE),
        (b"vary", b"origin"),
    ]

    async def cors_send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.start":
            headers = message.get("headers") or ()
            message = {**message, "headers": [*headers, *extra]}  # type: ignore[misc]
        await send(message)

    return cors_send


def is_preflight(method: str, headers: dict[str, str]) -> bool:
    return method == "OPTIONS" and "origin" in headers and "access-control-request-method" in headers


def preflight_headers(headers: dict[str, str], max_age: int) -> list[tuple[bytes, bytes]]:
    """The headers of a preflight's ``204`` (the origin's are added by :func:`with_cors`):
    the requested headers that are allowed, the methods, and how long to cache it."""
    requested = headers.get("access-control-request-headers", "")
    allowed = [
        name
        for name in (part.strip().lower() for part in requested.split(","))
        if name and (name in ALLOWED_REQUEST_HEADERS or name.startswith(PARAM_PREFIX))
    ]
    out = [
        (b"access-control-allow-methods", _METHODS),
        (b"access-control-max-age", str(max_age).encode()),
    ]
    if allowed:
        out.append((b"access-control-allow-headers", ", ".join(allowed).encode("latin-1")))
    return out
