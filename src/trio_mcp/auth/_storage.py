"""Where the OAuth client keeps tokens and client registrations."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ._models import ClientInformation, OAuthToken

__all__ = ["InMemoryTokenStorage", "TokenStorage"]


@runtime_checkable
class TokenStorage(Protocol):
    """Persistence of the OAuth client's state.

    Tokens are kept per MCP server URL; client registrations per
    authorization server issuer (credentials from one authorization server
    are never presented to another). Implementations that persist to disk
    hold secrets: store them accordingly. Every method may be awaited
    concurrently by several connections sharing one storage.
    """

    async def load_tokens(self, server_url: str) -> OAuthToken | None:
        """The tokens held for ``server_url``, if any."""
        ...

    async def save_tokens(self, server_url: str, tokens: OAuthToken) -> None:
        """Keep ``tokens`` for ``server_url`` (replacing earlier ones)."""
        ...

    async def delete_tokens(self, server_url: str) -> None:
        """Forget the tokens of ``server_url``."""
        ...

    async def load_client(self, issuer: str) -> ClientInformation | None:
        """The client registration held for the authorization server ``issuer``."""
        ...

    async def save_client(self, issuer: str, client: ClientInformation) -> None:
        """Keep ``client`` as the registration at ``issuer``."""
        ...


class InMemoryTokenStorage:
    """:class:`TokenStorage` in a dict: gone with the process (the default)."""

    def __init__(self) -> None:
        self._tokens: dict[str, OAuthToken] = {}
        self._clients: dict[str, ClientInformation] = {}

    async def load_tokens(self, server_url: str) -> OAuthToken | None:
        return self._tokens.get(server_url)

    async def save_tokens(self, server_url: str, tokens: OAuthToken) -> None:
        self._tokens[server_url] = tokens

    async def delete_tokens(self, server_url: str) -> None:
        self._tokens.pop(server_url, None)

    async def load_client(self, issuer: str) -> ClientInformation | None:
        return self._clients.get(issuer)

    async def save_client(self, issuer: str, client: ClientInformation) -> None:
        self._clients[issuer] = client
