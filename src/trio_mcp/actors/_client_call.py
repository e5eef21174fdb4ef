"""What a client-side middleware gets (see :mod:`._middleware`): the call a
:class:`~trio_mcp.ClientSession` is about to make. Apart from the server
side's middleware, so that a server process does not build this class."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from ._middleware import Next

if TYPE_CHECKING:
    from ._client import ClientSession

__all__ = ["ClientCall", "ClientMiddleware"]


@attrs.frozen
class ClientCall:
    """A call a :class:`~trio_mcp.ClientSession` is about to make."""

    session: ClientSession
    method: str
    #: The params as the session sends them (a wire Struct, a dict, or None).
    params: Any


#: ``async def mw(call: ClientCall, call_next: Next) -> result``.
ClientMiddleware = Callable[[ClientCall, Next], Awaitable[Any]]
