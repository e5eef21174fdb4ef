"""Dynamic client registration (RFC 7591): register this client at an
authorization server that offers it."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import httpx
import msgspec

from ._authorization_server import AuthorizationContext
from ._discovery import is_loopback
from ._errors import RegistrationError, UnsupportedServerError
from ._exchange import Unreachable, describe_error, error_of, exchange
from ._models import AuthorizationServerMetadata, ClientInformation, ClientMetadata
from ._settings import OAuthClientSettings
from ._token_requests import SECRET_METHODS

__all__ = ["register_client"]

log = logging.getLogger("trio_mcp.auth")

_KNOWN_METHODS = (*SECRET_METHODS, "none")


async def register_client(
    http: httpx.AsyncClient,
    settings: OAuthClientSettings,
    context: AuthorizationContext,
    client_metadata: ClientMetadata,
    redirect_uri: str,
) -> ClientInformation:
    """Register ``client_metadata`` (defaults: ``redirect_uri``, an authentication
    method the server supports, ``native`` for loopback or custom-scheme redirects)."""
    endpoint = context.metadata.registration_endpoint
    assert endpoint is not None
    body = client_metadata.to_registration()
    body.setdefault("redirect_uris", [redirect_uri])
    if "token_endpoint_auth_method" not in body:
        body["token_endpoint_auth_method"] = _registration_method(context.metadata)
    if "application_type" not in body:
        native = all(
            is_loopback(u) or urlsplit(u).scheme not in ("http", "https") for u in body["redirect_uris"]
        )
        body["application_type"] = "native" if native else "web"
    try:
        status, answer = await exchange(
            http, settings, "POST", endpoint, json=body, headers={"accept": "application/json"}
        )
    except Unreachable as exc:
        raise RegistrationError(f"client registration at {endpoint} failed: {exc}") from None
    if status not in (200, 201):
        error = error_of(answer)
        raise RegistrationError(
            f"client registration refused (HTTP {status}{describe_error(error)})",
            error=error.error if error else None,
            status_code=status,
        )
    try:
        client = msgspec.json.decode(answer, type=ClientInformation, strict=False)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise RegistrationError(f"invalid client registration response: {exc}", status_code=status) from None
    if client.token_endpoint_auth_method is None:
        method = body["token_endpoint_auth_method"]
        client = msgspec.structs.replace(client, token_endpoint_auth_method=method)
    log.info("registered a client at %s", context.issuer)
    return client


def _registration_method(metadata: AuthorizationServerMetadata) -> str:
    supported = metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"]
    for method in _KNOWN_METHODS:
        if method in supported:
            return method
    raise UnsupportedServerError(
        f"the authorization server supports none of our token endpoint authentication methods: {supported}"
    )
