"""The fast path of a POST (issue 11's speed work), over real HTTP: a request
in a session answered as JSON is served in its POST's own task, yet keeps the
session's rules (cancelled by the client's ``notifications/cancelled``,
bounded in-flight, server-to-client requests on the GET stream); a stateless
SSE answer that comes first goes out whole, with its length."""

from __future__ import annotations

import json
from typing import Any

import httpx
import trio

from trio_mcp.actors import PeerLimits
from trio_mcp.server import Context, MCPServer

from .test_server import ACCEPT_BOTH, TIMEOUT, Session, http, initialize, serving

MODERN = "2026-07-28"


def _gated_app(limits: PeerLimits | None = None) -> tuple[MCPServer, dict[str, Any]]:
    """A tool that waits at a gate, counting the calls that entered it and
    the ones that were cancelled there."""
    state: dict[str, Any] = {"entered": 0, "cancelled": 0, "gate": trio.Event()}
    app = MCPServer("fast-path", limits=limits) if limits is not None else MCPServer("fast-path")

    @app.tool
    async def wait() -> str:
        state["entered"] += 1
        state["task"] = trio.lowlevel.current_task().name
        try:
            await state["gate"].wait()
        except trio.Cancelled:
            state["cancelled"] += 1
            raise
        return "through"

    @app.tool
    async def echo(text: str) -> str:
        return text

    @app.tool
    async def ask(ctx: Context) -> str:
        await ctx.session.peer.ping()  # a request to the client, answered on another POST
        return "pong"

    return app, state


async def until_true(predicate: Any) -> None:
    while not predicate():
        await trio.sleep(0.01)


async def post_then_leave(session: Session, call: dict[str, Any], state: dict[str, Any]) -> None:
    """POST ``call``; once its handler has entered (``state["entered"]``),
    go away (the POST's connection closes); return once the handler was
    cancelled (``state["cancelled"]``)."""

    async def post_call() -> None:
        await session.post(call)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(post_call)
        await until_true(lambda: state["entered"] == 1)
        nursery.cancel_scope.cancel()  # the client goes away: its connection closes
    await until_true(lambda: state["cancelled"] == 1)


async def post_then_cancel(session: Session, call: dict[str, Any], state: dict[str, Any]) -> httpx.Response:
    """POST ``call``; once its handler has entered (``state["entered"]``),
    cancel it with ``notifications/cancelled`` on another POST (202).
    Returns the call's own response."""
    outcome: dict[str, httpx.Response] = {}

    async def post_call() -> None:
        outcome["call"] = await session.post(call)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(post_call)
        await until_true(lambda: state["entered"] == 1)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call["id"]}}
        assert (await session.post(cancel)).status_code == 202
    return outcome["call"]


async def test_a_json_answered_call_served_in_its_post_is_cancelled_by_the_client() -> None:
    app, state = _gated_app()
    async with serving(app, json_response=True) as (_, url), http() as client:
        session = await initialize(client, url)
        call = session.request("tools/call", {"name": "wait", "arguments": {}})
        with trio.fail_after(TIMEOUT):
            response = await post_then_cancel(session, call, state)
        assert state["cancelled"] == 1
        assert response.status_code == 202  # never answered
        assert response.content == b""
        # The session goes on: the next call is answered.
        echo = await session.post(session.request("tools/call", {"name": "echo", "arguments": {"text": "x"}}))
        assert echo.status_code == 200
        assert echo.json()["result"]["content"][0]["text"] == "x"


async def test_a_call_served_in_its_post_is_cancelled_when_its_client_goes_away() -> None:
    """The POST's one scope is watched (from ``disconnect_watch_delay`` on)
    while its handler runs in the POST's own task: a client that drops its
    connection cancels the handler, and the session goes on."""
    app, state = _gated_app()
    async with serving(app, json_response=True, disconnect_watch_delay=0.05) as (_, url), http() as client:
        session = await initialize(client, url)
        call = session.request("tools/call", {"name": "wait", "arguments": {}})
        with trio.fail_after(TIMEOUT):
            await post_then_leave(session, call, state)
        assert "_worker" not in state["task"]  # served in its POST's task, not by a peer worker
        assert not state["gate"].is_set()
        echo = await session.post(session.request("tools/call", {"name": "echo", "arguments": {"text": "y"}}))
        assert echo.status_code == 200
        assert echo.json()["result"]["content"][0]["text"] == "y"


async def test_a_long_sse_answer_in_a_session_gets_keep_alive_comments_and_resumes() -> None:
    """A session POST answered as an SSE stream: while its handler runs, the
    POST's watcher has its writer send a keep-alive comment every
    ping_interval. The client leaving does not end the stream (the handler
    goes on): its answer is there when the client resumes it."""
    app, state = _gated_app()
    options = {"json_response": False, "ping_interval": 0.1, "disconnect_watch_delay": 0.1}
    async with serving(app, **options) as (_, url), http() as client:
        session = await initialize(client, url)
        call = session.request("tools/call", {"name": "wait", "arguments": {}})
        with trio.fail_after(TIMEOUT):
            async with client.stream(
                "POST", url, content=json.dumps(call), headers=session.headers()
            ) as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                lines: list[str] = []
                async for line in stream.aiter_lines():  # until the second keep-alive comment
                    lines.append(line)
                    if lines.count(": ping") == 2:
                        break
            assert state["entered"] == 1
            assert lines[0].startswith("retry:")  # the priming event came first, with its hint
            primed = next(line for line in lines if line.startswith("id:"))
            state["gate"].set()
            resumed = await client.get(
                url,
                headers=session.headers(accept="text/event-stream", **{"last-event-id": primed[3:].strip()}),
            )
        assert resumed.status_code == 200
        data = [line[5:] for line in resumed.text.splitlines() if line.startswith("data:")]
        answer = json.loads(data[-1])
        assert answer["id"] == call["id"]
        assert answer["result"]["content"][0]["text"] == "through"
        assert state["cancelled"] == 0


async def test_calls_served_in_their_posts_are_bounded_like_any_other() -> None:
    """With room for 2 handlers and 1 queued request, a third and fourth call
    while two wait at the gate: the third waits its turn, the fourth is refused
    (overloaded) at once; opening the gate answers the three."""
    limits = PeerLimits(max_concurrent_handlers=2, max_queued_requests=1)
    app, state = _gated_app(limits)
    async with serving(app, json_response=True) as (_, url), http() as client:
        session = await initialize(client, url)
        answers: list[dict[str, Any]] = []

        async def call() -> None:
            response = await session.post(session.request("tools/call", {"name": "wait", "arguments": {}}))
            assert response.status_code == 200
            answers.append(response.json())

        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(call)
                await until_true(lambda: state["entered"] == 2)
                await until_true(lambda: app_running(app) == 3)
                refused = await session.post(session.request("tools/call", {"name": "wait", "arguments": {}}))
                assert refused.status_code == 200
                assert refused.json()["error"]["code"] == -32001  # overloaded, at once
                state["gate"].set()
        assert [a["result"]["content"][0]["text"] for a in answers] == ["through"] * 3
        assert state["entered"] == 3


def app_running(app: MCPServer) -> int:
    """Requests admitted in the app's (one) session: running plus queued."""
    sessions = list(app.sessions)
    if not sessions:
        return 0
    stats = sessions[0].peer.statistics()
    return int(stats.handlers_running + stats.requests_queued)


async def test_a_request_to_the_client_from_a_call_served_in_its_post_goes_on_the_get_stream() -> None:
    app, _ = _gated_app()
    async with serving(app, json_response=True) as (_, url), http() as client:
        session = await initialize(client, url)
        result: dict[str, httpx.Response] = {}

        async def post_call() -> None:
            result["call"] = await session.post(
                session.request("tools/call", {"name": "ask", "arguments": {}})
            )

        headers = session.headers(accept="text/event-stream")
        with trio.fail_after(TIMEOUT):
            async with client.stream("GET", url, headers=headers) as stream, trio.open_nursery() as nursery:
                assert stream.status_code == 200
                nursery.start_soon(post_call)
                async for line in stream.aiter_lines():
                    if line.startswith("data:") and '"ping"' in line:
                        request = json.loads(line[5:])
                        reply = {"jsonrpc": "2.0", "id": request["id"], "result": {}}
                        assert (await session.post(reply)).status_code == 202
                        break
        assert result["call"].status_code == 200
        assert result["call"].json()["result"]["content"][0]["text"] == "pong"


async def test_a_stateless_sse_answer_that_comes_first_goes_out_whole_with_its_length() -> None:
    app, _ = _gated_app()
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": meta},
    }
    headers = {
        **ACCEPT_BOTH,
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }
    async with serving(app, json_response=False) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            response = await client.post(url, content=json.dumps(body), headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert int(response.headers["content-length"]) == len(response.content)
    events = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    assert [json.loads(e)["result"]["content"][0]["text"] for e in events] == ["hi"]
