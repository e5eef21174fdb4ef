"""The authorization code flow: the user authorizes at the authorization
endpoint (PKCE S256, ``state``, ``resource``), the :class:`AuthorizationHandler`
brings back the redirect, which is checked (``state``, the RFC 9207 ``iss``,
``error``) before its code is exchanged for tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from urllib.parse import parse_qsl, urlsplit

import httpx
import trio

from ._authorization_server import AuthorizationContext
from ._discovery import with_query
from ._errors import AuthorizationResponseError, OAuthError
from ._handlers import AuthorizationHandler, AuthorizationRequest
from ._models import ClientInformation, OAuthToken
from ._token_requests import TokenEndpoint

__all__ = ["authorization_code_grant"]

log = logging.getLogger("trio_mcp.auth")


async def authorization_code_grant(
    http: httpx.AsyncClient,
    token_endpoint: TokenEndpoint,
    context: AuthorizationContext,
    client: ClientInformation,
    handler: AuthorizationHandler,
    scope: str | None,
) -> OAuthToken:
    """Send the user to authorize ``client`` for ``scope``; the tokens the code buys."""
    endpoint = context.metadata.authorization_endpoint
    assert endpoint is not None
    verifier = secrets.token_urlsafe(48)
    code_challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest())
    state = secrets.token_urlsafe(32)
    redirect_uri = handler.redirect_uri
    params = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": code_challenge.decode("ascii").rstrip("="),
        "code_challenge_method": "S256",
        "resource": context.resource,
    }
    if scope is not None:
        params["scope"] = scope
    request = AuthorizationRequest(
        url=with_query(endpoint, params),
        redirect_uri=redirect_uri,
        issuer=context.issuer,
        scope=scope,
        resource=context.resource,
    )
    log.info("authorizing at %s (scope %r)", context.issuer, scope)
    timeout = token_endpoint.settings.authorization_timeout
    try:
        with trio.fail_after(timeout):
            callback = await handler.authorize(request)
    except trio.TooSlowError:
        raise AuthorizationResponseError(f"no authorization response within {timeout}s") from None
    except OAuthError:
        raise
    except Exception as exc:
        raise AuthorizationResponseError(
            f"the authorization handler failed: {type(exc).__name__}: {exc}"
        ) from exc
    code = _code_from(callback, state, context)
    return await token_endpoint.request(
        http,
        context,
        client,
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
            "resource": context.resource,
        },
        requested_scope=scope,
    )


def _code_from(callback: str, state: str, context: AuthorizationContext) -> str:
    """Validate the authorization response (state, RFC 9207 iss, error); its code."""
    try:
        pairs = parse_qsl(urlsplit(callback).query, keep_blank_values=True)
    except ValueError:
        raise AuthorizationResponseError("the authorization response is not a URL") from None
    values: dict[str, str] = {}
    for name, value in pairs:
        if name in values and name in ("state", "code", "iss", "error"):
            raise AuthorizationResponseError(f"the authorization response repeats {name!r}")
        values.setdefault(name, value)
    received = values.get("state")
    if received is None or not hmac.compare_digest(received.encode(), state.encode()):
        raise AuthorizationResponseError("the authorization response's state does not match the request's")
    iss = values.get("iss")
    if iss is not None:
        if iss != context.issuer:  # RFC 9207: simple string comparison, no normalization
            raise AuthorizationResponseError(
                f"the authorization response comes from issuer {iss!r}, not from {context.issuer!r}"
            )
    elif context.metadata.authorization_response_iss_parameter_supported:
        raise AuthorizationResponseError(
            f"the authorization response lacks iss although {context.issuer} advertises it (RFC 9207)"
        )
    error = values.get("error")
    if error is not None:
        description = values.get("error_description")
        raise AuthorizationResponseError(
            f"authorization refused: {error}" + (f": {description[:200]}" if description else ""), error=error
        )
    code = values.get("code")
    if not code:
        raise AuthorizationResponseError("the authorization response carries no code")
    return code
