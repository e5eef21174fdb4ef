"""``POST``: one JSON-RPC message (or a 2025-03-26 batch) into a session,
a new session (``initialize``), or a stateless request; its answer as JSON
or as an SSE stream (see :mod:`trio_mcp.serving.http`)."""

from __future__ import annotations

import functools
import secrets
from typing import TYPE_CHECKING, Any

from ...actors import PeerLimits
from ...actors._peer_limits import oversized_batch
from ...protocol import (
    MODERN_VERSIONS,
    V2025_03_26,
    HeaderMismatch,
    InvalidMessage,
    Request,
    decode,
    encode,
    error_response,
)
from ...transports._asgi import (
    Disconnected,
    HttpError,
    Receive,
    Scope,
    Send,
    body_nowait,
    read_body,
    respond,
)
from ._config import ASSIGNED_SESSION, SESSION_HEADER, VERSION_HEADER, accepts, answer_mode, media_types
from ._get import answer_status, pump, session_headers
from ._session import HttpSessionStream
from ._sse_post import InlineSse
from ._stateless import rejection, typed_request
from ._streams import Conn
from ._watch import Guard

if TYPE_CHECKING:
    from ._app import StreamableHttpApp

__all__ = ["batch_limit", "handle_post"]

#: A 413's headers: the rest of the body is never read, so the server closes
#: the connection after the answer, and says so (a client that reused it
#: would lose its next request).
TOO_LARGE_HEADERS = ((b"connection", b"close"),)

#: A JSON answer's two ASGI messages (start, body).
Answer = tuple[dict[str, Any], dict[str, Any]]


async def handle_post(
    app: StreamableHttpApp, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
) -> None:
    json_ok, sse_ok = _formats(headers.get("content-type", ""), headers.get("accept"))
    settings = app.settings
    # The POST's one cancel scope: a slow body's deadline, the answer's
    # write's, and its client going away (see _watch).
    guard = Guard(app.watch, receive)
    try:
        try:
            body, whole = body_nowait(
                receive, headers, settings.max_body_size, too_large_headers=TOO_LARGE_HEADERS
            )
        except Disconnected:
            return
        with guard.scope:
            if not whole:
                guard.read_slowly(settings.body_timeout)
                try:
                    body = await read_body(
                        receive,
                        headers,
                        settings.max_body_size,
                        too_large_headers=TOO_LARGE_HEADERS,
                        start=body,
                    )
                except Disconnected:
                    return
                guard.body_read()
            answer = await _post_body(app, guard, body, scope, receive, send, headers, json_ok, sse_ok)
            if answer is not None:
                # A JSON answer there already (see _post_session), written from
                # here: under load a write resumes its task many times, each
                # time through every frame above it.
                guard.writing(settings.write_timeout)
                app.response_started()
                try:
                    await send(answer[0])
                    await send(answer[1])
                finally:
                    app.response_ended()
    finally:
        guard.end()
    by_peer, on_cancel, serving = guard.cancelled_by_peer, guard.on_cancel, guard.serving
    guard.on_cancel = guard.serving = None  # (the guard may outlive the POST in the watch's queue)
    if not guard.scope.cancelled_caught:
        return
    if by_peer:
        # The client cancelled the request served in this POST's task: it is
        # never answered; the POST gets 202, or its SSE stream ends (see _post_session).
        if on_cancel is not None:
            await on_cancel()
        else:
            await respond(send, 202, b"", serving or ())
        return
    if guard.body_timed_out:
        # A stalled body: the server then closes the connection, whose body is unread.
        raise HttpError(
            408,
            f"Request Timeout: the body did not arrive within {settings.body_timeout:g} s",
            headers=[(b"connection", b"close")],
        )


async def _post_body(
    app: StreamableHttpApp,
    guard: Guard,
    body: bytes,
    scope: Scope,
    receive: Receive,
    send: Send,
    headers: dict[str, str],
    json_ok: bool,
    sse_ok: bool,
) -> Answer | None:
    """Serve a POST's body; the JSON answer for the caller to write, when
    that is all there is left to do (None: answered already)."""
    frame = decode(body)
    if type(frame) is InvalidMessage:
        await respond(send, 400, encode(error_response(frame.id, frame.error)))
        return None
    if (
        type(frame) is Request
        and app._shared is not None
        and app.auth is None
        and headers.get(VERSION_HEADER) in MODERN_VERSIONS
        and SESSION_HEADER not in headers
        and frame.method != "subscriptions/listen"
    ):
        # A stateless request (2026-07-28) of a shared app: straight to its path.
        await app.stateless.serve_post(frame, scope, headers, json_ok, sse_ok, guard, send)
        return None
    batch = type(frame) is list
    items: list[Any] = frame if batch else [frame]  # type: ignore[assignment]
    if batch:
        bad = [m for m in items if type(m) is InvalidMessage]
        if bad:
            await respond(send, 400, encode([error_response(m.id, m.error) for m in bad]))
            return None
        refusal = oversized_batch(items, batch_limit(app))
        if refusal is not None:
            await respond(send, 400, encode(refusal))
            return None
    if batch:
        requests = [m for m in items if type(m) is Request]
    else:
        requests = [frame] if type(frame) is Request else []
    auth = app.auth
    if auth is not None and app._shared is not None:
        auth.check_scopes(app._shared, headers, requests)
    if app.settings.stateless and not app.stateless.is_stateless(headers, requests):
        # A stateless server: handshake-era requests are answered without sessions.
        await app.stateless.serve_handshake(frame, requests, headers, json_ok, sse_ok, guard, send)
        return None
    # An initialize that says it is of the stateless era is a removed method there (404).
    modern_header = headers.get(VERSION_HEADER, "").strip() in MODERN_VERSIONS
    if batch:
        is_init = any(m.method == "initialize" for m in requests) and not modern_header
    else:
        is_init = bool(requests) and requests[0].method == "initialize" and not modern_header
    ephemeral = False
    if is_init:
        if batch:
            raise HttpError(400, "Invalid Request: initialize must not be part of a batch", code=-32600)
        await app.make_room()
        session = await app.start_session(secrets.token_urlsafe(24))
        if auth is not None:
            auth.claim(session, headers)
    elif SESSION_HEADER not in headers and app.stateless.is_stateless(headers, requests):
        if not requests:
            await respond(send, 202, b"")
            return None
        if batch:
            raise HttpError(
                400, "Invalid Request: batches are not allowed in this protocol version", code=-32600
            )
        request = requests[0]
        if app._shared is not None and request.method != "subscriptions/listen":
            await app.stateless.serve_post(request, scope, headers, json_ok, sse_ok, guard, send)
            return None
        request, parts = typed_request(request, app._shared)  # its params decoded once
        rejected = rejection(headers, request, parts)
        if rejected is not None:
            status, error = rejected
            await respond(send, status, encode(error_response(request.id, error)))
            return None
        # subscriptions/listen (a stream of notifications), or an app made
        # per session: a session of its own, for this request only.
        session = await app.start_session(None)
        session.store = None  # nothing to resume without a session
        ephemeral = True
        if request.method == "subscriptions/listen":
            app.listening.add(session)  # ended by a drain: the client listens again elsewhere
        if request.method == "tools/call" and headers.get(VERSION_HEADER, "").strip() in MODERN_VERSIONS:
            # Last rung: the Mcp-Param-* headers against the tool's schema (-32020).
            problem = await app.stateless.params.problem(
                session.server_session, scope, headers, request, parts
            )
            if problem is not None:
                app.end_session(session, "Mcp-Param-* headers rejected")
                await respond(send, 400, encode(error_response(request.id, HeaderMismatch(problem))))
                return None
    else:
        session = await app.session_for(headers, scope.get(ASSIGNED_SESSION))
        if batch and (session.protocol_version or V2025_03_26) > V2025_03_26:
            raise HttpError(
                400, "Invalid Request: batches are not allowed in this protocol version", code=-32600
            )
    try:
        if auth is not None and app._shared is None:
            auth.check_scopes(session.server_session.app, headers, requests)
        return await _post_session(
            app, session, frame, requests, batch, is_init, json_ok, sse_ok, headers, guard, send
        )
    finally:
        if ephemeral:
            app.listening.discard(session)
            app.end_session(session, "stateless request done")


def _json_answer(session: HttpSessionStream, answer: Any, headers: list[tuple[bytes, bytes]]) -> Answer:
    """The two ASGI messages of a JSON answer (what :func:`respond` sends)."""
    body = encode(answer)
    out = [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json"), *headers]
    start = {"type": "http.response.start", "status": answer_status(session, answer), "headers": out}
    return start, {"type": "http.response.body", "body": body, "more_body": False}


@functools.lru_cache(maxsize=64)
def _formats(content_type: str, accept: str | None) -> tuple[bool, bool]:
    """Whether the answer may be JSON, and SSE, from the request's
    ``Content-Type`` and ``Accept`` (``415`` / ``406`` when neither); clients
    send the same few values, so each pair is worked out once."""
    if content_type.partition(";")[0].strip().lower() != "application/json":
        raise HttpError(415, "Unsupported Media Type: Content-Type must be application/json")
    accepted = media_types(accept)
    json_ok = accepts(accepted, "application/json")
    sse_ok = accepts(accepted, "text/event-stream")
    if not (json_ok or sse_ok):
        raise HttpError(406, "Not Acceptable: accept application/json and text/event-stream")
    return json_ok, sse_ok


def _take_back(inline: InlineSse, guard: Guard) -> None:
    """A POST's SSE answer that a worker serves after all: its connection
    becomes a channel again, for the pump, its event so far (the priming
    event; the handler has not run) queued in it."""
    conn = inline.conn
    conn.inline = None
    guard.ping = guard.on_gone = guard.on_cancel = guard.on_watch = None
    for event_id, data in inline.held:
        conn.send.send_nowait(("e", event_id, data))
    inline.held.clear()


def batch_limit(app: StreamableHttpApp) -> int:
    """The most messages one JSON-RPC batch may carry: the app's
    ``PeerLimits.max_batch_items`` (the peer's bound, read here because a
    Streamable HTTP session gathers a batch's answers itself, so a larger
    batch is refused before it reaches the peer)."""
    limits = getattr(app._shared, "limits", None) or PeerLimits()
    return int(limits.max_batch_items)


async def _post_session(
    app: StreamableHttpApp,
    session: HttpSessionStream,
    frame: Any,
    requests: list[Request],
    batch: bool,
    is_init: bool,
    json_ok: bool,
    sse_ok: bool,
    headers: dict[str, str],
    guard: Guard,
    send: Send,
) -> Answer | None:
    if not requests:
        status = await session.enqueue(frame)
        if status:
            raise HttpError(status, "Session not found" if status == 404 else "Session busy, retry later")
        await respond(send, 202, b"", session_headers(session))
        return None
    awaiting = session.awaiting
    if len(requests) == 1:
        ids = [requests[0].id]
        duplicate = ids[0] in awaiting
    else:
        ids = [r.id for r in requests]
        duplicate = len(set(ids)) != len(ids) or any(i in awaiting for i in ids)
    if duplicate:
        raise HttpError(400, "Invalid Request: duplicate request id", code=-32600)
    mode = answer_mode(app.settings.json_response, json_ok, sse_ok)
    conn = Conn(app.settings.sse_buffer, sse_ok)
    stream = session.new_post_stream(ids, mode, conn, batch, headers)
    if is_init:
        session.init_id = requests[0].id
    # A request answered as JSON or SSE is served right here when nothing
    # waits ahead of it (no hop to a worker: its answer is on the stream
    # after), in the POST's one scope: the client going away (watched from
    # the delay on) or cancelling the request ends it. An SSE answer's events
    # are then written by the tasks that emit them (see _sse_post).
    here = mode != "auto" and not batch and not is_init
    inline = InlineSse(app, session, stream, conn, send, guard) if here and mode == "sse" else None
    try:
        if mode == "sse":
            await stream.open_sse()
        status = 0
        if here:
            guard.watch_after_delay()
            guard.serving = answer_headers = session_headers(session)
            served = await session.serve_here(frame, guard.scope)
            guard.serving = None
            if served:
                if inline is not None:
                    return await inline.finish()
                answers = conn.take_json()
                if answers is not None:  # the usual case: no pump, the caller writes it
                    return _json_answer(session, answers[0], answer_headers)
            elif inline is not None:  # served by a worker: the pump writes what is held
                _take_back(inline, guard)
        if not here or not served:
            status = await session.enqueue(frame)
    except BaseException:
        session.abandon(stream)
        raise
    finally:
        if inline is not None:
            inline.close()
    if status:
        session.abandon(stream)
        if is_init:
            app.end_session(session, "initialize not accepted")
        raise HttpError(status, "Session not found" if status == 404 else "Session busy, retry later")
    # A stateless request, whose client going away ends it, is watched for
    # that from the start; a POST in a session only once its answer is not
    # there at once (see pump): a client that went away must not keep its
    # connection and task until a slow (or never) answer.
    await pump(
        app,
        session,
        stream,
        conn,
        [],
        guard.receive,
        send,
        sse_now=mode == "sse",
        guard=None if session.id is None else guard,
    )
    if session.id is None and not conn.complete:
        # A stateless request whose client went away: nobody can resume it.
        app.end_session(session, "client went away")
    return None
