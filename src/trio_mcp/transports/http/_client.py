"""The Streamable HTTP client transport.

:class:`StreamableHttpTransport` is an actor: ``stream = await
nursery.start(transport.run)`` gives a :class:`HttpClientStream` (a
:class:`~trio_mcp.transports.MessageStream`) to run a ClientSession over.

* Every outgoing message is one POST. A request's POST is served by a
  background task, so ``send`` returns at once; its answer (JSON, or an SSE
  stream carrying the server's related messages first) ends up in
  ``receive``. Notifications and responses are POSTed within ``send``
  (bounded by ``post_timeout``): the server accepts them with ``202``.
* ``Mcp-Session-Id`` from the ``initialize`` answer is sent on every later
  request, and so is ``MCP-Protocol-Version`` once known (sniffed from the
  ``initialize`` result; :attr:`HttpClientStream.protocol_version` can be
  set too).
* Stateless (2026-07-28) messages also carry the headers mirroring their
  body (``Mcp-Method``, ``Mcp-Name``…, see :mod:`._headers`), and a
  ``tools/call`` the ``Mcp-Param-*`` headers its session published in
  :data:`~._headers.PARAM_HEADERS` (read in ``send``, in the caller's task);
  configured ``Mcp-Param-*`` headers never stand in for them.
* After ``notifications/initialized`` the GET stream is opened for the
  server's own messages (``405``: the server has none; fine).
* A broken SSE stream (POST or GET) is resumed with ``Last-Event-ID`` after
  the server's ``retry`` delay, at most ``max_reconnects`` times in a row.
* ``404`` once a session is established fails the transport with
  ``TransportError("session expired")``: every pending call fails and the
  owner initializes a new session.
* Closing the stream DELETEs the session (bounded by ``close_timeout``).
* HTTP errors of a request's POST become JSON-RPC error answers to that
  request; network errors fail the transport.
* At most ``max_request_posts`` request POSTs are on the wire at once (the
  connection pool has room for them and for the one-way POSTs and the GET
  stream); more wait their turn, first come first served, at most
  ``max_queued_requests`` of them (one more is answered at once with
  ``-32001``). Each wait is bounded by its caller's cancel scope (a cancelled
  call leaves the queue), and a wait for a pooled connection that times out
  fails that call, never the transport.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import attrs
import httpx
import msgspec
import trio
from msgspec import Struct

from ..._util import check_positive, describe, numeric_fields
from ...protocol import (
    ErrorResponse,
    Frame,
    InternalError,
    InvalidMessage,
    McpError,
    Notification,
    Request,
    Response,
    ServerOverloaded,
    coerce,
    decode,
    encode,
    error_response,
)
from .._base import TransportClosed, TransportError
from ._headers import PARAM_PREFIX, modern_headers
from ._sse import SseDecoder, SseError

__all__ = ["HttpClientSettings", "HttpClientStream", "StreamableHttpTransport"]

log = logging.getLogger("trio_mcp.http.client")

_ACCEPT: Final = "application/json, text/event-stream"


@attrs.frozen(kw_only=True)
class HttpClientSettings:
    """Every bound of the client transport, named. Times in seconds."""

    #: Opening a TCP connection.
    connect_timeout: float = 10.0
    #: A whole POST of a notification or a response (``send`` waits for it).
    post_timeout: float = 30.0
    #: Silence tolerated on an SSE stream before it is treated as broken and
    #: resumed (servers send keep-alive comments more often than this).
    sse_read_timeout: float = 300.0
    #: ``aclose``: the DELETE and the connection shutdown, together.
    close_timeout: float = 1.5
    #: Largest JSON body or SSE event accepted from the server, in bytes.
    max_message_size: int = 4 << 20
    #: Messages received and not yet taken by ``receive``.
    receive_buffer: int = 64
    #: After a POST stream delivered every answer, how long its end may take
    #: to arrive: read to the end, the connection is reused (keep-alive);
    #: abandoned, it is thrown away.
    sse_tail_timeout: float = 1.0
    #: Consecutive failed reconnections of an SSE stream before giving up.
    max_reconnects: int = 5
    #: Delay before reconnecting when the server gave no ``retry`` hint.
    default_retry: float = 1.0
    #: Largest reconnection delay honoured (a server's ``retry`` is capped).
    max_retry: float = 30.0
    #: Open the GET stream after initialization.
    open_get_stream: bool = True
    #: Request POSTs on the wire at once; more wait their turn (in order).
    max_request_posts: int = 64
    #: Requests waiting for their turn; one more is answered at once with
    #: -32001 (ServerOverloaded) instead of being queued.
    max_queued_requests: int = 10_000
    #: Connections of the pool beyond ``max_request_posts``: for the
    #: notification and response POSTs, the GET stream and the DELETE.
    spare_connections: int = 8

    def __attrs_post_init__(self) -> None:
        check_positive(self, numeric_fields(self))


class _InitResult(Struct):
    protocolVersion: Any = None


class _SessionExpired(Exception):
    pass


class HttpClientStream:
    """The client end of a Streamable HTTP connection (a MessageStream)."""

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
            raise _SessionExpired

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
                raise _TooLarge(f"response larger than {limit} bytes")
        return bytes(body)

    # ------------------------------------------------------------- sending

    async def send(self, message: Any) -> None:
        if self._closing:
            raise TransportClosed("HTTP transport closed")
        if self._failure is not None:
            raise TransportError(self._failure.reason)
        kind = type(message)
        if kind is list:
            ids = [m.id for m in message if type(m) is Request]
        else:
            ids = [message.id] if kind is Request else []
        if ids:
            if kind is Request and message.method == "initialize":
                self._init_id = message.id
                self.session_id = None
            assert self._tasks is not None
            # Computed here, in the caller's task: PARAM_HEADERS is the caller's.
            self._tasks.start_soon(self._request_task, message, ids, modern_headers(message))
            await trio.lowlevel.checkpoint()
            return
        await self._post_oneway(message)
        if kind is Notification:
            if message.method == "notifications/cancelled":
                self._cancel_inflight(message.params)
            elif message.method == "notifications/initialized" and self.settings.open_get_stream:
                self._start_get_stream()

    def _cancel_inflight(self, params: Any) -> None:
        try:
            ident = coerce(params, dict[str, Any]).get("requestId")
        except (msgspec.ValidationError, msgspec.DecodeError):
            return
        if isinstance(ident, (int, str)) and not isinstance(ident, bool):
            scope = self._inflight.get(ident)
            if scope is not None:
                scope.cancel()

    def start_get_stream(self) -> None:
        """Open the GET stream now (normally done after initialization)."""
        self._start_get_stream()

    def _start_get_stream(self) -> None:
        if self._get_started or self._tasks is None:
            return
        self._get_started = True
        self._tasks.start_soon(self._get_task)

    async def _post_oneway(self, message: Any) -> None:
        headers = self._post_headers(modern_headers(message))
        request = self._client.build_request("POST", self.url, content=encode(message), headers=headers)
        try:
            with trio.fail_after(self.settings.post_timeout):
                response = await self._send(request)
                try:
                    status = response.status_code
                    body = await self._read_limited(response) if status >= 400 else b""
                finally:
                    await response.aclose()
        except trio.TooSlowError:
            raise TransportError(f"POST timed out after {self.settings.post_timeout}s") from None
        except httpx.PoolTimeout as exc:
            # This message could not be sent; the transport goes on.
            raise TransportError(f"no connection to the server free in time: {describe(exc)}") from None
        except _TooLarge:
            body = b"(too large)"
        except httpx.HTTPError as exc:
            failure = TransportError(f"POST failed: {describe(exc)}")
            self._fail(failure)
            raise failure from None
        if status == 404 and self.session_id is not None:
            failure = TransportError("session expired")
            self._fail(failure)
            raise failure
        if status >= 400:
            # The server refused a notification/response: there is nothing
            # to answer on the JSON-RPC level; log it and carry on.
            log.warning(
                "POST of %s refused: HTTP %d %s",
                _describe_message(message),
                status,
                body[:200].decode("utf-8", "replace"),
            )

    async def _request_task(self, message: Any, ids: list[int | str], mirrored: dict[str, str]) -> None:
        expect = set(ids)
        with trio.CancelScope() as scope:
            for ident in ids:
                self._inflight[ident] = scope
            try:
                if self._waiting >= self.settings.max_queued_requests and self._turns.value == 0:
                    await self._answer_errors(
                        expect,
                        f"the client already has {self._waiting} requests waiting to be sent",
                        ServerOverloaded,
                    )
                    return
                self._waiting += 1
                try:
                    await self._turns.acquire()  # in order; cancelled with the call
                finally:
                    self._waiting -= 1
                try:
                    await self._post_request(message, expect, mirrored)
                finally:
                    self._turns.release()
            except _SessionExpired:
                self._fail(TransportError("session expired"))
            except httpx.PoolTimeout as exc:
                # No connection free in time: this call fails, the transport goes on.
                await self._answer_errors(
                    expect, f"no connection to the server free in time: {describe(exc)}"
                )
            except httpx.HTTPError as exc:
                self._fail(TransportError(f"POST failed: {describe(exc)}"))
            except (_TooLarge, SseError) as exc:
                await self._answer_errors(expect, f"bad response from the server: {exc}")
            finally:
                for ident in ids:
                    if self._inflight.get(ident) is scope:
                        del self._inflight[ident]

    async def _answer_errors(
        self, expect: set[int | str], text: str, error: type[McpError] = InternalError
    ) -> None:
        for ident in list(expect):
            await self._push(error_response(ident, error(text)))
        expect.clear()

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """Send a POST; once more when the server closed a kept-alive connection
        just as it was reused (no response at all came, so the server never
        answered it): that race is not the server going away."""
        try:
            return await self._client.send(request, stream=True)
        except httpx.RemoteProtocolError as exc:
            log.debug("POST on a connection the server closed (%s): sent once more", describe(exc))
            return await self._client.send(request, stream=True)

    async def _post_request(self, message: Any, expect: set[int | str], mirrored: dict[str, str]) -> None:
        settings = self.settings
        timeout = httpx.Timeout(settings.post_timeout, connect=settings.connect_timeout, read=None)
        decoder = SseDecoder(settings.max_message_size)
        request = self._client.build_request(
            "POST", self.url, content=encode(message), headers=self._post_headers(mirrored), timeout=timeout
        )
        response = await self._send(request)
        try:
            self._check_expired(response)
            status = response.status_code
            if status >= 400:
                await self._http_error(response, expect)
                return
            if type(message) is Request and message.method == "initialize":
                self._session_from(response)
            ctype = response.headers.get("content-type", "").partition(";")[0].strip().lower()
            if status == 202 or not ctype:
                await self._answer_errors(
                    expect, f"the server accepted the request (HTTP {status}) but sent no answer"
                )
                return
            if ctype == "application/json":
                frame = decode(await self._read_limited(response))
                for item in frame if type(frame) is list else [frame]:
                    _discard(expect, item)
                    await self._push(item)
                if expect:
                    await self._answer_errors(expect, "the server's JSON answer did not answer the request")
                return
            if ctype != "text/event-stream":
                await self._answer_errors(expect, f"unexpected content type {ctype!r}")
                return
            await self._read_sse(response, decoder, expect)
        finally:
            await response.aclose()
        await self._resume(decoder, expect)

    async def _http_error(self, response: httpx.Response, expect: set[int | str]) -> None:
        try:
            body = await self._read_limited(response)
        except _TooLarge:
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
                            _discard(expect, item)
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
        except _SessionExpired:
            self._fail(TransportError("session expired"))
        except SseError as exc:
            self._fail(TransportError(f"GET stream: {exc}"))

    async def wait_get_stream(self) -> None:
        """Wait until the GET stream has connected once."""
        await self._get_connected.wait()

    # ----------------------------------------------------------- receiving

    async def receive(self) -> Frame:
        try:
            return await self._recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            if self._failure is not None and not self._closing:
                raise TransportError(self._failure.reason) from None
            raise trio.EndOfChannel from None

    # ------------------------------------------------------------- closing

    async def aclose(self) -> None:
        """Stop the background work, DELETE the session (bounded), end ``receive``."""
        if self._closing:
            await trio.lowlevel.checkpoint()
            return
        self._closing = True
        if self._tasks_scope is not None:
            self._tasks_scope.cancel()
        with trio.move_on_after(self.settings.close_timeout, shield=True):
            await self._delete()
        self._recv_send.close()
        self._recv.close()
        self._closed.set()

    async def _delete(self) -> None:
        if self.session_id is None or (
            self._failure is not None and self._failure.reason == "session expired"
        ):
            return
        try:
            await self._client.delete(self.url, headers=self._headers())
        except httpx.HTTPError as exc:
            log.debug("DELETE failed: %s", describe(exc))

    @property
    def closed(self) -> bool:
        return self._closing

    def statistics(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "protocol_version": self.protocol_version,
            "requests_in_flight": len(self._inflight),
            "requests_posting": self.settings.max_request_posts - self._turns.value,
            "requests_waiting": self._waiting,
            "get_stream_open": self.get_stream_open,
            "reconnects": self.reconnects,
            "received_queued": self._recv_send.statistics().current_buffer_used,
        }


class _TooLarge(Exception):
    pass


def _discard(expect: set[int | str], item: Any) -> None:
    kind = type(item)
    if kind is Response or kind is ErrorResponse:
        expect.discard(item.id)
    elif kind is InvalidMessage and item.id is not None:
        pass


def _describe_message(message: Any) -> str:
    method = getattr(message, "method", None)
    return method if method else type(message).__name__


class StreamableHttpTransport:
    """An actor connecting to a Streamable HTTP MCP endpoint.

    ``stream = await nursery.start(transport.run)``; ``run`` returns once the
    stream is closed (closing it DELETEs the session). ``headers`` are sent
    with every request (authorization, for instance). Pass ``http_client``
    to share an ``httpx.AsyncClient`` (it is not closed then), or ``auth``
    (an ``httpx.Auth`` such as :class:`~trio_mcp.auth.OAuthClientAuth`) for
    the client each run opens.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
        auth: httpx.Auth | None = None,
        settings: HttpClientSettings | None = None,
        **options: Any,
    ) -> None:
        if http_client is not None and auth is not None:
            raise ValueError("give auth to the shared http_client, not to the transport")
        self.url = url
        self._auth = auth
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.settings = (
            attrs.evolve(settings, **options) if settings is not None else HttpClientSettings(**options)
        )
        self._http_client = http_client
        self.stream: HttpClientStream | None = None

    async def run(self, *, task_status: trio.TaskStatus[HttpClientStream] = trio.TASK_STATUS_IGNORED) -> None:
        own = self._http_client is None
        pool = self.settings.max_request_posts + self.settings.spare_connections
        client = self._http_client or httpx.AsyncClient(
            auth=self._auth,
            timeout=httpx.Timeout(self.settings.post_timeout, connect=self.settings.connect_timeout),
            limits=httpx.Limits(max_connections=pool, max_keepalive_connections=pool),
        )
        stream = HttpClientStream(self, client)
        self.stream = stream
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(stream._host)
                task_status.started(stream)
                await stream._closed.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                if not stream._closing:
                    await stream.aclose()
                if own:
                    with trio.move_on_after(self.settings.close_timeout):
                        await client.aclose()
