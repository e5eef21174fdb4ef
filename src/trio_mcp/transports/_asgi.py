"""What the ASGI transports (Streamable HTTP, legacy HTTP+SSE) share: the
ASGI types, the lifespan protocol, header parsing and small HTTP errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import trio

__all__ = [
    "Scope",
    "Receive",
    "Send",
    "AsgiApp",
    "HttpError",
    "Disconnected",
    "header_map",
    "as_tuple",
    "watch_disconnect",
]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class HttpError(Exception):
    """Answer the request with ``status`` and a JSON-RPC error body."""

    def __init__(self, status: int, message: str, *, code: int = -32000, headers: Iterable[tuple[bytes, bytes]] = ()):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = list(headers)


class Disconnected(Exception):
    """The HTTP client went away while its request was read."""


def header_map(scope: Scope) -> dict[str, str]:
    """Request headers by lowercase name (repeated ones joined with ", ")."""
    out: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def as_tuple(value: Iterable[str]) -> tuple[str, ...]:
    """A setting given as one string or several, as a tuple."""
    return (value,) if isinstance(value, str) else tuple(value)


async def watch_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    """Cancel ``scope`` when the client disconnects."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


class AsgiApp:
    """An ASGI 3 application that hosts its own actor: ``run`` is either
    started by the server actor that owns the app or, under a plain ASGI
    server, inside the ASGI lifespan. Subclasses provide ``_http``, ``run``,
    ``aclose`` and the ``_running`` flag."""

    _running: bool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        # websocket and others: not ours; returning closes them

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        if self._running:  # run() is hosted elsewhere (the server actor)
            await send({"type": "lifespan.startup.complete"})
            while (await receive())["type"] != "lifespan.shutdown":
                pass
            await send({"type": "lifespan.shutdown.complete"})
            return
        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(self.run)
            except Exception as exc:
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
            while (await receive())["type"] != "lifespan.shutdown":
                pass
            await self.aclose()
        await send({"type": "lifespan.shutdown.complete"})
