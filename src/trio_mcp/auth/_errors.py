"""The typed failures of the OAuth client.

Every one is an :class:`httpx.HTTPError`: :class:`OAuthClientAuth` runs
inside an httpx request, and whoever sends the request (the Streamable HTTP
transport, or any httpx caller) already treats ``httpx.HTTPError`` as "this
request could not be made". Messages never carry a token, a code, a secret
or a PKCE verifier.
"""

from __future__ import annotations

import httpx

__all__ = [
    "AuthorizationResponseError",
    "DiscoveryError",
    "IssuerMismatchError",
    "OAuthError",
    "RegistrationError",
    "ResourceMismatchError",
    "TokenRequestError",
    "UnsupportedServerError",
]


class OAuthError(httpx.HTTPError):
    """The client could not obtain (or keep) authorization for the MCP server."""


class DiscoveryError(OAuthError):
    """Protected resource metadata (RFC 9728) or authorization server
    metadata (RFC 8414 / OpenID discovery) could not be found or is unusable."""


class ResourceMismatchError(DiscoveryError):
    """The protected resource metadata names a ``resource`` that is not the
    MCP server the client talks to (RFC 9728 §3.3): it is not used."""

    def __init__(self, message: str, *, resource: str, server_url: str) -> None:
        super().__init__(message)
        self.resource = resource
        self.server_url = server_url


class IssuerMismatchError(DiscoveryError):
    """Authorization server metadata whose ``issuer`` differs from the issuer
    identifier its well-known URL was built from (RFC 8414 §3.3): it is not used."""

    def __init__(self, message: str, *, expected: str, received: object) -> None:
        super().__init__(message)
        self.expected = expected
        self.received = received


class UnsupportedServerError(OAuthError):
    """The authorization server lacks something the client requires: PKCE
    with S256, a usable token endpoint authentication method, or any way to
    obtain a client identity (pre-registration, a Client ID Metadata
    Document, dynamic client registration)."""


class RegistrationError(OAuthError):
    """Dynamic client registration (RFC 7591) was refused or answered badly."""

    def __init__(self, message: str, *, error: str | None = None, status_code: int | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.status_code = status_code


class AuthorizationResponseError(OAuthError):
    """The authorization response was an error or failed validation (``state``
    mismatch, ``iss`` missing or different from the issuer (RFC 9207), no
    ``code``), or the authorization handler could not obtain one."""

    def __init__(self, message: str, *, error: str | None = None) -> None:
        super().__init__(message)
        self.error = error


class TokenRequestError(OAuthError):
    """The token endpoint refused a request (``error`` is the OAuth error code
    when it gave one) or answered with something that is not a usable token."""

    def __init__(self, message: str, *, error: str | None = None, status_code: int | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.status_code = status_code
