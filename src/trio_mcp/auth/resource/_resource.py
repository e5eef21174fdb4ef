""":class:`ResourceServer`: what an MCP server acting as an OAuth 2.1
resource server checks, and what it publishes (RFC 9728) and answers
(RFC 6750 challenges). No HTTP here: the Streamable HTTP server uses it."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import attrs

from ._token import (
    AccessToken,
    InvalidToken,
    TokenVerifier,
    VerifierUnavailable,
    canonical_resource,
    string_set,
    string_tuple,
)

__all__ = ["METADATA_PATH", "AuthFailure", "ResourceServer", "bearer_token"]

#: RFC 9728's well-known path of protected resource metadata.
METADATA_PATH: Final = "/.well-known/oauth-protected-resource"


class AuthFailure(Exception):
    """A request that may not go on: ``status`` 401 (no or a bad token), 403
    (``error="insufficient_scope"``, ``scope`` the scopes it needs) or 503
    (the token could not be checked)."""

    def __init__(
        self, status: int, description: str, *, error: str | None = None, scope: Iterable[str] = ()
    ) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.error = error
        self.scope = tuple(sorted(set(scope)))


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer …`` header (None: no bearer token)."""
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip()


def _attribute(value: str) -> str:
    """``value`` as an RFC 6750 quoted attribute value (no ``"`` nor ``\\``)."""
    return "".join(c for c in value if 0x20 <= ord(c) <= 0x7E and c not in '"\\')


@functools.lru_cache(maxsize=256)
def _canonical_or_same(value: str) -> str:
    """``value`` in canonical form if it is a URI (remembered: every token of
    a server names the same few audiences)."""
    try:
        return canonical_resource(value)
    except ValueError:
        return value  # an audience that is not a URI is compared as given


@attrs.frozen(kw_only=True)
class ResourceServer:
    """An MCP server's authorization as an OAuth 2.1 resource server.

    ``verifier`` checks each bearer token (:class:`JwtVerifier`,
    :class:`IntrospectionVerifier`, or any :class:`TokenVerifier`).
    ``resource`` is the server's canonical URI (RFC 8707), e.g.
    ``https://mcp.example.com/mcp``: a token must name it in ``aud`` (or one
    of ``audiences``; a token without ``aud`` is refused too, unless
    ``check_audience=False``); left ``None``,
    :class:`~trio_mcp.serving.http.HttpServer` fills in the URL it serves.
    ``authorization_servers`` are the issuers named in the metadata (by
    default the verifier's ``issuer``). Every request needs the
    ``required_scopes``; tools, resources and prompts may need more
    (``scopes=`` on their decorators). ``scopes_supported`` is published in
    the metadata (by default the required scopes and every declared one).
    """

    verifier: TokenVerifier
    resource: str | None = None
    authorization_servers: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)
    required_scopes: frozenset[str] = attrs.field(factory=frozenset, converter=string_set)
    scopes_supported: tuple[str, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(string_tuple)
    )
    #: Audiences accepted besides ``resource`` (an API identifier some
    #: authorization servers put in ``aud`` instead of the URI).
    audiences: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)
    check_audience: bool = True
    #: Published as ``resource_name`` / ``resource_documentation`` (RFC 9728).
    resource_name: str | None = None
    resource_documentation: str | None = None
    _accepted: frozenset[str] = attrs.field(init=False, factory=frozenset, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.verifier, TokenVerifier):
            raise TypeError("verifier must have an async verify(token) method (a TokenVerifier)")
        if self.resource is not None:
            accepted = {canonical_resource(self.resource), *(_canonical_or_same(a) for a in self.audiences)}
            object.__setattr__(self, "_accepted", frozenset(accepted))
        if not self.authorization_servers:
            issuer = getattr(self.verifier, "issuer", None)
            if not isinstance(issuer, str):
                raise ValueError("name the authorization_servers (the verifier has no issuer)")
            object.__setattr__(self, "authorization_servers", (issuer,))

    def with_resource(self, resource: str) -> ResourceServer:
        """This configuration for the server at ``resource`` (kept when set already)."""
        return self if self.resource is not None else attrs.evolve(self, resource=resource)

    # ------------------------------------------------------------- metadata

    def metadata_url(self) -> str:
        """Where the metadata of ``resource`` is (RFC 9728 §3.1: the
        well-known path inserted before the resource's path)."""
        parts = urlsplit(self._resource())
        path = parts.path.rstrip("/")
        return urlunsplit((parts.scheme, parts.netloc, METADATA_PATH + path, "", ""))

    def metadata(self, declared_scopes: Iterable[str] = ()) -> dict[str, Any]:
        """The protected resource metadata document (RFC 9728 §2)."""
        scopes = self.scopes_supported
        if scopes is None:
            scopes = tuple(sorted({*self.required_scopes, *declared_scopes}))
        doc: dict[str, Any] = {
            "resource": self._resource(),
            "authorization_servers": list(self.authorization_servers),
            "bearer_methods_supported": ["header"],
        }
        if scopes:
            doc["scopes_supported"] = list(scopes)
        if self.resource_name is not None:
            doc["resource_name"] = self.resource_name
        if self.resource_documentation is not None:
            doc["resource_documentation"] = self.resource_documentation
        return doc

    def challenge(self, failure: AuthFailure) -> str:
        """The ``WWW-Authenticate`` value of a ``401``/``403`` (RFC 6750 §3)."""
        params = []
        if failure.error is not None:
            params.append(f'error="{failure.error}"')
            params.append(f'error_description="{_attribute(failure.description)}"')
        scope = failure.scope or tuple(sorted(self.required_scopes))
        if scope:
            params.append(f'scope="{_attribute(" ".join(scope))}"')
        params.append(f'resource_metadata="{self.metadata_url()}"')
        return "Bearer " + ", ".join(params)

    def _resource(self) -> str:
        if self.resource is None:
            raise RuntimeError("the ResourceServer has no resource URI yet")
        return self.resource

    # --------------------------------------------------------------- checks

    async def authenticate(self, authorization: str | None) -> AccessToken:
        """The token of an ``Authorization`` header value, verified, for this
        resource, with the required scopes; else :class:`AuthFailure`."""
        token = bearer_token(authorization)
        if token is None:
            raise AuthFailure(401, "a bearer token is required")
        if not token:
            raise AuthFailure(401, "the bearer token is empty", error="invalid_token")
        try:
            verified = await self.verifier.verify(token)
        except InvalidToken as exc:
            raise AuthFailure(401, exc.description, error="invalid_token") from None
        except VerifierUnavailable as exc:
            raise AuthFailure(503, f"the token could not be checked: {exc}") from None
        if self.check_audience and not self.accepts_audience(verified.audience):
            raise AuthFailure(401, "the token was issued for another resource", error="invalid_token")
        self.check_scopes(verified, self.required_scopes)
        return verified

    def accepts_audience(self, audience: Sequence[str]) -> bool:
        """Whether a token with this ``aud`` is meant for this server."""
        self._resource()
        return any(_canonical_or_same(value) in self._accepted for value in audience)

    def check_scopes(self, token: AccessToken, needed: Iterable[str]) -> None:
        """``403 insufficient_scope`` unless ``token`` holds every scope of ``needed``."""
        needed = frozenset(needed)
        missing = token.missing(needed)
        if missing:
            raise AuthFailure(
                403,
                f"the token lacks the scope {' '.join(sorted(missing))}",
                error="insufficient_scope",
                scope=needed | self.required_scopes,
            )
