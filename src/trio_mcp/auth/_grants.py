"""Assertion grants: the JWT bearer grant (RFC 7523 §2.1) for workload
identity federation, and enterprise-managed authorization (token exchange +
JWT bearer).

* :class:`JwtBearerGrant` — MCP's ``io.modelcontextprotocol/auth/wif``
  extension (SEP-1933): a workload presents a JWT its platform issued (a
  Kubernetes service account token, a cloud workload identity…) as the
  ``assertion`` of ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer``.
  A refused grant is an error, never retried with another grant.
* :class:`EnterpriseGrant` — ``io.modelcontextprotocol/enterprise-managed-authorization``
  (SEP-990): the user's identity provider exchanges the user's ID token for
  an *identity assertion JWT authorization grant* (ID-JAG, RFC 8693 token
  exchange with ``requested_token_type=…:id-jag``, ``audience`` = the MCP
  authorization server's issuer, ``resource`` = the MCP server), which the
  client then presents to the MCP authorization server with the JWT bearer
  grant, authenticating as its registered client there.

Both are given to :class:`~trio_mcp.auth.OAuthClientAuth` as ``grant=``: no
browser, no redirect, a new token whenever the old one expires or is refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import attrs

from ._models import ClientInformation

__all__ = [
    "ID_JAG_TOKEN_TYPE",
    "ID_TOKEN_TYPE",
    "JWT_BEARER_GRANT",
    "TOKEN_EXCHANGE_GRANT",
    "EnterpriseGrant",
    "JwtBearerGrant",
]

JWT_BEARER_GRANT: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE_GRANT: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:id-jag"

#: A token, or ``fn(audience)`` returning one (sync or async): called for every grant.
TokenSource = str | Callable[[str], str | Awaitable[str]]


async def resolve(source: TokenSource, audience: str) -> str:
    if isinstance(source, str):
        return source
    value = source(audience)
    if not isinstance(value, str):
        value = await value
    if not isinstance(value, str) or not value:
        raise ValueError("the token source returned no token")
    return value


def _nonempty(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, str) and not value:
        raise ValueError(f"{type(instance).__name__}.{attribute.name} is empty")


@attrs.frozen(kw_only=True, repr=False)
class JwtBearerGrant:
    """Workload identity: ``assertion`` (a JWT, or ``fn(audience)`` minting one
    for the authorization server's issuer) is exchanged for an access token.

    ``client_secret`` given: ``client_secret_basic`` at the token endpoint;
    else the client is public (``client_id`` in the form)."""

    client_id: str = attrs.field(validator=_nonempty)
    assertion: TokenSource = attrs.field(validator=_nonempty)
    client_secret: str | None = None

    def client_information(self) -> ClientInformation:
        return ClientInformation(
            client_id=self.client_id,
            client_secret=self.client_secret,
            token_endpoint_auth_method="client_secret_basic" if self.client_secret else "none",
        )

    async def form(self, issuer: str, resource: str, exchange: Any) -> dict[str, str]:
        """The token request's form (besides client authentication and scope)."""
        assertion = await resolve(self.assertion, issuer)
        return {"grant_type": JWT_BEARER_GRANT, "assertion": assertion, "resource": resource}

    def __repr__(self) -> str:
        return f"JwtBearerGrant(client_id={self.client_id!r}, assertion='<redacted>')"


@attrs.frozen(kw_only=True, repr=False)
class EnterpriseGrant:
    """Enterprise-managed authorization: the IdP turns ``id_token`` (or
    ``fn(audience)``'s) into an ID-JAG at ``idp_token_endpoint``; the MCP
    authorization server turns the ID-JAG into an access token for
    ``client_id`` / ``client_secret`` (its registration there)."""

    idp_token_endpoint: str = attrs.field(validator=_nonempty)
    id_token: TokenSource = attrs.field(validator=_nonempty)
    client_id: str = attrs.field(validator=_nonempty)
    client_secret: str | None = None
    #: The client's id at the IdP (sent with the token exchange), if it has one.
    idp_client_id: str | None = None
    idp_client_secret: str | None = None

    def client_information(self) -> ClientInformation:
        return ClientInformation(
            client_id=self.client_id,
            client_secret=self.client_secret,
            token_endpoint_auth_method="client_secret_basic" if self.client_secret else "none",
        )

    async def form(
        self,
        issuer: str,
        resource: str,
        exchange: Callable[[str, dict[str, str]], Awaitable[dict[str, Any]]],
    ) -> dict[str, str]:
        """Token exchange at the IdP (``exchange(endpoint, form) -> JSON``), then the JWT bearer form."""
        request = {
            "grant_type": TOKEN_EXCHANGE_GRANT,
            "subject_token": await resolve(self.id_token, issuer),
            "subject_token_type": ID_TOKEN_TYPE,
            "requested_token_type": ID_JAG_TOKEN_TYPE,
            "audience": issuer,
            "resource": resource,
        }
        if self.idp_client_id is not None:
            request["client_id"] = self.idp_client_id
            if self.idp_client_secret is not None:
                request["client_secret"] = self.idp_client_secret
        answer = await exchange(self.idp_token_endpoint, request)
        jag = answer.get("access_token")
        if answer.get("issued_token_type") != ID_JAG_TOKEN_TYPE or not isinstance(jag, str) or not jag:
            raise ValueError(
                f"the identity provider's token exchange answer is not an ID-JAG "
                f"(issued_token_type {answer.get('issued_token_type')!r})"
            )
        return {"grant_type": JWT_BEARER_GRANT, "assertion": jag, "resource": resource}

    def __repr__(self) -> str:
        return (
            f"EnterpriseGrant(idp_token_endpoint={self.idp_token_endpoint!r}, client_id={self.client_id!r}, "
            "id_token='<redacted>')"
        )


#: What ``OAuthClientAuth(grant=...)`` takes.
AssertionGrant = JwtBearerGrant | EnterpriseGrant
