"""What the ASGI transports (Streamable HTTP, legacy HTTP+SSE) share: the
ASGI types, the lifespan protocol, header parsing and small HTTP errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

import trio

from ..protocol import encode

__all__ = [
    "AsgiApp",
    "Disconnected",
    "HttpError",
    "Receive",
    "SSE_HEADERS",
    "Scope",
    "Send",
    "WholeBody",
    "as_tuple",
    "body_nowait",
    "error_body",
    "header_map",
    "read_body",
    "respond",
    "start_event_stream",
    "watch_disconnect",
]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class HttpError(Exception):
    """Answer the request with ``status`` and a JSON-RPC error body."""

    def __init__(
        self, status: int, message: str, *, code: int = -32000, headers: Iterable[tuple[bytes, bytes]] = ()
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = list(headers)


class Disconnected(Exception):
    """The HTTP client went away while its request was read."""


#: Header maps by the raw headers they were made from (see header_map).
_HEADER_MAPS: dict[tuple[tuple[bytes, bytes], ...], dict[str, str]] = {}
#: Most raw header lists remembered by header_map.
HEADER_MAP_CACHE: Final = 256


def header_map(scope: Scope) -> dict[str, str]:
    """Request headers by lowercase name (repeated ones joined with ", ").

    A client sends the same headers request after request (on a connection,
    only the length changes, and few lengths recur), so the maps of the last
    :data:`HEADER_MAP_CACHE` distinct header lists are kept and copied."""
    raw = scope.get("headers", ())
    try:
        key = tuple(raw)
        known = _HEADER_MAPS.get(key)
    except TypeError:  # not (bytes, bytes) pairs: not worth remembering
        return _header_map(raw)
    if known is None:
        known = _header_map(raw)
        if len(_HEADER_MAPS) >= HEADER_MAP_CACHE:
            _HEADER_MAPS.clear()
        _HEADER_MAPS[key] = known
    return known.copy()


def _header_map(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    pairs = [(name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in raw]
    out = dict(pairs)
    if len(out) < len(pairs):  # a repeated header: its values joined, in order
        out = {}
        for name, value in pairs:
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


async def respond(
    send: Send,
    status: int,
    body: bytes,
    headers: Iterable[tuple[bytes, bytes]] = (),
    *,
    content_type: bytes = b"application/json",
) -> None:
    """A whole response: status, length, type (when there is a body), ``headers``."""
    out = [(b"content-length", b"%d" % len(body))]
    if body:
        out.append((b"content-type", content_type))
    out.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body, "more_body": False})


#: The headers of a ``text/event-stream`` response, never cached or buffered by proxies.
SSE_HEADERS: Final = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
)


async def start_event_stream(send: Send, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """Start a ``200 text/event-stream`` response (:data:`SSE_HEADERS`, then ``headers``)."""
    await send({"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, *headers]})


async def read_body(
    receive: Receive,
    headers: dict[str, str],
    limit: int,
    *,
    too_large_headers: Iterable[tuple[bytes, bytes]] = (),
    start: bytes = b"",
) -> bytes:
    """The request body, at most ``limit`` bytes (413 beyond, with
    ``too_large_headers``); raises :class:`Disconnected` if the client left.
    ``start``: what :func:`body_nowait` has read of it already."""
    if not start:
        _check_length(headers, limit, too_large_headers)
    body: bytes | bytearray = start
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        body = _grow(body, message.get("body", b""), limit, too_large_headers)
        if not message.get("more_body", False):
            return bytes(body)


class WholeBody:
    """A ``receive`` for a request whose body is all there already (one
    passed on whole, as a node of a cluster gets a request forwarded to it):
    the body in one message, then ``http.disconnect`` once ``gone`` returns.
    :func:`body_nowait` takes its body at once."""

    __slots__ = ("_body", "_gone")

    def __init__(self, body: bytes, gone: Callable[[], Awaitable[None]]) -> None:
        self._body: bytes | None = body
        self._gone = gone

    def peek(self) -> bytes | None:
        """The body, unless it was taken already (it stays to be taken)."""
        return self._body

    def take(self) -> bytes | None:
        """The body, unless it was taken already."""
        body, self._body = self._body, None
        return body

    async def __call__(self) -> dict[str, Any]:
        body = self.take()
        if body is not None:
            return {"type": "http.request", "body": body, "more_body": False}
        await self._gone()
        return {"type": "http.disconnect"}


def body_nowait(
    receive: Receive,
    headers: dict[str, str],
    limit: int,
    *,
    too_large_headers: Iterable[tuple[bytes, bytes]] = (),
) -> tuple[bytes, bool]:
    """As much of the request body as the server has queued for the app,
    without waiting: ``(body, whole)``; when not ``whole``, :func:`read_body`
    with ``start=body`` reads the rest. Usually the whole body is there when
    the app is called, so reading it needs no wait (and no deadline); that is
    known when ``receive`` is a trio memory channel's (hypercorn's trio
    worker) or a :class:`WholeBody`, otherwise nothing is read here. A body of its ``Content-Length``
    is whole without the empty message that ends it (hypercorn queues that
    one a scheduling turn later; nothing needs to read it). Raises as
    :func:`read_body`."""
    if type(receive) is WholeBody:
        whole = receive.take()
        if whole is None:
            return b"", False
        return bytes(_grow(b"", whole, limit, too_large_headers)), True
    channel = getattr(receive, "__self__", None)
    if type(channel) is not trio.MemoryReceiveChannel:
        return b"", False
    expected = _check_length(headers, limit, too_large_headers)
    body: bytes | bytearray = b""
    while True:
        try:
            message = channel.receive_nowait()
        except trio.WouldBlock:
            return bytes(body), len(body) == expected
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise Disconnected from None
        if message["type"] == "http.disconnect":
            raise Disconnected
        body = _grow(body, message.get("body", b""), limit, too_large_headers)
        if not message.get("more_body", False) or len(body) == expected:
            return bytes(body), True


def _check_length(
    headers: dict[str, str], limit: int, too_large_headers: Iterable[tuple[bytes, bytes]]
) -> int | None:
    """The ``Content-Length`` (None without a valid one); 413 above ``limit``."""
    length = headers.get("content-length")
    if length is None or not length.strip().isdigit():
        return None
    expected = int(length)
    if expected > limit:
        raise _too_large(limit, too_large_headers)
    return expected


def _grow(
    body: bytes | bytearray, chunk: bytes, limit: int, too_large_headers: Iterable[tuple[bytes, bytes]]
) -> bytes | bytearray:
    if not chunk:
        return body
    if not body:
        body = chunk  # one chunk, no copy: the usual case
    else:
        if type(body) is bytes:
            body = bytearray(body)
        body += chunk
    if len(body) > limit:
        raise _too_large(limit, too_large_headers)
    return body


def _too_large(limit: int, headers: Iterable[tuple[bytes, bytes]]) -> HttpError:
    return HttpError(413, f"Payload too large (limit {limit} bytes)", headers=headers)


def error_body(code: int, message: str, ident: Any = None) -> bytes:
    """A JSON-RPC error response body."""
    return encode({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}})


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
