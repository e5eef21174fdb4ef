"""The OAuth client (:mod:`trio_mcp.auth`) against an in-process authorization
server and a protected MCP server, each a small ASGI app on hypercorn
(127.0.0.1, port 0).

:class:`FakeAuthServer` implements just enough of OAuth 2.1 to check what the
client sends: RFC 8414 / OpenID metadata, dynamic client registration, an
authorization endpoint that approves at once (302 back to the redirect URI),
a token endpoint that verifies PKCE, ``resource``, ``redirect_uri`` and the
client authentication. :class:`ProtectedResource` wraps an ASGI app with
bearer checks (401 / 403 challenges) and serves RFC 9728 metadata.

Every server is stopped by its test; every test is bounded by ``TIMEOUT``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

import attrs
import httpx
import pytest
import trio

from trio_mcp.actors._client import open_session
from trio_mcp.auth import (
    AuthorizationRequest,
    AuthorizationResponseError,
    ClientInformation,
    ClientMetadata,
    DiscoveryError,
    FollowRedirectHandler,
    InMemoryTokenStorage,
    IssuerMismatchError,
    OAuthClientAuth,
    OAuthClientSettings,
    OAuthError,
    OAuthToken,
    ResourceMismatchError,
    TokenRequestError,
    TokenStorage,
    UnsupportedServerError,
)
from trio_mcp.auth._discovery import (
    as_metadata_urls,
    bearer_challenge,
    parse_challenges,
    prm_urls,
    resource_matches,
)
from trio_mcp.server import MCPServer
from trio_mcp.serving.http import HttpServerSettings, StreamableHttpApp
from trio_mcp.transports.http import StreamableHttpTransport

TIMEOUT = 15.0
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# ------------------------------------------------------------------ ASGI bits


async def read_body(receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def respond(send: Send, status: int, body: Any = b"", headers: list[tuple[str, str]] = ()) -> None:
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
        headers = [*headers, ("content-type", "application/json")]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(k.encode(), v.encode()) for k, v in headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def lifespan(receive: Receive, send: Send) -> None:
    """The ASGI lifespan protocol of an app with nothing to start."""
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await send({"type": "lifespan.shutdown.complete"})


def header(scope: Scope, name: str) -> str | None:
    for key, value in scope.get("headers", []):
        if key.decode().lower() == name:
            return value.decode()
    return None


@asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """``app`` on hypercorn at 127.0.0.1:0; yields its base URL."""
    from hypercorn.config import Config
    from hypercorn.trio import serve as hyper_serve

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 0.5
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: hyper_serve(app, config, shutdown_trigger=stop.wait, task_status=task_status)
        )
        try:
            yield binds[0]
        finally:
            stop.set()


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


# --------------------------------------------------------- authorization server


@attrs.define
class Grant:
    client_id: str
    scopes: list[str]
    resource: str | None
    issuer: str


@attrs.define(eq=False)
class FakeAuthServer:
    """An authorization server that approves every authorization request."""

    #: Issuer path ("/tenant1"): endpoints under it, metadata path-inserted.
    prefix: str = ""
    #: Serve the metadata at the OpenID location instead of RFC 8414's.
    openid: bool = False
    #: The OpenID location appended to the issuer path (…/tenant1/.well-known/openid-configuration).
    openid_appended: bool = False
    #: The issuer the metadata names (None: the real one).
    issuer_override: str | None = None
    serve_metadata: bool = True
    pkce_methods: list[str] | None = attrs.field(factory=lambda: ["S256"])
    auth_methods: list[str] | None = attrs.field(
        factory=lambda: ["client_secret_basic", "client_secret_post", "none"]
    )
    registration: bool = True
    cimd: bool = False
    scopes_supported: list[str] | None = None
    iss_supported: bool | None = True
    #: "correct", "omit", "wrong", "normalized" (trailing slash).
    iss_mode: str = "correct"
    #: The token_endpoint_auth_method registration answers with (None: the requested one).
    registered_method: str | None = None
    issue_secret: bool = True
    refresh_tokens: bool = True
    expires_in: int | None = 3600
    #: Grant only these scopes (None: what was requested).
    grant_only: list[str] | None = None
    #: Answer the authorization request with this error.
    deny: str | None = None
    #: Answer with another state.
    bad_state: bool = False
    #: Answer the authorization endpoint with a page instead of a redirect.
    no_redirect: bool = False
    refresh_error: str | None = None
    token_error: str | None = None
    hang_token: bool = False

    base: str = ""
    counter: int = 0
    requests: list[tuple[str, str, dict[str, str]]] = attrs.field(factory=list)
    registrations: list[dict[str, Any]] = attrs.field(factory=list)
    clients: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    authorizations: list[dict[str, str]] = attrs.field(factory=list)
    token_requests: list[dict[str, Any]] = attrs.field(factory=list)
    codes: dict[str, dict[str, str]] = attrs.field(factory=dict)
    access: dict[str, Grant] = attrs.field(factory=dict)
    refresh: dict[str, Grant] = attrs.field(factory=dict)
    revoked: set[str] = attrs.field(factory=set)
    #: Every secret handed out or received (codes, tokens, client secrets, verifiers).
    secrets: set[str] = attrs.field(factory=set)

    @property
    def issuer(self) -> str:
        return self.base + self.prefix

    def metadata_path(self) -> str:
        if self.openid_appended:
            return f"{self.prefix}/.well-known/openid-configuration"
        kind = "openid-configuration" if self.openid else "oauth-authorization-server"
        return f"/.well-known/{kind}{self.prefix}"

    def metadata(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "issuer": self.issuer_override or self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
        }
        if self.registration:
            doc["registration_endpoint"] = f"{self.issuer}/register"
        if self.pkce_methods is not None:
            doc["code_challenge_methods_supported"] = self.pkce_methods
        if self.auth_methods is not None:
            doc["token_endpoint_auth_methods_supported"] = self.auth_methods
        if self.cimd:
            doc["client_id_metadata_document_supported"] = True
        if self.scopes_supported is not None:
            doc["scopes_supported"] = self.scopes_supported
        if self.iss_supported is not None:
            doc["authorization_response_iss_parameter_supported"] = self.iss_supported
        return doc

    def grant_for(self, token: str | None) -> Grant | None:
        if token is None or token in self.revoked:
            return None
        return self.access.get(token)

    def revoke_all(self) -> None:
        self.revoked.update(self.access)

    def _next(self, kind: str) -> str:
        self.counter += 1
        digest = hashlib.sha1(f"{kind}{self.counter}{id(self)}".encode()).hexdigest()[:12]
        value = f"{kind}-{self.counter}-{digest}"
        self.secrets.add(value)
        return value

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        path = scope["path"]
        method = scope["method"]
        self.requests.append((method, path, {k.decode(): v.decode() for k, v in scope["headers"]}))
        if method == "GET" and self.serve_metadata and path == self.metadata_path():
            await respond(send, 200, self.metadata())
        elif method == "GET" and path == f"{self.prefix}/authorize":
            await self._authorize(scope, send)
        elif method == "POST" and path == f"{self.prefix}/token":
            await self._token(scope, await read_body(receive), send)
        elif method == "POST" and path == f"{self.prefix}/register" and self.registration:
            await self._register(json.loads(await read_body(receive)), send)
        else:
            await respond(send, 404, {"error": "not_found"})

    async def _register(self, body: dict[str, Any], send: Send) -> None:
        self.registrations.append(body)
        client_id = self._next("client")
        method = self.registered_method or body.get("token_endpoint_auth_method")
        answer: dict[str, Any] = {**body, "client_id": client_id}
        if method:
            answer["token_endpoint_auth_method"] = method
        if self.issue_secret and method != "none":
            answer["client_secret"] = self._next("secret")
        self.clients[client_id] = answer
        await respond(send, 201, answer)

    async def _authorize(self, scope: Scope, send: Send) -> None:
        query = dict(parse_qsl(scope["query_string"].decode()))
        self.authorizations.append(query)
        if self.no_redirect:
            await respond(send, 200, b"<html>log in</html>")
            return
        target = query["redirect_uri"]
        params: dict[str, str] = {}
        if self.deny:
            params["error"] = self.deny
            params["error_description"] = "the user said no"
        else:
            code = self._next("code")
            self.codes[code] = query
            params["code"] = code
        params["state"] = "not-the-state" if self.bad_state else query.get("state", "")
        iss = {
            "correct": self.issuer,
            "wrong": "https://evil.example.com",
            "normalized": self.issuer + "/",
            "omit": None,
        }[self.iss_mode]
        if iss is not None:
            params["iss"] = iss
        await respond(send, 302, b"", [("location", f"{target}?{urlencode(params)}")])

    def _client_of(self, scope: Scope, form: dict[str, str]) -> tuple[str | None, str]:
        """(client_id, the authentication method it used); checks the secret."""
        auth = header(scope, "authorization")
        if auth and auth.startswith("Basic "):
            client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            ok = self.clients.get(client_id, {}).get("client_secret") == secret
            return (client_id if ok else None), "client_secret_basic"
        if "client_secret" in form:
            client = self.clients.get(form.get("client_id", ""), {})
            ok = client.get("client_secret") == form["client_secret"]
            return (form["client_id"] if ok else None), "client_secret_post"
        return form.get("client_id"), "none"

    def _other_grant(
        self, grant_type: str | None, form: dict[str, str]
    ) -> tuple[list[str], str | None] | None:
        """(requested scopes, resource) of another grant than the code and refresh
        ones (None: unsupported)."""
        return None

    async def _token(self, scope: Scope, body: bytes, send: Send) -> None:
        form = dict(parse_qsl(body.decode()))
        client_id, used = self._client_of(scope, form)
        record = {
            "form": form,
            "auth_method": used,
            "client_id": client_id,
            "authorization": header(scope, "authorization"),
        }
        self.token_requests.append(record)
        self.secrets.update(v for k, v in form.items() if k in ("code_verifier", "client_secret"))
        if self.hang_token:
            await trio.sleep_forever()
        if self.token_error:
            await respond(send, 400, {"error": self.token_error, "error_description": "no tokens today"})
            return
        if client_id is None:
            await respond(send, 401, {"error": "invalid_client"})
            return
        grant_type = form.get("grant_type")
        if grant_type == "authorization_code":
            request = self.codes.pop(form.get("code", ""), None)
            problems = []
            if request is None:
                problems.append("unknown code")
            else:
                if s256(form.get("code_verifier", "")) != request.get("code_challenge"):
                    problems.append("PKCE verifier does not match")
                if form.get("redirect_uri") != request.get("redirect_uri"):
                    problems.append("redirect_uri differs")
                if form.get("resource") != request.get("resource"):
                    problems.append("resource differs")
                if client_id != request.get("client_id"):
                    problems.append("client differs")
            if problems:
                record["problems"] = problems
                await respond(send, 400, {"error": "invalid_grant", "error_description": "; ".join(problems)})
                return
            assert request is not None
            requested = request.get("scope", "").split()
            resource = form.get("resource")
        elif grant_type == "refresh_token":
            if self.refresh_error:
                await respond(send, 400, {"error": self.refresh_error})
                return
            old = self.refresh.get(form.get("refresh_token", ""))
            if old is None or old.client_id != client_id:
                await respond(send, 400, {"error": "invalid_grant"})
                return
            requested = old.scopes
            resource = form.get("resource")
        else:
            other = self._other_grant(grant_type, form)
            if other is None:
                await respond(send, 400, {"error": "unsupported_grant_type"})
                return
            requested, resource = other
        granted = [s for s in requested if self.grant_only is None or s in self.grant_only]
        grant = Grant(client_id=client_id, scopes=granted, resource=resource, issuer=self.issuer)
        access = self._next("at")
        self.access[access] = grant
        answer: dict[str, Any] = {"access_token": access, "token_type": "Bearer"}
        if self.expires_in is not None:
            answer["expires_in"] = self.expires_in
        if granted:
            answer["scope"] = " ".join(granted)
        if self.refresh_tokens:
            refresh = self._next("rt")
            self.refresh[refresh] = grant
            answer["refresh_token"] = refresh
        await respond(send, 200, answer)


# ------------------------------------------------------------ protected server


async def ok_app(scope: Scope, receive: Receive, send: Send) -> None:
    """A stand-in for an MCP endpoint: answers every POST with a JSON-RPC result."""
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    body = await read_body(receive)
    ident = json.loads(body).get("id") if body else None
    await respond(send, 200, {"jsonrpc": "2.0", "id": ident, "result": {}})


@attrs.define(eq=False)
class ProtectedResource:
    """Bearer checks in front of ``app`` (at ``/mcp``), RFC 9728 metadata beside it."""

    app: Any
    authz: FakeAuthServer
    #: Where the metadata is served (None: nowhere).
    prm_path: str | None = "/.well-known/oauth-protected-resource/mcp"
    #: Name the metadata URL in the challenge.
    prm_in_header: bool = True
    #: The challenge's scope (None: no scope parameter).
    challenge_scope: str | None = None
    scopes_supported: list[str] | None = None
    #: The resource the metadata names (None: this server's /mcp).
    resource: str | None = None
    #: tools/call of these tools needs that scope (403 insufficient_scope otherwise).
    tool_scopes: dict[str, str] = attrs.field(factory=dict)
    base: str = ""
    requests: list[tuple[str, str, str | None]] = attrs.field(factory=list)

    @property
    def url(self) -> str:
        return self.base + "/mcp"

    def prm(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "resource": self.resource or self.url,
            "authorization_servers": [self.authz.issuer],
        }
        if self.scopes_supported is not None:
            doc["scopes_supported"] = self.scopes_supported
        return doc

    def challenge(self, *, error: str, scope: str | None) -> str:
        parts = [f'error="{error}"']
        if scope:
            parts.append(f'scope="{scope}"')
        if self.prm_in_header and self.prm_path:
            parts.append(f'resource_metadata="{self.base}{self.prm_path}"')
        return "Bearer " + ", ".join(parts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        auth = header(scope, "authorization")
        self.requests.append((scope["method"], path, auth))
        if self.prm_path is not None and path == self.prm_path and scope["method"] == "GET":
            await respond(send, 200, self.prm())
            return
        if path != "/mcp":
            await respond(send, 404, {"error": "not_found"})
            return
        token = auth[7:] if auth and auth.startswith("Bearer ") else None
        grant = self.authz.grant_for(token)
        if grant is None or grant.issuer != self.authz.issuer:
            challenge = self.challenge(error="invalid_token", scope=self.challenge_scope)
            await respond(send, 401, {"error": "invalid_token"}, [("www-authenticate", challenge)])
            return
        body = await read_body(receive)
        needed = None
        if body and self.tool_scopes:
            try:
                message = json.loads(body)
            except ValueError:
                message = {}
            if isinstance(message, dict) and message.get("method") == "tools/call":
                needed = self.tool_scopes.get((message.get("params") or {}).get("name"))
        if needed is not None and needed not in grant.scopes:
            await respond(
                send,
                403,
                {"error": "insufficient_scope"},
                [("www-authenticate", self.challenge(error="insufficient_scope", scope=needed))],
            )
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


@attrs.define
class Router:
    """Two apps on one origin: paths starting with one of ``prefixes`` go to ``first``."""

    first: Any
    second: Any
    prefixes: tuple[str, ...]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.second(scope, receive, send)
            return
        app = self.first if scope["path"].startswith(self.prefixes) else self.second
        await app(scope, receive, send)


@asynccontextmanager
async def world(
    authz: FakeAuthServer | None = None, app: Any = ok_app, **resource_options: Any
) -> AsyncIterator[tuple[FakeAuthServer, ProtectedResource]]:
    """An authorization server and a protected resource, each on its own port."""
    authz = authz or FakeAuthServer()
    resource = ProtectedResource(app, authz, **resource_options)
    async with serve(authz) as as_base, serve(resource) as rs_base:
        authz.base = as_base
        resource.base = rs_base
        yield authz, resource


def make_auth(resource: ProtectedResource, **options: Any) -> OAuthClientAuth:
    options.setdefault("client_metadata", ClientMetadata(client_name="auth-tests"))
    return OAuthClientAuth(resource.url, **options)


async def call(
    http: httpx.AsyncClient, url: str, method: str = "tools/list", **params: Any
) -> httpx.Response:
    return await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


# ======================================================================= units


def test_challenges_parse_quoted_params_several_schemes_and_token68() -> None:
    values = [
        (
            'Basic realm="x", Bearer error="insufficient_scope", scope="a b", '
            'resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", '
            'error_description="say \\"hi\\""'
        ),
        "Negotiate dGVzdA==, DPoP algs=ES256",
    ]
    challenges = parse_challenges(values)
    assert [c.scheme for c in challenges] == ["basic", "bearer", "negotiate", "dpop"]
    bearer = bearer_challenge(values)
    assert bearer.error == "insufficient_scope" and bearer.scopes == ["a", "b"]
    assert bearer.resource_metadata == "http://h/.well-known/oauth-protected-resource/mcp"
    assert bearer.params["error_description"] == 'say "hi"'
    assert challenges[3].params == {"algs": "ES256"}
    assert bearer_challenge(["BEARER Scope=mcp:x"]).scope == "mcp:x"
    assert bearer_challenge(["Basic"]).params == {} and bearer_challenge([]).scheme == "bearer"
    assert bearer_challenge(['Bearer scope="unterminated']).scope == "unterminated"


def test_well_known_urls_in_discovery_order() -> None:
    assert prm_urls("https://h:8443/a/mcp/") == [
        "https://h:8443/.well-known/oauth-protected-resource/a/mcp",
        "https://h:8443/.well-known/oauth-protected-resource",
    ]
    assert prm_urls("https://h") == ["https://h/.well-known/oauth-protected-resource"]
    assert as_metadata_urls("https://as/tenant1") == [
        "https://as/.well-known/oauth-authorization-server/tenant1",
        "https://as/.well-known/openid-configuration/tenant1",
        "https://as/tenant1/.well-known/openid-configuration",
    ]
    assert as_metadata_urls("https://as/") == [
        "https://as/.well-known/oauth-authorization-server",
        "https://as/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize(
    ("resource", "matches"),
    [
        ("https://h/mcp", True),
        ("https://h", True),
        ("https://h/", True),
        ("HTTPS://H:443/mcp/", True),
        ("https://h/m", False),
        ("https://h/mcp/more", False),
        ("http://h/mcp", False),
        ("https://h:8443/mcp", False),
        ("https://evil.example.com/mcp", False),
        ("https://h/mcp#frag", False),
        ("not a url", False),
    ],
)
def test_resource_must_be_the_server_or_a_parent_of_it(resource: str, matches: bool) -> None:
    assert resource_matches(resource, "https://h/mcp") is matches


def test_secrets_stay_out_of_reprs() -> None:
    token = OAuthToken(access_token="AT-SECRET", refresh_token="RT-SECRET", scope="a")
    client = ClientInformation(client_id="c", client_secret="CS-SECRET")
    request = AuthorizationRequest(
        url="https://as/authorize?state=STATE-SECRET",
        redirect_uri="http://localhost/cb",
        issuer="https://as",
        scope=None,
        resource="https://h/mcp",
    )
    text = f"{token!r} {token} {client!r} {[client]} {request!r}"
    for secret in ("AT-SECRET", "RT-SECRET", "CS-SECRET", "STATE-SECRET"):
        assert secret not in text
    assert "'c'" in text and "<redacted>" in text


def test_token_expiry_keeps_a_margin_of_at_most_half_the_lifetime() -> None:
    token = OAuthToken(access_token="x", issued_at=1000.0, expires_at=1100.0)
    assert not token.expired(30, now=1060.0) and token.expired(30, now=1070.0)
    short = OAuthToken(access_token="x", issued_at=1000.0, expires_at=1010.0)
    assert not short.expired(30, now=1004.0) and short.expired(30, now=1005.0)
    assert not OAuthToken(access_token="x").expired(30)


def test_settings_and_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="request_timeout"):
        OAuthClientSettings(request_timeout=0)
    assert OAuthClientSettings(max_step_ups=0).max_step_ups == 0
    with pytest.raises(ValueError, match="client_metadata_url"):
        OAuthClientAuth("https://h/mcp", client_metadata_url="http://client.example/metadata.json")
    with pytest.raises(ValueError, match="client_metadata_url"):
        OAuthClientAuth("https://h/mcp", client_metadata_url="https://client.example/")
    assert isinstance(InMemoryTokenStorage(), TokenStorage)


def test_errors_are_httpx_errors() -> None:
    for error in (
        DiscoveryError,
        ResourceMismatchError,
        IssuerMismatchError,
        UnsupportedServerError,
        AuthorizationResponseError,
        TokenRequestError,
    ):
        assert issubclass(error, OAuthError) and issubclass(error, httpx.HTTPError)


async def test_sync_clients_are_refused() -> None:
    auth = OAuthClientAuth("http://127.0.0.1:9/mcp")
    with httpx.Client(auth=auth) as http, pytest.raises(RuntimeError, match="AsyncClient"):
        http.post("http://127.0.0.1:9/mcp", json={})


# ================================================================ the full flow


async def test_authorization_code_flow_end_to_end_over_a_session() -> None:
    """A ClientSession over Streamable HTTP: the first 401 runs discovery,
    registration, PKCE authorization and the token request; then everything
    carries the token and no second authorization happens."""
    server = MCPServer("protected")

    @server.tool
    def echo(text: str) -> str:
        return text

    app = StreamableHttpApp(server, settings=HttpServerSettings())
    with trio.fail_after(TIMEOUT):
        async with world(app=app, challenge_scope="mcp:basic") as (authz, resource):
            auth = make_auth(resource)
            async with httpx.AsyncClient(auth=auth) as http, trio.open_nursery() as nursery:
                stream = await nursery.start(StreamableHttpTransport(resource.url, http_client=http).run)
                async with open_session(stream) as session:
                    tools = await session.list_all_tools()
                    assert [t.name for t in tools] == ["echo"]
                    result = await session.call_tool("echo", {"text": "authorized"})
                    assert result.content[0].text == "authorized"  # type: ignore[union-attr]
                nursery.cancel_scope.cancel()
    # One registration, one authorization, one token request.
    assert len(authz.registrations) == 1 and len(authz.authorizations) == 1 and len(authz.token_requests) == 1
    registration = authz.registrations[0]
    assert registration["client_name"] == "auth-tests"
    assert registration["redirect_uris"] == ["http://localhost/callback"]
    assert registration["grant_types"] == ["authorization_code", "refresh_token"]
    assert registration["response_types"] == ["code"]
    assert registration["application_type"] == "native"
    assert registration["token_endpoint_auth_method"] == "client_secret_basic"
    query = authz.authorizations[0]
    assert query["response_type"] == "code" and query["code_challenge_method"] == "S256"
    assert len(query["code_challenge"]) == 43 and len(query["state"]) >= 32
    assert query["resource"] == resource.url and query["scope"] == "mcp:basic"
    assert query["redirect_uri"] == "http://localhost/callback"
    token_request = authz.token_requests[0]
    assert "problems" not in token_request  # PKCE, redirect_uri, resource and client all checked
    assert token_request["auth_method"] == "client_secret_basic"
    assert token_request["form"]["resource"] == resource.url
    assert auth.tokens is not None and auth.tokens.issuer == authz.issuer and auth.tokens.scope == "mcp:basic"
    # Every MCP request after the first carried the token.
    mcp = [r for r in resource.requests if r[1] == "/mcp"]
    assert mcp[0][2] is None and all(r[2] is not None for r in mcp[1:])


@pytest.mark.parametrize(
    ("variant", "resource_options", "authz_options", "expected_paths"),
    [
        ("prm in header", {"prm_path": "/custom/prm.json"}, {}, ["/custom/prm.json"]),
        ("prm path-based", {"prm_in_header": False}, {}, ["/.well-known/oauth-protected-resource/mcp"]),
        (
            "prm at root",
            {"prm_in_header": False, "prm_path": "/.well-known/oauth-protected-resource"},
            {},
            ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"],
        ),
        ("openid at root", {}, {"openid": True}, None),
        ("issuer path, RFC 8414 inserted", {}, {"prefix": "/tenant1"}, None),
        ("issuer path, OpenID inserted", {}, {"prefix": "/tenant1", "openid": True}, None),
        ("issuer path, OpenID appended", {}, {"prefix": "/tenant1", "openid_appended": True}, None),
    ],
)
async def test_discovery_variants(
    variant: str,
    resource_options: dict[str, Any],
    authz_options: dict[str, Any],
    expected_paths: list[str] | None,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(**authz_options), **resource_options) as (authz, resource):
            async with httpx.AsyncClient(auth=make_auth(resource)) as http:
                assert (await call(http, resource.url)).status_code == 200
    prm_requests = [path for method, path, _ in resource.requests if path != "/mcp"]
    if expected_paths is not None:
        assert prm_requests == expected_paths
    metadata = [path for method, path, _ in authz.requests if ".well-known" in path]
    expected = [urlsplit(u).path for u in as_metadata_urls(authz.issuer)]
    # Tried in the MCP order, up to the one that exists; never the root when the issuer has a path.
    assert metadata == expected[: expected.index(authz.metadata_path()) + 1]
    assert len(authz.authorizations) == 1 and authz.authorizations[0]["resource"] == resource.url


async def test_resource_parameter_is_the_prm_resource_verbatim() -> None:
    """A pathless resource identifier is sent as published (no "/" appended)."""
    with trio.fail_after(TIMEOUT):
        options = {"prm_path": "/.well-known/oauth-protected-resource", "prm_in_header": False}
        async with world(**options) as (authz, resource):
            resource.resource = resource.base
            async with httpx.AsyncClient(auth=make_auth(resource)) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert authz.authorizations[0]["resource"] == resource.base
    assert authz.token_requests[0]["form"]["resource"] == resource.base


# ================================================================== refusals


async def refused(resource: ProtectedResource, error: type[OAuthError], **options: Any) -> OAuthError:
    auth = make_auth(resource, **options)
    async with httpx.AsyncClient(auth=auth) as http:
        with pytest.raises(error) as caught:
            await call(http, resource.url)
    assert auth.last_error is caught.value
    assert caught.value.request.url == resource.url
    return caught.value


async def test_a_resource_mismatch_stops_before_the_authorization_server() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(resource="https://evil.example.com/mcp") as (authz, resource):
            error = await refused(resource, ResourceMismatchError)
    assert isinstance(error, ResourceMismatchError) and error.resource == "https://evil.example.com/mcp"
    assert authz.requests == []


async def test_metadata_naming_another_issuer_is_not_used() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(issuer_override="https://attacker.example.com")) as (authz, resource):
            error = await refused(resource, IssuerMismatchError)
    assert isinstance(error, IssuerMismatchError) and error.received == "https://attacker.example.com"
    assert [path for _, path, _ in authz.requests] == ["/.well-known/oauth-authorization-server"]


@pytest.mark.parametrize("methods", [None, ["plain"]])
async def test_no_pkce_s256_no_authorization(methods: list[str] | None) -> None:
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(pkce_methods=methods)) as (authz, resource):
            await refused(resource, UnsupportedServerError)
    assert authz.registrations == [] and authz.authorizations == []


@pytest.mark.parametrize(
    ("iss_supported", "iss_mode", "accepted"),
    [
        (True, "correct", True),
        (None, "omit", True),
        (False, "omit", True),
        (True, "omit", False),
        (True, "wrong", False),
        (None, "wrong", False),
        (True, "normalized", False),
    ],
)
async def test_iss_of_the_authorization_response(
    iss_supported: bool | None, iss_mode: str, accepted: bool
) -> None:
    authz = FakeAuthServer(iss_supported=iss_supported, iss_mode=iss_mode)
    with trio.fail_after(TIMEOUT):
        async with world(authz) as (authz, resource):
            if accepted:
                async with httpx.AsyncClient(auth=make_auth(resource)) as http:
                    assert (await call(http, resource.url)).status_code == 200
            else:
                await refused(resource, AuthorizationResponseError)
    assert len(authz.authorizations) == 1
    assert len(authz.token_requests) == (1 if accepted else 0)


@pytest.mark.parametrize(
    ("authz_options", "match"),
    [
        ({"bad_state": True}, "state does not match"),
        ({"deny": "access_denied"}, "authorization refused: access_denied: the user said no"),
        ({"no_redirect": True}, "answered HTTP 200 instead of redirecting"),
    ],
)
async def test_bad_authorization_responses(authz_options: dict[str, Any], match: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(**authz_options)) as (authz, resource):
            error = await refused(resource, AuthorizationResponseError)
    assert match in str(error)
    assert authz.token_requests == []
    if "deny" in authz_options:
        assert isinstance(error, AuthorizationResponseError) and error.error == "access_denied"


async def test_a_token_endpoint_error_is_typed() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(token_error="invalid_grant")) as (_, resource):
            error = await refused(resource, TokenRequestError)
    assert isinstance(error, TokenRequestError)
    assert (error.error, error.status_code) == ("invalid_grant", 400)
    assert "invalid_grant: no tokens today" in str(error)


async def test_no_client_identity_possible() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(registration=False)) as (authz, resource):
            error = await refused(resource, UnsupportedServerError)
    assert "no pre-registered client" in str(error) and authz.authorizations == []


async def test_missing_metadata_is_a_discovery_error() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(serve_metadata=False)) as (_, resource):
            error = await refused(resource, DiscoveryError)
    assert "no usable authorization server metadata" in str(error) and "HTTP 404" in str(error)


async def test_a_failing_handler_becomes_an_authorization_error() -> None:
    class Broken:
        redirect_uri = "http://localhost/callback"

        async def authorize(self, request: AuthorizationRequest) -> str:
            raise RuntimeError("no browser here")

    with trio.fail_after(TIMEOUT):
        async with world() as (_, resource):
            error = await refused(resource, AuthorizationResponseError, authorization_handler=Broken())
    assert "RuntimeError: no browser here" in str(error)


async def test_every_oauth_request_is_bounded() -> None:
    settings = OAuthClientSettings(request_timeout=0.3)
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(hang_token=True)) as (_, resource):
            started = trio.current_time()
            error = await refused(resource, TokenRequestError, settings=settings)
            assert trio.current_time() - started < 3
    assert "no answer within 0.3s" in str(error)


# ========================================================== client identities


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "none"])
async def test_token_endpoint_authentication_methods(method: str) -> None:
    authz = FakeAuthServer(auth_methods=[method], registered_method=method)
    with trio.fail_after(TIMEOUT):
        async with world(authz) as (authz, resource):
            async with httpx.AsyncClient(auth=make_auth(resource)) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert authz.registrations[0]["token_endpoint_auth_method"] == method
    request = authz.token_requests[0]
    assert request["auth_method"] == method and request["client_id"] is not None
    if method == "client_secret_basic":
        assert "client_id" not in request["form"] and "client_secret" not in request["form"]


async def test_pre_registered_client_wins_and_uses_basic() -> None:
    authz = FakeAuthServer(auth_methods=["client_secret_basic"], registration=False)
    with trio.fail_after(TIMEOUT):
        async with world(authz) as (authz, resource):
            authz.clients["pre-registered"] = {"client_secret": "pre-secret"}
            client = ClientInformation(client_id="pre-registered", client_secret="pre-secret")
            clients = {authz.issuer: client}
            async with httpx.AsyncClient(auth=make_auth(resource, clients=clients)) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert authz.registrations == []
    assert authz.authorizations[0]["client_id"] == "pre-registered"
    assert authz.token_requests[0]["auth_method"] == "client_secret_basic"
    assert authz.token_requests[0]["client_id"] == "pre-registered"


async def test_client_id_metadata_document_instead_of_registration() -> None:
    url = "https://client.example/oauth/metadata.json"
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(cimd=True)) as (authz, resource):
            async with httpx.AsyncClient(auth=make_auth(resource, client_metadata_url=url)) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert authz.registrations == []
    assert authz.authorizations[0]["client_id"] == url
    token_request = authz.token_requests[0]
    assert token_request["form"]["client_id"] == url and token_request["auth_method"] == "none"


async def test_cimd_unsupported_falls_back_to_registration() -> None:
    url = "https://client.example/oauth/metadata.json"
    with trio.fail_after(TIMEOUT):
        async with world() as (authz, resource):
            async with httpx.AsyncClient(auth=make_auth(resource, client_metadata_url=url)) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert len(authz.registrations) == 1 and authz.authorizations[0]["client_id"] != url


# ====================================================================== scopes


@pytest.mark.parametrize(
    ("resource_options", "authz_options", "auth_options", "expected"),
    [
        ({"challenge_scope": "mcp:basic", "scopes_supported": ["mcp:a", "mcp:b"]}, {}, {}, "mcp:basic"),
        ({"scopes_supported": ["mcp:a", "mcp:b"]}, {}, {}, "mcp:a mcp:b"),
        ({}, {}, {}, None),
        (
            {"challenge_scope": "mcp:basic"},
            {"scopes_supported": ["mcp:basic", "offline_access"]},
            {},
            "mcp:basic offline_access",
        ),
        (
            {"challenge_scope": "mcp:basic"},
            {"scopes_supported": ["mcp:basic", "offline_access"]},
            {"request_offline_access": False},
            "mcp:basic",
        ),
        ({}, {"scopes_supported": ["offline_access"]}, {}, None),
        ({"challenge_scope": "mcp:basic"}, {}, {"scopes": ["x", "y"]}, "x y"),
    ],
)
async def test_scope_selection(
    resource_options: dict[str, Any],
    authz_options: dict[str, Any],
    auth_options: dict[str, Any],
    expected: str | None,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(**authz_options), **resource_options) as (authz, resource):
            async with httpx.AsyncClient(auth=make_auth(resource, **auth_options)) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert authz.authorizations[0].get("scope") == expected


async def test_step_up_on_insufficient_scope_asks_for_the_union() -> None:
    with trio.fail_after(TIMEOUT):
        options: dict[str, Any] = {"challenge_scope": "mcp:basic", "tool_scopes": {"admin": "mcp:admin"}}
        async with world(**options) as (authz, resource):
            auth = make_auth(resource)
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
                response = await call(http, resource.url, "tools/call", name="admin")
                assert response.status_code == 200
                # The new token covers both: no further authorization.
                assert (await call(http, resource.url, "tools/call", name="admin")).status_code == 200
                assert (await call(http, resource.url)).status_code == 200
    assert [a.get("scope") for a in authz.authorizations] == ["mcp:basic", "mcp:basic mcp:admin"]
    assert auth.tokens is not None and auth.tokens.scope == "mcp:basic mcp:admin"


async def test_a_403_for_a_scope_the_token_has_is_left_alone() -> None:
    """The server refuses although the token has the scope: another authorization cannot help."""
    with trio.fail_after(TIMEOUT):
        options: dict[str, Any] = {"challenge_scope": "mcp:admin", "tool_scopes": {"admin": "mcp:admin"}}
        async with world(**options) as (authz, resource):
            async with httpx.AsyncClient(auth=make_auth(resource)) as http:
                assert (await call(http, resource.url)).status_code == 200
                authz.access[next(iter(authz.access))].scopes.clear()  # the server forgets the grant
                response = await call(http, resource.url, "tools/call", name="admin")
    assert response.status_code == 403
    assert len(authz.authorizations) == 1


async def test_step_up_is_bounded_when_the_server_never_grants() -> None:
    authz = FakeAuthServer(grant_only=["mcp:basic"])
    settings = OAuthClientSettings(max_step_ups=2)
    with trio.fail_after(TIMEOUT):
        options: dict[str, Any] = {"challenge_scope": "mcp:basic", "tool_scopes": {"admin": "mcp:admin"}}
        async with world(authz, **options) as (_, resource):
            async with httpx.AsyncClient(auth=make_auth(resource, settings=settings)) as http:
                response = await call(http, resource.url, "tools/call", name="admin")
    assert response.status_code == 403
    assert len(authz.authorizations) == 3  # the first one, then two step-ups


# ===================================================================== tokens


async def test_an_expiring_token_is_refreshed_before_use() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(expires_in=0), challenge_scope="mcp:basic") as (authz, resource):
            auth = make_auth(resource)
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
                first = auth.tokens
                assert (await call(http, resource.url)).status_code == 200
    assert len(authz.authorizations) == 1
    grants = [r["form"]["grant_type"] for r in authz.token_requests]
    assert grants == ["authorization_code", "refresh_token"]
    refresh = authz.token_requests[1]["form"]
    assert first is not None and refresh["refresh_token"] == first.refresh_token
    assert refresh["resource"] == resource.url
    assert auth.tokens is not None and auth.tokens.access_token != first.access_token
    assert auth.tokens.scope == "mcp:basic"


async def test_a_rejected_token_is_refreshed_on_401() -> None:
    with trio.fail_after(TIMEOUT):
        async with world() as (authz, resource), httpx.AsyncClient(auth=make_auth(resource)) as http:
            assert (await call(http, resource.url)).status_code == 200
            authz.revoke_all()
            assert (await call(http, resource.url)).status_code == 200
    assert len(authz.authorizations) == 1
    assert [r["form"]["grant_type"] for r in authz.token_requests] == ["authorization_code", "refresh_token"]


async def test_a_refused_refresh_falls_back_to_authorization() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(refresh_error="invalid_grant")) as (authz, resource):
            async with httpx.AsyncClient(auth=make_auth(resource)) as http:
                assert (await call(http, resource.url)).status_code == 200
                authz.revoke_all()
                assert (await call(http, resource.url)).status_code == 200
    assert len(authz.authorizations) == 2
    grants = [r["form"]["grant_type"] for r in authz.token_requests]
    assert grants == ["authorization_code", "refresh_token", "authorization_code"]


async def test_a_new_authorization_server_gets_a_new_registration() -> None:
    """When the PRM names another issuer, nothing of the first one is reused."""
    first, second = FakeAuthServer(), FakeAuthServer()
    with trio.fail_after(TIMEOUT):
        async with world(first) as (_, resource), serve(second) as second_base:
            second.base = second_base
            async with httpx.AsyncClient(auth=make_auth(resource)) as http:
                assert (await call(http, resource.url)).status_code == 200
                resource.authz = second  # migration: old tokens now fail, the PRM names the new issuer
                assert (await call(http, resource.url)).status_code == 200
    old_client = first.authorizations[0]["client_id"]
    assert len(second.registrations) == 1
    assert second.authorizations[0]["client_id"] != old_client
    for request in second.token_requests:
        assert request["client_id"] != old_client and "refresh_token" not in request["form"]


async def test_concurrent_requests_share_one_authorization() -> None:
    with trio.fail_after(TIMEOUT):
        async with world() as (authz, resource):
            statuses: list[int] = []
            async with httpx.AsyncClient(auth=make_auth(resource)) as http, trio.open_nursery() as nursery:
                for _ in range(10):

                    async def one() -> None:
                        statuses.append((await call(http, resource.url)).status_code)

                    nursery.start_soon(one)
    assert statuses == [200] * 10
    assert len(authz.registrations) == 1 and len(authz.authorizations) == 1


async def test_tokens_and_registrations_live_in_the_storage() -> None:
    storage = InMemoryTokenStorage()
    with trio.fail_after(TIMEOUT):
        async with world() as (authz, resource):
            async with httpx.AsyncClient(auth=make_auth(resource, storage=storage)) as http:
                assert (await call(http, resource.url)).status_code == 200
            stored = await storage.load_tokens(resource.url)
            assert stored is not None and stored.resource == resource.url
            client = await storage.load_client(authz.issuer)
            assert client is not None and client.client_id == authz.authorizations[0]["client_id"]
            # Another process (auth object) with the same storage: no new authorization.
            again = make_auth(resource, storage=storage)
            async with httpx.AsyncClient(auth=again) as http:
                assert (await call(http, resource.url)).status_code == 200
                # Logged out: the next request authorizes again, with the stored registration.
                await again.logout()
                assert await storage.load_tokens(resource.url) is None
                assert (await call(http, resource.url)).status_code == 200
    assert len(authz.authorizations) == 2 and len(authz.registrations) == 1


async def test_a_stored_expired_token_is_refreshed_after_discovery() -> None:
    """A new process with an expired token and its refresh token in the storage:
    the 401 runs discovery, then the refresh (no new authorization)."""
    storage = InMemoryTokenStorage()
    with trio.fail_after(TIMEOUT):
        async with world(FakeAuthServer(expires_in=0)) as (authz, resource):
            async with httpx.AsyncClient(auth=make_auth(resource, storage=storage)) as http:
                assert (await call(http, resource.url)).status_code == 200
            authz.revoke_all()
            async with httpx.AsyncClient(auth=make_auth(resource, storage=storage)) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert len(authz.authorizations) == 1 and len(authz.registrations) == 1
    assert [r["form"]["grant_type"] for r in authz.token_requests] == ["authorization_code", "refresh_token"]


async def test_login_ahead_of_the_first_request() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(prm_in_header=False, scopes_supported=["mcp:a"]) as (authz, resource):
            auth = make_auth(resource)
            tokens = await auth.login()
            assert tokens.scope == "mcp:a" and tokens.resource == resource.url
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert all(auth_header is not None for _, path, auth_header in resource.requests if path == "/mcp")
    assert len(authz.authorizations) == 1


async def test_the_token_goes_to_the_mcp_server_only() -> None:
    with trio.fail_after(TIMEOUT):
        async with world() as (authz, resource), httpx.AsyncClient(auth=make_auth(resource)) as http:
            assert (await call(http, resource.url)).status_code == 200
            await http.get(authz.issuer + "/.well-known/oauth-authorization-server")
    gets = [headers for method, _, headers in authz.requests if method == "GET"]
    # the metadata, the authorization request, and ours
    assert len(gets) == 3 and all("authorization" not in headers for headers in gets)


# ===================================================== 2025-03-26 servers (no PRM)


@pytest.mark.parametrize("metadata", [True, False])
async def test_without_protected_resource_metadata_the_origin_is_the_authorization_server(
    metadata: bool,
) -> None:
    authz = FakeAuthServer(serve_metadata=metadata)
    resource = ProtectedResource(ok_app, authz, prm_path=None)
    paths = ("/.well-known/oauth-authorization-server", "/authorize", "/token", "/register")
    app = Router(authz, resource, paths)
    with trio.fail_after(TIMEOUT):
        async with serve(app) as base:
            authz.base = resource.base = base
            async with httpx.AsyncClient(auth=make_auth(resource)) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert len(authz.authorizations) == 1 and authz.authorizations[0]["resource"] == resource.url


# ================================================================== no leaks


async def test_no_secret_reaches_the_logs_or_the_errors(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_mcp")
    messages: list[str] = []
    with trio.fail_after(TIMEOUT):
        async with world(
            FakeAuthServer(expires_in=0), challenge_scope="mcp:basic", tool_scopes={"admin": "mcp:admin"}
        ) as (authz, resource):
            auth = make_auth(resource)
            async with httpx.AsyncClient(auth=auth) as http:
                await call(http, resource.url)
                await call(http, resource.url)  # refresh
                await call(http, resource.url, "tools/call", name="admin")  # step-up
                authz.token_error = "invalid_request"
                authz.revoke_all()
                with pytest.raises(OAuthError) as caught:
                    await call(http, resource.url)
                messages.append(str(caught.value))
    text = caplog.text + "\n".join(messages) + repr(auth.tokens)
    assert "authorizing at" in caplog.text and "authorization failed" in caplog.text  # the logs were captured
    leaked = [s for s in authz.secrets if s in text and not s.startswith("client-")]
    assert leaked == []
    states = [a["state"] for a in authz.authorizations] + [a["code_challenge"] for a in authz.authorizations]
    assert not any(s in text for s in states)


async def test_headless_handler_follows_intermediate_redirects() -> None:
    """A login hop before the redirect back is followed; the callback itself is never requested."""
    hops: list[str] = []

    async def login_hop(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        hops.append(scope["path"])
        target = parse_qs(scope["query_string"].decode())["next"][0]
        await respond(send, 302, b"", [("location", target)])

    with trio.fail_after(TIMEOUT):
        async with serve(login_hop) as base:
            handler = FollowRedirectHandler("http://127.0.0.1:9/callback")
            callback = "http://127.0.0.1:9/callback?code=abc&state=s"
            url = f"{base}/login?{urlencode({'next': callback})}"
            request = AuthorizationRequest(
                url=url,
                redirect_uri=handler.redirect_uri,
                issuer=base,
                scope=None,
                resource="http://127.0.0.1:9/mcp",
            )
            assert await handler.authorize(request) == callback
    assert hops == ["/login"]


async def test_transport_failure_names_the_oauth_error() -> None:
    """Through the Streamable HTTP transport an OAuth failure fails the connection, with its reason."""
    with trio.fail_after(TIMEOUT):
        async with world(resource="https://evil.example.com/mcp") as (_, resource):
            async with httpx.AsyncClient(auth=make_auth(resource)) as http:
                with pytest.raises(BaseException) as caught:  # the session's error, maybe in a group
                    async with trio.open_nursery() as nursery:
                        transport = StreamableHttpTransport(resource.url, http_client=http)
                        stream = await nursery.start(transport.run)
                        async with open_session(stream, era="modern"):
                            pass
    assert (
        "POST failed: ResourceMismatchError: the protected resource metadata is for "
        "'https://evil.example.com/mcp'" in _describe(caught.value)
    )


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, BaseExceptionGroup):
        text += "".join(" | " + _describe(e) for e in exc.exceptions)
    return text


async def test_a_slow_login_inside_the_first_request() -> None:
    """With the era pinned, the first request (where the login happens) is not
    bounded by the probe timeout: only the caller's cancel scope bounds it."""
    probe = 0.1

    class SlowUser(FollowRedirectHandler):
        async def authorize(self, request: AuthorizationRequest) -> str:
            await trio.sleep(probe * 5)
            return await super().authorize(request)

    server = MCPServer("protected")

    @server.tool
    def echo(text: str) -> str:
        return text

    app = StreamableHttpApp(server, settings=HttpServerSettings())
    with trio.fail_after(TIMEOUT):
        async with world(app=app) as (_, resource):
            async with httpx.AsyncClient(auth=make_auth(resource, authorization_handler=SlowUser())) as http:
                async with trio.open_nursery() as nursery:
                    stream = await nursery.start(StreamableHttpTransport(resource.url, http_client=http).run)
                    async with open_session(stream, era="modern", discover_timeout=probe) as session:
                        assert [t.name for t in await session.list_all_tools()] == ["echo"]
                    nursery.cancel_scope.cancel()
