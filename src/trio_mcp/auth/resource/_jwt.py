"""JWT access tokens (RFC 9068 style), checked with PyJWT against a JWKS URL
(:class:`JwksCache`) or a static key (:class:`JwtVerifier`)."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any, Final, Generic, TypeVar

import httpx
import jwt
import msgspec
import trio
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from .._http import new_client
from ._token import AccessToken, InvalidToken, VerifierUnavailable, audiences_of, scopes_of

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "MAX_LEEWAY",
    "BoundedCache",
    "JwksCache",
    "JwtVerifier",
    "claims_token",
    "read_limited",
]

log = logging.getLogger("trio_mcp.auth.resource")

#: The signature algorithms a :class:`JwtVerifier` accepts by default.
ASYMMETRIC_ALGORITHMS: Final = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
_HMAC: Final = frozenset({"HS256", "HS384", "HS512"})
#: The most clock skew, in seconds, a verifier may tolerate on ``exp``/``nbf``/``iat``.
MAX_LEEWAY: Final = 300.0


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """At most ``size`` entries, each kept ``ttl`` seconds (trio's clock) and
    never past its own ``expires_at`` (a Unix time), the least recently used
    dropped first."""

    def __init__(self, size: int, ttl: float) -> None:
        self.size = size
        self.ttl = ttl
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= trio.current_time():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: K, value: V, expires_at: float | None = None) -> None:
        now = trio.current_time()
        deadline = now + self.ttl
        if expires_at is not None:
            deadline = min(deadline, now + expires_at - time.time())
        if self.size == 0 or deadline <= now:
            return
        self._entries[key] = (deadline, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)


class _Jwks(msgspec.Struct):
    keys: list[dict[str, Any]]


class JwksCache:
    """The keys of a JSON Web Key Set (RFC 7517) at ``url``, fetched with
    httpx when first needed and kept.

    Bounded: the set is fetched again once it is ``max_age`` seconds old,
    and when a token names a key id (``kid``) it does not hold, which is how
    a key rotation is seen, but never twice within ``min_refresh_interval``
    seconds (an unknown ``kid`` then fails without a fetch, so bad tokens
    cannot make the server hammer the JWKS). One fetch at a time; it may take
    ``fetch_timeout`` seconds and ``max_size`` bytes; at most ``max_keys``
    keys are kept. When a fetch fails, the keys fetched before stay in use.
    """

    def __init__(
        self,
        url: str,
        *,
        max_age: float = 3600.0,
        min_refresh_interval: float = 30.0,
        fetch_timeout: float = 10.0,
        max_size: int = 1 << 20,
        max_keys: int = 64,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not url.startswith(("https://", "http://")):
            raise ValueError(f"the JWKS URL must be an http(s) URL, not {url!r}")
        for name, value in (
            ("max_age", max_age),
            ("min_refresh_interval", min_refresh_interval),
            ("fetch_timeout", fetch_timeout),
            ("max_size", max_size),
            ("max_keys", max_keys),
        ):
            if value <= 0:
                raise ValueError(f"JwksCache {name} must be positive")
        self.url = url
        self.max_age = max_age
        self.min_refresh_interval = min_refresh_interval
        self.fetch_timeout = fetch_timeout
        self.max_size = max_size
        self.max_keys = max_keys
        self._client = http_client
        self._keys: list[dict[str, Any]] | None = None
        self._fetched_at = -float("inf")
        self._attempted_at = -float("inf")
        self._lock = trio.Lock()
        self._prepared: dict[tuple[int, str], jwt.PyJWK | None] = {}
        #: Fetches made (successful or not).
        self.fetches = 0

    async def key_for(self, kid: str | None, algorithm: str) -> jwt.PyJWK:
        """The key that verifies a token with this ``kid`` and ``alg``."""
        if self._keys is None or trio.current_time() - self._fetched_at >= self.max_age:
            await self._refresh(self.fetches)
        key = self._find(kid, algorithm)
        if key is None and trio.current_time() - self._attempted_at >= self.min_refresh_interval:
            await self._refresh(self.fetches)  # a new key (rotation)?
            key = self._find(kid, algorithm)
        if key is None:
            if self._keys is None:
                raise VerifierUnavailable(f"the JWKS at {self.url} could not be fetched")
            named = f"key id {kid!r}" if kid is not None else "no key id"
            raise InvalidToken(f"no key of the JWKS verifies {algorithm} with {named}")
        return key

    def _find(self, kid: str | None, algorithm: str) -> jwt.PyJWK | None:
        keys = self._keys or []
        candidates = [
            (index, jwk)
            for index, jwk in enumerate(keys)
            if (kid is None or jwk.get("kid") == kid)
            and jwk.get("use", "sig") == "sig"
            and jwk.get("alg", algorithm) == algorithm
        ]
        found = [key for key in (self._prepare(index, jwk, algorithm) for index, jwk in candidates) if key]
        # Without a kid, only an unambiguous key is used.
        return found[0] if len(found) == 1 or (kid is not None and found) else None

    def _prepare(self, index: int, jwk: dict[str, Any], algorithm: str) -> jwt.PyJWK | None:
        cached = (index, algorithm)
        if cached not in self._prepared:
            try:
                self._prepared[cached] = jwt.PyJWK(jwk, algorithm=algorithm)
            except (jwt.PyJWTError, ValueError, TypeError, KeyError):
                self._prepared[cached] = None  # not a key of that algorithm
        return self._prepared[cached]

    async def _refresh(self, seen: int) -> None:
        """Fetch the set, unless another task did since this one saw ``seen`` fetches."""
        async with self._lock:
            if self.fetches != seen:
                return
            self._attempted_at = trio.current_time()
            self.fetches += 1
            try:
                with trio.fail_after(self.fetch_timeout):
                    keys = await self._fetch()
            except (trio.TooSlowError, httpx.HTTPError, msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning(
                    "JWKS %s: fetch failed (%s); keeping %s keys", self.url, exc, len(self._keys or ())
                )
                return
            self._keys = keys[: self.max_keys]
            self._prepared.clear()
            self._fetched_at = trio.current_time()

    async def _fetch(self) -> list[dict[str, Any]]:
        if self._client is not None:
            return await self._read(self._client)
        async with new_client(self.fetch_timeout) as client:
            return await self._read(client)

    async def _read(self, client: httpx.AsyncClient) -> list[dict[str, Any]]:
        async with client.stream("GET", self.url, headers={"accept": "application/json"}) as response:
            body = await read_limited(response, self.max_size)
        return [key for key in msgspec.json.decode(body, type=_Jwks).keys if isinstance(key, dict)]


async def read_limited(response: httpx.Response, max_size: int) -> bytes:
    """The body of a ``200`` answer of at most ``max_size`` bytes (else an httpx error)."""
    if response.status_code != 200:
        raise httpx.HTTPStatusError(
            f"status {response.status_code}", request=response.request, response=response
        )
    body = b""
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > max_size:
            raise httpx.DecodingError(f"the answer is larger than {max_size} bytes")
    return body


class JwtVerifier:
    """Verifies JWT access tokens: the signature with a key of the JWKS at
    ``jwks_url`` (or :class:`JwksCache` ``jwks``) chosen by the token's
    ``kid``, or with a static ``key`` (a PEM public key, a key object, a JWK
    as a dict, or, for ``HS*`` algorithms only, the shared secret as bytes);
    ``exp`` (required) and ``nbf``/``iat`` with ``leeway`` seconds of clock
    skew (at most :data:`MAX_LEEWAY`); ``iss`` equal to ``issuer``. The
    ``alg`` must be one of ``algorithms`` (``none`` is never accepted, and
    symmetric algorithms only with a static secret). The audience and the
    scopes are checked by the :class:`ResourceServer` using it.

    Every request of a client carries the same token: a verified token is
    remembered (``cache_size`` of them, least recently used dropped first)
    for at most ``cache_ttl`` seconds and never past its ``exp``, so its
    signature is checked once, not on every request (a key withdrawn from
    the JWKS stops a token at the latest ``cache_ttl`` seconds later;
    ``cache_size=0``: no cache).

    ``token_type="at+jwt"`` also requires that header ``typ`` (RFC 9068
    access tokens; it keeps ID tokens and other JWTs of the same issuer out),
    compared without case and an ``application/`` prefix."""

    def __init__(
        self,
        issuer: str,
        *,
        jwks_url: str | None = None,
        jwks: JwksCache | None = None,
        key: Any = None,
        algorithms: Sequence[str] = ASYMMETRIC_ALGORITHMS,
        leeway: float = 30.0,
        cache_size: int = 1024,
        cache_ttl: float = 60.0,
        token_type: str | None = None,
    ) -> None:
        if sum(x is not None for x in (jwks_url, jwks, key)) != 1:
            raise ValueError("give exactly one of jwks_url, jwks and key")
        algorithms = tuple(algorithms)
        if not algorithms:
            raise ValueError("algorithms must name at least one algorithm")
        if any(alg.lower() == "none" for alg in algorithms):
            raise ValueError("the 'none' algorithm is never accepted")
        hmac = _HMAC.intersection(algorithms)
        if hmac and (len(hmac) != len(algorithms) or key is None or not isinstance(key, bytes)):
            raise ValueError("HS* algorithms need a static key given as bytes, and no other algorithm")
        unknown = set(algorithms) - _HMAC - set(ASYMMETRIC_ALGORITHMS)
        if unknown:
            raise ValueError(f"unsupported algorithms: {', '.join(sorted(unknown))}")
        if not 0 <= leeway <= MAX_LEEWAY:
            raise ValueError(f"leeway must be between 0 and {MAX_LEEWAY:g} seconds")
        if not issuer:
            raise ValueError("issuer must be given: tokens are accepted from one issuer")
        if cache_size < 0 or cache_ttl < 0:
            raise ValueError("cache_size and cache_ttl must not be negative (0: no cache)")
        self._cache: BoundedCache[str, AccessToken] = BoundedCache(cache_size, cache_ttl)
        self.issuer = issuer
        self.token_type = None if token_type is None else _media_type(token_type)
        self.algorithms = algorithms
        self.leeway = leeway
        self.jwks = JwksCache(jwks_url) if jwks_url is not None else jwks
        self._key = _static_key(key) if key is not None else None

    def __repr__(self) -> str:
        source = self.jwks.url if self.jwks is not None else "a static key"
        return f"<JwtVerifier issuer={self.issuer!r} keys from {source}>"

    async def verify(self, token: str) -> AccessToken:
        known = self._cache.get(token)
        if known is not None:
            if known.expires_at is not None and known.expires_at + self.leeway <= time.time():
                raise InvalidToken("the token has expired")
            return known
        verified = await self._verify(token)
        self._cache.put(token, verified, verified.expires_at)
        return verified

    async def _verify(self, token: str) -> AccessToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the token is not a well-formed JWT") from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in self.algorithms:
            raise InvalidToken(f"the token's algorithm {algorithm!r} is not accepted")
        kind = header.get("typ")
        if self.token_type is not None and (
            not isinstance(kind, str) or _media_type(kind) != self.token_type
        ):
            raise InvalidToken(f"the token's type {kind!r} is not {self.token_type!r}")
        if self.jwks is not None:
            kid = header.get("kid")
            key: Any = await self.jwks.key_for(kid if isinstance(kid, str) else None, algorithm)
        else:
            key = self._key
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss"], "verify_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("the token was issued by another issuer") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("the token's signature does not verify") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"the token has no {exc.claim!r} claim") from None
        except (jwt.PyJWTError, TypeError, ValueError):
            raise InvalidToken("the token was rejected") from None
        return claims_token(token, claims)


def claims_token(token: str, claims: dict[str, Any]) -> AccessToken:
    """The :class:`AccessToken` of verified JWT claims (or an introspection answer)."""
    subject = claims.get("sub")
    client_id = claims.get("client_id", claims.get("azp"))
    issuer = claims.get("iss")
    expires = claims.get("exp")
    return AccessToken(
        token=token,
        subject=subject if isinstance(subject, str) else None,
        client_id=client_id if isinstance(client_id, str) else None,
        scopes=scopes_of(claims.get("scope", claims.get("scp"))),
        issuer=issuer if isinstance(issuer, str) else None,
        audience=audiences_of(claims.get("aud")),
        expires_at=float(expires) if isinstance(expires, (int, float)) else None,
        claims=claims,
    )


def _media_type(value: str) -> str:
    value = value.strip().lower()
    return value.removeprefix("application/")


def _static_key(key: Any) -> Any:
    if isinstance(key, dict):
        return jwt.PyJWK(key).key
    if isinstance(key, str):
        key = key.encode()
    if isinstance(key, bytes) and key.lstrip().startswith(b"-----BEGIN CERTIFICATE"):
        return x509.load_pem_x509_certificate(key).public_key()
    if isinstance(key, bytes) and key.lstrip().startswith(b"-----BEGIN"):
        return serialization.load_pem_public_key(key)
    return key
