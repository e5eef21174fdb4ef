"""The client side of the legacy HTTP+SSE transport: :class:`SseTransport`
and its :class:`SseClientStream`. Decisions: see :mod:`trio_mcp.transports.sse`."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import trio

from ..._util import collapse_groups
from ...protocol import Frame, decode, encode
from .._base import TransportClosed, TransportError
from ..http._sse import SseDecoder, SseError

__all__ = ["SseClientStream", "SseTransport", "resolve_endpoint"]

log = logging.getLogger("trio_mcp.sse")


def resolve_endpoint(sse_url: str, data: str) -> str:
    """The POST URL announced by an ``endpoint`` event, resolved against the
    SSE URL; it must have the same origin. Raises :class:`TransportError`."""
    endpoint = urljoin(sse_url, data.strip())
    a, b = urlsplit(sse_url), urlsplit(endpoint)
    if (a.scheme, a.hostname, a.port) != (b.scheme, b.hostname, b.port):
        raise TransportError(f"the endpoint {endpoint!r} is not on the origin of {sse_url!r}")
    return endpoint


@lru_cache(maxsize=1)
def _default_ssl_context() -> ssl.SSLContext:
    # Building one loads the CA bundle (tens of milliseconds): share it.
    return httpx.create_ssl_context()


class SseClientStream:
    """The client's :class:`MessageStream` (from :class:`SseTransport`)."""

    def __init__(
        self,
        transport: SseTransport,
        client: httpx.AsyncClient,
        endpoint: str,
        receive_channel: trio.MemoryReceiveChannel[Frame],
    ) -> None:
        self._transport = transport
        self._client = client
        #: Where messages are POSTed.
        self.endpoint = endpoint
        self._recv = receive_channel
        self.posted = 0

    def __repr__(self) -> str:
        return f"<SseClientStream {self.endpoint}>"

    @property
    def closed(self) -> bool:
        """Closed locally, ended or broken."""
        t = self._transport
        return t._closed or t._ended or t._error is not None

    async def send(self, message: Any) -> None:
        t = self._transport
        if t._closed:
            raise TransportClosed("SSE transport closed")
        if t._error is not None:
            raise TransportError(t._error)
        if t._ended:
            raise TransportClosed("the server ended the event stream")
        body = encode(message)
        try:
            response = await self._client.post(
                self.endpoint, content=body, headers={"content-type": "application/json"}
            )
        except trio.Cancelled:
            raise
        except Exception as exc:  # httpx errors, or the client closed under us
            if t._closed or t._ended:
                raise TransportClosed("SSE transport closed") from None
            reason = f"POST {self.endpoint} failed: {type(exc).__name__}: {exc}"
            t._break(reason)
            raise TransportError(reason) from None
        status = response.status_code
        if 200 <= status < 300:
            self.posted += 1
            return
        detail = response.text.strip()[:200]
        reason = f"the server refused a message: HTTP {status}{': ' + detail if detail else ''}"
        if status in (404, 410):
            t._break(f"the SSE session is gone ({reason})")
        raise TransportError(reason)

    async def receive(self) -> Frame:
        try:
            return await self._recv.receive()
        except trio.ClosedResourceError:
            raise trio.EndOfChannel from None
        except trio.EndOfChannel:
            t = self._transport
            if t._error is not None and not t._closed:
                raise TransportError(t._error) from None
            raise

    async def aclose(self) -> None:
        """Close the event stream (the server ends the session); bounded."""
        t = self._transport
        if not t._closed:
            t._closed = True
            self._recv.close()
            t._wake.set()
        with trio.move_on_after(t.close_timeout, shield=True):
            await t._stopped.wait()


class SseTransport:
    """Client side of the legacy HTTP+SSE transport.

    ``stream = await nursery.start(transport.run)`` opens the event stream at
    ``url``, waits for the ``endpoint`` event and hands out an
    :class:`SseClientStream`. ``run`` raises :class:`TransportError`
    (before reporting started) when the stream cannot be opened (network
    error, a status other than 200, not an event stream, no endpoint in
    time, an endpoint on another origin). It returns once the stream is
    over (``stream.aclose()``, or ended / lost by the server). Cancelling
    ``run`` closes everything (bounded).

    ``headers`` go with every request (GET and POSTs). ``verify``: check
    the server's TLS certificate against the default CA bundle (``True``),
    an ``ssl.SSLContext`` of your own, or not at all (``False``).
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        endpoint_timeout: float = 10.0,
        connect_timeout: float = 10.0,
        sse_read_timeout: float | None = 300.0,
        post_timeout: float = 60.0,
        close_timeout: float = 2.0,
        receive_buffer: int = 64,
        max_event_size: int = 16 << 20,
        verify: ssl.SSLContext | bool = True,
        name: str | None = None,
    ) -> None:
        if urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"an SSE URL starts with http:// or https://, not {url!r}")
        for label, value in (
            ("endpoint_timeout", endpoint_timeout),
            ("connect_timeout", connect_timeout),
            ("post_timeout", post_timeout),
            ("close_timeout", close_timeout),
            ("max_event_size", max_event_size),
        ):
            if not value > 0:
                raise ValueError(f"{label} must be positive")
        if sse_read_timeout is not None and not sse_read_timeout > 0:
            raise ValueError("sse_read_timeout must be positive or None")
        if receive_buffer < 0:
            raise ValueError("receive_buffer must not be negative")
        self.url = url
        self.headers = dict(headers or {})
        self.endpoint_timeout = endpoint_timeout
        self.connect_timeout = connect_timeout
        self.sse_read_timeout = sse_read_timeout
        self.post_timeout = post_timeout
        self.close_timeout = close_timeout
        self.receive_buffer = receive_buffer
        self.max_event_size = max_event_size
        self.verify = verify
        self.name = name or f"sse-client:{url}"
        self._stream: SseClientStream | None = None
        self._closed = False  # aclose was called
        self._ended = False  # the event stream is over
        self._error: str | None = None  # why the transport broke
        self._wake = trio.Event()  # closed locally, ended, or broken
        self._stopped = trio.Event()
        self._started = False

    @property
    def stream(self) -> SseClientStream | None:
        return self._stream

    def __repr__(self) -> str:
        return f"<SseTransport {self.url}>"

    def _break(self, reason: str) -> None:
        if self._error is None and not self._closed:
            self._error = reason
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[SseClientStream] = trio.TASK_STATUS_IGNORED) -> None:
        if self._started:
            raise RuntimeError("an SseTransport runs once")
        self._started = True
        client = httpx.AsyncClient(
            headers=self.headers,
            timeout=httpx.Timeout(self.post_timeout, connect=self.connect_timeout, pool=None),
            verify=_default_ssl_context() if self.verify is True else self.verify,
        )
        response: httpx.Response | None = None
        try:
            response = await self._open(client)
            frames_send, frames_recv = trio.open_memory_channel[Frame](self.receive_buffer)
            with collapse_groups():  # a start failure comes out as itself
                await self._serve(response, client, frames_send, frames_recv, task_status)
        finally:
            self._ended = True
            with trio.CancelScope(shield=True), trio.move_on_after(self.close_timeout):
                if response is not None:
                    await response.aclose()
                await client.aclose()
            self._stopped.set()

    async def _serve(
        self,
        response: httpx.Response,
        client: httpx.AsyncClient,
        frames_send: trio.MemorySendChannel[Frame],
        frames_recv: trio.MemoryReceiveChannel[Frame],
        task_status: trio.TaskStatus[SseClientStream],
    ) -> None:
        async with trio.open_nursery() as nursery:
            try:
                with trio.fail_after(self.endpoint_timeout):
                    endpoint = await nursery.start(self._read, response, frames_send)
            except trio.TooSlowError:
                raise TransportError(
                    f"{self.url}: no endpoint event within {self.endpoint_timeout} s"
                ) from None
            stream = self._stream = SseClientStream(self, client, endpoint, frames_recv)
            task_status.started(stream)
            try:
                await self._wake.wait()
            finally:
                nursery.cancel_scope.cancel()

    async def _open(self, client: httpx.AsyncClient) -> httpx.Response:
        request = client.build_request(
            "GET",
            self.url,
            headers={"accept": "text/event-stream", "cache-control": "no-store"},
            timeout=httpx.Timeout(
                self.sse_read_timeout, connect=self.connect_timeout, pool=self.connect_timeout
            ),
        )
        try:
            response = await client.send(request, stream=True, follow_redirects=True)
        except httpx.HTTPError as exc:
            raise TransportError(
                f"{self.url}: cannot open the event stream: {type(exc).__name__}: {exc}"
            ) from None
        try:
            if response.status_code != 200:
                with trio.move_on_after(self.connect_timeout):
                    await response.aread()
                detail = response.text.strip()[:200] if response.is_stream_consumed else ""
                raise TransportError(
                    f"{self.url}: opening the event stream failed: HTTP {response.status_code}"
                    f"{': ' + detail if detail else ''}"
                )
            ctype = response.headers.get("content-type", "").partition(";")[0].strip().lower()
            if ctype != "text/event-stream":
                raise TransportError(f"{self.url}: not an event stream (Content-Type {ctype or 'missing'!r})")
        except BaseException:
            with trio.CancelScope(shield=True), trio.move_on_after(self.close_timeout):
                await response.aclose()
            raise
        return response

    async def _read(
        self,
        response: httpx.Response,
        frames: trio.MemorySendChannel[Frame],
        *,
        task_status: trio.TaskStatus[str],
    ) -> None:
        """Read the event stream: the endpoint first, then messages."""
        decoder = SseDecoder(self.max_event_size)
        base = str(response.url)
        endpoint: str | None = None
        error: str | None = None
        try:
            async for chunk in response.aiter_bytes():
                for event in decoder.feed(chunk):
                    if event.event == "endpoint":
                        if endpoint is None:
                            endpoint = resolve_endpoint(base, event.data)
                            task_status.started(endpoint)
                        else:
                            log.warning("%s: ignoring a second endpoint event", self.name)
                    elif event.event == "message":
                        if endpoint is None:
                            log.warning("%s: dropping a message sent before the endpoint event", self.name)
                            continue
                        try:
                            await frames.send(decode(event.data))
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            return  # closed locally
                    else:
                        log.debug("%s: ignoring an event of type %r", self.name, event.event)
            if endpoint is None:
                raise TransportError(f"{self.url}: the event stream ended before the endpoint event")
        except (httpx.HTTPError, SseError) as exc:
            error = f"{self.url}: event stream lost: {type(exc).__name__}: {exc}"
            if endpoint is None:
                raise TransportError(error) from None
        finally:
            if error is not None:
                self._break(error)
            self._ended = True  # before the reader of frames can see the end
            frames.close()
            self._wake.set()
