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

This module holds the per-request logic and the flow's state; the steps live
apart: discovery (:mod:`._authorization_server`), dynamic client registration
(:mod:`._registration`), the authorization code flow (:mod:`._authorization_code`),
token requests and the grants without a user (:mod:`._token_requests`), each
over one bounded exchange (:mod:`._exchange`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Generator, Iterable, Mapping
from urllib.parse import urlsplit

import httpx
import msgspec
import trio

from ._authorization_code import authorization_code_grant
from ._authorization_server import AuthorizationContext, discover
from ._credentials import ClientCredentials, ClientCredentialsConfigError
from ._discovery import Challenge, bearer_challenge, canonical_server_url, parse_challenges
from ._dpop import DPoPKey, needs_nonce
from ._errors import OAuthError, TokenRequestError, UnsupportedServerError
from ._exchange import oauth_http
from ._grants import AssertionGrant, EnterpriseGrant, JwtBearerGrant
from ._handlers import AuthorizationHandler, FollowRedirectHandler
from ._http import tls_context
from ._models import ClientInformation, ClientMetadata, OAuthToken
from ._registration import register_client
from ._settings import OAuthClientSettings
from ._storage import InMemoryTokenStorage, TokenStorage
from ._token_requests import TokenEndpoint

__all__ = ["OAuthClientAuth", "OAuthClientSettings"]

log = logging.getLogger("trio_mcp.auth")


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
        self._token_endpoint = TokenEndpoint(
            self.settings, dpop=self.dpop, client_credentials=client_credentials
        )
        self._lock = trio.Lock()
        self._loaded = False
        self._tokens: OAuthToken | None = None
        #: Bumped whenever the tokens change (a request that saw an older one just resends).
        self._generation = 0
        #: The generation a refresh produced (its rejection means: authorize again).
        self._refreshed_generation = -1
        self._context: AuthorizationContext | None = None
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
                    async with oauth_http(self.settings, self._http_client) as http:
                        await self._obtain(http, context, self._requested or tokens.scopes)
                elif not tokens.refresh_token:
                    self._set_tokens(None)
                elif context is not None and context.issuer == tokens.issuer:
                    try:
                        async with oauth_http(self.settings, self._http_client) as http:
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
        async with oauth_http(self.settings, self._http_client) as http:
            context = await discover(http, self.settings, self.server_url, challenge, headless=self._headless)
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
        async with oauth_http(self.settings, self._http_client) as http:
            context = await discover(http, self.settings, self.server_url, challenge, headless=self._headless)
            tokens = self._tokens
            before = self._requested or (tokens.scopes if tokens is not None else [])
            scopes = _union(before, challenge.scopes)
            log.info("step-up authorization for scope %r", " ".join(scopes))
            await self._obtain(http, context, scopes)

    async def _obtain(
        self, http: httpx.AsyncClient, context: AuthorizationContext, scopes: list[str]
    ) -> None:
        """New tokens for ``scopes``: the client_credentials grant or the authorization code flow."""
        if self.client_credentials is not None:
            tokens = await self._token_endpoint.client_credentials_grant(http, context, scopes)
        elif self.grant is not None:
            tokens = await self._token_endpoint.assertion_grant(http, context, self.grant, scopes)
        else:
            client = await self._client_for(http, context)
            scope = self._scope_parameter(scopes, context)
            tokens = await authorization_code_grant(
                http, self._token_endpoint, context, client, self.handler, scope
            )
        self._requested = list(scopes)
        self._context = context
        await self._store(tokens)

    def _scopes_for(self, challenge: Challenge, context: AuthorizationContext) -> list[str]:
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

    def _scope_parameter(self, scopes: list[str], context: AuthorizationContext) -> str | None:
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

    async def _refresh(
        self, http: httpx.AsyncClient, context: AuthorizationContext, tokens: OAuthToken
    ) -> None:
        assert tokens.refresh_token is not None
        client = await self._client_for(http, context)
        fresh = await self._token_endpoint.request(
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

    # ---------------------------------------------------- client identity

    async def _client_for(self, http: httpx.AsyncClient, context: AuthorizationContext) -> ClientInformation:
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
            client = await register_client(
                http, self.settings, context, self.client_metadata, self.handler.redirect_uri
            )
            await self.storage.save_client(issuer, client)
            return client
        raise UnsupportedServerError(
            f"no client identity for {issuer}: it offers no dynamic client registration"
            + (", no Client ID Metadata Document support" if self.client_metadata_url else "")
            + " and no pre-registered client is configured for it"
        )


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
