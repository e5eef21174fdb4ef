"""Opening one bench session: the single place where the load tool reaches a
server (a URL or a stdio command line), with the CLI's connection options
(``--header``, ``--auth``: :func:`trio_mcp.cli._connect.connect_transport`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import trio

from .._util import collapse_groups
from ..actors._client import ClientSession, Era
from ..actors._client import open_session as open_client_session
from ..cli._connect import AuthSettings, connect_transport

__all__ = ["open_session"]


@asynccontextmanager
async def open_session(
    target: Sequence[str],
    *,
    headers: dict[str, str] | None = None,
    auth: AuthSettings | None = None,
    era: Era = "auto",
) -> AsyncIterator[ClientSession]:
    """A new connection to ``target`` and an initialized session over it
    (``era="modern"``: stateless 2026-07-28 requests, no handshake).

    ``headers`` go on every HTTP request (Streamable HTTP, SSE) or on the
    WebSocket upgrade; ``auth`` authorizes them (a bearer token read from its
    environment variable, or the OAuth client credentials grant); a stdio
    command takes neither (:class:`~trio_mcp.cli._targets.TargetError`)."""
    options: dict[str, Any] = {"era": era, "server_key": " ".join(target)}
    with collapse_groups():
        async with AsyncExitStack() as stack:
            factory = await connect_transport(target, headers=headers, auth=auth, stack=stack)
            nursery = await stack.enter_async_context(trio.open_nursery())
            stream = await nursery.start(factory().run)
            async with open_client_session(stream, **options) as session:
                yield session
            nursery.cancel_scope.cancel()
