"""Opening one bench session: the single place where the load tool reaches a
server (a URL or a stdio command line), so the CLI's connection options can
be swapped in here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from .._util import collapse_groups
from ..actors._client import ClientSession, Era
from ..actors._client import open_session as open_client_session
from ..cli._targets import transport_factory

__all__ = ["open_session"]


@asynccontextmanager
async def open_session(
    target: Sequence[str], *, headers: dict[str, str] | None = None, era: Era = "auto"
) -> AsyncIterator[ClientSession]:
    """A new connection to ``target`` and an initialized session over it
    (``era="modern"``: stateless 2026-07-28 requests, no handshake).

    ``headers`` go on every HTTP request (Streamable HTTP, SSE) or on the
    WebSocket upgrade; a stdio command takes none."""
    if headers and not _is_url(target):
        raise ValueError("--header applies to URL targets, not to a stdio command")
    factory = transport_factory(target, headers=headers or None)
    options: dict[str, Any] = {"era": era, "server_key": " ".join(target)}
    with collapse_groups():
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(factory().run)
            async with open_client_session(stream, **options) as session:
                yield session
            nursery.cancel_scope.cancel()


def _is_url(target: Sequence[str]) -> bool:
    return len(target) == 1 and "://" in target[0]
