"""The client_credentials grant's client identity (OAuth 2.1 §4.2; MCP's
``io.modelcontextprotocol/oauth-client-credentials`` extension).

A machine-to-machine client authorizes as itself: no user, no browser, no
redirect. :class:`ClientCredentials` names the client and how it
authenticates at the token endpoint:

* a ``client_secret``: ``client_secret_basic`` (the default where the
  authorization server allows it) or ``client_secret_post``;
* a ``private_key`` (PEM): ``private_key_jwt``, a signed JWT client assertion
  (RFC 7523 §2.2, RFC 7521 §4.2).

Everything is checked when the object is built (the key is loaded then), so
a configuration that cannot work fails at once with
:class:`ClientCredentialsConfigError`, never inside a request.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Literal

import attrs

from ._models import ClientInformation

__all__ = ["CLIENT_ASSERTION_TYPE", "ClientCredentials", "ClientCredentialsConfigError"]

#: RFC 7523 §2.2: the ``client_assertion_type`` of a JWT client assertion.
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

AuthMethod = Literal["client_secret_basic", "client_secret_post", "private_key_jwt"]
Audience = Literal["issuer", "token_endpoint"]

_SECRET_METHODS = ("client_secret_basic", "client_secret_post")
#: JWS algorithm -> (key family, EC curve name).
_ALGORITHMS: dict[str, tuple[str, str | None]] = {
    "ES256": ("ec", "secp256r1"),
    "ES384": ("ec", "secp384r1"),
    "ES512": ("ec", "secp521r1"),
    "RS256": ("rsa", None),
    "RS384": ("rsa", None),
    "RS512": ("rsa", None),
    "PS256": ("rsa", None),
    "PS384": ("rsa", None),
    "PS512": ("rsa", None),
    "EdDSA": ("okp", None),
}


class ClientCredentialsConfigError(ValueError):
    """A :class:`ClientCredentials` (or its use with :class:`OAuthClientAuth`)
    that cannot work: no way to authenticate, both a secret and a key, a key
    that does not load or does not fit the algorithm, a missing library."""


def _positive(instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ClientCredentialsConfigError(f"ClientCredentials.{attribute.name} must be positive")


@attrs.frozen(kw_only=True, repr=False)
class ClientCredentials:
    """The client of the client_credentials grant, for :class:`OAuthClientAuth`::

        creds = ClientCredentials(client_id="svc", client_secret=secret)
        creds = ClientCredentials(client_id="svc", private_key=pem, signing_algorithm="ES256")
        auth = OAuthClientAuth(url, client_credentials=creds)

    Discovery (protected resource metadata, authorization server metadata),
    token storage, renewal on expiry, ``401`` and ``403 insufficient_scope``
    work as for the authorization code flow; the token request is
    ``grant_type=client_credentials`` with ``resource`` (RFC 8707) and the
    selected ``scope``. PKCE and an authorization endpoint are not needed.
    """

    client_id: str
    client_secret: str | None = None
    #: A PEM private key (PKCS#8 or traditional), for ``private_key_jwt``.
    private_key: str | bytes | None = None
    #: The JWS algorithm of the client assertion.
    signing_algorithm: str = "ES256"
    #: The ``kid`` header of the client assertion (the key's id in the client's JWK set).
    key_id: str | None = None
    #: ``None``: ``private_key_jwt`` with a key; with a secret, ``client_secret_basic``
    #: or ``client_secret_post``, whichever the authorization server supports.
    method: AuthMethod | None = None
    #: The assertion's ``aud``: the authorization server's issuer identifier
    #: (RFC 7523bis; what MCP's conformance suite checks) or its token endpoint URL.
    assertion_audience: Audience = "issuer"
    #: Seconds from the assertion's ``iat`` to its ``exp``.
    assertion_lifetime: float = attrs.field(default=60.0, validator=_positive)
    _key: Any = attrs.field(init=False, default=None, eq=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.client_id, str) or not self.client_id:
            raise ClientCredentialsConfigError("ClientCredentials.client_id must be a non-empty string")
        if self.client_secret is not None and self.private_key is not None:
            raise ClientCredentialsConfigError(
                "ClientCredentials takes a client_secret or a private_key, not both"
            )
        if self.client_secret is None and self.private_key is None:
            raise ClientCredentialsConfigError(
                "ClientCredentials needs a client_secret (client_secret_basic / client_secret_post) "
                "or a private_key (private_key_jwt)"
            )
        if self.client_secret is not None:
            if not self.client_secret:
                raise ClientCredentialsConfigError("ClientCredentials.client_secret is empty")
            if self.method not in (None, *_SECRET_METHODS):
                raise ClientCredentialsConfigError(
                    f"token endpoint authentication {self.method!r} needs a private_key, not a client_secret"
                )
        else:
            if self.method not in (None, "private_key_jwt"):
                raise ClientCredentialsConfigError(
                    f"token endpoint authentication {self.method!r} needs a client_secret, not a private_key"
                )
            object.__setattr__(self, "_key", _load_key(self.private_key, self.signing_algorithm))
        if self.assertion_audience not in ("issuer", "token_endpoint"):
            raise ClientCredentialsConfigError(
                "ClientCredentials.assertion_audience must be 'issuer' or 'token_endpoint'"
            )

    @property
    def token_endpoint_auth_method(self) -> str | None:
        """The configured method (``None``: chosen from what the server supports)."""
        return "private_key_jwt" if self.private_key is not None else self.method

    def client_information(self) -> ClientInformation:
        """This client as the OAuth client code sees every client identity."""
        return ClientInformation(
            client_id=self.client_id,
            client_secret=self.client_secret,
            token_endpoint_auth_method=self.token_endpoint_auth_method,
        )

    def assertion(self, audience: str, *, now: float | None = None) -> str:
        """A fresh signed client assertion for ``audience`` (RFC 7523 §3):
        ``iss`` = ``sub`` = the client id, ``aud``, ``iat``, ``exp`` and a
        unique ``jti``."""
        if self._key is None:
            raise ClientCredentialsConfigError("a client assertion needs a private_key")
        import jwt  # checked by _load_key

        issued = int(time.time() if now is None else now)
        claims = {
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": audience,
            "iat": issued,
            "exp": issued + max(1, round(self.assertion_lifetime)),
            "jti": secrets.token_urlsafe(24),
        }
        headers: dict[str, Any] = {"typ": "JWT"}
        if self.key_id is not None:
            headers["kid"] = self.key_id
        try:
            return jwt.encode(claims, self._key, algorithm=self.signing_algorithm, headers=headers)
        except jwt.PyJWTError as exc:
            raise ClientCredentialsConfigError(f"cannot sign with this key: {type(exc).__name__}") from None

    def __repr__(self) -> str:
        secret = "None" if self.client_secret is None else "'<redacted>'"
        key = "None" if self.private_key is None else "'<redacted>'"
        return (
            f"ClientCredentials(client_id={self.client_id!r}, client_secret={secret}, private_key={key}, "
            f"signing_algorithm={self.signing_algorithm!r}, method={self.token_endpoint_auth_method!r})"
        )


def _load_key(pem: str | bytes | None, algorithm: str) -> Any:
    """The private key object, checked against ``algorithm``."""
    family = _ALGORITHMS.get(algorithm)
    if family is None:
        raise ClientCredentialsConfigError(
            f"unsupported signing_algorithm {algorithm!r}; one of {', '.join(_ALGORITHMS)}"
        )
    try:
        import jwt  # noqa: F401
        from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
    except ImportError:
        raise ClientCredentialsConfigError(
            "private_key_jwt needs PyJWT with cryptography: pip install 'pyjwt[crypto]'"
        ) from None
    data = pem.encode() if isinstance(pem, str) else pem
    try:
        key = load_pem_private_key(data or b"", password=None)
    except (ValueError, TypeError):
        # (the message of the underlying error could quote the key: not repeated)
        raise ClientCredentialsConfigError(
            "ClientCredentials.private_key is not an unencrypted PEM private key"
        ) from None
    kind, curve = family
    if kind == "ec":
        fits = isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == curve
    elif kind == "rsa":
        fits = isinstance(key, rsa.RSAPrivateKey) and key.key_size >= 2048
    else:
        fits = isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey)
    if not fits:
        need = {
            "ec": f"an EC key on {curve}",
            "rsa": "an RSA key of 2048 bits or more",
            "okp": "an Ed25519 or Ed448 key",
        }[kind]
        raise ClientCredentialsConfigError(
            f"signing_algorithm {algorithm} needs {need}; the private_key is a {type(key).__name__}"
        )
    return key
