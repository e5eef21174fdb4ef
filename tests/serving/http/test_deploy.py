"""Deploying the Streamable HTTP server: CORS, allowed hosts, health and
readiness, custom routes, stateless mode. Real hypercorn on 127.0.0.1
(port 0), raw httpx and our own client; every wait bounded."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from trio_mcp.actors._client import open_session
from trio_mcp.protocol import TextContent
from trio_mcp.server import Context, MCPServer
from trio_mcp.serving.http import HttpServer
from trio_mcp.transports.http import StreamableHttpTransport
from trio_mcp.transports.http._security import ANY_IP, HostPolicy, wildcard_hosts
from trio_mcp.transports.http._sse import SseDecoder

from .test_server import ACCEPT_BOTH, TIMEOUT, answer_of, http, init_message, initialize, make_app, serving

PAGE = "https://app.example.com"


def call(ident: int, name: str = "echo", **arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


# ------------------------------------------------------------------- CORS


async def test_a_preflight_from_an_allowed_origin_is_answered() -> None:
    async with serving(allowed_origins=(PAGE,)) as (_, url), http() as client:
        response = await client.options(
            url,
            headers={
                "origin": PAGE,
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, mcp-session-id, mcp-protocol-version, "
                "authorization, mcp-param-region, x-not-ours",
            },
        )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == PAGE
    methods = {m.strip() for m in response.headers["access-control-allow-methods"].split(",")}
    assert {"GET", "POST", "DELETE"} <= methods
    allowed = {h.strip() for h in response.headers["access-control-allow-headers"].split(",")}
    assert allowed == {
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "authorization",
        "mcp-param-region",
    }
    assert int(response.headers["access-control-max-age"]) > 0
    assert "origin" in response.headers["vary"].lower()


async def test_answers_to_an_allowed_origin_expose_the_mcp_headers() -> None:
    async with serving(allowed_origins=(PAGE,)) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            response = await client.post(
                url, content=json.dumps(init_message()), headers={**ACCEPT_BOTH, "origin": PAGE}
            )
            assert response.status_code == 200
            assert response.headers["access-control-allow-origin"] == PAGE
            exposed = {h.strip() for h in response.headers["access-control-expose-headers"].split(",")}
            assert {"mcp-session-id", "mcp-protocol-version"} <= exposed
            session_id = response.headers["mcp-session-id"]
            # An error answer carries them too (the page can read the status).
            missing = await client.post(
                url, content=json.dumps(call(2)), headers={**ACCEPT_BOTH, "origin": PAGE}
            )
            assert missing.status_code == 400
            assert missing.headers["access-control-allow-origin"] == PAGE
            deleted = await client.delete(url, headers={"origin": PAGE, "mcp-session-id": session_id})
            assert deleted.status_code == 200
            assert deleted.headers["access-control-allow-origin"] == PAGE


async def test_a_refused_origin_gets_403_and_no_cors_headers() -> None:
    async with serving(allowed_origins=(PAGE,)) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            preflight = await client.options(
                url, headers={"origin": "https://evil.example", "access-control-request-method": "POST"}
            )
            post = await client.post(
                url,
                content=json.dumps(init_message()),
                headers={**ACCEPT_BOTH, "origin": "https://evil.example"},
            )
    for response in (preflight, post):
        assert response.status_code == 403
        assert "access-control-allow-origin" not in response.headers


async def test_what_was_refused_before_is_refused_with_the_same_codes() -> None:
    async with serving() as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            # OPTIONS that is not a preflight: 405 as before, naming the methods.
            plain = await client.options(url)
            assert plain.status_code == 405
            assert plain.headers["allow"] == "GET, POST, DELETE"
            assert (await client.put(url, content=b"{}", headers=ACCEPT_BOTH)).status_code == 405
            elsewhere = url.replace("/mcp", "/other")
            assert (await client.get(elsewhere)).status_code == 404
            assert (await client.get(url, headers={"host": "evil.example"})).status_code == 421
            bad_type = {**ACCEPT_BOTH, "content-type": "text/plain"}
            assert (await client.post(url, content=b"{}", headers=bad_type)).status_code == 415
            assert (await client.get(url, headers={"accept": "text/event-stream"})).status_code == 400


# ----------------------------------------------------------- allowed hosts


def test_a_wildcard_bind_answers_ip_addresses_and_this_machines_names() -> None:
    hosts = wildcard_hosts()
    assert {"localhost", "127.0.0.1", "[::1]", ANY_IP} <= set(hosts)
    policy = HostPolicy(hosts, ())
    for host in ("10.1.2.3:8000", "192.168.0.7", "[fe80::1]:8000", "[2001:db8::5]", "localhost:9"):
        assert policy.host_allowed(host), host
    for host in ("evil.example", "evil.example:8000", "10.1.2.3.evil.example", "[not-an-ip]", ""):
        assert not policy.host_allowed(host), host
    assert HttpServer(make_app(), host="0.0.0.0").asgi.settings.allowed_hosts == hosts
    # A specific address adds itself; the loopback default stays the loopback names.
    assert "10.9.8.7" in HttpServer(make_app(), host="10.9.8.7").asgi.settings.allowed_hosts
    assert ANY_IP not in HttpServer(make_app()).asgi.settings.allowed_hosts


async def test_an_ip_address_host_is_answered_when_allowed_and_a_name_is_not() -> None:
    async with serving(allowed_hosts=(*wildcard_hosts(),)) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            ok = await client.post(
                url, content=json.dumps(init_message()), headers={**ACCEPT_BOTH, "host": "10.1.2.3:8000"}
            )
            assert ok.status_code == 200
            rebound = await client.post(
                url, content=json.dumps(init_message()), headers={**ACCEPT_BOTH, "host": "evil.example"}
            )
            assert rebound.status_code == 421


# --------------------------------------------------------- health, ready


async def test_healthz_and_readyz() -> None:
    async with serving() as (_, url), http() as client:
        base = url.removesuffix("/mcp")
        with trio.fail_after(TIMEOUT):
            health = await client.get(f"{base}/healthz")
            assert health.status_code == 200 and health.json() == {"status": "ok"}
            ready = await client.get(f"{base}/readyz")
            assert ready.status_code == 200
            assert ready.json() == {"ready": True, "sessions": 0, "maxSessions": 1024}
            await initialize(client, url)
            assert (await client.get(f"{base}/readyz")).json()["sessions"] == 1
            assert (await client.post(f"{base}/healthz")).status_code == 405
            # The same Host check as the endpoint.
            assert (await client.get(f"{base}/healthz", headers={"host": "evil.example"})).status_code == 421


async def test_readyz_is_503_at_max_sessions() -> None:
    async with serving(max_sessions=1) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            await initialize(client, url)
            ready = await client.get(url.replace("/mcp", "/readyz"))
            assert ready.status_code == 503
            assert ready.json()["ready"] is False and ready.json()["reason"] == "at max_sessions"


async def test_the_readiness_callback_adds_to_the_report_and_decides() -> None:
    state: dict[str, Any] = {"ready": True, "servers": {"a": {"connected": True}}}

    async def readiness() -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        return dict(state)

    async with serving(readiness=readiness) as (_, url), http() as client:
        ready_url = url.replace("/mcp", "/readyz")
        with trio.fail_after(TIMEOUT):
            first = await client.get(ready_url)
            assert first.status_code == 200
            assert first.json()["servers"] == {"a": {"connected": True}} and first.json()["ready"] is True
            state.update(ready=False, servers={"a": {"connected": False}})
            second = await client.get(ready_url)
            assert second.status_code == 503
            assert second.json()["servers"] == {"a": {"connected": False}}


async def test_a_failing_or_hanging_readiness_callback_means_not_ready() -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("database unreachable")

    async def hanging() -> dict[str, Any]:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async with serving(readiness=broken) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            answer = await client.get(url.replace("/mcp", "/readyz"))
    assert answer.status_code == 503 and "database unreachable" in answer.json()["reason"]
    async with serving(readiness=hanging, readiness_timeout=0.05) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            answer = await client.get(url.replace("/mcp", "/readyz"))
    assert answer.status_code == 503 and "took over" in answer.json()["reason"]


# ---------------------------------------------------------- custom routes


async def hello_route(scope: dict[str, Any], receive: Any, send: Any) -> None:
    body = json.dumps({"path": scope["path"], "method": scope["method"]}).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": body})


async def test_custom_routes_exact_and_prefix() -> None:
    server = HttpServer(make_app(), routes={"/hello": hello_route})
    server.mount("/static/", hello_route)
    with pytest.raises(ValueError, match="taken"):
        server.mount("/mcp", hello_route)
    with pytest.raises(ValueError, match="taken"):
        server.mount("/healthz", hello_route)
    with pytest.raises(ValueError, match="must start with"):
        server.mount("relative", hello_route)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            info = await nursery.start(server.run)
            base = info.url.removesuffix("/mcp")
            async with http() as client:
                assert (await client.get(f"{base}/hello")).json() == {"path": "/hello", "method": "GET"}
                assert (await client.post(f"{base}/static/a/b.txt")).json()["path"] == "/static/a/b.txt"
                assert (await client.get(f"{base}/hello/more")).status_code == 404
                assert (
                    await client.get(f"{base}/hello", headers={"host": "evil.example"})
                ).status_code == 421
                # The MCP endpoint is unchanged.
                await initialize(client, info.url)
            server.stop()


# -------------------------------------------------------------- stateless


def stateless_app() -> MCPServer:
    app = make_app()

    @app.tool
    async def ask(ctx: Context) -> str:
        result = await ctx.sample("hi", max_tokens=5)
        return str(result)

    return app


async def test_stateless_mode_answers_without_sessions() -> None:
    async with serving(stateless_app(), stateless=True) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            init = await client.post(url, content=json.dumps(init_message()), headers=ACCEPT_BOTH)
            assert init.status_code == 200
            assert "mcp-session-id" not in init.headers
            assert answer_of(init)["result"]["protocolVersion"] == "2025-11-25"
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await client.post(url, content=json.dumps(note), headers=ACCEPT_BOTH)).status_code == 202
            # Any request, no session id, no initialize needed (each POST on its own).
            headers = {**ACCEPT_BOTH, "mcp-protocol-version": "2025-06-18"}
            answer = await client.post(url, content=json.dumps(call(2, text="hi")), headers=headers)
            assert answer.status_code == 200 and "mcp-session-id" not in answer.headers
            assert answer_of(answer)["result"]["content"][0]["text"] == "hi"
            # Without the version header: 2025-03-26, as the specification says.
            bare = await client.post(url, content=json.dumps(call(3, text="bare")), headers=ACCEPT_BOTH)
            assert answer_of(bare)["result"]["content"][0]["text"] == "bare"
            # A session id sent anyway is ignored.
            stray = {**headers, "mcp-session-id": "nope"}
            assert (
                await client.post(url, content=json.dumps(call(4, text="x")), headers=stray)
            ).status_code == 200
            # No GET stream, nothing to delete.
            get = await client.get(url, headers={"accept": "text/event-stream"})
            assert get.status_code == 405 and get.headers["allow"] == "POST"
            assert "stateless" in get.json()["error"]["message"]
            assert (await client.delete(url)).status_code == 405
            # No batches.
            batch = [call(5), call(6)]
            assert (await client.post(url, content=json.dumps(batch), headers=ACCEPT_BOTH)).status_code == 400
            # A JSON-RPC error is answered with 200, as in a session (not the 2026 statuses).
            unknown = await client.post(url, content=json.dumps(call(7, name="nope")), headers=headers)
            assert unknown.status_code == 200
            assert answer_of(unknown)["error"]["code"] == -32602


async def test_stateless_mode_streams_a_handlers_notifications_and_refuses_server_requests() -> None:
    async with serving(stateless_app(), stateless=True) as (_, url), http() as client:
        headers = {**ACCEPT_BOTH, "mcp-protocol-version": "2025-11-25"}
        with trio.fail_after(TIMEOUT):
            message = call(2, name="slow_progress", steps=2)
            message["params"]["_meta"] = {"progressToken": "p"}
            response = await client.post(url, content=json.dumps(message), headers=headers)
            assert response.headers["content-type"].startswith("text/event-stream")
            events = [json.loads(e.data) for e in SseDecoder().feed(response.content) if e.data]
            assert [e.get("method") for e in events[:2]] == ["notifications/progress"] * 2
            assert events[-1]["result"]["content"][0]["text"] == "finished"
            # Sampling needs a client capability that a stateless server never has.
            ask = await client.post(url, content=json.dumps(call(3, name="ask")), headers=headers)
            result = answer_of(ask)
            assert result["result"]["isError"] is True
            assert "sampling" in result["result"]["content"][0]["text"]


async def test_our_client_works_against_a_stateless_server() -> None:
    async with serving(stateless_app(), stateless=True) as (server, url):
        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                stream = await nursery.start(StreamableHttpTransport(url).run)
                async with open_session(stream) as session:
                    result = await session.call_tool("echo", {"text": "stateless"})
                    assert result.content == [TextContent(text="stateless")]
                    again = await session.call_tool("echo", {"text": "again"})
                    assert again.content == [TextContent(text="again")]
                nursery.cancel_scope.cancel()
        assert server.statistics().sessions == 0
        assert server.statistics().sessions_created == 0


async def test_a_factory_app_is_made_once_in_stateless_mode() -> None:
    made: list[MCPServer] = []

    def factory() -> MCPServer:
        made.append(make_app())
        return made[-1]

    async with serving(factory, stateless=True) as (_, url), http() as client:
        headers = {**ACCEPT_BOTH, "mcp-protocol-version": "2025-06-18"}
        with trio.fail_after(TIMEOUT):
            for ident in range(3):
                answer = await client.post(url, content=json.dumps(call(ident, text="f")), headers=headers)
                assert answer_of(answer)["result"]["content"][0]["text"] == "f"
    assert len(made) == 1


# ------------------------------------------------------------ freeze_heap


async def test_freeze_heap_moves_the_start_up_heap_out_of_the_collectors_reach() -> None:
    import gc

    gc.unfreeze()
    try:
        async with serving() as (_, url), http() as client:
            assert gc.get_freeze_count() == 0  # off by default: a library leaves the process alone
            assert (await client.get(url.replace("/mcp", "/healthz"))).status_code == 200
        async with serving(freeze_heap=True) as (_, url), http() as client:
            assert gc.get_freeze_count() > 0  # frozen once listening
            session = await initialize(client, url)
            answer = answer_of(await session.post(call(2, text="after freezing")))
            assert answer["result"]["content"][0]["text"] == "after freezing"
    finally:
        gc.unfreeze()
