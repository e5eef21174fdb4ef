"""The server side of authorization (:mod:`trio_mcp.auth.resource`): the
verifiers, the JWKS cache, the introspection cache, and the challenges and
metadata of :class:`ResourceServer`.

The JWKS and introspection endpoints are those of the local authorization
server of the HTTP tests (real keys, hypercorn on 127.0.0.1 port 0). Time
runs on a MockClock at real speed, jumped ahead where a test needs an
interval to pass; every test is bounded by ``TIMEOUT``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import jwt
import pytest
import trio
import trio.testing
from cryptography.hazmat.primitives import serialization
from tests.auth.test_oauth_client import TIMEOUT, Grant, serve
from tests.serving.http.authserver import JwtAuthServer, new_key

from trio_mcp.auth.resource import (
    AccessToken,
    AuthFailure,
    IntrospectionVerifier,
    InvalidToken,
    JwksCache,
    JwtVerifier,
    ResourceServer,
    TokenVerifier,
    VerifierUnavailable,
    canonical_resource,
)
from trio_mcp.auth.resource._jwt import BoundedCache

RESOURCE = "https://mcp.example.com/mcp"


@pytest.fixture
def clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(rate=1.0)


@asynccontextmanager
async def running(*, bounded: bool = True) -> AsyncIterator[JwtAuthServer]:
    """The authorization server, on hypercorn; the whole test bounded by
    ``TIMEOUT`` unless it jumps the clock (it then bounds each wait with :func:`within`)."""
    authz = JwtAuthServer()
    with trio.fail_after(TIMEOUT if bounded else float("inf")):
        async with serve(authz) as base:
            authz.base = base
            yield authz


async def within(verifier: Any, token: str) -> AccessToken:
    """``verifier.verify(token)``, bounded (in a test that jumps the clock)."""
    with trio.fail_after(TIMEOUT):
        verified: AccessToken = await verifier.verify(token)
        return verified


def pem(key: Any) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


# ===================================================================== units


def test_verifier_configurations_that_cannot_be_safe_are_refused() -> None:
    with pytest.raises(ValueError, match="none"):
        JwtVerifier("https://as", key=pem(new_key()), algorithms=["RS256", "none"])
    with pytest.raises(ValueError, match="HS"):
        JwtVerifier("https://as", key=pem(new_key()), algorithms=["HS256", "RS256"])
    with pytest.raises(ValueError, match="HS"):
        JwtVerifier("https://as", jwks_url="https://as/jwks", algorithms=["HS256"])
    with pytest.raises(ValueError, match="leeway"):
        JwtVerifier("https://as", key=pem(new_key()), leeway=3600)
    with pytest.raises(ValueError, match="exactly one"):
        JwtVerifier("https://as", key=pem(new_key()), jwks_url="https://as/jwks")
    with pytest.raises(ValueError, match="issuer"):
        JwtVerifier("", key=pem(new_key()))
    with pytest.raises(ValueError, match="unsupported"):
        JwtVerifier("https://as", key=pem(new_key()), algorithms=["XS999"])
    with pytest.raises(ValueError, match="http"):
        JwksCache("file:///etc/keys.json")
    with pytest.raises(ValueError, match="client_secret"):
        IntrospectionVerifier("https://as/introspect", client_id="rs")
    with pytest.raises(TypeError, match="verify"):
        ResourceServer(verifier=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="authorization_servers"):
        ResourceServer(verifier=Fixed(AccessToken(token="t")))
    with pytest.raises(ValueError, match="absolute"):
        ResourceServer(verifier=JwtVerifier("https://as", key=pem(new_key())), resource="/mcp")


@pytest.mark.parametrize(
    ("uri", "canonical"),
    [
        ("https://MCP.Example.com/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com:443/mcp/", "https://mcp.example.com/mcp"),
        ("http://127.0.0.1:8000/mcp", "http://127.0.0.1:8000/mcp"),
        ("HTTPS://mcp.example.com", "https://mcp.example.com"),
        ("http://[::1]:80/a/b", "http://[::1]/a/b"),
    ],
)
def test_resource_uris_compare_in_canonical_form(uri: str, canonical: str) -> None:
    assert canonical_resource(uri) == canonical


def test_a_token_stays_out_of_reprs() -> None:
    token = AccessToken(token="SECRET-TOKEN", subject="alice", scopes=["a"], claims={"x": "SECRET-CLAIM"})
    assert "SECRET" not in repr(token) and "alice" in repr(token)
    assert token.missing(["a", "b"]) == {"b"}


class Fixed:
    """A plug-in verifier: one known token."""

    def __init__(self, answer: AccessToken) -> None:
        self.answer = answer

    async def verify(self, token: str) -> AccessToken:
        if token != self.answer.token:
            raise InvalidToken("unknown token")
        return self.answer


async def test_a_plug_in_verifier_and_the_challenges() -> None:
    good = AccessToken(token="t1", subject="s", scopes=["mcp"], audience=["https://MCP.example.com/mcp/"])
    verifier = Fixed(good)
    assert isinstance(verifier, TokenVerifier)
    server = ResourceServer(
        verifier=verifier,
        resource=RESOURCE,
        authorization_servers=["https://as.example.com"],
        required_scopes=["mcp"],
        resource_name="Example",
    )
    assert (await server.authenticate("Bearer t1")) is good
    assert (await server.authenticate("bearer   t1 ")) is good
    with pytest.raises(AuthFailure) as missing:
        await server.authenticate(None)
    assert missing.value.status == 401 and missing.value.error is None
    assert server.challenge(missing.value) == (
        'Bearer scope="mcp", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"'
    )
    with pytest.raises(AuthFailure) as bad:
        await server.authenticate('Bearer t2"')
    assert bad.value.status == 401 and bad.value.error == "invalid_token"
    assert 'error="invalid_token", error_description="unknown token", scope="mcp"' in server.challenge(
        bad.value
    )
    with pytest.raises(AuthFailure) as short:
        server.check_scopes(good, ["mcp:admin"])
    assert short.value.status == 403 and short.value.scope == ("mcp", "mcp:admin")
    assert 'error="insufficient_scope"' in server.challenge(short.value)
    assert server.metadata(["mcp:admin"]) == {
        "resource": RESOURCE,
        "authorization_servers": ["https://as.example.com"],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["mcp", "mcp:admin"],
        "resource_name": "Example",
    }
    # Another audience is refused, unless it is one of ``audiences`` or the check is off.
    other = AccessToken(token="t1", scopes=["mcp"], audience=["api://mcp"])
    strict = ResourceServer(verifier=Fixed(other), resource=RESOURCE, authorization_servers=["https://as"])
    with pytest.raises(AuthFailure, match="another resource"):
        await strict.authenticate("Bearer t1")
    for lenient in (
        ResourceServer(
            verifier=Fixed(other),
            resource=RESOURCE,
            authorization_servers=["https://as"],
            audiences=["api://mcp"],
        ),
        ResourceServer(
            verifier=Fixed(other),
            resource=RESOURCE,
            authorization_servers=["https://as"],
            check_audience=False,
        ),
    ):
        assert (await lenient.authenticate("Bearer t1")) is other


# ============================================================ JWT verification


async def test_a_static_key_verifies_and_the_leeway_is_bounded() -> None:
    authz = JwtAuthServer(base="https://as.example.com")
    verifier = JwtVerifier(authz.issuer, key=pem(authz.keys["rsa-1"]).decode(), leeway=30)
    token = authz.mint(audience=RESOURCE, scopes=["a", "b"], subject="alice", client_id="app", extra="x")
    verified = await verifier.verify(token)
    assert (verified.subject, verified.client_id, verified.issuer) == ("alice", "app", authz.issuer)
    assert verified.scopes == {"a", "b"} and verified.audience == (RESOURCE,)
    assert verified.claims["extra"] == "x" and verified.expires_at is not None
    assert await verifier.verify(authz.mint(audience=RESOURCE, lifetime=-10))  # within the leeway
    with pytest.raises(InvalidToken, match="expired"):
        await verifier.verify(authz.mint(audience=RESOURCE, lifetime=-40))
    with pytest.raises(InvalidToken, match="not valid yet"):
        await verifier.verify(authz.mint(audience=RESOURCE, not_before=time.time() + 60))
    no_exp = jwt.encode({"iss": authz.issuer, "sub": "x"}, authz.keys["rsa-1"], algorithm="RS256")
    with pytest.raises(InvalidToken, match="'exp'"):
        await verifier.verify(no_exp)
    # An EC key and the scp claim; a shared secret for HS256 only.
    ec_key = new_key("ec-1")
    ec_verifier = JwtVerifier(authz.issuer, key=pem(ec_key), algorithms=["ES256"])
    ec_token = jwt.encode(
        {"iss": authz.issuer, "exp": time.time() + 60, "scp": ["x"]}, ec_key, algorithm="ES256"
    )
    assert (await ec_verifier.verify(ec_token)).scopes == {"x"}
    with pytest.raises(InvalidToken, match="algorithm"):
        await ec_verifier.verify(token)  # RS256 is not accepted by that verifier
    # With token_type, the header's typ must be that (RFC 9068): an ID token is no access token.
    typed = JwtVerifier(authz.issuer, key=pem(authz.keys["rsa-1"]), token_type="application/AT+JWT")
    assert await typed.verify(token)  # minted with typ "at+jwt"
    id_token = jwt.encode(
        {"iss": authz.issuer, "exp": time.time() + 60},
        authz.keys["rsa-1"],
        algorithm="RS256",
        headers={"typ": "JWT"},
    )
    assert await verifier.verify(id_token)
    with pytest.raises(InvalidToken, match="type 'JWT'"):
        await typed.verify(id_token)
    secret = b"a shared secret of the authorization server"
    hs = JwtVerifier(authz.issuer, key=secret, algorithms=["HS256"])
    assert await hs.verify(
        jwt.encode({"iss": authz.issuer, "exp": time.time() + 60}, secret, algorithm="HS256")
    )


async def test_jwks_rotation_is_followed_with_a_bounded_refresh(clock: trio.testing.MockClock) -> None:
    async with running(bounded=False) as authz:
        cache = JwksCache(authz.jwks_url, min_refresh_interval=30, max_age=600)
        verifier = JwtVerifier(authz.issuer, jwks=cache)
        await within(verifier, authz.mint(audience=RESOURCE))
        assert authz.jwks_fetches == 1
        # The authorization server rotates to a new key (ES256): a token naming
        # it makes the cache fetch the set again (the last fetch being older
        # than min_refresh_interval).
        clock.jump(31)
        authz.keys["ec-2"] = new_key("ec-2")
        rotated = authz.mint(audience=RESOURCE, kid="ec-2", algorithm="ES256")
        assert (await within(verifier, rotated)).subject == "alice"
        assert authz.jwks_fetches == 2
        # An unknown kid within min_refresh_interval fails without a fetch...
        stranger = authz.mint(audience=RESOURCE, kid="rsa-9", key=new_key("rsa-intruder"))
        for _ in range(5):
            with pytest.raises(InvalidToken, match="'rsa-9'"):
                await within(verifier, stranger)
        assert authz.jwks_fetches == 2
        # ...and after it, one fetch more; a key then published is found.
        clock.jump(31)
        authz.keys["rsa-9"] = new_key("rsa-intruder")
        assert await within(verifier, stranger)
        assert authz.jwks_fetches == 3
        # Once max_age passes, the set is fetched again; a key withdrawn is gone.
        authz.published = ["ec-2"]
        clock.jump(601)
        with pytest.raises(InvalidToken):
            await within(verifier, authz.mint(audience=RESOURCE))
        assert authz.jwks_fetches == 4
        assert await within(verifier, rotated)


async def test_a_verified_token_is_remembered_within_bounds(clock: trio.testing.MockClock) -> None:
    async with running(bounded=False) as authz:
        verifier = JwtVerifier(authz.issuer, jwks=JwksCache(authz.jwks_url, max_age=10), cache_ttl=60)
        token = authz.mint(audience=RESOURCE)
        assert (await within(verifier, token)).subject == "alice"
        authz.published = []  # the key is withdrawn
        clock.jump(11)
        # Remembered: no signature check, so no JWKS fetch for it...
        assert (await within(verifier, token)).subject == "alice"
        assert authz.jwks_fetches == 1
        # ...while a token not seen yet needs the (now stale) set, fetched again.
        with pytest.raises(InvalidToken):
            await within(verifier, authz.mint(audience=RESOURCE, subject="bob"))
        assert authz.jwks_fetches == 2
        clock.jump(50)  # cache_ttl after the first check: checked again, and refused
        with pytest.raises(InvalidToken):
            await within(verifier, token)


async def test_the_bounded_cache_drops_the_least_recently_used_and_the_expired(
    clock: trio.testing.MockClock,
) -> None:
    cache: BoundedCache[str, int] = BoundedCache(2, 60)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recently used
    cache.put("c", 3)
    assert (cache.get("b"), cache.get("a"), cache.get("c"), len(cache)) == (None, 1, 3, 2)
    cache.put("short", 4, expires_at=time.time() + 5)  # its own exp comes before the ttl
    clock.jump(6)
    assert cache.get("short") is None and cache.get("c") == 3
    cache.put("gone", 5, expires_at=time.time() - 1)  # already expired: not kept
    assert cache.get("gone") is None
    clock.jump(60)
    assert cache.get("c") is None and len(cache) == 0
    none: BoundedCache[str, int] = BoundedCache(0, 60)
    none.put("a", 1)
    assert none.get("a") is None


async def test_many_requests_at_once_share_one_jwks_fetch() -> None:
    async with running() as authz:
        verifier = JwtVerifier(authz.issuer, jwks_url=authz.jwks_url)
        tokens = [authz.mint(audience=RESOURCE, subject=f"user-{i}") for i in range(8)]
        subjects: list[str | None] = []

        async def check(token: str) -> None:
            subjects.append((await verifier.verify(token)).subject)

        async with trio.open_nursery() as nursery:
            for token in tokens:
                nursery.start_soon(check, token)
        assert sorted(s or "" for s in subjects) == [f"user-{i}" for i in range(8)]
        assert authz.jwks_fetches == 1


async def test_an_unreachable_jwks_is_unavailable_not_invalid() -> None:
    async with running() as authz:
        url = authz.jwks_url
    # The server is gone: the first fetch fails.
    verifier = JwtVerifier(authz.issuer, jwks=JwksCache(url, fetch_timeout=5))
    with trio.fail_after(TIMEOUT), pytest.raises(VerifierUnavailable):
        await verifier.verify(authz.mint(audience=RESOURCE))
    server = ResourceServer(verifier=verifier, resource=RESOURCE)
    with trio.fail_after(TIMEOUT), pytest.raises(AuthFailure) as failure:
        await server.authenticate("Bearer " + authz.mint(audience=RESOURCE))
    assert failure.value.status == 503


# ============================================================ introspection


def introspection(authz: JwtAuthServer, **options: Any) -> IntrospectionVerifier:
    return IntrospectionVerifier(
        authz.introspection_url, client_id="resource-server", client_secret="rs-secret", **options
    )


def issue(authz: JwtAuthServer, **claims: Any) -> str:
    token = authz.mint(audience=RESOURCE, scopes=["mcp"], **claims)
    authz.access[token] = Grant(client_id="c", scopes=["mcp"], resource=RESOURCE, issuer=authz.issuer)
    return token


async def test_introspection_cache_is_bounded_in_size_and_time(clock: trio.testing.MockClock) -> None:
    async with running(bounded=False) as authz:
        verifier = introspection(authz, cache_size=2, cache_ttl=60, issuer=authz.issuer)
        first, second, third = (issue(authz, subject=f"u{i}") for i in range(3))
        for token in (first, second, first, second):
            await within(verifier, token)
        assert authz.introspections == [first, second]
        await within(verifier, third)  # evicts the least recently used: first
        await within(verifier, first)
        assert authz.introspections == [first, second, third, first]
        # A revoked token is accepted from the cache until its entry expires.
        authz.revoke_all()
        assert (await within(verifier, first)).subject == "u0"
        clock.jump(61)
        with pytest.raises(InvalidToken, match="not active"):
            await within(verifier, first)
        # Refusals are cached too.
        with pytest.raises(InvalidToken):
            await within(verifier, first)
        assert authz.introspections == [first, second, third, first, first]
        # No entry outlives the token's own exp: asked again after 5 s, not 60.
        short = issue(authz, lifetime=5)
        await within(verifier, short)
        clock.jump(4)
        await within(verifier, short)
        assert authz.introspections[-1] == short and authz.introspections.count(short) == 1
        clock.jump(2)
        await within(verifier, short)
        assert authz.introspections.count(short) == 2


async def test_introspection_failures_are_typed() -> None:
    async with running() as authz:
        token = issue(authz)
        other_issuer = introspection(authz, issuer="https://someone-else.example.com")
        with pytest.raises(InvalidToken, match="another issuer"):
            await other_issuer.verify(token)
        wrong_secret = IntrospectionVerifier(
            authz.introspection_url, client_id="resource-server", client_secret="no"
        )
        with pytest.raises(VerifierUnavailable, match="401"):
            await wrong_secret.verify(token)
        hanging = IntrospectionVerifier(authz.base + "/nowhere", client_id="rs", client_secret="s")
        with pytest.raises(VerifierUnavailable, match="404"):
            await hanging.verify(token)
