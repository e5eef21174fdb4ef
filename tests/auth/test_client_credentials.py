"""The client_credentials grant of the OAuth client (:class:`trio_mcp.auth.ClientCredentials`).

The authorization server is :class:`CredentialsAuthServer`, the fake of
``test_oauth_client`` taught the client_credentials grant: it checks
``client_secret_basic`` / ``client_secret_post`` secrets and verifies
``private_key_jwt`` client assertions (RFC 7523) with the client's public
key, recording what it received. Servers run on 127.0.0.1 port 0; every test
is bounded by ``TIMEOUT``.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

import attrs
import httpx
import jwt
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from trio_mcp.auth import (
    ClientCredentials,
    ClientCredentialsConfigError,
    ClientInformation,
    OAuthClientAuth,
    OAuthClientSettings,
    OAuthError,
    TokenRequestError,
    UnsupportedServerError,
)
from trio_mcp.auth._credentials import CLIENT_ASSERTION_TYPE

from .test_oauth_client import (
    TIMEOUT,
    FakeAuthServer,
    ProtectedResource,
    Scope,
    call,
    world,
)

CLIENT_ID = "svc-reporting"
SECRET = "svc-secret-3f9a1c"
_ALGORITHMS = ["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"]

# ---------------------------------------------------------------------- keys

_KEYS: dict[str, Any] = {}


def private_key(kind: str) -> Any:
    """One key per kind for the whole module (RSA generation is slow)."""
    if kind not in _KEYS:
        _KEYS[kind] = {
            "p256": lambda: ec.generate_private_key(ec.SECP256R1()),
            "p256-other": lambda: ec.generate_private_key(ec.SECP256R1()),
            "p384": lambda: ec.generate_private_key(ec.SECP384R1()),
            "p521": lambda: ec.generate_private_key(ec.SECP521R1()),
            "rsa": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "rsa1024": lambda: rsa.generate_private_key(public_exponent=65537, key_size=1024),
            "ed25519": ed25519.Ed25519PrivateKey.generate,
        }[kind]()
    return _KEYS[kind]


def pem(kind: str) -> str:
    return (
        private_key(kind)
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        .decode()
    )


def kind_for(algorithm: str) -> str:
    return {"ES256": "p256", "ES384": "p384", "ES512": "p521", "EdDSA": "ed25519"}.get(algorithm, "rsa")


def secret_credentials(**options: Any) -> ClientCredentials:
    return ClientCredentials(client_id=CLIENT_ID, client_secret=SECRET, **options)


def key_credentials(algorithm: str = "ES256", **options: Any) -> ClientCredentials:
    return ClientCredentials(
        client_id=CLIENT_ID, private_key=pem(kind_for(algorithm)), signing_algorithm=algorithm, **options
    )


# ------------------------------------------------------- authorization server


@attrs.define(eq=False)
class CredentialsAuthServer(FakeAuthServer):
    """:class:`FakeAuthServer` plus the client_credentials grant."""

    #: ``grant_types_supported`` (None: not advertised).
    grant_types: list[str] | None = attrs.field(factory=lambda: ["client_credentials"])
    auth_methods: list[str] | None = attrs.field(
        factory=lambda: ["client_secret_basic", "client_secret_post", "private_key_jwt"]
    )
    signing_algs: list[str] | None = None
    #: Advertise an authorization endpoint (a machine-only server may not have one).
    authorization_endpoint: bool = True
    refresh_tokens: bool = False
    registration: bool = False
    #: The ``aud`` a client assertion must carry (None: the issuer).
    audience: str | None = None
    public_keys: dict[str, Any] = attrs.field(factory=dict)
    #: Every client assertion received: type, header, claims, verification error.
    assertions: list[dict[str, Any]] = attrs.field(factory=list)

    def metadata(self) -> dict[str, Any]:
        doc = super().metadata()
        doc.pop("grant_types_supported")
        if self.grant_types is not None:
            doc["grant_types_supported"] = self.grant_types
        if self.signing_algs is not None:
            doc["token_endpoint_auth_signing_alg_values_supported"] = self.signing_algs
        if not self.authorization_endpoint:
            del doc["authorization_endpoint"]
        return doc

    def _other_grant(
        self, grant_type: str | None, form: dict[str, str]
    ) -> tuple[list[str], str | None] | None:
        if grant_type != "client_credentials":
            return None
        return form.get("scope", "").split(), form.get("resource")

    def _client_of(self, scope: Scope, form: dict[str, str]) -> tuple[str | None, str]:
        if "client_assertion" in form:
            return self._assertion_client(form), "private_key_jwt"
        return super()._client_of(scope, form)

    def _assertion_client(self, form: dict[str, str]) -> str | None:
        """The client a JWT assertion authenticates (None: it does not verify); recorded in ``assertions``."""
        assertion = form["client_assertion"]
        self.secrets.add(assertion)
        claims = jwt.decode(assertion, options={"verify_signature": False})
        record: dict[str, Any] = {
            "type": form.get("client_assertion_type"),
            "header": jwt.get_unverified_header(assertion),
            "claims": claims,
            "error": None,
        }
        self.assertions.append(record)
        key = self.public_keys.get(claims.get("iss"))
        if key is None or form.get("client_assertion_type") != CLIENT_ASSERTION_TYPE:
            return None
        try:
            jwt.decode(
                assertion,
                key,
                algorithms=_ALGORITHMS,
                audience=self.audience or self.issuer,
                options={"require": ["iss", "sub", "aud", "exp", "iat", "jti"]},
            )
        except (jwt.PyJWTError, TypeError, ValueError) as exc:
            record["error"] = str(exc)
            return None
        return claims["iss"] if claims["sub"] == claims["iss"] else None


def credentials_server(**options: Any) -> CredentialsAuthServer:
    authz = CredentialsAuthServer(**options)
    authz.clients[CLIENT_ID] = {"client_secret": SECRET}
    return authz


def trust(authz: CredentialsAuthServer, algorithm: str = "ES256") -> None:
    authz.public_keys[CLIENT_ID] = private_key(kind_for(algorithm)).public_key()


def cc_auth(resource: ProtectedResource, credentials: ClientCredentials, **options: Any) -> OAuthClientAuth:
    return OAuthClientAuth(resource.url, client_credentials=credentials, **options)


def grants(authz: FakeAuthServer) -> list[str]:
    return [r["form"]["grant_type"] for r in authz.token_requests]


def untouched_user_endpoints(authz: FakeAuthServer) -> bool:
    """No authorization request, no registration: nothing a user would see."""
    return (
        authz.authorizations == []
        and authz.registrations == []
        and not any(path.endswith(("/authorize", "/register")) for _, path, _ in authz.requests)
    )


# ======================================================================= units


def test_assertion_claims_and_header() -> None:
    credentials = key_credentials(key_id="key-1", assertion_lifetime=90)
    assertion = credentials.assertion("https://as.example", now=1_700_000_000)
    head = jwt.get_unverified_header(assertion)
    assert (head["alg"], head["typ"], head["kid"]) == ("ES256", "JWT", "key-1")
    claims = jwt.decode(
        assertion,
        private_key("p256").public_key(),
        algorithms=["ES256"],
        audience="https://as.example",
        options={"verify_exp": False, "verify_iat": False},
    )
    assert claims["iss"] == claims["sub"] == CLIENT_ID
    assert claims["aud"] == "https://as.example"
    assert (claims["iat"], claims["exp"]) == (1_700_000_000, 1_700_000_090)
    assert isinstance(claims["jti"], str) and len(claims["jti"]) >= 24
    assert set(claims) == {"iss", "sub", "aud", "iat", "exp", "jti"}


def test_every_assertion_has_its_own_jti() -> None:
    credentials = key_credentials()
    jtis = {
        jwt.decode(credentials.assertion("https://as"), options={"verify_signature": False})["jti"]
        for _ in range(200)
    }
    assert len(jtis) == 200


@pytest.mark.parametrize("algorithm", _ALGORITHMS)
def test_every_signing_algorithm_verifies(algorithm: str) -> None:
    credentials = key_credentials(algorithm)
    assertion = credentials.assertion("https://as")
    public = private_key(kind_for(algorithm)).public_key()
    claims = jwt.decode(assertion, public, algorithms=[algorithm], audience="https://as")
    assert claims["sub"] == CLIENT_ID and jwt.get_unverified_header(assertion)["alg"] == algorithm


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({}, "needs a client_secret .* or a private_key"),
        ({"client_secret": SECRET, "private_key": "x"}, "not both"),
        ({"client_secret": ""}, "client_secret is empty"),
        ({"client_id": "", "client_secret": SECRET}, "client_id must be a non-empty string"),
        ({"client_secret": SECRET, "method": "private_key_jwt"}, "needs a private_key"),
        ({"private_key": "p256", "method": "client_secret_basic"}, "needs a client_secret"),
        (
            {"private_key": "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"},
            "not an unencrypted PEM private key",
        ),
        ({"private_key": "p256", "signing_algorithm": "HS256"}, "unsupported signing_algorithm 'HS256'"),
        ({"private_key": "p256", "signing_algorithm": "none"}, "unsupported signing_algorithm"),
        ({"private_key": "rsa", "signing_algorithm": "ES256"}, "ES256 needs an EC key on secp256r1"),
        ({"private_key": "p384", "signing_algorithm": "ES256"}, "ES256 needs an EC key on secp256r1"),
        ({"private_key": "p256", "signing_algorithm": "RS256"}, "RS256 needs an RSA key"),
        ({"private_key": "rsa1024", "signing_algorithm": "RS256"}, "2048 bits or more"),
        ({"private_key": "rsa", "signing_algorithm": "EdDSA"}, "EdDSA needs an Ed25519 or Ed448 key"),
        ({"client_secret": SECRET, "assertion_lifetime": 0}, "assertion_lifetime must be positive"),
        ({"client_secret": SECRET, "assertion_audience": "anyone"}, "assertion_audience must be"),
    ],
)
def test_configurations_that_cannot_work_are_refused(options: dict[str, Any], match: str) -> None:
    options = {"client_id": CLIENT_ID, **options}
    if options.get("private_key") in ("p256", "p384", "rsa", "rsa1024"):
        options["private_key"] = pem(options["private_key"])  # a key kind, as PEM
    with pytest.raises(ClientCredentialsConfigError, match=match) as caught:
        ClientCredentials(**options)
    assert isinstance(caught.value, ValueError)
    assert "PRIVATE KEY" not in str(caught.value) and SECRET not in str(caught.value)


@pytest.mark.parametrize(
    "options",
    [
        {"clients": {"https://as": ClientInformation(client_id="x")}},
        {"client_metadata_url": "https://client.example/metadata.json"},
        {"authorization_handler": object()},
    ],
)
def test_client_credentials_take_no_user_flow_options(options: dict[str, Any]) -> None:
    with pytest.raises(ClientCredentialsConfigError, match="cannot be used with it"):
        OAuthClientAuth("https://h/mcp", client_credentials=secret_credentials(), **options)
    with pytest.raises(ClientCredentialsConfigError, match="must be a ClientCredentials"):
        OAuthClientAuth("https://h/mcp", client_credentials={"client_id": "x"})  # type: ignore[arg-type]


def test_secrets_and_keys_stay_out_of_reprs() -> None:
    key_pem = pem("p256")
    text = f"{secret_credentials()!r} {key_credentials()!r} {secret_credentials().client_information()!r}"
    assert SECRET not in text and "PRIVATE KEY" not in text and key_pem[40:80] not in text
    assert CLIENT_ID in text and "private_key_jwt" in text and "<redacted>" in text


def test_the_method_follows_the_credential() -> None:
    assert key_credentials().token_endpoint_auth_method == "private_key_jwt"
    assert secret_credentials().token_endpoint_auth_method is None  # chosen from the server's list
    post = secret_credentials(method="client_secret_post")
    assert post.client_information().token_endpoint_auth_method == "client_secret_post"
    assert post.client_information().client_secret == SECRET


# ============================================================ token requests


async def test_client_secret_basic_grant() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server(), challenge_scope="mcp:read") as (authz, resource):
            auth = cc_auth(resource, secret_credentials())
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert untouched_user_endpoints(authz)
    [request] = authz.token_requests
    form = {"grant_type": "client_credentials", "resource": resource.url, "scope": "mcp:read"}
    assert request["form"] == form
    assert request["authorization"].startswith("Basic ")
    assert base64.b64decode(request["authorization"][6:]).decode() == f"{CLIENT_ID}:{SECRET}"
    assert (request["auth_method"], request["client_id"]) == ("client_secret_basic", CLIENT_ID)
    assert auth.tokens is not None and auth.tokens.scope == "mcp:read" and auth.tokens.refresh_token is None


@pytest.mark.parametrize(
    ("server_methods", "method"),
    [(["client_secret_post"], None), (["client_secret_basic", "client_secret_post"], "client_secret_post")],
)
async def test_client_secret_post_grant(server_methods: list[str], method: str | None) -> None:
    """Chosen when configured, or when the server accepts nothing else."""
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server(auth_methods=server_methods)) as (authz, resource):
            auth = cc_auth(resource, secret_credentials(method=method))
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
    [request] = authz.token_requests
    assert request["auth_method"] == "client_secret_post" and request["authorization"] is None
    assert request["form"] == {
        "grant_type": "client_credentials",
        "resource": resource.url,
        "client_id": CLIENT_ID,
        "client_secret": SECRET,
    }


@pytest.mark.parametrize("algorithm", ["ES256", "RS256", "EdDSA"])
async def test_private_key_jwt_grant(algorithm: str) -> None:
    authz = credentials_server(signing_algs=["ES256", "RS256", "EdDSA"])
    trust(authz, algorithm)
    with trio.fail_after(TIMEOUT):
        async with world(authz, scopes_supported=["mcp:a", "mcp:b"]) as (authz, resource):
            auth = cc_auth(resource, key_credentials(algorithm))
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert untouched_user_endpoints(authz)
    [request] = authz.token_requests
    [assertion] = authz.assertions
    assert request["client_id"] == CLIENT_ID, assertion["error"]
    assert request["authorization"] is None
    form = request["form"]
    assert set(form) == {"grant_type", "resource", "scope", "client_assertion_type", "client_assertion"}
    assert (form["grant_type"], form["scope"]) == ("client_credentials", "mcp:a mcp:b")
    assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    assert assertion["type"] == form["client_assertion_type"]
    claims = assertion["claims"]
    assert claims["iss"] == claims["sub"] == CLIENT_ID
    assert claims["aud"] == authz.issuer
    assert 0 < claims["exp"] - claims["iat"] <= 60
    assert assertion["header"]["alg"] == algorithm


async def test_the_assertion_audience_can_be_the_token_endpoint() -> None:
    authz = credentials_server()
    trust(authz)
    with trio.fail_after(TIMEOUT):
        async with world(authz) as (authz, resource):
            authz.audience = f"{authz.issuer}/token"
            auth = cc_auth(resource, key_credentials(assertion_audience="token_endpoint"))
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert authz.assertions[0]["claims"]["aud"] == f"{authz.issuer}/token"


async def test_no_pkce_and_no_authorization_endpoint_needed() -> None:
    authz = credentials_server(pkce_methods=None, authorization_endpoint=False, grant_types=None)
    with trio.fail_after(TIMEOUT):
        async with world(authz) as (authz, resource):
            auth = cc_auth(resource, secret_credentials())
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert grants(authz) == ["client_credentials"]


async def test_login_ahead_of_the_first_request() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server()) as (authz, resource):
            auth = cc_auth(resource, secret_credentials())
            tokens = await auth.login()
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
    assert tokens.issuer == authz.issuer and tokens.resource == resource.url
    assert grants(authz) == ["client_credentials"]
    assert all(auth is not None for _, path, auth in resource.requests if path == "/mcp")


# ================================================================ token life


async def test_the_token_is_reused_until_it_expires() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server()) as (authz, resource):
            auth = cc_auth(resource, secret_credentials())
            async with httpx.AsyncClient(auth=auth) as http:
                for _ in range(4):
                    assert (await call(http, resource.url)).status_code == 200
    assert grants(authz) == ["client_credentials"]
    sent = [auth for _, path, auth in resource.requests if path == "/mcp"]
    assert sent[0] is None and len(set(sent[1:])) == 1  # one 401, then one token throughout


async def test_an_expiring_token_is_replaced_before_use() -> None:
    authz = credentials_server(expires_in=0)
    trust(authz)
    with trio.fail_after(TIMEOUT):
        async with world(authz, challenge_scope="mcp:read") as (authz, resource):
            auth = cc_auth(resource, key_credentials())
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
                first = auth.tokens
                assert (await call(http, resource.url)).status_code == 200
    assert grants(authz) == ["client_credentials", "client_credentials"]
    assert [r["form"]["scope"] for r in authz.token_requests] == ["mcp:read", "mcp:read"]
    jtis = [a["claims"]["jti"] for a in authz.assertions]
    assert len(set(jtis)) == 2
    sent = [auth for _, path, auth in resource.requests if path == "/mcp"]
    assert len(sent) == 3 and sent[0] is None  # the second call went out with the new token, no 401
    assert first is not None and auth.tokens is not None
    assert sent[2] == f"Bearer {auth.tokens.access_token}" != f"Bearer {first.access_token}"


async def test_a_rejected_token_gets_a_new_grant_on_401() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server()) as (authz, resource):
            auth = cc_auth(resource, secret_credentials())
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
                authz.revoke_all()
                assert (await call(http, resource.url)).status_code == 200
    assert grants(authz) == ["client_credentials", "client_credentials"]


async def test_a_refresh_token_is_used_when_the_server_issues_one() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server(refresh_tokens=True, expires_in=0)) as (authz, resource):
            auth = cc_auth(resource, secret_credentials())
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
                assert (await call(http, resource.url)).status_code == 200
    assert grants(authz) == ["client_credentials", "refresh_token"]
    assert authz.token_requests[1]["auth_method"] == "client_secret_basic"


async def test_step_up_asks_for_the_union_of_scopes() -> None:
    options: dict[str, Any] = {"challenge_scope": "mcp:basic", "tool_scopes": {"admin": "mcp:admin"}}
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server(), **options) as (authz, resource):
            auth = cc_auth(resource, secret_credentials())
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
                assert (await call(http, resource.url, "tools/call", name="admin")).status_code == 200
    assert [r["form"].get("scope") for r in authz.token_requests] == ["mcp:basic", "mcp:basic mcp:admin"]
    assert grants(authz) == ["client_credentials", "client_credentials"]


# ==================================================================== errors


async def failed(
    resource: ProtectedResource, credentials: ClientCredentials, error: type[OAuthError], **options: Any
) -> OAuthError:
    auth = cc_auth(resource, credentials, **options)
    async with httpx.AsyncClient(auth=auth) as http:
        with pytest.raises(error) as caught:
            await call(http, resource.url)
    assert auth.last_error is caught.value and caught.value.request.url == resource.url
    return caught.value


async def test_a_wrong_secret_is_a_typed_token_error() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server()) as (authz, resource):
            wrong = ClientCredentials(client_id=CLIENT_ID, client_secret="not-the-secret")
            error = await failed(resource, wrong, TokenRequestError)
    assert isinstance(error, TokenRequestError)
    assert (error.error, error.status_code) == ("invalid_client", 401)
    assert "client_credentials" in str(error) and "not-the-secret" not in str(error)
    assert len(authz.token_requests) == 1  # asked once, not in a loop


async def test_an_assertion_the_server_cannot_verify_is_refused() -> None:
    authz = credentials_server()
    authz.public_keys[CLIENT_ID] = private_key("p256-other").public_key()  # another key of this client
    with trio.fail_after(TIMEOUT):
        async with world(authz) as (authz, resource):
            error = await failed(resource, key_credentials(), TokenRequestError)
    assert isinstance(error, TokenRequestError) and error.error == "invalid_client"
    assert "Signature verification failed" in authz.assertions[0]["error"]


async def test_a_token_endpoint_error_is_typed() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server(token_error="invalid_scope")) as (_, resource):
            error = await failed(resource, secret_credentials(), TokenRequestError)
    assert isinstance(error, TokenRequestError)
    assert (error.error, error.status_code) == ("invalid_scope", 400)
    assert "invalid_scope: no tokens today" in str(error)


@pytest.mark.parametrize(
    ("server", "credentials", "match"),
    [
        (
            {"grant_types": ["authorization_code", "refresh_token"]},
            "secret",
            "does not offer the client_credentials grant",
        ),
        ({"auth_methods": ["client_secret_basic"]}, "key", "does not accept private_key_jwt"),
        ({"auth_methods": ["private_key_jwt"]}, "secret", "does not accept client_secret_basic"),
        ({"auth_methods": ["none"]}, "secret", "does not accept"),
        ({"signing_algs": ["RS256"]}, "key", "does not accept ES256 client assertions"),
    ],
)
async def test_a_server_that_cannot_take_the_grant_is_refused_before_asking(
    server: dict[str, Any], credentials: str, match: str
) -> None:
    creds = key_credentials() if credentials == "key" else secret_credentials()
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server(**server)) as (authz, resource):
            error = await failed(resource, creds, UnsupportedServerError)
    assert match in str(error)
    assert authz.token_requests == []


async def test_the_token_request_is_bounded() -> None:
    settings = OAuthClientSettings(request_timeout=0.3)
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server(hang_token=True)) as (_, resource):
            started = trio.current_time()
            error = await failed(resource, secret_credentials(), TokenRequestError, settings=settings)
            assert trio.current_time() - started < 3
    assert "no answer within 0.3s" in str(error)


async def test_a_failed_renewal_fails_the_request_with_a_typed_error() -> None:
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server(expires_in=0)) as (authz, resource):
            auth = cc_auth(resource, secret_credentials())
            async with httpx.AsyncClient(auth=auth) as http:
                assert (await call(http, resource.url)).status_code == 200
                authz.token_error = "temporarily_unavailable"
                with pytest.raises(TokenRequestError) as caught:
                    await call(http, resource.url)
    assert caught.value.error == "temporarily_unavailable"
    assert grants(authz) == ["client_credentials", "client_credentials"]


async def test_no_secret_reaches_the_logs_or_the_errors(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_mcp")
    authz = credentials_server(expires_in=0)
    trust(authz)
    messages: list[str] = []
    with trio.fail_after(TIMEOUT):
        async with world(authz, tool_scopes={"admin": "mcp:admin"}) as (authz, resource):
            auth = cc_auth(resource, key_credentials())
            async with httpx.AsyncClient(auth=auth) as http:
                await call(http, resource.url)
                await call(http, resource.url)  # renewal
                await call(http, resource.url, "tools/call", name="admin")  # step-up
                authz.token_error = "invalid_request"
                with pytest.raises(OAuthError) as caught:
                    await call(http, resource.url)
                messages.append(str(caught.value))
        async with world(credentials_server(token_error="invalid_client")) as (_, resource):
            with pytest.raises(OAuthError) as caught:
                async with httpx.AsyncClient(auth=cc_auth(resource, secret_credentials())) as http:
                    await call(http, resource.url)
            messages.append(str(caught.value))
    text = caplog.text + "\n".join(messages) + repr(auth.tokens) + repr(auth.client_credentials)
    assert "client_credentials grant at" in caplog.text and "authorization failed" in caplog.text
    assert len(authz.secrets) >= 4
    assert [s for s in authz.secrets if s in text] == []
    assert SECRET not in text and "PRIVATE KEY" not in text
