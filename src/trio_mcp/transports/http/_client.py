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

from typing import Any

import attrs
import httpx
import msgspec
import trio

from ..._util import describe
from ...protocol import (
    Frame,
    Notification,
    Request,
    ServerOverloaded,
    coerce,
    decode,
    encode,
)
from .._base import TransportClosed, TransportError
from ._connection import HttpConnection, SessionExpired, TooLarge, discard_answered, log
from ._headers import modern_headers
from ._settings import HttpClientSettings
from ._sse import SseDecoder, SseError

__all__ = ["HttpClientSettings", "HttpClientStream", "StreamableHttpTransport"]


class HttpClientStream(HttpConnection):
    """The client end of a Streamable HTTP connection (a MessageStream)."""

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
        except TooLarge:
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
            except SessionExpired:
                self._fail(TransportError("session expired"))
            except httpx.PoolTimeout as exc:
                # No connection free in time: this call fails, the transport goes on.
                await self._answer_errors(
                    expect, f"no connection to the server free in time: {describe(exc)}"
                )
            except httpx.HTTPError as exc:
                self._fail(TransportError(f"POST failed: {describe(exc)}"))
            except (TooLarge, SseError) as exc:
                await self._answer_errors(expect, f"bad response from the server: {exc}")
            finally:
                for ident in ids:
                    if self._inflight.get(ident) is scope:
                        del self._inflight[ident]

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
                    discard_answered(expect, item)
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
