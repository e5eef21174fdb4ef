"""OAuth 2.1 authorization for MCP clients over Streamable HTTP.

:class:`OAuthClientAuth` is an :class:`httpx.Auth`: give it to the
``httpx.AsyncClient`` of :class:`~trio_mcp.transports.http.StreamableHttpTransport`
(``http_client=``) and every request to the MCP server carries a bearer
token, obtained on the server's first ``401`` through protected resource
metadata (RFC 9728), authorization server metadata (RFC 8414 / OpenID
discovery), a client identity (pre-registered, Client ID Metadata Document,
or dynamic client registration, RFC 7591) and the authorization code flow
with PKCE (S256), ``resource`` (RFC 8707) and ``iss`` (RFC 9207) checks;
refreshed when it expires; stepped up on ``403 insufficient_scope``. A
machine-to-machine client gives :class:`ClientCredentials` instead and gets
its tokens with the client_credentials grant (``client_secret_basic`` /
``client_secret_post``, or ``private_key_jwt``: an RFC 7523 client assertion)::

    auth = OAuthClientAuth(url, client_metadata=ClientMetadata(client_name="my-app"),
                           authorization_handler=my_browser_handler)
    async with httpx.AsyncClient(auth=auth) as http:
        stream = await nursery.start(StreamableHttpTransport(url, http_client=http).run)

    machine = OAuthClientAuth(url, client_credentials=ClientCredentials(client_id="svc", private_key=pem))

Pluggable: where tokens and registrations are kept (:class:`TokenStorage`,
in memory by default) and how the user authorizes
(:class:`AuthorizationHandler`; :class:`FollowRedirectHandler` by default, for
headless use and tests). Failures are :class:`OAuthError` subclasses (each an
``httpx.HTTPError``); a configuration that cannot work raises
:class:`ClientCredentialsConfigError` (a ``ValueError``) when it is built.
"""

from ._client import OAuthClientAuth, OAuthClientSettings
from ._credentials import ClientCredentials, ClientCredentialsConfigError
from ._dpop import DPoPKey
from ._errors import (
    AuthorizationResponseError,
    DiscoveryError,
    IssuerMismatchError,
    OAuthError,
    RegistrationError,
    ResourceMismatchError,
    TokenRequestError,
    UnsupportedServerError,
)
from ._grants import EnterpriseGrant, JwtBearerGrant
from ._handlers import AuthorizationHandler, AuthorizationRequest, FollowRedirectHandler
from ._models import (
    AuthorizationServerMetadata,
    ClientInformation,
    ClientMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from ._storage import InMemoryTokenStorage, TokenStorage

__all__ = [
    "AuthorizationHandler",
    "AuthorizationRequest",
    "AuthorizationResponseError",
    "AuthorizationServerMetadata",
    "ClientCredentials",
    "ClientCredentialsConfigError",
    "ClientInformation",
    "ClientMetadata",
    "DPoPKey",
    "DiscoveryError",
    "EnterpriseGrant",
    "FollowRedirectHandler",
    "InMemoryTokenStorage",
    "IssuerMismatchError",
    "JwtBearerGrant",
    "OAuthClientAuth",
    "OAuthClientSettings",
    "OAuthError",
    "OAuthToken",
    "ProtectedResourceMetadata",
    "RegistrationError",
    "ResourceMismatchError",
    "TokenRequestError",
    "TokenStorage",
    "UnsupportedServerError",
]
