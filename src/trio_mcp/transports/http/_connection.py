"""What a Streamable HTTP client stream keeps and how it reads the server:
the headers of every request (session id, protocol version), failing the
transport, delivering frames to ``receive``, sending once more on a stale
kept-alive connection, reading answers (JSON bodies and SSE streams),
resuming a broken SSE stream with ``Last-Event-ID``, and the GET stream of
the server's own messages. :class:`~._client.HttpClientStream` builds the
sending and closing on top of it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

import httpx
import msgspec
import trio
from msgspec import Struct

from ..._util import describe
from ...protocol import (
    ErrorResponse,
    Frame,
    InternalError,
    InvalidMessage,
    McpError,
    Response,
    coerce,
    decode,
    error_response,
)
from .._base import TransportError
from ._headers import PARAM_PREFIX
from ._sse import SseDecoder, SseError

if TYPE_CHECKING:
    from ._client import StreamableHttpTransport

__all__ = ["HttpConnection", "SessionExpired", "TooLarge", "discard_answered"]

log = logging.getLogger("trio_mcp.http.client")

_ACCEPT: Final = "application/json, text/event-stream"


class _InitResult(Struct):
    protocolVersion: Any = None


class SessionExpired(Exception):
    pass


class TooLarge(Exception):
    pass


class HttpConnection:
    """The state of a client stream and its reading side (see the module docstring)."""

    def __init__(self, transport: StreamableHttpTransport, client: httpx.AsyncClient) -> None:
        self.transport = transport
        self.settings = transport.settings
        self.url = transport.url
        self._client = client
        #: The session id the server issued (None before ``initialize``, or
        #: with a stateless server).
        self.session_id: str | None = None
        #: Sent as ``MCP-Protocol-Version`` once known.
        self.protocol_version: str | None = None
        #: The stateless-era version of the last mirrored request (no session).
        self._modern_version: str | None = None
        self._recv_send, self._recv = trio.open_memory_channel[Frame](self.settings.receive_buffer)
        self._init_id: int | str | None = None
        self._inflight: dict[int | str, trio.CancelScope] = {}
        self._tasks: trio.Nursery | None = None
        self._tasks_scope: trio.CancelScope | None = None
        self._failure: TransportError | None = None
        self._closing = False
        self._closed = trio.Event()
        self._get_started = False
        #: Set while the GET stream is connected (for tests and monitoring).
        self.get_stream_open = False
        self._get_connected = trio.Event()
        self._refused_status = 0
        self.reconnects = 0
        #: Turns on the wire for request POSTs (a FIFO: trio's semaphore is fair).
        self._turns = trio.Semaphore(self.settings.max_request_posts)
        self._waiting = 0

    # ----------------------------------------------------------- internals

    async def _host(self, *, task_status: trio.TaskStatus[None]) -> None:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                self._tasks = nursery
                self._tasks_scope = scope
                task_status.started()
                await trio.sleep_forever()

    def _headers(self, *, post: bool = False, last_event_id: str | None = None) -> dict[str, str]:
        headers = dict(self.transport.headers)
        headers["accept"] = _ACCEPT if post else "text/event-stream"
        if post:
            headers["content-type"] = "application/json"
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        if last_event_id is not None:
            headers["last-event-id"] = last_event_id
        return headers

    def _post_headers(self, mirrored: dict[str, str]) -> dict[str, str]:
        """A POST's headers: the configured ones, then what mirrors the body.
        A stateless-era message that mirrors nothing (a notification) still
        says which version it speaks."""
        headers = self._headers(post=True)
        version = mirrored.get("mcp-protocol-version")
        if version is not None:
            self._modern_version = version
        elif self._modern_version is not None and self.session_id is None:
            headers.setdefault("mcp-protocol-version", self._modern_version)
        if mirrored:
            # Mcp-Param-* of a stateless message are the call's arguments, nothing else.
            headers = {k: v for k, v in headers.items() if not k.startswith(PARAM_PREFIX)}
            headers.update(mirrored)
        return headers

    def _fail(self, exc: TransportError) -> None:
        if self._failure is None and not self._closing:
            self._failure = exc
            log.debug("transport failed: %s", exc.reason)
        self._recv_send.close()
        if self._tasks_scope is not None:
            self._tasks_scope.cancel()

    async def _push(self, frame: Frame) -> None:
        if type(frame) is Response and frame.id == self._init_id and self._init_id is not None:
            self._sniff_version(frame)
        try:
            await self._recv_send.send(frame)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def _sniff_version(self, response: Response) -> None:
        try:
            version = coerce(response.result, _InitResult).protocolVersion
        except (msgspec.ValidationError, msgspec.DecodeError):
            return
        if isinstance(version, str) and self.protocol_version is None:
            self.protocol_version = version

    def _check_expired(self, response: httpx.Response) -> None:
        if response.status_code == 404 and self.session_id is not None:
            raise SessionExpired

    def _session_from(self, response: httpx.Response) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id:
            self.session_id = session_id

    async def _read_limited(self, response: httpx.Response) -> bytes:
        body = bytearray()
        limit = self.settings.max_message_size
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > limit:
                raise TooLarge(f"response larger than {limit} bytes")
        return bytes(body)

    # ------------------------------------------------- answers and streams

    async def _answer_errors(
        self, expect: set[int | str], text: str, error: type[McpError] = InternalError
    ) -> None:
        for ident in list(expect):
            await self._push(error_response(ident, error(text)))
        expect.clear()

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """Send a POST; once more when the server closed a kept-alive connection
        just as it was reused (no response at all came, so the server never
        answered it): that race is not the server going away. The close shows
        as the connection ending before a response (RemoteProtocolError) or,
        when the request reached the closed socket, as a reset (ReadError,
        WriteError). A server that is really gone fails the second try too."""
        try:
            return await self._client.send(request, stream=True)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            log.debug("POST on a connection the server closed (%s): sent once more", describe(exc))
            return await self._client.send(request, stream=True)

    async def _http_error(self, response: httpx.Response, expect: set[int | str]) -> None:
        try:
            body = await self._read_limited(response)
        except TooLarge:
            body = b""
        frame = decode(body) if body else None
        error = getattr(frame, "error", None) if type(frame) is ErrorResponse else None
        for ident in list(expect):
            if error is not None:
                await self._push(ErrorResponse(id=ident, error=error))
            else:
                text = body[:200].decode("utf-8", "replace")
                await self._push(error_response(ident, InternalError(f"HTTP {response.status_code}: {text}")))
        expect.clear()

    async def _read_sse(
        self, response: httpx.Response, decoder: SseDecoder, expect: set[int | str] | None
    ) -> bool:
        """Read events until the stream ends or (POST streams) every expected
        answer came. Returns whether an event arrived. A broken connection
        or a silent one (``sse_read_timeout``) just ends the reading."""
        got = False
        timeout = self.settings.sse_read_timeout
        chunks = response.aiter_bytes()
        try:
            while True:
                with trio.move_on_after(timeout) as idle:
                    try:
                        chunk = await chunks.__anext__()
                    except StopAsyncIteration:
                        return got
                if idle.cancelled_caught:
                    log.debug("SSE stream silent for %ss; resuming", timeout)
                    return got
                for event in decoder.feed(chunk):
                    got = True
                    self.reconnects = 0
                    if event.event != "message" or not event.data:
                        continue
                    frame = decode(event.data)
                    if expect is not None:
                        for item in frame if type(frame) is list else [frame]:
                            discard_answered(expect, item)
                    await self._push(frame)
                    if expect is not None and not expect:
                        # Every answer is in; the server ends the stream right
                        # after. Reading its end keeps the connection reusable.
                        with trio.move_on_after(self.settings.sse_tail_timeout):
                            async for _ in chunks:
                                pass
                        return got
        except (httpx.TransportError, httpx.StreamError) as exc:
            log.debug("SSE stream broke: %s", describe(exc))
            return got
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]  # httpx's iterator is an async generator

    def _retry_delay(self, decoder: SseDecoder) -> float:
        retry = decoder.retry
        delay = self.settings.default_retry if retry is None else retry / 1000
        return min(delay, self.settings.max_retry)

    async def _resume(self, decoder: SseDecoder, expect: set[int | str]) -> None:
        """Resume a POST stream that ended before its answers, with GET + Last-Event-ID."""
        attempts = 0
        while expect:
            if decoder.last_event_id is None:
                await self._answer_errors(expect, "the server closed the stream before answering")
                return
            attempts += 1
            if attempts > self.settings.max_reconnects:
                await self._answer_errors(expect, "could not resume the stream before the answer came")
                return
            await trio.sleep(self._retry_delay(decoder))
            try:
                ok = await self._get_once(decoder, expect)
            except httpx.HTTPError as exc:
                log.debug("resuming failed: %s", describe(exc))
                continue
            if ok is None:
                await self._answer_errors(expect, "the server cannot resume the stream")
                return
            if ok:
                attempts = 0

    async def _get_once(self, decoder: SseDecoder, expect: set[int | str] | None) -> bool | None:
        """One GET (resuming from the decoder's last event id if any): True if
        events came, False if none, None when the server refuses the stream."""
        settings = self.settings
        timeout = httpx.Timeout(settings.post_timeout, connect=settings.connect_timeout, read=None)
        request = self._client.build_request(
            "GET", self.url, headers=self._headers(last_event_id=decoder.last_event_id), timeout=timeout
        )
        response = await self._send(request)
        try:
            self._check_expired(response)
            ctype = response.headers.get("content-type", "").partition(";")[0].strip().lower()
            if response.status_code != 200 or ctype != "text/event-stream":
                self._refused_status = response.status_code
                return None
            if expect is None:
                self.get_stream_open = True
                self._get_connected.set()
            try:
                return await self._read_sse(response, decoder, expect)
            finally:
                if expect is None:
                    self.get_stream_open = False
        finally:
            await response.aclose()

    async def _get_task(self) -> None:
        decoder = SseDecoder(self.settings.max_message_size)
        attempts = 0
        try:
            while True:
                try:
                    ok = await self._get_once(decoder, None)
                except httpx.HTTPError as exc:
                    log.debug("GET stream failed: %s", describe(exc))
                    ok = False
                    attempts += 1
                    if attempts > self.settings.max_reconnects:
                        self._fail(TransportError(f"GET stream: {describe(exc)}"))
                        return
                else:
                    if ok is None:
                        if self._refused_status != 405:  # 405: the server has no GET stream
                            log.warning("the server refused the GET stream (HTTP %d)", self._refused_status)
                        return
                    attempts = 0 if ok else attempts + 1
                    if attempts > self.settings.max_reconnects:
                        log.warning("the GET stream keeps ending without events; giving up")
                        return
                self.reconnects += 1
                await trio.sleep(self._retry_delay(decoder))
        except SessionExpired:
            self._fail(TransportError("session expired"))
        except SseError as exc:
            self._fail(TransportError(f"GET stream: {exc}"))

    async def wait_get_stream(self) -> None:
        """Wait until the GET stream has connected once."""
        await self._get_connected.wait()

    def start_get_stream(self) -> None:
        """Open the GET stream now (normally done after initialization)."""
        self._start_get_stream()

    def _start_get_stream(self) -> None:
        if self._get_started or self._tasks is None:
            return
        self._get_started = True
        self._tasks.start_soon(self._get_task)


def discard_answered(expect: set[int | str], item: Any) -> None:
    kind = type(item)
    if kind is Response or kind is ErrorResponse:
        expect.discard(item.id)
    elif kind is InvalidMessage and item.id is not None:
        pass
