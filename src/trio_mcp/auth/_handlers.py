"""How the user is sent to the authorization endpoint and how the answer comes back."""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable
from urllib.parse import urljoin

import attrs
import httpx
import trio

from ._discovery import same_endpoint
from ._errors import AuthorizationResponseError
from ._http import new_client

__all__ = ["AuthorizationHandler", "AuthorizationRequest", "FollowRedirectHandler"]

log = logging.getLogger("trio_mcp.auth")

_REDIRECTS = (301, 302, 303, 307, 308)


@attrs.frozen(repr=False)
class AuthorizationRequest:
    """One authorization request the user has to answer.

    ``url`` is the authorization endpoint with every parameter (PKCE
    challenge, ``state``, ``resource``, ``scope``); the answer is the URL the
    authorization server redirects the user agent to: ``redirect_uri`` with
    ``code``, ``state`` (and ``iss``) or ``error`` in its query.
    """

    url: str
    redirect_uri: str
    #: The issuer identifier of the authorization server.
    issuer: str
    #: The ``scope`` requested (``None``: left to the server's default).
    scope: str | None
    #: The MCP server (``resource``) the access is for.
    resource: str

    def __repr__(self) -> str:  # the URL carries state and the PKCE challenge
        return (
            f"AuthorizationRequest(issuer={self.issuer!r}, scope={self.scope!r}, resource={self.resource!r})"
        )


@runtime_checkable
class AuthorizationHandler(Protocol):
    """Sends the user to the authorization URL and brings back the redirect.

    ``redirect_uri`` is registered with the authorization server and sent in
    every authorization request. ``authorize`` returns the full URL the user
    agent was redirected to (the client validates ``state`` and ``iss`` and
    reads ``code`` or ``error`` itself). An interactive handler opens a
    browser and listens on the loopback ``redirect_uri``; the client bounds
    the whole call by ``OAuthClientSettings.authorization_timeout``.
    """

    @property
    def redirect_uri(self) -> str: ...

    async def authorize(self, request: AuthorizationRequest) -> str: ...


class FollowRedirectHandler:
    """For headless use and tests: GET the authorization URL without a user
    and take the ``Location`` that points back at ``redirect_uri``.

    Works with authorization servers that approve at once (test servers, the
    conformance suite's mock, pre-approved machine clients); other redirects
    are followed up to ``max_redirects`` hops. Nothing listens on
    ``redirect_uri``: it is never requested. Each hop is bounded by
    ``timeout`` seconds.
    """

    def __init__(
        self,
        redirect_uri: str = "http://localhost/callback",
        *,
        http_client: httpx.AsyncClient | None = None,
        timeout: float = 10.0,
        max_redirects: int = 5,
    ) -> None:
        self._redirect_uri = redirect_uri
        self._client = http_client
        self.timeout = timeout
        self.max_redirects = max_redirects

    @property
    def redirect_uri(self) -> str:
        return self._redirect_uri

    async def authorize(self, request: AuthorizationRequest) -> str:
        if self._client is not None:
            return await self._follow(self._client, request)
        async with new_client(self.timeout) as client:
            return await self._follow(client, request)

    async def _follow(self, client: httpx.AsyncClient, request: AuthorizationRequest) -> str:
        url = request.url
        for _ in range(self.max_redirects + 1):
            try:
                with trio.fail_after(self.timeout):
                    response = await client.get(url, follow_redirects=False)
            except trio.TooSlowError:
                raise AuthorizationResponseError(
                    f"the authorization endpoint did not answer within {self.timeout}s"
                ) from None
            except httpx.HTTPError as exc:
                raise AuthorizationResponseError(
                    f"the authorization endpoint could not be reached: {type(exc).__name__}"
                ) from None
            location = response.headers.get("location")
            if response.status_code not in _REDIRECTS or not location:
                raise AuthorizationResponseError(
                    f"the authorization endpoint answered HTTP {response.status_code} "
                    "instead of redirecting back to the redirect URI"
                )
            target: str = urljoin(url, location)
            if same_endpoint(target, request.redirect_uri):
                return target
            log.debug("authorization: following a redirect (HTTP %d)", response.status_code)
            url = target
        raise AuthorizationResponseError(f"more than {self.max_redirects} redirects before the redirect URI")
