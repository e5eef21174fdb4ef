"""Opaque (or any) access tokens checked by OAuth 2.0 token introspection
(RFC 7662), the answers kept in a bounded cache."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import httpx
import msgspec
import trio

from .._http import new_client
from ._jwt import BoundedCache, claims_token, read_limited
from ._token import AccessToken, InvalidToken, VerifierUnavailable

__all__ = ["IntrospectionVerifier"]


class IntrospectionVerifier:
    """Asks the authorization server's introspection endpoint ``url`` about
    each token (``POST token=…``), authenticating with ``client_id`` and
    ``client_secret`` (HTTP Basic) when given. A token is accepted when the
    answer says ``"active": true``, its ``exp`` (if any) has not passed, and
    its ``iss`` (if any) is ``issuer`` (when given).

    Answers, accepting or refusing, are cached by the token's SHA-256 for
    ``cache_ttl`` seconds (an accepted token no longer than its ``exp``), at
    most ``cache_size`` of them (the least recently used go first): a token
    revoked at the authorization server may still be accepted for up to
    ``cache_ttl`` seconds. One introspection may take ``fetch_timeout``
    seconds and ``max_size`` bytes; beyond, or when the endpoint fails, the
    request gets ``503`` (:class:`VerifierUnavailable`).
    """

    def __init__(
        self,
        url: str,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        issuer: str | None = None,
        cache_size: int = 1024,
        cache_ttl: float = 60.0,
        fetch_timeout: float = 10.0,
        max_size: int = 64 << 10,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not url.startswith(("https://", "http://")):
            raise ValueError(f"the introspection URL must be an http(s) URL, not {url!r}")
        if (client_id is None) != (client_secret is None):
            raise ValueError("give both client_id and client_secret, or neither")
        if cache_size < 0 or cache_ttl < 0:
            raise ValueError("cache_size and cache_ttl must not be negative (0: no cache)")
        if fetch_timeout <= 0 or max_size <= 0:
            raise ValueError("fetch_timeout and max_size must be positive")
        self.url = url
        self.issuer = issuer
        self.cache_size = cache_size
        self.cache_ttl = cache_ttl
        self.fetch_timeout = fetch_timeout
        self.max_size = max_size
        self._auth = None if client_id is None else httpx.BasicAuth(client_id, client_secret or "")
        self._client = http_client
        self._cache: BoundedCache[bytes, AccessToken | str] = BoundedCache(cache_size, cache_ttl)
        #: Introspection requests made (cache misses).
        self.requests = 0

    def __repr__(self) -> str:
        return f"<IntrospectionVerifier {self.url}>"

    async def verify(self, token: str) -> AccessToken:
        digest = hashlib.sha256(token.encode()).digest()
        cached = self._cache.get(digest)
        if isinstance(cached, str):
            raise InvalidToken(cached)
        if cached is not None:
            return cached
        try:
            verdict = self._judge(token, await self._introspect(token))
        except InvalidToken as exc:
            self._cache.put(digest, exc.description)
            raise
        self._cache.put(digest, verdict, verdict.expires_at)
        return verdict

    def _judge(self, token: str, answer: dict[str, Any]) -> AccessToken:
        if answer.get("active") is not True:
            raise InvalidToken("the token is not active")
        expires = answer.get("exp")
        if isinstance(expires, (int, float)) and expires <= time.time():
            raise InvalidToken("the token has expired")
        if self.issuer is not None and "iss" in answer and answer["iss"] != self.issuer:
            raise InvalidToken("the token was issued by another issuer")
        if self.issuer is not None and "iss" not in answer:
            answer = {**answer, "iss": self.issuer}  # the endpoint speaks for its issuer
        return claims_token(token, answer)

    async def _introspect(self, token: str) -> dict[str, Any]:
        self.requests += 1
        try:
            with trio.fail_after(self.fetch_timeout):
                if self._client is not None:
                    body = await self._post(self._client, token)
                else:
                    async with new_client(self.fetch_timeout) as client:
                        body = await self._post(client, token)
            answer = msgspec.json.decode(body)
        except (trio.TooSlowError, httpx.HTTPError, msgspec.DecodeError) as exc:
            raise VerifierUnavailable(f"token introspection at {self.url} failed: {exc}") from None
        if not isinstance(answer, dict):
            raise VerifierUnavailable(
                f"token introspection at {self.url} answered something else than an object"
            )
        return answer

    async def _post(self, client: httpx.AsyncClient, token: str) -> bytes:
        form = {"token": token, "token_type_hint": "access_token"}
        headers = {"accept": "application/json"}
        auth = self._auth if self._auth is not None else httpx.USE_CLIENT_DEFAULT
        async with client.stream("POST", self.url, data=form, headers=headers, auth=auth) as response:
            return await read_limited(response, self.max_size)
