"""Requests to the token endpoint: the client's authentication
(``client_secret_basic`` / ``client_secret_post`` / ``none`` /
``private_key_jwt``), the DPoP proof and nonce retry, the token response
checked; and the grants without a user: client_credentials and the assertion
grants (JWT bearer, enterprise-managed authorization)."""

from __future__ import annotations

import base64
import logging
import time
from typing import Any
from urllib.parse import quote_plus

import httpx
import msgspec

from ._authorization_server import AuthorizationContext
from ._credentials import CLIENT_ASSERTION_TYPE, ClientCredentials
from ._dpop import DPoPKey, needs_nonce
from ._errors import OAuthError, TokenRequestError, UnsupportedServerError
from ._exchange import (
    Unreachable,
    check_secure,
    describe_error,
    error_of,
    exchange,
    exchange_with_headers,
)
from ._grants import AssertionGrant
from ._models import AuthorizationServerMetadata, ClientInformation, OAuthToken, _TokenResponse
from ._settings import OAuthClientSettings

__all__ = [
    "SECRET_METHODS",
    "TokenEndpoint",
    "auth_method",
]

log = logging.getLogger("trio_mcp.auth")

SECRET_METHODS = ("client_secret_basic", "client_secret_post")
#: How a client_credentials client may authenticate (never ``none``).
_CREDENTIALS_METHODS = (*SECRET_METHODS, "private_key_jwt")


class TokenEndpoint:
    """Token requests of one :class:`~trio_mcp.auth.OAuthClientAuth`: its
    bounds, its DPoP key and its client credentials (for ``private_key_jwt``)."""

    def __init__(
        self,
        settings: OAuthClientSettings,
        *,
        dpop: DPoPKey | None,
        client_credentials: ClientCredentials | None,
    ) -> None:
        self.settings = settings
        self.dpop = dpop
        self.client_credentials = client_credentials

    async def request(
        self,
        http: httpx.AsyncClient,
        context: AuthorizationContext,
        client: ClientInformation,
        form: dict[str, str],
        *,
        requested_scope: str | None,
    ) -> OAuthToken:
        """POST ``form`` (a grant) as ``client``; the tokens it answers."""
        endpoint = context.metadata.token_endpoint
        assert endpoint is not None
        grant = form["grant_type"]
        headers = {"accept": "application/json"}
        form = dict(form)
        self._authenticate(context, client, endpoint, form, headers)
        dpop = self.dpop
        for _attempt in range(2):  # a second time only with the DPoP nonce the server demanded
            if dpop is not None:
                headers["dpop"] = dpop.proof("POST", endpoint)
            try:
                status, body, nonce = await self._post(http, endpoint, form, headers)
            except Unreachable as exc:
                raise TokenRequestError(f"the {grant} token request failed: {exc}") from None
            if nonce is None or dpop is None:
                break
            dpop.remember_nonce(endpoint, nonce)
        if status != 200:
            error = error_of(body)
            raise TokenRequestError(
                f"the token endpoint refused the {grant} request (HTTP {status}{describe_error(error)})",
                error=error.error if error else None,
                status_code=status,
            )
        try:
            answer = msgspec.json.decode(body, type=_TokenResponse, strict=False)
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise TokenRequestError(
                f"the token endpoint's answer to the {grant} request is not a token response",
                status_code=status,
            ) from None
        token_type = "DPoP" if answer.token_type.lower() == "dpop" and dpop is not None else "Bearer"
        if answer.token_type.lower() != token_type.lower():
            raise TokenRequestError(
                f"unsupported token type {answer.token_type!r} (only Bearer"
                + (" and DPoP)" if dpop is not None else ")"),
                status_code=status,
            )
        now = time.time()
        return OAuthToken(
            access_token=answer.access_token,
            token_type=token_type,
            refresh_token=answer.refresh_token,
            scope=answer.scope if answer.scope is not None else requested_scope,
            expires_at=now + answer.expires_in if answer.expires_in is not None else None,
            issued_at=now,
            issuer=context.issuer,
            resource=context.resource,
        )

    async def client_credentials_grant(
        self, http: httpx.AsyncClient, context: AuthorizationContext, scopes: list[str]
    ) -> OAuthToken:
        """OAuth 2.1 §4.2: the client authenticates and asks for a token for itself."""
        credentials = self.client_credentials
        assert credentials is not None
        metadata = context.metadata
        grants = metadata.grant_types_supported
        if grants is not None and "client_credentials" not in grants:
            raise UnsupportedServerError(
                f"the authorization server {context.issuer} does not offer the client_credentials grant "
                f"(grant_types_supported: {grants})"
            )
        client = credentials.client_information()
        method = auth_method(client, metadata)
        supported = metadata.token_endpoint_auth_methods_supported
        if method not in _CREDENTIALS_METHODS or (supported is not None and method not in supported):
            raise UnsupportedServerError(
                f"the authorization server {context.issuer} does not accept {method} at its token endpoint "
                f"(token_endpoint_auth_methods_supported: {supported})"
            )
        if method == "private_key_jwt":
            algorithm = credentials.signing_algorithm
            algorithms = metadata.token_endpoint_auth_signing_alg_values_supported
            if algorithms and algorithm not in algorithms:
                raise UnsupportedServerError(
                    f"the authorization server {context.issuer} does not accept {algorithm} client "
                    f"assertions (token_endpoint_auth_signing_alg_values_supported: {algorithms})"
                )
        scope = " ".join(scopes) or None
        form = {"grant_type": "client_credentials", "resource": context.resource}
        if scope is not None:
            form["scope"] = scope
        log.info("client_credentials grant at %s (scope %r, %s)", context.issuer, scope, method)
        return await self.request(http, context, client, form, requested_scope=scope)

    async def assertion_grant(
        self, http: httpx.AsyncClient, context: AuthorizationContext, grant: AssertionGrant, scopes: list[str]
    ) -> OAuthToken:
        """The JWT bearer grant (RFC 7523 §2.1), after the token exchange of
        enterprise-managed authorization. A refusal is an error: no retry,
        no other grant."""
        settings = self.settings

        async def token_exchange(endpoint: str, form: dict[str, str]) -> dict[str, Any]:
            check_secure(settings, endpoint, "identity provider token endpoint")
            try:
                status, body = await exchange(
                    http, settings, "POST", endpoint, data=form, headers={"accept": "application/json"}
                )
            except Unreachable as exc:
                raise TokenRequestError(f"the token exchange at {endpoint} failed: {exc}") from None
            if status != 200:
                error = error_of(body)
                raise TokenRequestError(
                    f"the identity provider refused the token exchange (HTTP {status}{describe_error(error)})",
                    error=error.error if error else None,
                    status_code=status,
                )
            try:
                answer = msgspec.json.decode(body)
            except msgspec.DecodeError:
                raise TokenRequestError("the token exchange answer is not JSON") from None
            if not isinstance(answer, dict):
                raise TokenRequestError("the token exchange answer is not a JSON object")
            return answer

        try:
            form = await grant.form(context.issuer, context.resource, token_exchange)
        except ValueError as exc:
            raise TokenRequestError(str(exc)) from None
        scope = " ".join(scopes) or None
        if scope is not None:
            form["scope"] = scope
        log.info("%s grant at %s (scope %r)", type(grant).__name__, context.issuer, scope)
        return await self.request(http, context, grant.client_information(), form, requested_scope=scope)

    def _authenticate(
        self,
        context: AuthorizationContext,
        client: ClientInformation,
        endpoint: str,
        form: dict[str, str],
        headers: dict[str, str],
    ) -> None:
        """Add the client's authentication to the request's ``form`` or ``headers``."""
        method = auth_method(client, context.metadata)
        if method in SECRET_METHODS and not client.client_secret:
            raise UnsupportedServerError(f"{method} needs a client secret and the client has none")
        if method == "client_secret_basic":
            assert client.client_secret is not None
            pair = f"{quote_plus(client.client_id)}:{quote_plus(client.client_secret)}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        elif method == "client_secret_post":
            assert client.client_secret is not None
            form["client_id"] = client.client_id
            form["client_secret"] = client.client_secret
        elif method == "none":
            form["client_id"] = client.client_id
        elif method == "private_key_jwt" and self.client_credentials is not None:
            credentials = self.client_credentials
            audience = context.issuer if credentials.assertion_audience == "issuer" else endpoint
            try:
                assertion = credentials.assertion(audience)
            except (ValueError, TypeError) as exc:  # (the key loaded at configuration: not expected)
                raise OAuthError(f"could not sign the client assertion: {type(exc).__name__}") from None
            form["client_assertion_type"] = CLIENT_ASSERTION_TYPE
            form["client_assertion"] = assertion
        else:
            raise UnsupportedServerError(f"token endpoint authentication method {method!r} is not supported")

    async def _post(
        self, http: httpx.AsyncClient, endpoint: str, form: dict[str, str], headers: dict[str, str]
    ) -> tuple[int, bytes, str | None]:
        """POST a token request: (status, body, the DPoP nonce a ``use_dpop_nonce`` answer demands)."""
        status, body, answer_headers = await exchange_with_headers(
            http, self.settings, "POST", endpoint, data=form, headers=headers
        )
        error = error_of(body) if status == 400 else None
        return status, body, needs_nonce(status, answer_headers, error.error if error else None)


def auth_method(client: ClientInformation, metadata: AuthorizationServerMetadata) -> str:
    """How ``client`` authenticates at the token endpoint."""
    if client.token_endpoint_auth_method:
        return client.token_endpoint_auth_method
    if not client.client_secret:
        return "none"
    supported = metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"]
    for method in SECRET_METHODS:
        if method in supported:
            return method
    return "none" if "none" in supported else "client_secret_basic"
