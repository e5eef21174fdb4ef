"""DPoP: sender-constrained access tokens (RFC 9449; MCP's
``io.modelcontextprotocol/auth/dpop`` extension, SEP-1932).

A :class:`DPoPKey` holds one asymmetric key pair for the client's lifetime.
Every token request and every request to the MCP server carries a fresh
*proof* (a JWT signed with the private key whose header holds the public JWK:
``typ: dpop+jwt``, claims ``jti``, ``htm``, ``htu``, ``iat``, ``nonce`` when
the server demands one, and ``ath`` — the access token's hash — at the
resource). The authorization server binds the token to the key (``cnf.jkt``)
and answers ``token_type: DPoP``; the token is then presented as
``Authorization: DPoP <token>``. A server that wants a nonce answers
``use_dpop_nonce`` with a ``DPoP-Nonce`` header: the nonce is remembered per
server (origin) and the request is sent again once with it (§8, §9).

PyJWT (with cryptography) signs the proofs.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

__all__ = ["DPOP_NONCE_ERROR", "DPoPKey", "htu_of", "needs_nonce"]

#: The error code of a ``use_dpop_nonce`` challenge (token endpoint: JSON body; resource: WWW-Authenticate).
DPOP_NONCE_ERROR: Final = "use_dpop_nonce"
#: JWS algorithm -> EC curve name (the algorithms a DPoPKey can generate).
_CURVES: Final = {"ES256": "secp256r1", "ES384": "secp384r1", "ES512": "secp521r1"}
_JWK_CURVES: Final = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def htu_of(url: str) -> str:
    """The ``htu`` of a request URL: without query and fragment (RFC 9449 §4.2)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, "", ""))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def needs_nonce(status: int, headers: Any, error: str | None) -> str | None:
    """The nonce a ``use_dpop_nonce`` answer demands (``None`` for any other answer)."""
    if status not in (400, 401) or error != DPOP_NONCE_ERROR:
        return None
    nonce = headers.get("dpop-nonce")
    return nonce.strip() if isinstance(nonce, str) and nonce.strip() else None


class DPoPKey:
    """One proof key (generated, EC) and the nonces servers gave it."""

    def __init__(self, algorithm: str = "ES256") -> None:
        curve = _CURVES.get(algorithm)
        if curve is None:
            raise ValueError(f"unsupported DPoP algorithm {algorithm!r}; one of {', '.join(_CURVES)}")
        try:
            import jwt  # noqa: F401
            from cryptography.hazmat.primitives.asymmetric import ec
        except ImportError:  # pragma: no cover (a dependency)
            raise ValueError("DPoP needs PyJWT with cryptography: pip install 'pyjwt[crypto]'") from None
        self.algorithm = algorithm
        self._private = ec.generate_private_key(getattr(ec, curve.upper())())
        numbers = self._private.public_key().public_numbers()
        size = (self._private.curve.key_size + 7) // 8
        #: The public key as a JWK (what every proof's header carries).
        self.jwk: dict[str, str] = {
            "kty": "EC",
            "crv": _JWK_CURVES[curve],
            "x": _b64(numbers.x.to_bytes(size, "big")),
            "y": _b64(numbers.y.to_bytes(size, "big")),
        }
        #: origin -> the last nonce that server gave.
        self.nonces: dict[str, str] = {}

    @property
    def thumbprint(self) -> str:
        """The JWK SHA-256 thumbprint (RFC 7638): the ``jkt`` a bound token names."""
        canonical = '{{"crv":"{crv}","kty":"EC","x":"{x}","y":"{y}"}}'.format(**self.jwk)
        return _b64(hashlib.sha256(canonical.encode("ascii")).digest())

    def remember_nonce(self, url: str, nonce: str) -> None:
        self.nonces[_origin(url)] = nonce

    def proof(self, method: str, url: str, *, access_token: str | None = None) -> str:
        """A fresh proof for one request (with the server's nonce if it gave one)."""
        import jwt

        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(24),
            "htm": method.upper(),
            "htu": htu_of(url),
            "iat": int(time.time()),
        }
        nonce = self.nonces.get(_origin(url))
        if nonce is not None:
            claims["nonce"] = nonce
        if access_token is not None:
            claims["ath"] = _b64(hashlib.sha256(access_token.encode("ascii")).digest())
        headers = {"typ": "dpop+jwt", "jwk": self.jwk}
        return jwt.encode(claims, self._private, algorithm=self.algorithm, headers=headers)
