"""A session POST answered as an SSE stream (``json_response=False``), over
real HTTP: its request is served in the POST's own task (issue 11: SSE
answers within 1.2x of JSON ones). An answer ready at once goes out whole,
with its length, yet keeps its event ids and resumes; the messages related
to the request go out on the POST's stream, at once, before its answer; a
request to the client is answered on another POST; the client cancelling
the call ends the stream without an answer; a client leaving a stream it
cannot resume cancels the handler; a handler can close the connection and
the client resumes (SEP-1699)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import trio

from trio_mcp.actors import PeerLimits
from trio_mcp.server import Context, MCPServer
from trio_mcp.serving.http import close_sse_stream
from trio_mcp.transports.http._sse import SseDecoder, SseEvent

from .test_fast_path import app_running, post_then_cancel, post_then_leave, until_true
from .test_server import TIMEOUT, Session, http, initialize, messages, read_events, serving

SSE = {"json_response": False}


def _app(limits: PeerLimits | None = None) -> tuple[MCPServer, dict[str, Any]]:
    """Tools that note the task serving them; ``progress_then_wait`` reports
    progress, then waits at a gate."""
    state: dict[str, Any] = {"tasks": [], "gate": trio.Event(), "cancelled": 0, "entered": 0}
    app = MCPServer("sse-answers", limits=limits) if limits is not None else MCPServer("sse-answers")

    @app.tool
    async def echo(text: str) -> str:
        state["tasks"].append(trio.lowlevel.current_task().name)
        return text

    @app.tool
    async def progress_then_wait(ctx: Context, steps: int = 2) -> str:
        state["tasks"].append(trio.lowlevel.current_task().name)
        state["entered"] += 1
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        try:
            await state["gate"].wait()
        except trio.Cancelled:
            state["cancelled"] += 1
            raise
        await ctx.info("done soon")
        return "finished"

    @app.tool
    async def ask(ctx: Context) -> str:
        await ctx.session.peer.ping()  # a request to the client, answered on another POST
        return "pong"

    @app.tool
    async def polled(ctx: Context) -> str:
        state["closed"] = await close_sse_stream(ctx)
        await ctx.report_progress(1, 1, "after the close")
        await state["gate"].wait()
        return "answer after reconnect"

    return app, state


def _call(session: Session, name: str, arguments: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return session.request("tools/call", params)


async def _resume(session: Session, last_event_id: str) -> list[SseEvent]:
    headers = session.headers(accept="text/event-stream", **{"last-event-id": last_event_id})
    async with session.client.stream("GET", session.url, headers=headers) as stream:
        assert stream.status_code == 200
        return await read_events(stream, SseDecoder())  # to the end of the stream


def _served_in_its_post(task_name: str) -> bool:
    return "_worker" not in task_name and "relief" not in task_name


async def test_an_sse_answer_ready_at_once_goes_out_whole_and_resumes() -> None:
    """One body with its length: the retry hint, the priming event and the
    answer, both with ids; a GET with the priming event's id replays the answer."""
    app, state = _app()
    async with serving(app, **SSE) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            call = _call(session, "echo", {"text": "whole"})
            response = await session.post(call)
            assert response.status_code == 200
            assert response.headers["content-type"] == "text/event-stream"
            assert response.headers["cache-control"] == "no-cache, no-transform"
            assert response.headers["mcp-session-id"] == session.id
            assert int(response.headers["content-length"]) == len(response.content)
            decoder = SseDecoder()
            events = decoder.feed(response.content)
            assert decoder.retry is not None
            assert events[0].data == ""  # the priming event
            assert all(e.id is not None for e in events)
            (answer,) = messages(events)
            assert answer["id"] == call["id"]
            assert answer["result"]["content"][0]["text"] == "whole"
            replayed = await _resume(session, events[0].id or "")
            assert messages(replayed) == [answer]
            assert [e.id for e in replayed] == [events[1].id]
    assert len(state["tasks"]) == 1 and _served_in_its_post(state["tasks"][0])


async def test_related_messages_go_out_at_once_before_the_answer() -> None:
    """Progress reported while the handler then waits reaches the client
    before the gate opens (written at once, not held for the answer); the
    log message and the answer follow on the same stream, every event with
    an id, in order."""
    app, state = _app()
    async with serving(app, **SSE) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            call = _call(session, "progress_then_wait", {"steps": 2}, token="p")
            decoder = SseDecoder()
            async with client.stream("POST", url, content=json.dumps(call), headers=session.headers()) as r:
                assert r.status_code == 200
                assert r.headers["content-type"] == "text/event-stream"
                before = await read_events(r, decoder, lambda evs: len(messages(evs)) == 2)
                assert not state["gate"].is_set()
                state["gate"].set()
                after = await read_events(r, decoder)
    events = before + after
    received = messages(events)
    assert [m.get("method") for m in received] == [
        "notifications/progress",
        "notifications/progress",
        "notifications/message",
        None,
    ]
    assert [m["params"]["progress"] for m in received[:2]] == [1, 2]
    assert received[-1]["id"] == call["id"]
    assert received[-1]["result"]["content"][0]["text"] == "finished"
    assert events[0].data == "" and all(e.id is not None for e in events)
    assert len({e.id for e in events}) == len(events)
    assert _served_in_its_post(state["tasks"][0])


async def test_an_sse_call_that_waits_its_turn_is_served_by_a_worker_and_answered_the_same() -> None:
    """Room for one handler: a second call, while the first waits at the
    gate, cannot be served in its POST; a worker serves it once the first is
    done, and its stream is the same (priming event, related message, answer, ids)."""
    app, state = _app(PeerLimits(max_concurrent_handlers=1, max_queued_requests=4))
    async with serving(app, **SSE) as (_, url), http() as client:
        session = await initialize(client, url)
        first = _call(session, "progress_then_wait", {"steps": 0})
        second = _call(session, "progress_then_wait", {"steps": 0})
        responses: dict[str, httpx.Response] = {}

        async def post(name: str, call: dict[str, Any]) -> None:
            responses[name] = await session.post(call)

        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(post, "first", first)
                await until_true(lambda: state["entered"] == 1)
                nursery.start_soon(post, "second", second)
                await until_true(lambda: app_running(app) == 2)  # the second one queued
                assert state["entered"] == 1
                state["gate"].set()
    for name, call in (("first", first), ("second", second)):
        events = SseDecoder().feed(responses[name].content)
        assert events[0].data == "" and all(e.id is not None for e in events)
        received = messages(events)
        assert [m.get("method") for m in received] == ["notifications/message", None]
        assert received[-1]["id"] == call["id"]
        assert received[-1]["result"]["content"][0]["text"] == "finished"
    assert not _served_in_its_post(state["tasks"][1])


async def test_a_request_to_the_client_goes_on_the_posts_stream_before_its_answer() -> None:
    app, _ = _app()
    async with serving(app, **SSE) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            call = _call(session, "ask", {})
            seen: list[dict[str, Any]] = []
            decoder = SseDecoder()
            async with client.stream("POST", url, content=json.dumps(call), headers=session.headers()) as r:
                async for chunk in r.aiter_bytes():
                    for message in messages(decoder.feed(chunk)):
                        seen.append(message)
                        if message.get("method") == "ping":
                            reply = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
                            assert (await session.post(reply)).status_code == 202
    assert [m.get("method") for m in seen] == ["ping", None]
    assert seen[-1]["id"] == call["id"]
    assert seen[-1]["result"]["content"][0]["text"] == "pong"


async def test_a_cancelled_sse_call_ends_its_stream_without_an_answer() -> None:
    app, state = _app()
    async with serving(app, **SSE) as (_, url), http() as client:
        session = await initialize(client, url)
        call = _call(session, "progress_then_wait", {"steps": 1}, token="c")
        with trio.fail_after(TIMEOUT):
            response = await post_then_cancel(session, call, state)
            assert response.status_code == 200
            assert response.headers["content-type"] == "text/event-stream"
            received = messages(SseDecoder().feed(response.content))
            assert [m.get("method") for m in received] == ["notifications/progress"]  # no answer
            assert state["cancelled"] == 1
            # The session goes on.
            echo = await session.post(_call(session, "echo", {"text": "after"}))
            assert messages(SseDecoder().feed(echo.content))[-1]["result"]["content"][0]["text"] == "after"


async def test_a_client_leaving_a_stream_it_cannot_resume_cancels_the_handler() -> None:
    """No event store: nothing to resume, so a client that drops its
    connection (noticed from ``disconnect_watch_delay`` on) cancels the
    handler served in its POST, as for a JSON answer."""
    app, state = _app()
    options = {**SSE, "event_store": None, "disconnect_watch_delay": 0.05}
    async with serving(app, **options) as (_, url), http() as client:
        session = await initialize(client, url)
        call = _call(session, "progress_then_wait", {"steps": 1}, token="g")
        with trio.fail_after(TIMEOUT):
            await post_then_leave(session, call, state)
            assert not state["gate"].is_set()
            echo = await session.post(_call(session, "echo", {"text": "next"}))
            assert messages(SseDecoder().feed(echo.content))[-1]["result"]["content"][0]["text"] == "next"


async def test_a_handler_closing_its_posts_stream_is_resumed_with_its_answer() -> None:
    """SEP-1699 polling from a handler served in its POST: the response ends
    at once (the handler goes on), and a GET with the last event id gets
    what followed, the answer included."""
    app, state = _app()
    async with serving(app, **SSE) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            call = _call(session, "polled", {}, token="s")
            decoder = SseDecoder()
            async with client.stream("POST", url, content=json.dumps(call), headers=session.headers()) as r:
                first = await read_events(r, decoder)  # ends while the handler waits at its gate
            await until_true(lambda: "closed" in state)  # (set once the close's write is over)
            assert state["closed"] is True
            assert not state["gate"].is_set()
            assert [e.data for e in first] == [""]  # the priming event only
            state["gate"].set()
            resumed = await _resume(session, decoder.last_event_id or "")
    received = messages(resumed)
    assert [m.get("method") for m in received] == ["notifications/progress", None]
    assert received[-1]["result"]["content"][0]["text"] == "answer after reconnect"
