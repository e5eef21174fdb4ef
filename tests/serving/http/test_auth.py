"""The Streamable HTTP server as an OAuth 2.1 resource server, against a
local authorization server (:class:`JwtAuthServer`: real RSA keys, a JWKS,
RFC 8414 metadata, a token endpoint, introspection), both on hypercorn at
127.0.0.1 port 0. Our own OAuth client drives the whole flow where a client
is needed; raw httpx where the exact status and challenge matter.

Every handler records its calls: a refused request must leave no record.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import jwt
import pytest
import trio
from tests.auth.test_oauth_client import Grant, serve

from trio_mcp.actors._client import open_session
from trio_mcp.auth import ClientCredentials, ClientMetadata, OAuthClientAuth
from trio_mcp.auth._discovery import bearer_challenge
from trio_mcp.auth.resource import IntrospectionVerifier, JwtVerifier, ResourceServer
from trio_mcp.protocol import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, InvalidParams
from trio_mcp.server import Context, MCPServer
from trio_mcp.serving.http import HttpServer
from trio_mcp.transports.http import StreamableHttpTransport

from .authserver import CLIENT_ID, SECRET, JwtAuthServer, new_key
from .test_server import ACCEPT_BOTH, TIMEOUT, Session, answer_of, init_message

MODERN = "2026-07-28"


def recording_app() -> MCPServer:
    """Tools, resources and prompts needing various scopes; each records its calls in ``app.calls``."""
    app = MCPServer("protected")
    calls: list[str] = []
    app.calls = calls  # type: ignore[attr-defined]

    @app.tool
    def echo(text: str) -> str:
        calls.append("echo")
        return text

    @app.tool(scopes=["mcp:admin"])
    def wipe() -> str:
        calls.append("wipe")
        return "wiped"

    @app.tool
    def whoami(ctx: Context) -> dict[str, Any]:
        calls.append("whoami")
        auth = ctx.auth
        assert auth is not None
        return {"subject": auth.subject, "client": auth.client_id, "scopes": sorted(auth.scopes)}

    @app.resource("memo://secret", scopes=["mcp:secrets"])
    def secret() -> str:
        calls.append("secret")
        return "the secret"

    @app.resource("notes://{name}", scopes=["mcp:notes"])
    def note(name: str) -> str:
        calls.append(f"note:{name}")
        return f"note {name}"

    @app.prompt(scopes=["mcp:secrets"])
    def confidential() -> str:
        calls.append("confidential")
        return "classified"

    return app


@asynccontextmanager
async def protected(
    app: Any = None,
    *,
    authz: JwtAuthServer | None = None,
    verifier: Callable[[JwtAuthServer], Any] | None = None,
    **options: Any,
) -> AsyncIterator[tuple[JwtAuthServer, HttpServer, str]]:
    """An authorization server and an HttpServer checking its tokens (``mcp``
    required; by default a :class:`JwtVerifier` using its JWKS)."""
    authz = authz or JwtAuthServer()
    app = app if app is not None else recording_app()
    with trio.fail_after(TIMEOUT):
        async with serve(authz) as base, trio.open_nursery() as nursery:
            authz.base = base
            options.setdefault("required_scopes", ["mcp"])
            if verifier is None:
                checker: Any = JwtVerifier(authz.issuer, jwks_url=authz.jwks_url)
            else:
                checker = verifier(authz)
            config = ResourceServer(verifier=checker, **options)
            server = HttpServer(app, auth=config)
            info = await nursery.start(server.run)
            try:
                yield authz, server, info.url
            finally:
                server.stop()


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def start_session(client: httpx.AsyncClient, url: str, token: str) -> Session:
    response = await client.post(
        url, content=json.dumps(init_message()), headers={**ACCEPT_BOTH, **bearer(token)}
    )
    assert response.status_code == 200, response.text
    session = Session(client, url, response.headers["mcp-session-id"], "2025-11-25")
    note = await session.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, **bearer(token))
    assert note.status_code == 202
    return session


def challenge_of(response: httpx.Response) -> Any:
    return bearer_challenge(response.headers.get_list("www-authenticate"))


def metadata_url(url: str) -> str:
    return url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource/mcp"


# =================================================================== metadata


async def test_metadata_and_health_are_public_and_name_servers_and_scopes() -> None:
    async with protected() as (authz, _, url), httpx.AsyncClient(timeout=TIMEOUT) as client:
        origin = url.removesuffix("/mcp")
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            response = await client.get(origin + path)
            assert response.status_code == 200
            assert response.json() == {
                "resource": url,
                "authorization_servers": [authz.issuer],
                "bearer_methods_supported": ["header"],
                "scopes_supported": ["mcp", "mcp:admin", "mcp:notes", "mcp:secrets"],
            }
        assert (await client.get(origin + "/healthz")).status_code == 200
        assert (await client.get(origin + "/readyz")).status_code == 200
        assert (await client.post(origin + "/.well-known/oauth-protected-resource")).status_code == 405


# ============================================================ 401 challenges


async def test_no_token_gets_401_naming_the_metadata_and_the_base_scope() -> None:
    async with protected() as (_, server, url), httpx.AsyncClient(timeout=TIMEOUT) as client:
        for headers in ({}, {"authorization": "Basic dXNlcjpwYXNz"}):
            response = await client.post(
                url, content=json.dumps(init_message()), headers={**ACCEPT_BOTH, **headers}
            )
            assert response.status_code == 401
            challenge = challenge_of(response)
            assert challenge.scheme == "bearer" and challenge.error is None
            assert challenge.resource_metadata == metadata_url(url)
            assert challenge.scope == "mcp"
        # GET and DELETE of the endpoint too; a CORS preflight needs no token.
        assert (await client.get(url, headers={"accept": "text/event-stream"})).status_code == 401
        assert (await client.delete(url, headers={"mcp-session-id": "x"})).status_code == 401
        preflight = await client.options(
            url, headers={"origin": "http://localhost:3000", "access-control-request-method": "POST"}
        )
        assert preflight.status_code == 204
        assert server.statistics().sessions_created == 0


BAD_TOKENS = [
    "expired",
    "wrong audience",
    "another resource",
    "wrong issuer",
    "bad signature",
    "alg none",
    "HS256 with the public key",
    "not yet valid",
    "unknown key id",
    "not a JWT",
]


def bad_token(kind: str, authz: JwtAuthServer, url: str) -> str:
    scopes = ["mcp", "mcp:admin"]
    if kind == "expired":
        return authz.mint(audience=url, scopes=scopes, lifetime=-120)  # beyond the 30 s leeway
    if kind == "wrong audience":
        return authz.mint(audience="https://elsewhere.example.com", scopes=scopes)
    if kind == "another resource":
        return authz.mint(audience=url.replace("/mcp", "/other-mcp"), scopes=scopes)
    if kind == "wrong issuer":
        return authz.mint(audience=url, scopes=scopes, issuer="https://evil.example.com")
    if kind == "bad signature":
        return authz.mint(audience=url, scopes=scopes, key=new_key("rsa-intruder"))
    if kind == "alg none":
        payload = jwt.decode(authz.mint(audience=url, scopes=scopes), options={"verify_signature": False})
        return jwt.encode(payload, None, algorithm="none", headers={"kid": authz.signing_kid})
    if kind == "HS256 with the public key":
        # The classic confusion: the RSA public key (PEM) used as an HMAC secret.
        from cryptography.hazmat.primitives import serialization

        pem = (
            authz.keys[authz.signing_kid]
            .public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        payload = jwt.decode(authz.mint(audience=url, scopes=scopes), options={"verify_signature": False})
        import hashlib
        import hmac

        header = {"alg": "HS256", "typ": "JWT", "kid": authz.signing_kid}
        b64 = jwt.utils.base64url_encode
        signing_input = b64(json.dumps(header).encode()) + b"." + b64(json.dumps(payload).encode())
        signature = b64(hmac.new(pem, signing_input, hashlib.sha256).digest())
        return (signing_input + b"." + signature).decode()
    if kind == "not yet valid":
        import time

        return authz.mint(audience=url, scopes=scopes, not_before=time.time() + 600)
    if kind == "unknown key id":
        return authz.mint(audience=url, scopes=scopes, kid="nobody", key=new_key("rsa-intruder"))
    assert kind == "not a JWT"
    return "not-a-jwt-at-all"


@pytest.mark.parametrize("kind", BAD_TOKENS)
async def test_a_bad_token_gets_401_invalid_token_and_runs_nothing(kind: str) -> None:
    app = recording_app()
    async with protected(app) as (authz, server, url), httpx.AsyncClient(timeout=TIMEOUT) as client:
        good = authz.mint(audience=url, scopes=["mcp", "mcp:admin"])
        session = await start_session(client, url, good)
        token = bad_token(kind, authz, url)
        attempts = [
            # a new session
            await client.post(
                url, content=json.dumps(init_message()), headers={**ACCEPT_BOTH, **bearer(token)}
            ),
            # a call in an existing session
            await session.post(
                session.request("tools/call", {"name": "wipe", "arguments": {}}), **bearer(token)
            ),
            # a stateless (2026-07-28) call
            await client.post(
                url,
                content=json.dumps(modern_call("echo", {"text": "x"})),
                headers={**ACCEPT_BOTH, **modern_headers("echo"), **bearer(token)},
            ),
        ]
        for response in attempts:
            assert response.status_code == 401, (kind, response.text)
            challenge = challenge_of(response)
            assert challenge.error == "invalid_token"
            assert challenge.resource_metadata == metadata_url(url)
            assert "error_description" in challenge.params
        assert app.calls == []  # type: ignore[attr-defined]
        assert server.statistics().sessions_created == 1
        # The good token still works.
        ok = await session.post(
            session.request("tools/call", {"name": "wipe", "arguments": {}}), **bearer(good)
        )
        assert answer_of(ok)["result"]["content"][0]["text"] == "wiped"
        assert app.calls == ["wipe"]  # type: ignore[attr-defined]


def modern_call(name: str, arguments: dict[str, Any], method: str = "tools/call") -> dict[str, Any]:
    params: dict[str, Any] = {"_meta": {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}}}
    if method == "tools/call":
        params.update(name=name, arguments=arguments)
    else:
        params.update(name=name)
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def modern_headers(name: str, method: str = "tools/call") -> dict[str, str]:
    return {"mcp-protocol-version": MODERN, "mcp-method": method, "mcp-name": name}


# ============================================================ 403 challenges


async def test_a_missing_scope_gets_403_insufficient_scope_and_runs_nothing() -> None:
    app = recording_app()
    async with protected(app) as (authz, _, url), httpx.AsyncClient(timeout=TIMEOUT) as client:
        token = authz.mint(audience=url, scopes=["mcp"])
        session = await start_session(client, url, token)
        needs = [
            ("tools/call", {"name": "wipe", "arguments": {}}, "mcp mcp:admin"),
            ("resources/read", {"uri": "memo://secret"}, "mcp mcp:secrets"),
            ("resources/subscribe", {"uri": "memo://secret"}, "mcp mcp:secrets"),
            ("resources/read", {"uri": "notes://todo"}, "mcp mcp:notes"),
            ("prompts/get", {"name": "confidential"}, "mcp mcp:secrets"),
        ]
        for method, params, scope in needs:
            response = await session.post(session.request(method, params), **bearer(token))
            assert response.status_code == 403, (method, response.text)
            challenge = challenge_of(response)
            assert challenge.error == "insufficient_scope" and challenge.scope == scope
            assert challenge.resource_metadata == metadata_url(url)
        # A batch (2025-03-26) holding one such call is refused whole.
        old = await start_session_version(client, url, token, "2025-03-26")
        batch = [
            old.request("tools/call", {"name": "echo", "arguments": {"text": "a"}}),
            old.request("tools/call", {"name": "wipe", "arguments": {}}),
        ]
        refused = await old.post(batch, **bearer(token))
        assert refused.status_code == 403 and challenge_of(refused).scope == "mcp mcp:admin"
        # Stateless (2026-07-28): the same answer.
        modern = await client.post(
            url,
            content=json.dumps(modern_call("wipe", {})),
            headers={**ACCEPT_BOTH, **modern_headers("wipe"), **bearer(token)},
        )
        assert modern.status_code == 403 and challenge_of(modern).scope == "mcp mcp:admin"
        assert app.calls == []  # type: ignore[attr-defined]
        # What needs no more than the base scope runs.
        ok = await session.post(
            session.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}), **bearer(token)
        )
        assert answer_of(ok)["result"]["content"][0]["text"] == "hi"
        # A token without the base scope cannot even start a session.
        bare = authz.mint(audience=url, scopes=["mcp:admin"])
        response = await client.post(
            url, content=json.dumps(init_message()), headers={**ACCEPT_BOTH, **bearer(bare)}
        )
        assert response.status_code == 403 and challenge_of(response).scope == "mcp"
        assert app.calls == ["echo"]  # type: ignore[attr-defined]


async def start_session_version(client: httpx.AsyncClient, url: str, token: str, version: str) -> Session:
    response = await client.post(
        url, content=json.dumps(init_message(version)), headers={**ACCEPT_BOTH, **bearer(token)}
    )
    assert response.status_code == 200, response.text
    session = Session(client, url, response.headers["mcp-session-id"], version)
    note = await session.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, **bearer(token))
    assert note.status_code == 202
    return session


async def test_the_principal_is_in_the_context_in_both_eras() -> None:
    async with protected() as (authz, _, url), httpx.AsyncClient(timeout=TIMEOUT) as client:
        token = authz.mint(audience=url, scopes=["mcp", "mcp:notes"], subject="carol", client_id="app-7")
        session = await start_session(client, url, token)
        expected = {"subject": "carol", "client": "app-7", "scopes": ["mcp", "mcp:notes"]}
        answer = await session.post(
            session.request("tools/call", {"name": "whoami", "arguments": {}}), **bearer(token)
        )
        assert answer_of(answer)["result"]["structuredContent"] == expected
        modern = await client.post(
            url,
            content=json.dumps(modern_call("whoami", {})),
            headers={**ACCEPT_BOTH, **modern_headers("whoami"), **bearer(token)},
        )
        assert modern.status_code == 200
        assert answer_of(modern)["result"]["structuredContent"] == expected


# ============================================================ session binding


async def test_a_session_refuses_another_principals_token() -> None:
    app = recording_app()
    async with protected(app) as (authz, _, url), httpx.AsyncClient(timeout=TIMEOUT) as client:
        alice = authz.mint(audience=url, scopes=["mcp"], subject="alice")
        bob = authz.mint(audience=url, scopes=["mcp", "mcp:admin"], subject="bob")
        session = await start_session(client, url, alice)
        call = session.request("tools/call", {"name": "echo", "arguments": {"text": "hijack"}})
        assert (await session.post(call, **bearer(bob))).status_code == 404
        stream = await client.get(
            url, headers={**session.headers(), **bearer(bob), "accept": "text/event-stream"}
        )
        assert stream.status_code == 404
        deleted = await client.delete(url, headers={**session.headers(), **bearer(bob)})
        assert deleted.status_code == 404
        # The same user through another client is another principal too.
        other_client = authz.mint(audience=url, scopes=["mcp"], subject="alice", client_id="other-app")
        assert (await session.post(call, **bearer(other_client))).status_code == 404
        assert app.calls == []  # type: ignore[attr-defined]
        # Alice's session is intact, and takes her new (stepped-up) token.
        stepped = authz.mint(audience=url, scopes=["mcp", "mcp:admin"], subject="alice")
        wiped = await session.post(
            session.request("tools/call", {"name": "wipe", "arguments": {}}), **bearer(stepped)
        )
        assert answer_of(wiped)["result"]["content"][0]["text"] == "wiped"
        assert app.calls == ["wipe"]  # type: ignore[attr-defined]


# ======================================================= with our own client


async def test_our_oauth_client_discovers_authorizes_calls_and_steps_up() -> None:
    """Discovery from the 401, registration, the authorization code flow with
    PKCE and ``resource``, a JWT issued for this server, the call; then a 403
    insufficient_scope and the client's step-up to the wider scope."""
    app = recording_app()
    async with protected(app) as (authz, _, url):
        auth = OAuthClientAuth(url, client_metadata=ClientMetadata(client_name="rs-tests"))
        async with httpx.AsyncClient(auth=auth, timeout=TIMEOUT) as http, trio.open_nursery() as nursery:
            stream = await nursery.start(StreamableHttpTransport(url, http_client=http).run)
            async with open_session(stream) as session:
                who = await session.call_tool("whoami", {})
                assert who.structured_content["subject"] == "alice"  # type: ignore[index]
                assert who.structured_content["scopes"] == ["mcp"]  # type: ignore[index]
                wiped = await session.call_tool("wipe", {})
                assert wiped.content[0].text == "wiped"  # type: ignore[union-attr]
                who = await session.call_tool("whoami", {})
                assert who.structured_content["scopes"] == ["mcp", "mcp:admin"]  # type: ignore[index]
            nursery.cancel_scope.cancel()
    assert app.calls == ["whoami", "wipe", "whoami"]  # type: ignore[attr-defined]
    # The first authorization asked for the base scope (from the challenge),
    # the second for the union; every token was issued for this resource.
    assert [a["scope"] for a in authz.authorizations] == ["mcp", "mcp mcp:admin"]
    assert all(r["form"]["resource"] == url for r in authz.token_requests)
    assert authz.jwks_fetches == 1


async def test_the_client_credentials_grant_end_to_end() -> None:
    app = recording_app()
    async with protected(app) as (authz, _, url):
        auth = OAuthClientAuth(
            url, client_credentials=ClientCredentials(client_id=CLIENT_ID, client_secret=SECRET)
        )
        async with httpx.AsyncClient(auth=auth, timeout=TIMEOUT) as http, trio.open_nursery() as nursery:
            stream = await nursery.start(StreamableHttpTransport(url, http_client=http).run)
            async with open_session(stream) as session:
                who = await session.call_tool("whoami", {})
                assert who.structured_content["client"] == CLIENT_ID  # type: ignore[index]
            nursery.cancel_scope.cancel()
    assert [r["form"]["grant_type"] for r in authz.token_requests] == ["client_credentials"]


# ============================================================ verifiers at work


async def test_introspection_checks_tokens_and_caches_the_answers() -> None:
    app = recording_app()

    def introspection(authz: JwtAuthServer) -> IntrospectionVerifier:
        return IntrospectionVerifier(
            authz.introspection_url,
            client_id="resource-server",
            client_secret="rs-secret",
            issuer=authz.issuer,
        )

    async with protected(app, verifier=introspection) as (authz, _, url):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            token = authz.mint(audience=url, scopes=["mcp"])
            authz.access[token] = Grant(
                client_id=CLIENT_ID, scopes=["mcp"], resource=url, issuer=authz.issuer
            )
            session = await start_session(client, url, token)
            for _ in range(3):
                call = session.request("tools/call", {"name": "whoami", "arguments": {}})
                answer = await session.post(call, **bearer(token))
                assert answer_of(answer)["result"]["structuredContent"]["subject"] == "alice"
            assert authz.introspections == [token]  # one introspection, then the cache
            unknown = authz.mint(audience=url, scopes=["mcp"])  # never issued: not active
            call = session.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
            refused = await session.post(call, **bearer(unknown))
            assert refused.status_code == 401 and challenge_of(refused).error == "invalid_token"
            assert authz.introspections == [token, unknown]
    assert app.calls == ["whoami"] * 3  # type: ignore[attr-defined]


def test_the_readme_example_builds_what_it_says() -> None:
    """The README's "Authorization" example, without its last line (which serves forever)."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = readme.split("\n## Authorization\n", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert code.rstrip().endswith("trio.run(main)")
    namespace: dict[str, Any] = {}
    exec(code.rstrip().removesuffix("trio.run(main)"), namespace)  # noqa: S102 - the README's own code
    app, auth = namespace["app"], namespace["auth"]
    assert app.scopes_for("tools/call", "add_note") == {"notes:write"}
    assert app.scopes_for("tools/call", "whoami") == frozenset()
    assert auth.metadata(app.declared_scopes())["scopes_supported"] == ["notes", "notes:write"]
    assert auth.metadata_url() == "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


async def test_an_app_made_per_session_is_asked_for_its_scopes() -> None:
    made: list[MCPServer] = []

    def factory() -> MCPServer:
        made.append(recording_app())
        return made[-1]

    async with protected(factory) as (authz, _, url), httpx.AsyncClient(timeout=TIMEOUT) as client:
        token = authz.mint(audience=url, scopes=["mcp"])
        session = await start_session(client, url, token)
        refused = await session.post(
            session.request("tools/call", {"name": "wipe", "arguments": {}}), **bearer(token)
        )
        assert refused.status_code == 403 and challenge_of(refused).scope == "mcp mcp:admin"
        modern = await client.post(
            url,
            content=json.dumps(modern_call("wipe", {})),
            headers={**ACCEPT_BOTH, **modern_headers("wipe"), **bearer(token)},
        )
        assert modern.status_code == 403 and challenge_of(modern).scope == "mcp mcp:admin"
        admin = authz.mint(audience=url, scopes=["mcp", "mcp:admin"])
        ok = await client.post(
            url,
            content=json.dumps(modern_call("wipe", {})),
            headers={**ACCEPT_BOTH, **modern_headers("wipe"), **bearer(admin)},
        )
        assert answer_of(ok)["result"]["content"][0]["text"] == "wiped"
    assert [app.calls for app in made] == [[], [], ["wipe"]]  # type: ignore[attr-defined]


async def test_a_verifier_that_cannot_check_gets_503_without_a_challenge() -> None:
    def unreachable(authz: JwtAuthServer) -> JwtVerifier:
        return JwtVerifier(authz.issuer, jwks_url=authz.base + "/no-such-jwks")

    app = recording_app()
    async with (
        protected(app, verifier=unreachable) as (authz, _, url),
        httpx.AsyncClient(timeout=TIMEOUT) as client,
    ):
        token = authz.mint(audience=url, scopes=["mcp"])
        response = await client.post(
            url, content=json.dumps(init_message()), headers={**ACCEPT_BOTH, **bearer(token)}
        )
        assert response.status_code == 503 and "www-authenticate" not in response.headers
    assert app.calls == []  # type: ignore[attr-defined]


def test_a_wildcard_bind_needs_the_public_resource_uri() -> None:
    verifier = JwtVerifier("https://as.example.com", jwks_url="https://as.example.com/jwks")
    with pytest.raises(ValueError, match="resource URI"):
        HttpServer(recording_app(), host="0.0.0.0", auth=ResourceServer(verifier=verifier))
    named = ResourceServer(verifier=verifier, resource="https://mcp.example.com/mcp")
    assert HttpServer(recording_app(), host="0.0.0.0", auth=named).asgi.auth is not None


def test_the_public_names_are_documented() -> None:
    from trio_mcp.auth import resource

    for name in resource.__all__:
        value = getattr(resource, name)
        if isinstance(value, type) or callable(value):
            assert value.__doc__, name


async def test_a_stateless_task_belongs_to_the_principal_that_created_it() -> None:
    """2026-07-28: no session, so a task belongs to the token's principal."""
    app = MCPServer("tasks", tasks=True)

    @app.tool(task_support="optional")
    async def slow() -> str:
        await trio.sleep_forever()
        return "never"  # pragma: no cover

    async with protected(app) as (authz, _, url):
        tokens = {name: authz.mint(audience=url, scopes=["mcp"], subject=name) for name in ("alice", "bob")}
        async with (
            httpx.AsyncClient(headers=bearer(tokens["alice"]), timeout=TIMEOUT) as alice_http,
            httpx.AsyncClient(headers=bearer(tokens["bob"]), timeout=TIMEOUT) as bob_http,
            trio.open_nursery() as nursery,
        ):
            alice_stream = await nursery.start(StreamableHttpTransport(url, http_client=alice_http).run)
            bob_stream = await nursery.start(StreamableHttpTransport(url, http_client=bob_http).run)
            async with (
                open_session(alice_stream, era="modern") as alice,
                open_session(bob_stream, era="modern") as bob,
            ):
                mine = await alice.tasks.call_tool("slow", {})
                for attempt in (bob.tasks.get, bob.tasks.cancel):
                    with pytest.raises(InvalidParams, match="Unknown task"):
                        await attempt(mine.task_id)
                assert (await alice.tasks.get(mine.task_id)).status == "working"
                await alice.tasks.cancel(mine.task_id)
            nursery.cancel_scope.cancel()


async def test_behind_a_proxy_the_metadata_is_also_at_the_public_path() -> None:
    public = "https://mcp.example.com/team/mcp"
    async with protected(resource=public) as (authz, _, url), httpx.AsyncClient(timeout=TIMEOUT) as client:
        origin = url.removesuffix("/mcp")
        for path in ("/team/mcp", "/mcp", ""):
            response = await client.get(f"{origin}/.well-known/oauth-protected-resource{path}")
            assert response.status_code == 200 and response.json()["resource"] == public
        refused = await client.post(url, content=json.dumps(init_message()), headers=ACCEPT_BOTH)
        assert challenge_of(refused).resource_metadata == (
            "https://mcp.example.com/.well-known/oauth-protected-resource/team/mcp"
        )
        # Tokens must name the public URI, not the address the server listens on.
        local = authz.mint(audience=url, scopes=["mcp"])
        wrong = await client.post(
            url, content=json.dumps(init_message()), headers={**ACCEPT_BOTH, **bearer(local)}
        )
        assert wrong.status_code == 401
        good = authz.mint(audience=public, scopes=["mcp"])
        ok = await client.post(
            url, content=json.dumps(init_message()), headers={**ACCEPT_BOTH, **bearer(good)}
        )
        assert ok.status_code == 200
