"""In-memory client/server pairs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from .._util import collapse_groups
from ..actors._client import ClientSession, open_session
from ..server._lowlevel import LowLevelServer
from ..transports.memory import Mode, memory_pair


@asynccontextmanager
async def connected(
    app: LowLevelServer, *, mode: Mode = "zero-copy", **client_options: Any
) -> AsyncIterator[ClientSession]:
    """An initialized client session talking to ``app`` over an in-memory pair.

    ``mode="bytes"`` sends every message through the JSON codec, as a wire
    would; ``mode="inline"`` serves calls in the calling task (see
    :mod:`trio_mcp.transports.memory`).
    """
    client_end, server_end = memory_pair(mode=mode)
    with collapse_groups():
        async with app.running(), trio.open_nursery() as nursery:
            await app.start_session(server_end, nursery)
            async with open_session(client_end, **client_options) as client:
                yield client
            nursery.cancel_scope.cancel()
