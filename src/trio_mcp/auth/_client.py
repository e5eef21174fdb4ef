"""The OAuth 2.1 authorization client of MCP, as an :class:`httpx.Auth`.

:class:`OAuthClientAuth` puts ``Authorization: Bearer`` on the requests to
one MCP server and, when the server answers

* ``401``: discovers the protected resource metadata (the challenge's
  ``resource_metadata``, then the RFC 9728 well-known URLs), checks that it
  describes this server, discovers the authorization server's metadata
  (RFC 8414 and OpenID discovery, path-insertion variants first) and checks
  its ``issuer``, refuses a server without PKCE S256, obtains a client
  identity (pre-registered, Client ID Metadata Document, or dynamic client
  registration), refreshes the token when it can and otherwise runs the
  authorization code flow (PKCE, ``state``, ``resource``, the RFC 9207
  ``iss`` check) -- or, given :class:`ClientCredentials`, the
  client_credentials grant (machine to machine: no browser, no redirect) --
  then resends the request once;
* ``403`` with ``error="insufficient_scope"``: re-authorizes with the union
  of the scopes requested so far and the challenged ones (when that asks
  for anything new), at most ``max_step_ups`` times per request.

Concurrent requests share one flow: the first to see a ``401`` runs it under
a lock, the others resend with its token. Every OAuth request is bounded by
``request_timeout`` and the authorization handler by
``authorization_timeout``. Failures raise an :class:`OAuthError` (an
``httpx.HTTPError``) out of the request; nothing logged carries a token, a
code, a secret or a PKCE verifier.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote_plus, urlsplit

import attrs
import httpx
import msgspec
import trio

from .._util import check_positive, numeric_fields
from ._credentials import CLIENT_ASSERTION_TYPE, ClientCredentials, ClientCredentialsConfigError
from ._discovery import (
    Challenge,
    as_metadata_urls,
    bearer_challenge,
    canonical_server_url,
    is_loopback,
    parse_challenges,
    prm_urls,
    resource_matches,
    with_query,
)
from ._dpop import DPoPKey, needs_nonce
from ._errors import (
    AuthorizationResponseError,
    DiscoveryError,
    IssuerMismatchError,
    OAuthError,
    RegistrationError,
    ResourceMismatchError,
    TokenRequestError,
    UnsupportedServerError,
)
from ._grants import AssertionGrant, EnterpriseGrant, JwtBearerGrant
from ._handlers import AuthorizationHandler, AuthorizationRequest, FollowRedirectHandler
from ._http import new_client, tls_context
from ._models import (
    AuthorizationServerMetadata,
    ClientInformation,
    ClientMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
    _ErrorResponse,
    _TokenResponse,
)
from ._storage import InMemoryTokenStorage, TokenStorage

__all__ = ["OAuthClientAuth", "OAuthClientSettings"]

log = logging.getLogger("trio_mcp.auth")

_T = TypeVar("_T")
_SECRET_METHODS = ("client_secret_basic", "client_secret_post")
_KNOWN_METHODS = (*_SECRET_METHODS, "none")
#: How a client_credentials client may authenticate (never ``none``).
_CREDENTIALS_METHODS = (*_SECRET_METHODS, "private_key_jwt")


@attrs.frozen(kw_only=True)
class OAuthClientSettings:
    """Every bound of the OAuth client, named. Times in seconds."""

    #: One OAuth HTTP exchange (a metadata document, a registration, a token request).
    request_timeout: float = 10.0
    #: The authorization handler's whole ``authorize`` call (a user logging in).
    authorization_timeout: float = 300.0
    #: Re-authorizations on ``403 insufficient_scope`` for one request.
    max_step_ups: int = 2
    #: Refresh (or re-authorize) this long before the access token expires
    #: (at most half its lifetime).
    expiry_margin: float = 30.0
    #: Largest metadata document or token response accepted, in bytes.
    max_document_size: int = 1 << 20
    #: Accept ``http://`` authorization server URLs on non-loopback hosts
    #: (``http://localhost`` and ``http://127.0.0.1`` are always accepted).
    allow_insecure_http: bool = False

    def __attrs_post_init__(self) -> None:
        numbers = numeric_fields(self)
        check_positive(self, [n for n in numbers if n != "max_step_ups"], nonnegative=["max_step_ups"])


@attrs.frozen
class _Context:
    """What discovery found for one flow."""

    resource: str
    issuer: str
    metadata: AuthorizationServerMetadata
    #: ``None``: the server publishes no protected resource metadata (2025-03-26 fallback).
    prm: ProtectedResourceMetadata | None


class _Unreachable(Exception):
    """An OAuth HTTP exchange did not complete (the reason, no secrets)."""


class OAuthClientAuth(httpx.Auth):
    """OAuth 2.1 authorization for the requests to one MCP server.

    Give it to the ``httpx.AsyncClient`` of a Streamable HTTP transport::

        auth = OAuthClientAuth(url, client_metadata=ClientMetadata(client_name="my-app"))
        async with httpx.AsyncClient(auth=auth) as http:
            stream = await nursery.start(StreamableHttpTransport(url, http_client=http).run)

    Arguments:

    * ``server_url``: the MCP endpoint; only requests to its origin get a token.
    * ``authorization_handler``: sends the user to the authorization URL and
      returns the redirect (default: :class:`FollowRedirectHandler`, headless).
    * ``storage``: tokens and client registrations (default: in memory).
    * ``client_metadata``: what dynamic client registration registers.
    * ``clients``: pre-registered client identities by authorization server
      issuer; they win over everything else at that issuer.
    * ``client_metadata_url``: an ``https`` URL (with a path) serving this
      client's Client ID Metadata Document; used as ``client_id`` where the
      authorization server advertises ``client_id_metadata_document_supported``.
    * ``scopes``: always request these (default: the challenge's ``scope``,
      else the resource's ``scopes_supported``, else none).
    * ``request_offline_access``: add ``offline_access`` (for a refresh
      token) when the authorization server lists it in ``scopes_supported``.
    * ``http_client``: the client for OAuth requests (metadata, registration,
      tokens); default: a short-lived one per flow. Never this auth's own client.
    * ``client_credentials``: authorize as this client with the
      client_credentials grant instead of the authorization code flow (no
      user: no ``authorization_handler``, ``clients`` or ``client_metadata_url``);
      a new token is requested whenever the old one expires or is rejected.
    * ``grant``: the same without a client secret of the client's own: a
      :class:`JwtBearerGrant` (workload identity federation) or an
      :class:`EnterpriseGrant` (enterprise-managed authorization: token
      exchange at the identity provider, then the JWT bearer grant).
    * ``dpop``: sender-constrained tokens (RFC 9449): a proof of a
      :class:`DPoPKey` (``True``: a new one) on every token request and MCP
      request, the token presented as ``DPoP``; nonces servers demand are used.
    """

    requires_request_body = True

    def __init__(
        self,
        server_url: str,
        *,
        authorization_handler: AuthorizationHandler | None = None,
        storage: TokenStorage | None = None,
        client_metadata: ClientMetadata | None = None,
        clients: Mapping[str, ClientInformation] | None = None,
        client_metadata_url: str | None = None,
        scopes: Iterable[str] | None = None,
        request_offline_access: bool = True,
        http_client: httpx.AsyncClient | None = None,
        settings: OAuthClientSettings | None = None,
        client_credentials: ClientCredentials | None = None,
        grant: AssertionGrant | None = None,
        dpop: DPoPKey | bool = False,
    ) -> None:
        if client_credentials is not None and grant is not None:
            raise ClientCredentialsConfigError("give client_credentials or an assertion grant, not both")
        if grant is not None and not isinstance(grant, JwtBearerGrant | EnterpriseGrant):
            raise ClientCredentialsConfigError("grant must be a JwtBearerGrant or an EnterpriseGrant")
        if client_credentials is not None or grant is not None:
            if client_credentials is not None and not isinstance(client_credentials, ClientCredentials):
                raise ClientCredentialsConfigError("client_credentials must be a ClientCredentials")
            extra = [
                name
                for name, value in (
                    ("authorization_handler", authorization_handler),
                    ("clients", clients),
                    ("client_metadata_url", client_metadata_url),
                )
                if value
            ]
            if extra:
                raise ClientCredentialsConfigError(
                    f"{'client_credentials' if grant is None else 'an assertion grant'} authorizes without "
                    f"a user: {', '.join(extra)} cannot be used with it"
                )
        self.client_credentials = client_credentials
        #: A JWT bearer grant (workload identity) or enterprise-managed authorization.
        self.grant = grant
        #: The DPoP proof key (``dpop=True``: a new ES256 key), else None.
        self.dpop: DPoPKey | None = DPoPKey() if dpop is True else (dpop or None)
        self.server_url = canonical_server_url(server_url)
        self.handler: AuthorizationHandler = authorization_handler or FollowRedirectHandler()
        self.storage: TokenStorage = storage if storage is not None else InMemoryTokenStorage()
        self.client_metadata = client_metadata or ClientMetadata()
        self.clients = dict(clients or {})
        if client_metadata_url is not None:
            parts = urlsplit(client_metadata_url)
            if parts.scheme != "https" or parts.path in ("", "/"):
                raise ValueError("client_metadata_url must be an https URL with a path")
        self.client_metadata_url = client_metadata_url
        self.scopes = list(scopes) if scopes is not None else None
        self.request_offline_access = request_offline_access
        self.settings = settings or OAuthClientSettings()
        self._http_client = http_client
        if http_client is None:
            tls_context()  # built now, not inside the first request's time budget
        self._origin = _origin_of(self.server_url)
        self._lock = trio.Lock()
        self._loaded = False
        self._tokens: OAuthToken | None = None
        #: Bumped whenever the tokens change (a request that saw an older one just resends).
        self._generation = 0
        #: The generation a refresh produced (its rejection means: authorize again).
        self._refreshed_generation = -1
        self._context: _Context | None = None
        self._requested: list[str] = []
        #: The last failure (also raised out of the request that met it).
        self.last_error: OAuthError | None = None

    # -------------------------------------------------------------- public

    @property
    def tokens(self) -> OAuthToken | None:
        """The tokens in use (``None`` before the first authorization)."""
        return self._tokens

    async def login(self) -> OAuthToken:
        """Authorize now, without waiting for a ``401`` (discovery from the
        well-known URLs). Returns the new tokens."""
        try:
            async with self._lock:
                await self._load()
                await self._authorize_from(Challenge("bearer"), sent_token=False, generation=self._generation)
        except OAuthError as exc:
            raise self._failed(exc, None) from None
        assert self._tokens is not None
        return self._tokens

    async def logout(self) -> None:
        """Forget the tokens (here and in the storage); client registrations stay."""
        async with self._lock:
            self._tokens = None
            self._generation += 1
            self._loaded = True
            await self.storage.delete_tokens(self.server_url)

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        raise RuntimeError("OAuthClientAuth works with httpx.AsyncClient only")
        yield request  # pragma: no cover

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if _origin_of(str(request.url)) != self._origin:
            yield request
            return
        try:
            await request.aread()
            generation = await self._prepare(request)
        except OAuthError as exc:
            raise self._failed(exc, request) from None
        response = yield request
        reauthorized = False
        nonce_retried = False
        step_ups = 0
        while True:
            status = response.status_code
            if self.dpop is not None and not nonce_retried:
                nonce = needs_nonce(status, response.headers, _dpop_challenge_error(response))
                if nonce is not None:  # RFC 9449 §9: the same request again, with the server's nonce
                    nonce_retried = True
                    self.dpop.remember_nonce(str(request.url), nonce)
                    await self._drain(response)
                    self._apply(request)
                    response = yield request
                    continue
            if status == 401 and not reauthorized:
                reauthorized = True
                step_up = False
            elif status == 403:
                step_up = True
            else:
                return
            challenge = bearer_challenge(response.headers.get_list("www-authenticate"))
            if step_up:
                if challenge.error != "insufficient_scope":
                    return
                if not self._new_scopes(challenge):
                    log.warning(
                        "the MCP server answers 403 insufficient_scope for scope %r, which the token "
                        "already has: not authorizing again",
                        challenge.scope,
                    )
                    return
                if step_ups >= self.settings.max_step_ups:
                    log.warning(
                        "the MCP server still answers 403 insufficient_scope (scope %r) after %d "
                        "step-up authorizations: giving up",
                        challenge.scope,
                        step_ups,
                    )
                    return
                step_ups += 1
            sent_token = "authorization" in request.headers
            try:
                await self._drain(response)
                async with self._lock:
                    # (a changed generation: another request already re-authorized)
                    if self._generation == generation:
                        if step_up:
                            await self._step_up(challenge)
                        else:
                            await self._authorize_from(challenge, sent_token, generation)
                    generation = self._apply(request)
            except OAuthError as exc:
                raise self._failed(exc, request) from None
            response = yield request

    # ---------------------------------------------------------- per request

    async def _prepare(self, request: httpx.Request) -> int:
        """Load the tokens, refresh them if they expire, set the header."""
        async with self._lock:
            await self._load()
            tokens = self._tokens
            if tokens is not None and tokens.expired(self.settings.expiry_margin):
                context = self._context
                if (
                    not tokens.refresh_token
                    and self._headless
                    and context is not None
                    and context.issuer == tokens.issuer
                ):
                    # (a failure is raised out of this request: a 401 would only ask again)
                    async with self._http() as http:
                        await self._obtain(http, context, self._requested or tokens.scopes)
                elif not tokens.refresh_token:
                    self._set_tokens(None)
                elif context is not None and context.issuer == tokens.issuer:
                    try:
                        async with self._http() as http:
                            await self._refresh(http, context, tokens)
                    except OAuthError as exc:
                        log.info("token refresh failed (%s); authorizing again on the next 401", exc)
                        self._set_tokens(None)
                # else (tokens from the storage, nothing discovered yet): the 401
                # the stale token meets runs discovery, then the refresh.
            return self._apply(request)

    @property
    def _headless(self) -> bool:
        """No user: the client_credentials grant or an assertion grant."""
        return self.client_credentials is not None or self.grant is not None

    def _apply(self, request: httpx.Request) -> int:
        tokens = self._tokens
        if tokens is not None and self.dpop is not None and tokens.token_type.lower() == "dpop":
            request.headers["authorization"] = f"DPoP {tokens.access_token}"
            request.headers["dpop"] = self.dpop.proof(
                request.method, str(request.url), access_token=tokens.access_token
            )
        elif tokens is not None:
            request.headers["authorization"] = f"Bearer {tokens.access_token}"
        elif "authorization" in request.headers:
            del request.headers["authorization"]
        return self._generation

    def _new_scopes(self, challenge: Challenge) -> list[str]:
        """The challenged scopes not granted yet (none: a step-up cannot help)."""
        tokens = self._tokens
        granted = set(tokens.scopes if tokens is not None and tokens.scope else self._requested)
        return [s for s in challenge.scopes if s not in granted]

    async def _drain(self, response: httpx.Response) -> None:
        try:
            with trio.fail_after(self.settings.request_timeout):
                await response.aread()
        except (trio.TooSlowError, httpx.HTTPError):
            status = response.status_code
            raise OAuthError(f"could not read the HTTP {status} answer of the MCP server") from None

    def _failed(self, exc: OAuthError, request: httpx.Request | None) -> OAuthError:
        if request is not None:
            exc.request = request
        self.last_error = exc
        log.warning("authorization failed: %s: %s", type(exc).__name__, exc)
        return exc

    async def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            tokens = await self.storage.load_tokens(self.server_url)
            if tokens is not None:
                self._tokens = tokens
                self._generation += 1

    def _set_tokens(self, tokens: OAuthToken | None) -> None:
        self._tokens = tokens
        self._generation += 1

    async def _store(self, tokens: OAuthToken) -> None:
        self._set_tokens(tokens)
        await self.storage.save_tokens(self.server_url, tokens)

    # -------------------------------------------------------------- flows

    async def _authorize_from(self, challenge: Challenge, sent_token: bool, generation: int) -> None:
        """After a 401: discover, then refresh if that can help, else authorize."""
        async with self._http() as http:
            context = await self._discover(http, challenge)
            tokens = self._tokens
            if (
                sent_token
                and tokens is not None
                and tokens.refresh_token
                and tokens.issuer == context.issuer
                and tokens.resource == context.resource
                and self._refreshed_generation != generation
            ):
                try:
                    await self._refresh(http, context, tokens)
                    return
                except TokenRequestError as exc:
                    log.info("token refresh refused (%s); authorizing again", exc.error or exc)
            await self._obtain(http, context, self._scopes_for(challenge, context))

    async def _step_up(self, challenge: Challenge) -> None:
        """After a 403 insufficient_scope: authorize again with the union of scopes."""
        async with self._http() as http:
            context = await self._discover(http, challenge)
            tokens = self._tokens
            before = self._requested or (tokens.scopes if tokens is not None else [])
            scopes = _union(before, challenge.scopes)
            log.info("step-up authorization for scope %r", " ".join(scopes))
            await self._obtain(http, context, scopes)

    async def _obtain(self, http: httpx.AsyncClient, context: _Context, scopes: list[str]) -> None:
        """New tokens for ``scopes``: the client_credentials grant or the authorization code flow."""
        if self.client_credentials is not None:
            await self._client_credentials_grant(http, context, scopes)
        elif self.grant is not None:
            await self._assertion_grant(http, context, scopes)
        else:
            await self._authorize(http, context, scopes)

    def _scopes_for(self, challenge: Challenge, context: _Context) -> list[str]:
        """The MCP scope selection: explicit scopes, else the challenge's
        ``scope``, else every ``scopes_supported`` of the resource, else none;
        joined to the scopes requested before."""
        if self.scopes is not None:
            chosen = self.scopes
        elif challenge.scopes:
            chosen = challenge.scopes
        elif context.prm is not None and context.prm.scopes_supported:
            chosen = context.prm.scopes_supported
        else:
            chosen = []
        return _union(self._requested, chosen)

    def _scope_parameter(self, scopes: list[str], context: _Context) -> str | None:
        out = list(scopes)
        supported = context.metadata.scopes_supported or []
        if (
            self.request_offline_access
            and out
            and "offline_access" in supported
            and "offline_access" not in out
            and "refresh_token" in self.client_metadata.grant_types
        ):
            out.append("offline_access")
        return " ".join(out) or None

    async def _authorize(self, http: httpx.AsyncClient, context: _Context, scopes: list[str]) -> None:
        """The authorization code flow with PKCE (S256), ``state`` and ``resource``."""
        client = await self._client_for(http, context)
        endpoint = context.metadata.authorization_endpoint
        assert endpoint is not None
        verifier = secrets.token_urlsafe(48)
        code_challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest())
        state = secrets.token_urlsafe(32)
        scope = self._scope_parameter(scopes, context)
        redirect_uri = self.handler.redirect_uri
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
        timeout = self.settings.authorization_timeout
        try:
            with trio.fail_after(timeout):
                callback = await self.handler.authorize(request)
        except trio.TooSlowError:
            raise AuthorizationResponseError(f"no authorization response within {timeout}s") from None
        except OAuthError:
            raise
        except Exception as exc:
            raise AuthorizationResponseError(
                f"the authorization handler failed: {type(exc).__name__}: {exc}"
            ) from exc
        code = _code_from(callback, state, context)
        tokens = await self._token_request(
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
        self._requested = list(scopes)
        self._context = context
        await self._store(tokens)

    async def _client_credentials_grant(
        self, http: httpx.AsyncClient, context: _Context, scopes: list[str]
    ) -> None:
        """OAuth 2.1 §4.2: the client authenticates and asks for a token for itself."""
        assert self.client_credentials is not None
        metadata = context.metadata
        grants = metadata.grant_types_supported
        if grants is not None and "client_credentials" not in grants:
            raise UnsupportedServerError(
                f"the authorization server {context.issuer} does not offer the client_credentials grant "
                f"(grant_types_supported: {grants})"
            )
        client = self.client_credentials.client_information()
        method = _auth_method(client, metadata)
        supported = metadata.token_endpoint_auth_methods_supported
        if method not in _CREDENTIALS_METHODS or (supported is not None and method not in supported):
            raise UnsupportedServerError(
                f"the authorization server {context.issuer} does not accept {method} at its token endpoint "
                f"(token_endpoint_auth_methods_supported: {supported})"
            )
        if method == "private_key_jwt":
            algorithm = self.client_credentials.signing_algorithm
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
        tokens = await self._token_request(http, context, client, form, requested_scope=scope)
        self._requested = list(scopes)
        self._context = context
        await self._store(tokens)

    async def _assertion_grant(self, http: httpx.AsyncClient, context: _Context, scopes: list[str]) -> None:
        """The JWT bearer grant (RFC 7523 §2.1), after the token exchange of
        enterprise-managed authorization. A refusal is an error: no retry,
        no other grant."""
        assert self.grant is not None

        async def exchange(endpoint: str, form: dict[str, str]) -> dict[str, Any]:
            self._check_secure(endpoint, "identity provider token endpoint")
            try:
                status, body = await self._exchange(
                    http, "POST", endpoint, data=form, headers={"accept": "application/json"}
                )
            except _Unreachable as exc:
                raise TokenRequestError(f"the token exchange at {endpoint} failed: {exc}") from None
            if status != 200:
                error = _error_of(body)
                raise TokenRequestError(
                    f"the identity provider refused the token exchange (HTTP {status}{_describe_error(error)})",
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
            form = await self.grant.form(context.issuer, context.resource, exchange)
        except ValueError as exc:
            raise TokenRequestError(str(exc)) from None
        scope = " ".join(scopes) or None
        if scope is not None:
            form["scope"] = scope
        log.info("%s grant at %s (scope %r)", type(self.grant).__name__, context.issuer, scope)
        tokens = await self._token_request(
            http, context, self.grant.client_information(), form, requested_scope=scope
        )
        self._requested = list(scopes)
        self._context = context
        await self._store(tokens)

    async def _refresh(self, http: httpx.AsyncClient, context: _Context, tokens: OAuthToken) -> None:
        assert tokens.refresh_token is not None
        client = await self._client_for(http, context)
        fresh = await self._token_request(
            http,
            context,
            client,
            {
                "grant_type": "refresh_token",
                "refresh_token": tokens.refresh_token,
                "resource": context.resource,
            },
            requested_scope=tokens.scope,
        )
        if fresh.refresh_token is None:
            fresh = msgspec.structs.replace(fresh, refresh_token=tokens.refresh_token)
        log.info("access token refreshed at %s", context.issuer)
        self._context = context
        await self._store(fresh)
        self._refreshed_generation = self._generation

    # ----------------------------------------------------------- discovery

    async def _discover(self, http: httpx.AsyncClient, challenge: Challenge) -> _Context:
        hint = challenge.resource_metadata
        candidates = _unique([hint, *prm_urls(self.server_url)] if hint else prm_urls(self.server_url))
        failures: list[str] = []
        prm = None
        for url in candidates:
            prm = await self._fetch(http, url, ProtectedResourceMetadata, failures)
            if prm is not None:
                break
        if prm is None:
            if hint or any(not f.startswith("HTTP 4") for f in failures):
                raise DiscoveryError(
                    "no usable protected resource metadata for the MCP server: " + "; ".join(failures)
                )
            # 2025-03-26 servers publish none: the authorization server is the server's origin.
            parts = urlsplit(self.server_url)
            origin = f"{parts.scheme}://{parts.netloc}"
            log.info("no protected resource metadata; the authorization server is %s", origin)
            return await self._metadata_context(http, self.server_url, origin, None)
        if not resource_matches(prm.resource, self.server_url):
            raise ResourceMismatchError(
                f"the protected resource metadata is for {prm.resource!r}, not for the MCP server "
                f"{self.server_url!r}",
                resource=prm.resource,
                server_url=self.server_url,
            )
        if not prm.authorization_servers:
            raise DiscoveryError("the protected resource metadata names no authorization server")
        return await self._metadata_context(http, prm.resource, prm.authorization_servers[0], prm)

    async def _metadata_context(
        self, http: httpx.AsyncClient, resource: str, issuer: str, prm: ProtectedResourceMetadata | None
    ) -> _Context:
        self._check_secure(issuer, "authorization server issuer")
        failures: list[str] = []
        metadata = None
        for url in as_metadata_urls(issuer):
            metadata = await self._fetch(http, url, AuthorizationServerMetadata, failures)
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
        if self._headless:
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
                self._check_secure(endpoint, what)
        pkce = metadata.code_challenge_methods_supported or []
        if not self._headless and "S256" not in pkce:
            raise UnsupportedServerError(
                f"the authorization server {issuer} does not advertise PKCE with S256 "
                "(code_challenge_methods_supported): refusing to authorize"
            )
        return _Context(resource=resource, issuer=issuer, metadata=metadata, prm=prm)

    def _check_secure(self, url: str, what: str) -> None:
        scheme = urlsplit(url).scheme.lower()
        insecure_ok = is_loopback(url) or self.settings.allow_insecure_http
        if scheme == "https" or (scheme == "http" and insecure_ok):
            return
        raise DiscoveryError(f"the {what} {url!r} is not an https URL")

    async def _fetch(
        self, http: httpx.AsyncClient, url: str, kind: type[_T], failures: list[str]
    ) -> _T | None:
        """A JSON document of ``kind`` at ``url``, or ``None`` (the reason appended to ``failures``)."""
        try:
            status, body = await self._exchange(http, "GET", url, headers={"accept": "application/json"})
        except _Unreachable as exc:
            failures.append(f"{url}: {exc}")
            return None
        if status != 200:
            failures.append(f"HTTP {status} from {url}")
            return None
        try:
            return msgspec.json.decode(body, type=kind)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            failures.append(f"invalid document at {url}: {exc}")
            return None

    async def _exchange(
        self, http: httpx.AsyncClient, method: str, url: str, **kwargs: Any
    ) -> tuple[int, bytes]:
        """One bounded OAuth HTTP exchange: (status, body)."""
        status, body, _ = await self._exchange_with_headers(http, method, url, **kwargs)
        return status, body

    async def _exchange_with_headers(
        self, http: httpx.AsyncClient, method: str, url: str, **kwargs: Any
    ) -> tuple[int, bytes, httpx.Headers]:
        """One bounded OAuth HTTP exchange: (status, body, headers)."""
        timeout = self.settings.request_timeout
        limit = self.settings.max_document_size
        try:
            with trio.fail_after(timeout):
                async with http.stream(method, url, follow_redirects=method == "GET", **kwargs) as response:
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > limit:
                            raise _Unreachable(f"answer larger than {limit} bytes")
                    return response.status_code, bytes(body), response.headers
        except trio.TooSlowError:
            raise _Unreachable(f"no answer within {timeout}s") from None
        except httpx.HTTPError as exc:
            raise _Unreachable(type(exc).__name__) from None

    @asynccontextmanager
    async def _http(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._http_client is not None:
            yield self._http_client
            return
        async with new_client(self.settings.request_timeout) as client:
            yield client

    # ---------------------------------------------------- client identity

    async def _client_for(self, http: httpx.AsyncClient, context: _Context) -> ClientInformation:
        """Pre-registered, else stored, else a Client ID Metadata Document URL,
        else dynamic client registration (the configured client for the
        client_credentials grant)."""
        if self.client_credentials is not None:
            return self.client_credentials.client_information()
        if self.grant is not None:
            return self.grant.client_information()
        issuer = context.issuer
        preregistered = self.clients.get(issuer)
        if preregistered is not None:
            return preregistered
        stored = await self.storage.load_client(issuer)
        if stored is not None and not stored.expired():
            return stored
        if context.metadata.client_id_metadata_document_supported and self.client_metadata_url:
            return ClientInformation(client_id=self.client_metadata_url, token_endpoint_auth_method="none")
        if context.metadata.registration_endpoint:
            client = await self._register(http, context)
            await self.storage.save_client(issuer, client)
            return client
        raise UnsupportedServerError(
            f"no client identity for {issuer}: it offers no dynamic client registration"
            + (", no Client ID Metadata Document support" if self.client_metadata_url else "")
            + " and no pre-registered client is configured for it"
        )

    async def _register(self, http: httpx.AsyncClient, context: _Context) -> ClientInformation:
        endpoint = context.metadata.registration_endpoint
        assert endpoint is not None
        body = self.client_metadata.to_registration()
        body.setdefault("redirect_uris", [self.handler.redirect_uri])
        if "token_endpoint_auth_method" not in body:
            body["token_endpoint_auth_method"] = _registration_method(context.metadata)
        if "application_type" not in body:
            native = all(
                is_loopback(u) or urlsplit(u).scheme not in ("http", "https") for u in body["redirect_uris"]
            )
            body["application_type"] = "native" if native else "web"
        try:
            status, answer = await self._exchange(
                http, "POST", endpoint, json=body, headers={"accept": "application/json"}
            )
        except _Unreachable as exc:
            raise RegistrationError(f"client registration at {endpoint} failed: {exc}") from None
        if status not in (200, 201):
            error = _error_of(answer)
            raise RegistrationError(
                f"client registration refused (HTTP {status}{_describe_error(error)})",
                error=error.error if error else None,
                status_code=status,
            )
        try:
            client = msgspec.json.decode(answer, type=ClientInformation, strict=False)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise RegistrationError(
                f"invalid client registration response: {exc}", status_code=status
            ) from None
        if client.token_endpoint_auth_method is None:
            method = body["token_endpoint_auth_method"]
            client = msgspec.structs.replace(client, token_endpoint_auth_method=method)
        log.info("registered a client at %s", context.issuer)
        return client

    # -------------------------------------------------------------- tokens

    async def _token_request(
        self,
        http: httpx.AsyncClient,
        context: _Context,
        client: ClientInformation,
        form: dict[str, str],
        *,
        requested_scope: str | None,
    ) -> OAuthToken:
        endpoint = context.metadata.token_endpoint
        assert endpoint is not None
        grant = form["grant_type"]
        method = _auth_method(client, context.metadata)
        headers = {"accept": "application/json"}
        form = dict(form)
        if method in _SECRET_METHODS and not client.client_secret:
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
        for _attempt in range(2):  # a second time only with the DPoP nonce the server demanded
            if self.dpop is not None:
                headers["dpop"] = self.dpop.proof("POST", endpoint)
            try:
                status, body, nonce = await self._token_exchange(http, endpoint, form, headers)
            except _Unreachable as exc:
                raise TokenRequestError(f"the {grant} token request failed: {exc}") from None
            if nonce is None or self.dpop is None:
                break
            self.dpop.remember_nonce(endpoint, nonce)
        if status != 200:
            error = _error_of(body)
            raise TokenRequestError(
                f"the token endpoint refused the {grant} request (HTTP {status}{_describe_error(error)})",
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
        token_type = "DPoP" if answer.token_type.lower() == "dpop" and self.dpop is not None else "Bearer"
        if answer.token_type.lower() != token_type.lower():
            raise TokenRequestError(
                f"unsupported token type {answer.token_type!r} (only Bearer"
                + (" and DPoP)" if self.dpop is not None else ")"),
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

    async def _token_exchange(
        self, http: httpx.AsyncClient, endpoint: str, form: dict[str, str], headers: dict[str, str]
    ) -> tuple[int, bytes, str | None]:
        """POST a token request: (status, body, the DPoP nonce a ``use_dpop_nonce`` answer demands)."""
        status, body, answer_headers = await self._exchange_with_headers(
            http, "POST", endpoint, data=form, headers=headers
        )
        error = _error_of(body) if status == 400 else None
        return status, body, needs_nonce(status, answer_headers, error.error if error else None)


# ------------------------------------------------------------------ helpers


def _dpop_challenge_error(response: httpx.Response) -> str | None:
    """The ``error`` of a response's ``DPoP`` challenge (``use_dpop_nonce``...)."""
    for challenge in parse_challenges(response.headers.get_list("www-authenticate")):
        if challenge.scheme == "dpop":
            return challenge.error
    return None


def _origin_of(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def _union(first: Iterable[str], second: Iterable[str]) -> list[str]:
    out: list[str] = []
    for scope in (*first, *second):
        if scope not in out:
            out.append(scope)
    return out


def _unique(urls: Iterable[str | None]) -> list[str]:
    out: list[str] = []
    for url in urls:
        if url and url not in out:
            out.append(url)
    return out


def _registration_method(metadata: AuthorizationServerMetadata) -> str:
    supported = metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"]
    for method in _KNOWN_METHODS:
        if method in supported:
            return method
    raise UnsupportedServerError(
        f"the authorization server supports none of our token endpoint authentication methods: {supported}"
    )


def _auth_method(client: ClientInformation, metadata: AuthorizationServerMetadata) -> str:
    if client.token_endpoint_auth_method:
        return client.token_endpoint_auth_method
    if not client.client_secret:
        return "none"
    supported = metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"]
    for method in _SECRET_METHODS:
        if method in supported:
            return method
    return "none" if "none" in supported else "client_secret_basic"


def _error_of(body: bytes) -> _ErrorResponse | None:
    try:
        return msgspec.json.decode(body, type=_ErrorResponse, strict=False)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


def _describe_error(error: _ErrorResponse | None) -> str:
    if error is None or not error.error:
        return ""
    text = f", {error.error}"
    if error.error_description:
        text += f": {error.error_description[:200]}"
    return text


def _code_from(callback: str, state: str, context: _Context) -> str:
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
