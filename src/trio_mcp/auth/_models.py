"""The OAuth documents the client reads, sends and keeps (msgspec Structs).

Wire documents decode leniently (unknown members ignored). The two that hold
secrets, :class:`OAuthToken` and :class:`ClientInformation`, redact them from
their ``repr``.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

__all__ = [
    "AuthorizationServerMetadata",
    "ClientInformation",
    "ClientMetadata",
    "OAuthToken",
    "ProtectedResourceMetadata",
]


class ProtectedResourceMetadata(msgspec.Struct, kw_only=True):
    """RFC 9728 protected resource metadata (the members the client uses)."""

    resource: str
    authorization_servers: list[str] | None = None
    scopes_supported: list[str] | None = None
    bearer_methods_supported: list[str] | None = None
    resource_name: str | None = None


class AuthorizationServerMetadata(msgspec.Struct, kw_only=True):
    """RFC 8414 authorization server metadata (or an OpenID provider
    configuration), the members the client uses."""

    issuer: str
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    registration_endpoint: str | None = None
    scopes_supported: list[str] | None = None
    response_types_supported: list[str] | None = None
    grant_types_supported: list[str] | None = None
    code_challenge_methods_supported: list[str] | None = None
    token_endpoint_auth_methods_supported: list[str] | None = None
    #: The JWS algorithms accepted for ``private_key_jwt`` client assertions.
    token_endpoint_auth_signing_alg_values_supported: list[str] | None = None
    #: RFC 9207: the authorization response carries ``iss``.
    authorization_response_iss_parameter_supported: bool = False
    #: The server accepts an HTTPS URL naming a Client ID Metadata Document as ``client_id``.
    client_id_metadata_document_supported: bool = False


class ClientMetadata(msgspec.Struct, kw_only=True):
    """What the client registers with dynamic client registration (RFC 7591).

    ``None`` members are left out of the registration request. Left unset,
    ``redirect_uris`` is the authorization handler's redirect URI,
    ``token_endpoint_auth_method`` is chosen from what the authorization
    server supports, and ``application_type`` is ``"native"`` for loopback
    or private-scheme redirect URIs, ``"web"`` otherwise.
    """

    client_name: str | None = "trio-mcp"
    redirect_uris: list[str] | None = None
    grant_types: list[str] = msgspec.field(default_factory=lambda: ["authorization_code", "refresh_token"])
    response_types: list[str] = msgspec.field(default_factory=lambda: ["code"])
    token_endpoint_auth_method: str | None = None
    application_type: str | None = None
    scope: str | None = None
    client_uri: str | None = None
    logo_uri: str | None = None
    contacts: list[str] | None = None
    software_id: str | None = None
    software_version: str | None = None

    def to_registration(self) -> dict[str, Any]:
        """The registration request body (``None`` members left out)."""
        return {k: v for k, v in msgspec.to_builtins(self).items() if v is not None}


class ClientInformation(msgspec.Struct, kw_only=True):
    """A client identity at one authorization server: pre-registered, from
    dynamic client registration, or a Client ID Metadata Document URL."""

    client_id: str
    client_secret: str | None = None
    #: Seconds since the epoch; 0 or ``None``: the secret does not expire.
    client_secret_expires_at: int | None = None
    client_id_issued_at: int | None = None
    #: ``none``, ``client_secret_basic``, ``client_secret_post`` (or
    #: ``private_key_jwt`` for :class:`ClientCredentials`); ``None``:
    #: chosen from what the authorization server supports.
    token_endpoint_auth_method: str | None = None
    redirect_uris: list[str] | None = None

    def expired(self, now: float | None = None) -> bool:
        """The registered secret has expired (register again)."""
        expires = self.client_secret_expires_at
        return bool(expires) and (time.time() if now is None else now) >= expires  # type: ignore[operator]

    def __repr__(self) -> str:
        secret = "None" if self.client_secret is None else "'<redacted>'"
        return (
            f"ClientInformation(client_id={self.client_id!r}, client_secret={secret}, "
            f"token_endpoint_auth_method={self.token_endpoint_auth_method!r})"
        )


class OAuthToken(msgspec.Struct, kw_only=True):
    """The tokens the client holds for one MCP server, and where they came from."""

    access_token: str
    token_type: str = "Bearer"
    refresh_token: str | None = None
    #: The granted scope (the requested one when the server did not say).
    scope: str | None = None
    #: Seconds since the epoch; ``None``: unknown.
    expires_at: float | None = None
    issued_at: float | None = None
    #: The authorization server that issued them (its issuer identifier).
    issuer: str | None = None
    #: The ``resource`` they were requested for (RFC 8707).
    resource: str | None = None

    def expired(self, margin: float = 0.0, now: float | None = None) -> bool:
        """Expired, or expiring within ``margin`` seconds (at most half the lifetime)."""
        if self.expires_at is None:
            return False
        now = time.time() if now is None else now
        if self.issued_at is not None:
            margin = min(margin, max(self.expires_at - self.issued_at, 0.0) / 2)
        return now >= self.expires_at - margin

    @property
    def scopes(self) -> list[str]:
        return self.scope.split() if self.scope else []

    def __repr__(self) -> str:
        refresh = "None" if self.refresh_token is None else "'<redacted>'"
        return (
            f"OAuthToken(access_token='<redacted>', token_type={self.token_type!r}, "
            f"refresh_token={refresh}, scope={self.scope!r}, expires_at={self.expires_at!r}, "
            f"issuer={self.issuer!r}, resource={self.resource!r})"
        )


class _TokenResponse(msgspec.Struct, kw_only=True):
    access_token: str
    token_type: str
    expires_in: float | None = None
    refresh_token: str | None = None
    scope: str | None = None


class _ErrorResponse(msgspec.Struct, kw_only=True):
    error: str | None = None
    error_description: str | None = None
