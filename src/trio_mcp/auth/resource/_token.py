"""What a verified access token tells the server, the verifier interface,
and the typed failures of verification."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

import attrs

__all__ = [
    "AccessToken",
    "InvalidToken",
    "TokenVerifier",
    "VerifierUnavailable",
    "canonical_resource",
    "scopes_of",
]


def string_set(values: Iterable[str]) -> frozenset[str]:
    return frozenset(values)


def string_tuple(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


class InvalidToken(Exception):
    """The token cannot be accepted (bad signature, expired, another issuer or
    audience, inactive…): the request gets ``401`` with ``error="invalid_token"``.
    ``description`` goes into the challenge's ``error_description``; it never
    carries the token."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class VerifierUnavailable(Exception):
    """The token could not be checked at all (the JWKS or the introspection
    endpoint unreachable, too slow, or answering garbage): the request gets
    ``503``, not a challenge, since a new token would not help."""


@attrs.frozen(kw_only=True)
class AccessToken:
    """A verified access token: who presented it and what it allows.

    Handlers see it as :attr:`Context.auth <trio_mcp.server.Context.auth>`.
    The raw ``token`` is kept for token exchange but left out of ``repr``;
    never forward it to another server (the MCP specification forbids token
    passthrough)."""

    token: str = attrs.field(repr=False)
    #: ``sub``: the user (or the client, for a client_credentials token).
    subject: str | None = None
    #: ``client_id`` (or ``azp``): the OAuth client the token was issued to.
    client_id: str | None = None
    scopes: frozenset[str] = attrs.field(factory=frozenset, converter=string_set)
    issuer: str | None = None
    #: ``aud``: the resources the token was issued for (RFC 8707).
    audience: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)
    #: ``exp`` as a Unix time (None: the token does not say).
    expires_at: float | None = None
    #: Every claim of the JWT, or every member of the introspection answer.
    claims: Mapping[str, Any] = attrs.field(factory=dict, repr=False)

    @property
    def identity(self) -> tuple[str | None, str | None, str | None]:
        """``(issuer, subject, client_id)``: what a session is bound to."""
        return (self.issuer, self.subject, self.client_id)

    def missing(self, required: Iterable[str]) -> frozenset[str]:
        """The scopes of ``required`` this token lacks."""
        return frozenset(required) - self.scopes


@runtime_checkable
class TokenVerifier(Protocol):
    """Checks a bearer token: returns the :class:`AccessToken`, or raises
    :class:`InvalidToken` (``401``) or :class:`VerifierUnavailable` (``503``).

    A verifier checks the token's integrity, lifetime and issuer; the
    audience (this server's resource URI, RFC 8707) and the scopes are
    checked by :class:`~trio_mcp.auth.resource.ResourceServer` from the
    ``audience`` and ``scopes`` it returns, whatever the verifier. Its
    ``verify`` runs in the HTTP request's task: bound every wait in it."""

    async def verify(self, token: str) -> AccessToken: ...


def scopes_of(value: Any) -> frozenset[str]:
    """Scopes from a ``scope`` claim (space-separated, RFC 8693 / 9068) or an
    ``scp`` claim (a list, or a string); anything else holds none."""
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, (list, tuple)):
        return frozenset(item for item in value if isinstance(item, str) and item)
    return frozenset()


def audiences_of(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(item for item in value if isinstance(item, str))
    return ()


_DEFAULT_PORTS = {"http": 80, "https": 443}


def canonical_resource(uri: str) -> str:
    """The canonical form of a resource URI for comparison (RFC 8707, MCP
    "Canonical Server URI"): scheme and host lower-cased, a default port
    dropped, no fragment, no trailing ``/`` on the path. Raises ValueError
    for a URI that is not absolute."""
    parts = urlsplit(uri.strip())
    if not parts.scheme or not parts.hostname:
        raise ValueError(f"a resource URI must be absolute (scheme and host), not {uri!r}")
    if parts.fragment:
        raise ValueError(f"a resource URI has no fragment: {uri!r}")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    scheme = parts.scheme.lower()
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))
