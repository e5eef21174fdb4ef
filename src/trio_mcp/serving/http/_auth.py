"""The Streamable HTTP server as an OAuth 2.1 resource server (MCP
authorization, 2025-06-18 onward), with a
:class:`~trio_mcp.auth.resource.ResourceServer`:

* ``GET /.well-known/oauth-protected-resource`` and the same path suffixed
  with the MCP endpoint's (``…/mcp``) serve the protected resource metadata
  (RFC 9728), naming the authorization servers and the scopes. They, the
  health routes and custom routes need no token.
* Every request to the MCP endpoint (CORS preflights aside) needs a bearer
  token the verifier accepts, issued for this server (``aud``, RFC 8707),
  with the server's required scopes: else ``401`` with ``WWW-Authenticate:
  Bearer resource_metadata="…"`` (and ``error="invalid_token"`` when a token
  was presented), ``403`` with ``error="insufficient_scope"``, or ``503``
  when the token cannot be checked.
* A request naming a tool, resource or prompt that declares more scopes
  (``scopes=``) gets ``403`` with ``error="insufficient_scope"`` and the
  ``scope`` it needs, at the HTTP layer and before any handler runs (MCP
  2025-11-25 "Scope challenge handling": the client can step up and retry);
  a batch is refused as a whole.
* A session belongs to the principal that created it (issuer, subject,
  client id): its id presented with another principal's token gets ``404``,
  as an unknown id does (the id is no oracle). The same principal may
  present a new token (refreshed, stepped up); the session then carries it.
* Handlers read the token as ``ctx.auth``: the request's headers travel as
  :class:`AuthorizedHeaders`, which carry it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import msgspec
from msgspec import Struct

from ...auth.resource import METADATA_PATH, AccessToken, AuthFailure, ResourceServer
from ...protocol import Request, coerce
from ...transports._asgi import HttpError, Receive, Scope, Send, respond

if TYPE_CHECKING:
    from ._app import StreamableHttpApp
    from ._session import HttpSessionStream

__all__ = ["AuthorizedHeaders", "HttpAuth"]


class AuthorizedHeaders(dict[str, str]):
    """A request's headers (lower-case names) and the token it came with."""

    __slots__ = ("auth",)

    def __init__(self, headers: dict[str, str], auth: AccessToken) -> None:
        super().__init__(headers)
        self.auth = auth


class _Target(Struct):
    name: Any = None
    uri: Any = None
    ref: Any = None


def _target(request: Request) -> str | None:
    """The tool or prompt name, or the resource URI, a request names."""
    try:
        found = coerce(request.params, _Target)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    value = found.name if isinstance(found.name, str) else found.uri
    if request.method == "completion/complete" and isinstance(found.ref, dict):
        value = found.ref.get("name", found.ref.get("uri"))
    return value if isinstance(value, str) else None


def _http_error(config: ResourceServer, failure: AuthFailure) -> HttpError:
    headers = []
    if failure.status in (401, 403):
        headers.append((b"www-authenticate", config.challenge(failure).encode("latin-1")))
    message = {401: "Unauthorized", 403: "Forbidden", 503: "Service Unavailable"}.get(failure.status, "Error")
    return HttpError(failure.status, f"{message}: {failure.description}", headers=headers)


class HttpAuth:
    """A :class:`ResourceServer` at work in one :class:`StreamableHttpApp`."""

    def __init__(self, config: ResourceServer, app: StreamableHttpApp) -> None:
        self.config = config
        self.app = app

    def metadata_paths(self) -> list[str]:
        """Where the metadata is served: the root form and the one suffixed
        with the MCP endpoint's path (RFC 9728 §3.1), and with the resource
        URI's path when it is another (a proxy forwarding ``/team/mcp`` here)."""
        suffixes = [self.app.settings.path]
        if self.config.resource is not None:
            suffixes.append(urlsplit(self.config.resource).path)
        paths = [METADATA_PATH + suffix.rstrip("/") for suffix in suffixes]
        return list(dict.fromkeys([METADATA_PATH, *paths]))

    def bind(self, url: str) -> None:
        """The server's URL is known (it listens): it is the resource URI,
        unless the configuration named one."""
        self.config = self.config.with_resource(url)

    async def serve_metadata(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") not in ("GET", "HEAD"):
            await respond(send, 405, b"", [(b"allow", b"GET, HEAD")])
            return
        if self.config.resource is None:
            await respond(send, 503, b"")
            return
        declared = getattr(self.app._shared, "declared_scopes", None)
        doc = self.config.metadata(declared() if callable(declared) else ())
        headers = [(b"cache-control", b"public, max-age=3600"), (b"access-control-allow-origin", b"*")]
        body = msgspec.json.encode(doc)
        await respond(send, 200, body if scope.get("method") == "GET" else b"", headers)

    async def authenticate(self, headers: dict[str, str]) -> AuthorizedHeaders:
        """``headers`` with the verified token, or the ``HttpError`` to answer."""
        config = self.config
        if config.resource is None:
            raise HttpError(503, "Service Unavailable: the server is starting")
        try:
            token = await config.authenticate(headers.get("authorization"))
        except AuthFailure as failure:
            raise _http_error(config, failure) from None
        return AuthorizedHeaders(headers, token)

    def check_scopes(self, mcp_app: Any, headers: dict[str, str], requests: list[Request]) -> None:
        """``403 insufficient_scope`` when a request needs scopes the token lacks."""
        scopes_for = getattr(mcp_app, "scopes_for", None)
        token = getattr(headers, "auth", None)
        if scopes_for is None or token is None:
            return
        needed: set[str] = set()
        for request in requests:
            needed.update(scopes_for(request.method, _target(request)))
        if needed:
            try:
                self.config.check_scopes(token, needed)
            except AuthFailure as failure:
                raise _http_error(self.config, failure) from None

    def claim(self, session: HttpSessionStream, headers: dict[str, str]) -> None:
        """A session, being created or named by a request: the request's
        principal must be the one that created it (else ``404``)."""
        token: AccessToken | None = getattr(headers, "auth", None)
        if token is None:
            return
        owner: AccessToken | None = session.auth
        if owner is not None and owner.identity != token.identity:
            raise HttpError(404, "Session not found")
        session.auth = token
