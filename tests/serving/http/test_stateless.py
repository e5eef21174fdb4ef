"""Stateless (2026-07-28) requests on the Streamable HTTP server, served in
their own ASGI task by the app's one stateless server session (no session
actor per request): the answer as JSON or SSE, the handler's notifications on
the SSE stream, a client that goes away or a server that stops cancelling the
handler, and what such a handler cannot do. Real hypercorn on 127.0.0.1:0."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio

from trio_mcp.protocol import (
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    PaginatedRequestParams,
    PromptMessage,
    TextContent,
)
from trio_mcp.server import Context, LowLevelServer, MCPServer

from .test_server import (
    ACCEPT_BOTH,
    TIMEOUT,
    SseDecoder,
    has_response,
    http,
    messages,
    read_events,
    serving,
)

MODERN = "2026-07-28"
JSON_ONLY = {"accept": "application/json", "content-type": "application/json"}


def call(name: str, arguments: dict[str, Any], ident: int = 1, **meta: Any) -> tuple[str, dict[str, str]]:
    """A stateless tools/call body and its mirrored headers."""
    params = {
        "name": name,
        "arguments": arguments,
        "_meta": {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}, **meta},
    }
    body = json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})
    return body, {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name}


def stateless_app() -> Any:
    app = MCPServer("stateless")
    app.seen = []  # type: ignore[attr-defined]
    app.entered = trio.Event()  # type: ignore[attr-defined]
    app.cancelled = trio.Event()  # type: ignore[attr-defined]

    @app.tool
    def who(ctx: Context) -> str:
        """Records the session serving it."""
        app.seen.append(ctx.session)
        return "me"

    @app.tool
    async def chatty(ctx: Context) -> str:
        """Progress, then a log message, then the answer."""
        await ctx.report_progress(1, 2, "half")
        await ctx.info("almost")
        await ctx.report_progress(2, 2, "all")
        return "said it"

    @app.tool
    async def block(ctx: Context) -> str:
        """Waits until cancelled."""
        app.entered.set()
        try:
            await trio.sleep_forever()
        finally:
            app.cancelled.set()
        return "never"  # pragma: no cover

    @app.tool
    async def ask_the_old_way(ctx: Context) -> str:
        """A server-to-client request, which a stateless request cannot carry."""
        await ctx.session.peer.ping()
        return "unreachable"  # pragma: no cover

    return app


async def test_stateless_requests_share_one_server_session_and_start_no_session() -> None:
    app = stateless_app()
    async with serving(app) as (server, url), http() as client:
        for i in range(3):
            body, mirrored = call("who", {}, ident=i)
            response = await client.post(url, content=body, headers={**ACCEPT_BOTH, **mirrored})
            assert response.status_code == 200
            assert response.json()["result"]["content"][0]["text"] == "me"
        assert len(app.seen) == 3 and app.seen[0] is app.seen[1] is app.seen[2]
        assert server.statistics().sessions == 0
        assert not app.sessions  # the stateless server session is never attached as a session


async def test_auto_mode_switches_to_sse_for_the_first_notification() -> None:
    async with serving(stateless_app()) as (_, url), http() as client:
        body, mirrored = call("chatty", {}, ident=5, progressToken="p", **{META_LOG_LEVEL: "info"})
        async with client.stream("POST", url, content=body, headers={**ACCEPT_BOTH, **mirrored}) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = await read_events(stream, SseDecoder(), has_response(5))
        sent = messages(events)
        assert [m.get("method") for m in sent] == [
            "notifications/progress",
            "notifications/message",
            "notifications/progress",
            None,
        ]
        assert sent[0]["params"] == {"progressToken": "p", "progress": 1, "total": 2, "message": "half"}
        assert sent[1]["params"]["data"] == "almost"
        assert sent[3]["result"]["content"][0]["text"] == "said it"
        assert all(e.id is None for e in events)  # nothing of a stateless request can be resumed


async def test_a_json_only_client_gets_the_answer_alone() -> None:
    async with serving(stateless_app()) as (server, url), http() as client:
        body, mirrored = call("chatty", {}, progressToken="p", **{META_LOG_LEVEL: "info"})
        response = await client.post(url, content=body, headers={**JSON_ONLY, **mirrored})
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/json")
        assert response.json()["result"]["content"][0]["text"] == "said it"
        assert server.statistics().messages_dropped == 3  # two progress notifications and the log message


@pytest.mark.parametrize("json_response", [False, True])
async def test_the_sse_setting_streams_every_answer(json_response: bool) -> None:
    async with serving(stateless_app(), json_response=json_response) as (_, url), http() as client:
        body, mirrored = call("who", {}, ident=9)
        response = await client.post(url, content=body, headers={**ACCEPT_BOTH, **mirrored})
        assert response.status_code == 200
        if json_response:
            assert response.json()["id"] == 9
        else:
            assert response.headers["content-type"].startswith("text/event-stream")
            (answer,) = messages(SseDecoder().feed(response.content))
            assert answer["id"] == 9 and answer["result"]["content"][0]["text"] == "me"


async def test_errors_of_the_stateless_era_have_their_http_status() -> None:
    async with serving(stateless_app()) as (_, url), http() as client:
        body, mirrored = call("nope", {})
        response = await client.post(url, content=body, headers={**ACCEPT_BOTH, **mirrored})
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32602  # unknown tool: invalid params


async def test_a_server_to_client_request_fails_the_handler_instead_of_hanging() -> None:
    async with serving(stateless_app()) as (_, url), http() as client:
        body, mirrored = call("ask_the_old_way", {})
        with trio.fail_after(TIMEOUT):
            response = await client.post(url, content=body, headers={**ACCEPT_BOTH, **mirrored})
        assert response.status_code == 200
        result = response.json()["result"]
        assert result["isError"] is True
        assert "ConnectionClosed" in result["content"][0]["text"]
        assert "speaks only through that request's answer" in result["content"][0]["text"]


async def test_a_client_that_goes_away_cancels_the_handler() -> None:
    app = stateless_app()
    async with serving(app) as (_, url), http() as client:
        body, mirrored = call("block", {})
        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    lambda: client.post(url, content=body, headers={**ACCEPT_BOTH, **mirrored})
                )
                await app.entered.wait()
                nursery.cancel_scope.cancel()  # closes the connection mid-request
            await app.cancelled.wait()


async def test_a_long_sse_answer_gets_keep_alive_comments_until_its_client_leaves() -> None:
    """Nothing but the handler's answer would be written for as long as it
    runs: the POST's watcher (once the request has run disconnect_watch_delay)
    writes a keep-alive comment every ping_interval, and cancels the handler
    when the client goes away."""
    app = stateless_app()
    options = {"json_response": False, "ping_interval": 0.1, "disconnect_watch_delay": 0.1}
    async with serving(app, **options) as (_, url), http() as client:
        body, mirrored = call("block", {})
        with trio.fail_after(TIMEOUT):
            async with client.stream(
                "POST", url, content=body, headers={**ACCEPT_BOTH, **mirrored}
            ) as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                seen = b""
                async for chunk in stream.aiter_bytes():
                    seen += chunk
                    if seen.count(b": ping") >= 2:
                        break
                assert app.entered.is_set() and not app.cancelled.is_set()
            await app.cancelled.wait()  # the client left: the handler is cancelled


async def test_stopping_the_server_cancels_stateless_requests_in_flight() -> None:
    app = stateless_app()
    outcome: list[Any] = []

    async def post(client: Any, url: str) -> None:
        body, mirrored = call("block", {})
        try:
            outcome.append(await client.post(url, content=body, headers={**ACCEPT_BOTH, **mirrored}))
        except httpx.HTTPError as exc:  # the connection closes without an answer
            outcome.append(exc)

    with trio.fail_after(TIMEOUT):
        async with http() as client, trio.open_nursery() as outer, serving(app) as (server, url):
            outer.start_soon(post, client, url)
            await app.entered.wait()
            await server.asgi.aclose()
            await server.asgi.wait_responses_done()
            assert app.cancelled.is_set()
    assert len(outcome) == 1


async def test_a_handler_registered_later_is_served_statelessly_too() -> None:
    app = LowLevelServer("later")

    async def get_prompt(ctx: Context, params: GetPromptRequestParams) -> GetPromptResult:
        return GetPromptResult(messages=[PromptMessage(role="user", content=TextContent(text=params.name))])

    async with serving(app) as (_, url), http() as client:
        meta = {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}}
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": "p", "_meta": meta}}
        )
        headers = {
            **ACCEPT_BOTH,
            "mcp-protocol-version": MODERN,
            "mcp-method": "prompts/get",
            "mcp-name": "p",
        }
        before = await client.post(url, content=body, headers=headers)
        assert before.json()["error"]["code"] == -32601  # no prompts yet
        app.set_request_handler("prompts/get", GetPromptRequestParams, get_prompt)
        app.set_request_handler("prompts/list", PaginatedRequestParams, list_nothing)
        after = await client.post(url, content=body, headers=headers)
        assert after.status_code == 200
        assert after.json()["result"]["messages"][0]["content"]["text"] == "p"


async def list_nothing(ctx: Context, params: Any) -> ListPromptsResult:
    return ListPromptsResult(prompts=[])
