"""Recording what an ``"inline"`` in-memory pair serves in the caller's task.

Such a request, the handler's notifications and the answer never cross the
pair, so a test wire wrapping the pair's ends records them here, as they
happen, with ``record(side, message, related_request_id)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trio_mcp.transports._base import RELATED_REQUEST

Record = Callable[[str, Any, Any], Any]


def recording_inline(serve: Any, record: Record, side: str) -> Any:
    """``serve`` (an inline server, or None) wrapped to record what it serves;
    ``side`` ("client" or "server") is the side whose requests it serves."""
    if serve is None:
        return None
    other = "server" if side == "client" else "client"

    async def recorded(request: Any, sink: Any) -> Any:
        # A server's request relates to the request its handler serves.
        record(side, request, RELATED_REQUEST.get() if side == "server" else None)

        async def recording_sink(note: Any) -> None:
            record(other, note, request.id)
            await sink(note)

        reply = await serve(request, recording_sink)
        record(other, reply, request.id)
        return reply

    return recorded
