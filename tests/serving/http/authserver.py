"""A local authorization server for the resource-server tests: the fake of
``tests/auth`` (RFC 8414 metadata, dynamic registration, the authorization
code flow with PKCE, the client_credentials grant) whose access tokens are
JWTs signed with a real key (RSA 2048 by default, ``kid`` in the header),
with a JWKS endpoint and a token introspection endpoint (RFC 7662).

It runs on hypercorn at 127.0.0.1 port 0 (``serve`` of ``tests/auth``) and
records the JWKS fetches and introspections it answers.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any
from urllib.parse import parse_qsl

import attrs
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from tests.auth.test_client_credentials import CLIENT_ID, SECRET, CredentialsAuthServer
from tests.auth.test_oauth_client import Receive, Scope, Send, header, read_body, respond

__all__ = ["CLIENT_ID", "SECRET", "JwtAuthServer", "new_key"]

_KEYS: dict[str, Any] = {}


def new_key(kind: str = "rsa") -> Any:
    """One private key per name for the whole run (RSA generation is slow)."""
    if kind not in _KEYS:
        if kind.startswith("ec"):
            _KEYS[kind] = ec.generate_private_key(ec.SECP256R1())
        else:
            _KEYS[kind] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return _KEYS[kind]


def _jwk(kid: str, key: Any) -> dict[str, Any]:
    public = key.public_key()
    algorithm: Any = jwt.algorithms.ECAlgorithm if isinstance(public, ec.EllipticCurvePublicKey) else None
    if algorithm is None:
        algorithm = jwt.algorithms.RSAAlgorithm
    doc: dict[str, Any] = json.loads(algorithm.to_jwk(public))
    doc.update(kid=kid, use="sig")
    return doc


@attrs.define(eq=False)
class JwtAuthServer(CredentialsAuthServer):
    """:class:`CredentialsAuthServer` issuing JWT access tokens."""

    grant_types: list[str] | None = attrs.field(
        factory=lambda: ["authorization_code", "refresh_token", "client_credentials"]
    )
    auth_methods: list[str] | None = attrs.field(
        factory=lambda: ["client_secret_basic", "client_secret_post", "none"]
    )
    registration: bool = True
    refresh_tokens: bool = True
    #: The subject of the tokens of the authorization code flow.
    subject: str = "alice"
    #: kid -> private key; tokens are signed with ``signing_kid``'s.
    keys: dict[str, Any] = attrs.field(factory=lambda: {"rsa-1": new_key("rsa")})
    signing_kid: str = "rsa-1"
    #: Keys published in the JWKS (None: all of ``keys``).
    published: list[str] | None = None
    jwks_fetches: int = 0
    introspections: list[str] = attrs.field(factory=list)
    #: Who may call the introspection endpoint (client_id, secret).
    introspection_client: tuple[str, str] = ("resource-server", "rs-secret")

    def __attrs_post_init__(self) -> None:
        self.clients[CLIENT_ID] = {"client_secret": SECRET}

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def introspection_url(self) -> str:
        return f"{self.issuer}/introspect"

    def metadata(self) -> dict[str, Any]:
        doc = super().metadata()
        doc["jwks_uri"] = self.jwks_url
        doc["introspection_endpoint"] = self.introspection_url
        return doc

    def mint(
        self,
        *,
        audience: str | list[str] | None,
        scopes: list[str] | tuple[str, ...] = (),
        subject: str | None = None,
        client_id: str = CLIENT_ID,
        issuer: str | None = None,
        lifetime: float = 3600,
        not_before: float | None = None,
        kid: str | None = None,
        key: Any = None,
        algorithm: str = "RS256",
        **claims: Any,
    ) -> str:
        """A signed access token (by default: this issuer, the signing key)."""
        now = time.time()
        payload: dict[str, Any] = {
            "iss": issuer if issuer is not None else self.issuer,
            "sub": subject if subject is not None else self.subject,
            "client_id": client_id,
            "iat": int(now),
            "exp": int(now + lifetime),
            "jti": self._next("jti"),
            **claims,
        }
        if audience is not None:
            payload["aud"] = audience
        if scopes:
            payload["scope"] = " ".join(scopes)
        if not_before is not None:
            payload["nbf"] = int(not_before)
        kid = kid if kid is not None else self.signing_kid
        signing = key if key is not None else self.keys[kid]
        token = jwt.encode(payload, signing, algorithm=algorithm, headers={"kid": kid, "typ": "at+jwt"})
        self.secrets.add(token)
        return token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == f"{self.prefix}/jwks":
            self.jwks_fetches += 1
            kids = self.published if self.published is not None else list(self.keys)
            await respond(send, 200, {"keys": [_jwk(kid, self.keys[kid]) for kid in kids]})
            return
        if scope["type"] == "http" and scope["path"] == f"{self.prefix}/introspect":
            await self._introspect(scope, await read_body(receive), send)
            return
        await super().__call__(scope, receive, send)

    async def _introspect(self, scope: Scope, body: bytes, send: Send) -> None:
        expected = "Basic " + _basic(*self.introspection_client)
        if header(scope, "authorization") != expected:
            await respond(send, 401, {"error": "invalid_client"})
            return
        token = dict(parse_qsl(body.decode())).get("token", "")
        self.introspections.append(token)
        grant = self.grant_for(token)
        if grant is None:
            await respond(send, 200, {"active": False})
            return
        claims = jwt.decode(token, options={"verify_signature": False})
        await respond(send, 200, {"active": True, "token_type": "Bearer", **claims})

    async def _token(self, scope: Scope, body: bytes, send: Send) -> None:
        """The fake's token endpoint, its opaque access token swapped for a JWT."""
        start: dict[str, Any] = {}

        async def swap(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            answer = json.loads(message["body"]) if message["body"] else {}
            opaque = answer.get("access_token") if isinstance(answer, dict) else None
            if opaque is not None:
                grant = self.access[opaque]
                token = self.mint(audience=grant.resource, scopes=grant.scopes, client_id=grant.client_id)
                self.access[token] = grant
                answer["access_token"] = token
            await respond(
                send,
                start["status"],
                answer,
                [(k.decode(), v.decode()) for k, v in start["headers"] if k.lower() != b"content-type"],
            )

        await super()._token(scope, body, swap)


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()
