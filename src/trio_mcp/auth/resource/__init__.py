"""The server side of MCP authorization: an MCP server as an OAuth 2.1
resource server (MCP 2025-06-18 onward; RFC 9728, RFC 8707, RFC 7662,
RFC 6750).

A :class:`ResourceServer` names the server's canonical URI, its
authorization servers and the scopes every request needs, and holds a
:class:`TokenVerifier`: :class:`JwtVerifier` (JWT access tokens checked
against a JWKS URL, :class:`JwksCache`, or a static key), or
:class:`IntrospectionVerifier` (RFC 7662, with a bounded cache), or your
own (any object with ``async def verify(token) -> AccessToken``)::

    auth = ResourceServer(
        verifier=JwtVerifier("https://auth.example.com", jwks_url="https://auth.example.com/jwks"),
        resource="https://mcp.example.com/mcp",
        required_scopes=["mcp"],
    )
    server = HttpServer(app, auth=auth)

The Streamable HTTP server (:class:`~trio_mcp.serving.http.HttpServer`,
``auth=``) then serves the protected resource metadata, answers ``401`` /
``403`` challenges, binds sessions to their principal, and hands handlers
the :class:`AccessToken` as ``ctx.auth``.
"""

from ._introspection import IntrospectionVerifier
from ._jwt import ASYMMETRIC_ALGORITHMS, MAX_LEEWAY, JwksCache, JwtVerifier
from ._resource import METADATA_PATH, AuthFailure, ResourceServer, bearer_token
from ._token import AccessToken, InvalidToken, TokenVerifier, VerifierUnavailable, canonical_resource

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "MAX_LEEWAY",
    "METADATA_PATH",
    "AccessToken",
    "AuthFailure",
    "IntrospectionVerifier",
    "InvalidToken",
    "JwksCache",
    "JwtVerifier",
    "ResourceServer",
    "TokenVerifier",
    "VerifierUnavailable",
    "bearer_token",
    "canonical_resource",
]
