"""The authorization extensions' building blocks: DPoP proofs (RFC 9449) and
the assertion grants (JWT bearer for workload identity, enterprise-managed
authorization). The whole flows run against the official conformance
suite's servers (``tests/conformance``: ``auth/dpop``, ``auth/dpop-nonce``,
``auth/wif-jwt-bearer``, ``auth/enterprise-managed-authorization``)."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import httpx
import jwt
import pytest

from trio_mcp.auth import (
    ClientCredentials,
    ClientCredentialsConfigError,
    DPoPKey,
    EnterpriseGrant,
    JwtBearerGrant,
    OAuthClientAuth,
)
from trio_mcp.auth._dpop import needs_nonce
from trio_mcp.auth._grants import ID_JAG_TOKEN_TYPE, ID_TOKEN_TYPE, JWT_BEARER_GRANT, TOKEN_EXCHANGE_GRANT

URL = "https://mcp.example.com/mcp"


def verified(proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header = jwt.get_unverified_header(proof)
    key = jwt.algorithms.ECAlgorithm.from_jwk(json.dumps(header["jwk"]))
    return header, jwt.decode(proof, key, algorithms=["ES256"])


def test_a_proof_is_a_signed_dpop_jwt_with_the_public_key() -> None:
    key = DPoPKey()
    header, claims = verified(key.proof("post", "https://AS.example.com/token?x=1#f"))
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    assert set(header["jwk"]) == {"kty", "crv", "x", "y"}  # no private part
    assert claims["htm"] == "POST" and claims["htu"] == "https://as.example.com/token"
    assert "ath" not in claims and "nonce" not in claims and isinstance(claims["iat"], int)


def test_every_proof_is_fresh_and_binds_the_token() -> None:
    key = DPoPKey()
    first = verified(key.proof("POST", URL, access_token="tok"))[1]
    second = verified(key.proof("POST", URL, access_token="tok"))[1]
    assert first["jti"] != second["jti"]
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"tok").digest()).rstrip(b"=").decode()
    assert first["ath"] == digest


def test_nonces_are_kept_per_server() -> None:
    key = DPoPKey()
    key.remember_nonce("https://as.example.com/token", "n-1")
    assert verified(key.proof("POST", "https://as.example.com/other"))[1]["nonce"] == "n-1"
    assert "nonce" not in verified(key.proof("POST", URL))[1]


def test_thumbprint_is_rfc7638() -> None:
    key = DPoPKey()
    members = {name: key.jwk[name] for name in ("crv", "kty", "x", "y")}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True).encode()
    assert (
        key.thumbprint == base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode()
    )


def test_nonce_challenges_are_recognised() -> None:
    headers = httpx.Headers({"DPoP-Nonce": "abc"})
    assert needs_nonce(400, headers, "use_dpop_nonce") == "abc"
    assert needs_nonce(401, headers, "use_dpop_nonce") == "abc"
    assert needs_nonce(401, headers, "invalid_token") is None
    assert needs_nonce(400, httpx.Headers(), "use_dpop_nonce") is None
    with pytest.raises(ValueError, match="unsupported DPoP algorithm"):
        DPoPKey("HS256")


async def test_jwt_bearer_grant_form() -> None:
    minted: list[str] = []

    def mint(audience: str) -> str:
        minted.append(audience)
        return "workload.jwt"

    grant = JwtBearerGrant(client_id="wl", assertion=mint)
    form = await grant.form("https://as.example.com", URL, None)
    assert form == {"grant_type": JWT_BEARER_GRANT, "assertion": "workload.jwt", "resource": URL}
    assert minted == ["https://as.example.com"]
    assert grant.client_information().token_endpoint_auth_method == "none"
    assert "workload.jwt" not in repr(JwtBearerGrant(client_id="wl", assertion="workload.jwt"))


async def test_enterprise_grant_exchanges_the_id_token_for_an_id_jag() -> None:
    sent: list[tuple[str, dict[str, str]]] = []

    async def exchange(endpoint: str, form: dict[str, str]) -> dict[str, Any]:
        sent.append((endpoint, form))
        return {"access_token": "the.id.jag", "issued_token_type": ID_JAG_TOKEN_TYPE, "token_type": "N_A"}

    grant = EnterpriseGrant(
        idp_token_endpoint="https://idp.example.com/token",
        id_token="user.id.token",
        idp_client_id="at-idp",
        client_id="at-as",
        client_secret="s3cret",
    )
    form = await grant.form("https://as.example.com", URL, exchange)
    assert form == {"grant_type": JWT_BEARER_GRANT, "assertion": "the.id.jag", "resource": URL}
    [(endpoint, request)] = sent
    assert endpoint == "https://idp.example.com/token"
    assert request == {
        "grant_type": TOKEN_EXCHANGE_GRANT,
        "subject_token": "user.id.token",
        "subject_token_type": ID_TOKEN_TYPE,
        "requested_token_type": ID_JAG_TOKEN_TYPE,
        "audience": "https://as.example.com",
        "resource": URL,
        "client_id": "at-idp",
    }
    assert grant.client_information().token_endpoint_auth_method == "client_secret_basic"

    async def not_a_jag(endpoint: str, form: dict[str, str]) -> dict[str, Any]:
        return {"access_token": "x", "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}

    with pytest.raises(ValueError, match="not an ID-JAG"):
        await grant.form("https://as.example.com", URL, not_a_jag)


def test_grant_configurations_that_cannot_work_are_refused() -> None:
    grant = JwtBearerGrant(client_id="wl", assertion="a.b.c")
    with pytest.raises(ClientCredentialsConfigError, match="not both"):
        OAuthClientAuth(
            URL, grant=grant, client_credentials=ClientCredentials(client_id="x", client_secret="y")
        )
    with pytest.raises(ClientCredentialsConfigError, match="without a user"):
        OAuthClientAuth(URL, grant=grant, client_metadata_url="https://client.example.com/meta.json")
    with pytest.raises(ValueError, match="empty"):
        JwtBearerGrant(client_id="", assertion="a.b.c")
    assert isinstance(OAuthClientAuth(URL, dpop=True).dpop, DPoPKey)
    assert OAuthClientAuth(URL).dpop is None
