"""Which authorization server guards an MCP server, and what it offers.

:func:`discover` follows the protected resource metadata (the challenge's
``resource_metadata``, then the RFC 9728 well-known URLs), checks that it
describes this server, then fetches the authorization server's metadata
(RFC 8414 and OpenID discovery) and checks its ``issuer``, its endpoints'
schemes and (for a user's authorization) PKCE S256. A 2025-03-26 server that
publishes no metadata gets the default endpoints at its origin.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from urllib.parse import urlsplit

import attrs
import httpx

from ._discovery import Challenge, as_metadata_urls, prm_urls, resource_matches
from ._errors import DiscoveryError, IssuerMismatchError, ResourceMismatchError, UnsupportedServerError
from ._exchange import check_secure, fetch_document
from ._models import AuthorizationServerMetadata, ProtectedResourceMetadata
from ._settings import OAuthClientSettings

__all__ = ["AuthorizationContext", "discover"]

log = logging.getLogger("trio_mcp.auth")


@attrs.frozen
class AuthorizationContext:
    """What discovery found for one flow."""

    resource: str
    issuer: str
    metadata: AuthorizationServerMetadata
    #: ``None``: the server publishes no protected resource metadata (2025-03-26 fallback).
    prm: ProtectedResourceMetadata | None


async def discover(
    http: httpx.AsyncClient,
    settings: OAuthClientSettings,
    server_url: str,
    challenge: Challenge,
    *,
    headless: bool,
) -> AuthorizationContext:
    """The authorization server of ``server_url`` and its metadata. ``headless``:
    no user will authorize (no authorization endpoint or PKCE needed)."""
    hint = challenge.resource_metadata
    candidates = _unique([hint, *prm_urls(server_url)] if hint else prm_urls(server_url))
    failures: list[str] = []
    prm = None
    for url in candidates:
        prm = await fetch_document(http, settings, url, ProtectedResourceMetadata, failures)
        if prm is not None:
            break
    if prm is None:
        if hint or any(not f.startswith("HTTP 4") for f in failures):
            raise DiscoveryError(
                "no usable protected resource metadata for the MCP server: " + "; ".join(failures)
            )
        # 2025-03-26 servers publish none: the authorization server is the server's origin.
        parts = urlsplit(server_url)
        origin = f"{parts.scheme}://{parts.netloc}"
        log.info("no protected resource metadata; the authorization server is %s", origin)
        return await _metadata_context(http, settings, server_url, origin, None, headless=headless)
    if not resource_matches(prm.resource, server_url):
        raise ResourceMismatchError(
            f"the protected resource metadata is for {prm.resource!r}, not for the MCP server {server_url!r}",
            resource=prm.resource,
            server_url=server_url,
        )
    if not prm.authorization_servers:
        raise DiscoveryError("the protected resource metadata names no authorization server")
    return await _metadata_context(
        http, settings, prm.resource, prm.authorization_servers[0], prm, headless=headless
    )


async def _metadata_context(
    http: httpx.AsyncClient,
    settings: OAuthClientSettings,
    resource: str,
    issuer: str,
    prm: ProtectedResourceMetadata | None,
    *,
    headless: bool,
) -> AuthorizationContext:
    check_secure(settings, issuer, "authorization server issuer")
    failures: list[str] = []
    metadata = None
    for url in as_metadata_urls(issuer):
        metadata = await fetch_document(http, settings, url, AuthorizationServerMetadata, failures)
        if metadata is not None:
            break
    if metadata is None:
        if prm is not None or any(not f.startswith("HTTP 4") for f in failures):
            raise DiscoveryError(
                f"no usable authorization server metadata for {issuer}: " + "; ".join(failures)
            )
        # 2025-03-26 fallback: the default endpoints at the server's origin.
        metadata = AuthorizationServerMetadata(
            issuer=issuer,
            authorization_endpoint=f"{issuer}/authorize",
            token_endpoint=f"{issuer}/token",
            registration_endpoint=f"{issuer}/register",
            code_challenge_methods_supported=["S256"],
        )
    elif metadata.issuer != issuer:
        raise IssuerMismatchError(
            f"the authorization server metadata names the issuer {metadata.issuer!r}, "
            f"not {issuer!r} (the issuer its well-known URL was built from)",
            expected=issuer,
            received=metadata.issuer,
        )
    if headless:
        # (no user, no browser: neither an authorization endpoint nor PKCE is needed)
        if not metadata.token_endpoint:
            raise DiscoveryError(f"the metadata of {issuer} lacks the token endpoint")
    elif not metadata.authorization_endpoint or not metadata.token_endpoint:
        raise DiscoveryError(f"the metadata of {issuer} lacks the authorization or the token endpoint")
    for what, endpoint in (
        ("authorization endpoint", metadata.authorization_endpoint),
        ("token endpoint", metadata.token_endpoint),
        ("registration endpoint", metadata.registration_endpoint),
    ):
        if endpoint is not None:
            check_secure(settings, endpoint, what)
    pkce = metadata.code_challenge_methods_supported or []
    if not headless and "S256" not in pkce:
        raise UnsupportedServerError(
            f"the authorization server {issuer} does not advertise PKCE with S256 "
            "(code_challenge_methods_supported): refusing to authorize"
        )
    return AuthorizationContext(resource=resource, issuer=issuer, metadata=metadata, prm=prm)


def _unique(urls: Iterable[str | None]) -> list[str]:
    out: list[str] = []
    for url in urls:
        if url and url not in out:
            out.append(url)
    return out
