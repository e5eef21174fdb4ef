"""The Streamable HTTP server, driven with raw HTTP (httpx) against a real
hypercorn on 127.0.0.1 (port 0). Every server is stopped by its test and
every wait is bounded."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio

from trio_mcp.protocol import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from trio_mcp.server import Context, MCPServer
from trio_mcp.serving.http import (
    HttpServer,
    HttpServerSettings,
    MemoryEventStore,
    StreamableHttpApp,
)
from trio_mcp.transports.http._security import HostPolicy, split_host
from trio_mcp.transports.http._sse import SseDecoder, SseEvent

TIMEOUT = 10.0
LATEST = "2025-11-25"
ACCEPT_BOTH = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def init_message(version: str = LATEST, ident: int | str = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }


def make_app() -> MCPServer:
    app = MCPServer("http-test")

    @app.tool(inline=True)
    def echo(text: str) -> str:
        return text

    @app.tool
    async def slow_progress(ctx: Context, steps: int = 2) -> str:
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        await ctx.info("done soon")
        return "finished"

    @app.resource("memo://one", inline=True)
    def one() -> str:
        return "one"

    return app


@asynccontextmanager
async def serving(app: Any = None, **options: Any) -> AsyncIterator[tuple[HttpServer, str]]:
    """A real server on 127.0.0.1:0, stopped on exit (bounded)."""
    server = HttpServer(app if app is not None else make_app(), **options)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            info = await nursery.start(server.run)
            try:
                yield server, info.url
            finally:
                server.stop()


@asynccontextmanager
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        yield client


class Session:
    """A raw, initialized session."""

    def __init__(self, client: httpx.AsyncClient, url: str, session_id: str, version: str) -> None:
        self.client = client
        self.url = url
        self.id = session_id
        self.version = version
        self.next_id = 100

    def headers(self, **extra: str) -> dict[str, str]:
        return {**ACCEPT_BOTH, "mcp-session-id": self.id, "mcp-protocol-version": self.version, **extra}

    async def post(self, message: Any, **extra: str) -> httpx.Response:
        return await self.client.post(self.url, content=json.dumps(message), headers=self.headers(**extra))

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        return msg


async def initialize(client: httpx.AsyncClient, url: str, version: str = LATEST) -> Session:
    response = await client.post(url, content=json.dumps(init_message(version)), headers=ACCEPT_BOTH)
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    assert answer_of(response)["result"]["protocolVersion"] == version
    session = Session(client, url, session_id, version)
    note = await session.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202
    assert note.content == b""
    return session


def answer_of(response: httpx.Response) -> dict[str, Any]:
    """The last message of a JSON or SSE answer."""
    if response.headers["content-type"].startswith("text/event-stream"):
        return messages(SseDecoder().feed(response.content))[-1]
    return response.json()  # type: ignore[no-any-return]


async def read_events(
    response: httpx.Response, decoder: SseDecoder, until: Callable[[list[SseEvent]], bool] | None = None
) -> list[SseEvent]:
    """Events of an SSE response until ``until(events)`` holds, or the end."""
    events: list[SseEvent] = []
    chunks = response.extensions.get("test_chunks")
    if chunks is None:  # keep one iterator per response: it can be read in steps
        chunks = response.extensions["test_chunks"] = response.aiter_bytes()
    async for chunk in chunks:
        events.extend(decoder.feed(chunk))
        if until is not None and until(events):
            break
    return events


def messages(events: list[SseEvent]) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in events if e.data]


def has_method(method: str, count: int = 1) -> Callable[[list[SseEvent]], bool]:
    return lambda events: sum(1 for m in messages(events) if m.get("method") == method) >= count


def has_response(ident: int) -> Callable[[list[SseEvent]], bool]:
    return lambda events: any(m.get("id") == ident and "method" not in m for m in messages(events))


# ------------------------------------------------------------------ basics


async def test_initialize_issues_session_id_and_notifications_get_202() -> None:
    async with serving() as (server, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            assert len(session.id) >= 16 and all(0x21 <= ord(c) <= 0x7E for c in session.id)
            assert server.statistics().sessions == 1
            # A second initialize creates a second session.
            other = await initialize(client, url)
            assert other.id != session.id
            assert server.statistics().sessions == 2
            # A response from the client (to nothing pending) is accepted as well.
            reply = await session.post({"jsonrpc": "2.0", "id": 99, "result": {}})
            assert reply.status_code == 202


async def test_json_answer_by_default() -> None:
    async with serving() as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            request = session.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
            response = await session.post(request)
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("application/json")
            body = response.json()
            assert body["id"] == request["id"]
            assert body["result"]["content"][0]["text"] == "hi"


async def test_sse_answer_when_client_accepts_only_sse() -> None:
    async with serving() as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            request = session.request("tools/list")
            response = await session.post(request, accept="text/event-stream")
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            decoder = SseDecoder()
            events = decoder.feed(response.content)
            assert decoder.retry is not None  # the reconnection hint
            assert events[0].data == ""  # the priming event: an id, no message
            assert events[0].id is not None
            (answer,) = messages(events)
            assert answer["id"] == request["id"]
            assert {t["name"] for t in answer["result"]["tools"]} == {"echo", "slow_progress"}
            assert all(e.id is not None for e in events)


async def test_json_response_false_always_answers_sse() -> None:
    async with serving(json_response=False) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            response = await session.post(session.request("ping"))
            assert response.headers["content-type"].startswith("text/event-stream")
            assert messages(SseDecoder().feed(response.content))[-1]["result"] == {}


async def test_related_messages_upgrade_the_answer_to_sse() -> None:
    async with serving() as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            request = session.request(
                "tools/call",
                {"name": "slow_progress", "arguments": {"steps": 2}, "_meta": {"progressToken": "p"}},
            )
            response = await session.post(request)
            assert response.headers["content-type"].startswith("text/event-stream")
            received = messages(SseDecoder().feed(response.content))
            methods = [m.get("method") for m in received]
            assert methods == [
                "notifications/progress",
                "notifications/progress",
                "notifications/message",
                None,
            ]
            assert received[0]["params"] == {
                "progressToken": "p",
                "progress": 1,
                "total": 2,
                "message": "step 1",
            }
            assert received[-1]["id"] == request["id"]
            assert received[-1]["result"]["content"][0]["text"] == "finished"


async def test_json_response_true_sends_related_messages_to_the_get_stream() -> None:
    async with serving(json_response=True) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            async with client.stream(
                "GET", url, headers=session.headers(accept="text/event-stream")
            ) as stream:
                assert stream.status_code == 200
                request = session.request(
                    "tools/call",
                    {"name": "slow_progress", "arguments": {"steps": 1}, "_meta": {"progressToken": 7}},
                )
                response = await session.post(request)
                assert response.headers["content-type"].startswith("application/json")
                assert response.json()["id"] == request["id"]
                events = await read_events(stream, SseDecoder(), has_method("notifications/message"))
                got = [m["method"] for m in messages(events)]
                assert got == ["notifications/progress", "notifications/message"]


async def test_batch_in_2025_03_26_and_refused_later() -> None:
    async with serving() as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            old = await initialize(client, url, "2025-03-26")
            batch = [
                old.request("ping"),
                old.request("tools/list"),
                {"jsonrpc": "2.0", "method": "notifications/x"},
            ]
            response = await old.post(batch)
            assert response.status_code == 200
            answers = response.json()
            assert isinstance(answers, list)
            assert sorted(a["id"] for a in answers) == sorted([batch[0]["id"], batch[1]["id"]])
            duplicate = await old.post(
                [old.request("ping"), {**old.request("ping"), "id": batch[0]["id"]}] * 1
            )
            assert duplicate.status_code == 200  # the earlier ids were answered: free again
            same = old.request("ping")
            duplicate = await old.post([same, same])
            assert duplicate.status_code == 400
            new = await initialize(client, url)
            refused = await new.post([new.request("ping")])
            assert refused.status_code == 400
            assert refused.json()["error"]["code"] == -32600


# ----------------------------------------------------------- refusals


async def test_missing_and_unknown_session() -> None:
    async with serving() as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            missing = await client.post(url, content=json.dumps(ping), headers=ACCEPT_BOTH)
            assert missing.status_code == 400
            assert missing.json()["error"]["message"].startswith("Bad Request")
            unknown = await client.post(
                url, content=json.dumps(ping), headers={**ACCEPT_BOTH, "mcp-session-id": "nope"}
            )
            assert unknown.status_code == 404
            get_missing = await client.get(url, headers={"accept": "text/event-stream"})
            assert get_missing.status_code == 400
            get_unknown = await client.get(
                url, headers={"accept": "text/event-stream", "mcp-session-id": "nope"}
            )
            assert get_unknown.status_code == 404
            delete_unknown = await client.delete(url, headers={"mcp-session-id": "nope"})
            assert delete_unknown.status_code == 404


async def test_protocol_version_header() -> None:
    async with serving() as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            bad = await session.post(session.request("ping"), **{"mcp-protocol-version": "1999-01-01"})
            assert bad.status_code == 400
            assert "1999-01-01" in bad.json()["error"]["message"]
            headers = session.headers()
            del headers["mcp-protocol-version"]  # absent: the negotiated one is assumed
            ok = await client.post(url, content=json.dumps(session.request("ping")), headers=headers)
            assert ok.status_code == 200
            assert ok.json()["result"] == {}


async def test_delete_ends_the_session() -> None:
    async with serving() as (server, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            (server_session,) = server.asgi._shared.sessions
            deleted = await client.delete(url, headers=session.headers())
            assert deleted.status_code == 200
            assert server.statistics().sessions == 0
            after = await session.post(session.request("ping"))
            assert after.status_code == 404
            await server_session.peer.wait_stopped()  # the ServerSession ended


async def test_dns_rebinding_protection() -> None:
    async with serving() as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            body = json.dumps(init_message())
            bad_host = await client.post(url, content=body, headers={**ACCEPT_BOTH, "host": "evil.example"})
            assert 400 <= bad_host.status_code < 500
            bad_origin = await client.post(
                url, content=body, headers={**ACCEPT_BOTH, "origin": "http://evil.example"}
            )
            assert bad_origin.status_code == 403
            null_origin = await client.post(url, content=body, headers={**ACCEPT_BOTH, "origin": "null"})
            assert null_origin.status_code == 403
            good = await client.post(
                url, content=body, headers={**ACCEPT_BOTH, "origin": "http://localhost:5173"}
            )
            assert good.status_code == 200
            localhost = await client.post(
                url, content=body, headers={**ACCEPT_BOTH, "host": "localhost:1234"}
            )
            assert localhost.status_code == 200
    async with (
        serving(allowed_hosts=["mcp.example"], allowed_origins=["https://app.example"]) as (_, url),
        http() as client,
    ):
        with trio.fail_after(TIMEOUT):
            body = json.dumps(init_message())
            ours = await client.post(
                url,
                content=body,
                headers={**ACCEPT_BOTH, "host": "mcp.example", "origin": "https://app.example"},
            )
            assert ours.status_code == 200
            local_now_refused = await client.post(url, content=body, headers=ACCEPT_BOTH)
            assert 400 <= local_now_refused.status_code < 500


def test_host_policy_parsing() -> None:
    assert split_host("[::1]:8080") == ("[::1]", "8080")
    assert split_host("LocalHost") == ("localhost", None)
    assert split_host("::1") == ("[::1]", None)
    policy = HostPolicy(["localhost", "example.com:8443"], ["localhost", "https://app.example"])
    assert policy.host_allowed("localhost:1")
    assert policy.host_allowed("example.com:8443")
    assert not policy.host_allowed("example.com:8444")
    assert not policy.host_allowed(None)
    assert policy.origin_allowed(None)
    assert policy.origin_allowed("https://app.example/")
    assert not policy.origin_allowed("http://app.example")
    assert policy.origin_allowed("http://localhost:3000")
    assert not policy.origin_allowed("file://localhost")


async def test_body_limits_and_content_checks() -> None:
    async with serving(max_body_size=1024) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            big = session.request("tools/call", {"name": "echo", "arguments": {"text": "x" * 2000}})
            too_large = await session.post(big)
            assert too_large.status_code == 413

            async def chunked() -> AsyncIterator[bytes]:  # no Content-Length
                data = json.dumps(big).encode()
                for i in range(0, len(data), 256):
                    yield data[i : i + 256]

            streamed = await client.post(url, content=chunked(), headers=session.headers())
            assert streamed.status_code == 413
            assert streamed.headers["connection"] == "close"  # its body is never read
            wrong_type = await client.post(
                url,
                content=json.dumps(session.request("ping")),
                headers=session.headers(**{"content-type": "text/plain"}),
            )
            assert wrong_type.status_code == 415
            bad_json = await client.post(
                url, content=b'{"jsonrpc": "2.0", "id": 1,', headers=session.headers()
            )
            assert bad_json.status_code == 400
            assert bad_json.json()["error"]["code"] == -32700
            assert bad_json.json()["id"] is None
            not_acceptable = await session.post(session.request("ping"), accept="text/html")
            assert not_acceptable.status_code == 406
            put = await client.put(url, headers=session.headers())
            assert put.status_code == 405
            elsewhere = await client.post(
                url.replace("/mcp", "/other"), content=b"{}", headers=session.headers()
            )
            assert elsewhere.status_code == 404


# ------------------------------------------------------------ GET stream


async def test_get_stream_receives_server_notifications() -> None:
    app = make_app()
    async with serving(app) as (server, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            async with client.stream(
                "GET", url, headers=session.headers(accept="text/event-stream")
            ) as stream:
                assert stream.status_code == 200
                assert stream.headers["content-type"].startswith("text/event-stream")
                assert stream.headers["mcp-session-id"] == session.id
                decoder = SseDecoder()

                @app.tool(inline=True)
                def late() -> str:
                    return "late"

                events = await read_events(stream, decoder, has_method("notifications/tools/list_changed"))
                assert events[0].data == ""  # priming
                assert all(e.id for e in events)
                # One GET stream per session.
                second = await client.get(url, headers=session.headers(accept="text/event-stream"))
                assert second.status_code == 409
            assert server.statistics().messages_dropped == 0


async def test_messages_before_the_first_get_stream_are_kept_for_it() -> None:
    app = make_app()
    async with serving(app) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            # A related message of a JSON-answered request goes to the standalone
            # stream; no GET stream is open yet, so it waits in the backlog.
            response = await session.post(
                session.request("tools/call", {"name": "slow_progress", "arguments": {"steps": 1}}),
                accept="application/json",
            )
            assert response.json()["result"]["content"][0]["text"] == "finished"
            async with client.stream(
                "GET", url, headers=session.headers(accept="text/event-stream")
            ) as stream:
                events = await read_events(stream, SseDecoder(), has_method("notifications/message"))
                assert messages(events)[0]["params"]["data"] == "done soon"


async def test_get_stream_resumption_replays_missed_events() -> None:
    app = make_app()
    async with serving(app) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            decoder = SseDecoder()
            async with client.stream(
                "GET", url, headers=session.headers(accept="text/event-stream")
            ) as stream:
                await read_events(stream, decoder, lambda events: bool(events))  # the priming event
            last_seen = decoder.last_event_id
            assert last_seen is not None
            # The connection is gone: these are missed...
            app.add_tool(lambda: "a", name="missed_a")
            app.add_tool(lambda: "b", name="missed_b")
            # ... and replayed (the resuming connection takes the stream over,
            # whether or not the server noticed the old one is gone).
            resumed = SseDecoder()
            headers = session.headers(accept="text/event-stream", **{"last-event-id": last_seen})
            async with client.stream("GET", url, headers=headers) as stream:
                assert stream.status_code == 200
                events = await read_events(stream, resumed, has_method("notifications/tools/list_changed", 2))
            assert [m["method"] for m in messages(events)] == ["notifications/tools/list_changed"] * 2
            assert all(e.id is not None and e.id != last_seen for e in events)
            # A fresh GET (no Last-Event-ID) starts a new stream, without them.
            fresh = SseDecoder()
            async with client.stream(
                "GET", url, headers=session.headers(accept="text/event-stream")
            ) as stream:
                first = await read_events(stream, fresh, lambda events: bool(events))
            assert first[0].data == "" and first[0].id not in {e.id for e in events}


async def test_a_resuming_connection_takes_the_stream_over() -> None:
    app = make_app()
    async with serving(app) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            get = session.headers(accept="text/event-stream")
            async with client.stream("GET", url, headers=get) as old:
                decoder = SseDecoder()
                await read_events(old, decoder, lambda events: bool(events))
                # The server still holds the old connection; a plain GET is refused...
                assert (await client.get(url, headers=get)).status_code == 409
                # ... a resumption replaces it, and the old one ends.
                resume = {**get, "last-event-id": decoder.last_event_id or ""}
                async with client.stream("GET", url, headers=resume) as new:
                    assert new.status_code == 200
                    await read_events(old, decoder)  # ends
                    app.add_tool(lambda: "n", name="n")
                    events = await read_events(
                        new, SseDecoder(), has_method("notifications/tools/list_changed")
                    )
                    assert messages(events)[0]["method"] == "notifications/tools/list_changed"


async def test_post_stream_resumption_replays_the_answer() -> None:
    app = make_app()
    proceed = trio.Event()

    @app.tool
    async def waits(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        await proceed.wait()
        return "answer"

    async with serving(app) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            request = session.request("tools/call", {"name": "waits", "_meta": {"progressToken": 1}})
            decoder = SseDecoder()
            async with client.stream(
                "POST", url, content=json.dumps(request), headers=session.headers()
            ) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                await read_events(response, decoder, has_method("notifications/progress"))
            # Disconnected before the answer; it is produced meanwhile.
            proceed.set()
            headers = session.headers(accept="text/event-stream", **{"last-event-id": decoder.last_event_id})
            async with client.stream("GET", url, headers=headers) as stream:
                events = await read_events(stream, SseDecoder())  # ends after the answer
            (answer,) = messages(events)
            assert answer["id"] == request["id"]
            assert answer["result"]["content"][0]["text"] == "answer"


async def test_event_store_is_bounded() -> None:
    store = MemoryEventStore(max_events_per_stream=2, max_streams=2)
    ids = [await store.store_event("s", b"%d" % i) for i in range(4)]
    assert await store.events_after(ids[0]) == [(ids[2], b"2"), (ids[3], b"3")]  # 1 fell out
    assert await store.stream_of(ids[3]) == "s"
    await store.store_event("t", b"t")
    await store.store_event("u", b"u")  # evicts "s", the least recently written
    assert await store.stream_of(ids[3]) is None
    assert await store.events_after(ids[3]) is None
    assert await store.events_after("garbage") is None
    await store.forget_stream("t")
    assert store.statistics()["streams"] == 1
    with pytest.raises(ValueError):
        MemoryEventStore(0)


# ------------------------------------------------------- lifecycle, misc


async def test_shutdown_ends_sse_streams_promptly() -> None:
    app = make_app()
    with trio.fail_after(TIMEOUT):
        async with http() as client:
            server = HttpServer(app)
            async with trio.open_nursery() as nursery:
                info = await nursery.start(server.run)
                session = await initialize(client, info.url)
                async with client.stream(
                    "GET", info.url, headers=session.headers(accept="text/event-stream")
                ) as stream:
                    decoder = SseDecoder()
                    await read_events(stream, decoder, lambda events: bool(events))
                    server.stop()
                    with trio.fail_after(3):
                        await read_events(stream, decoder)  # ends: the server closed it
            assert not app.sessions  # every ServerSession ended


async def test_server_ending_a_session_gives_404() -> None:
    app = make_app()
    async with serving(app) as (server, url), http() as client:
        with trio.fail_after(TIMEOUT):
            session = await initialize(client, url)
            assert await server.asgi.terminate_session(session.id)
            assert not await server.asgi.terminate_session(session.id)
            response = await session.post(session.request("ping"))
            assert response.status_code == 404


async def test_failed_initialize_leaves_no_session() -> None:
    async with serving() as (server, url), http() as client:
        with trio.fail_after(TIMEOUT):
            bad = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 5}}
            response = await client.post(url, content=json.dumps(bad), headers=ACCEPT_BOTH)
            assert response.status_code == 200
            assert response.json()["error"]["code"] == -32602
            # Ended as the answer was routed, before it was written.
            assert server.statistics().sessions == 0


async def test_stateless_modern_request_needs_no_session() -> None:
    async with serving() as (server, url), http() as client:
        with trio.fail_after(TIMEOUT):
            meta = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}
            request = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "stateless"}, "_meta": meta},
            }
            mirrored = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo"}
            response = await client.post(
                url, content=json.dumps(request), headers={**ACCEPT_BOTH, **mirrored}
            )
            assert response.status_code == 200
            assert "mcp-session-id" not in response.headers
            assert response.json()["result"]["content"][0]["text"] == "stateless"
            assert server.statistics().sessions == 0


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"mcp-method": None}, "Mcp-Method header is missing"),
        ({"mcp-method": "tools/list"}, "does not match the body's method"),
        ({"mcp-name": None}, "Mcp-Name header is missing"),
        ({"mcp-name": "other"}, "Mcp-Name header does not match params.name"),
        ({"mcp-protocol-version": None}, "MCP-Protocol-Version header does not match"),
        ({"mcp-name": "=?base64?ZWNobw==?="}, None),  # "echo", base64-wrapped: accepted
        ({"mcp-name": "=?base64?not base64?="}, "Mcp-Name header is missing or malformed"),
    ],
)
async def test_stateless_requests_must_mirror_their_body_in_headers(
    change: dict, problem: str | None
) -> None:
    """2026-07-28: Mcp-Method, Mcp-Name and MCP-Protocol-Version mirror the body;
    a missing or mismatching one is HTTP 400 with JSON-RPC error -32020."""
    async with serving() as (_server, url), http() as client:
        with trio.fail_after(TIMEOUT):
            meta = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}
            request = {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": meta},
            }
            headers = {
                **ACCEPT_BOTH,
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/call",
                "mcp-name": "echo",
            }
            for key, value in change.items():
                if value is None:
                    headers.pop(key)
                else:
                    headers[key] = value
            response = await client.post(url, content=json.dumps(request), headers=headers)
            if problem is None:
                assert response.status_code == 200
                assert response.json()["result"]["content"][0]["text"] == "x"
            else:
                assert response.status_code == 400
                body = response.json()
                assert body["id"] == 7 and body["error"]["code"] == -32020
                assert problem in body["error"]["message"]


async def test_stateless_subscriptions_listen_streams_on_its_post() -> None:
    app = make_app()
    async with serving(app) as (_server, url), http() as client:
        with trio.fail_after(TIMEOUT):
            meta = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}
            listen = {
                "jsonrpc": "2.0",
                "id": "sub-1",
                "method": "subscriptions/listen",
                "params": {"notifications": {"toolsListChanged": True}, "_meta": meta},
            }
            headers = {
                **ACCEPT_BOTH,
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "subscriptions/listen",
            }
            async with client.stream("POST", url, content=json.dumps(listen), headers=headers) as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                decoder = SseDecoder()
                await read_events(stream, decoder, has_method("notifications/subscriptions/acknowledged"))
                app.add_tool(lambda: "l", name="listened")
                events = await read_events(stream, decoder, has_method("notifications/tools/list_changed"))
                (note,) = messages(events)
                assert note["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub-1"}
                (server_session,) = app.sessions
            await server_session.peer.wait_stopped()  # the client left: its stateless session ends
            assert server_session.peer.closed


async def test_session_factory_gets_one_app_per_session() -> None:
    made: list[MCPServer] = []

    def factory() -> MCPServer:
        made.append(make_app())
        return made[-1]

    async with serving(factory) as (_, url), http() as client:
        with trio.fail_after(TIMEOUT):
            first = await initialize(client, url)
            await initialize(client, url)
            assert len(made) == 2
            answer = await first.post(
                first.request("tools/call", {"name": "echo", "arguments": {"text": "f"}})
            )
            assert answer.json()["result"]["content"][0]["text"] == "f"


async def test_asgi_app_served_by_plain_hypercorn_runs_itself_in_the_lifespan() -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    asgi = StreamableHttpApp(make_app(), settings=HttpServerSettings(path="/rpc"))
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 1.0
    stop = trio.Event()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery, http() as client:
            binds = await nursery.start(
                lambda task_status: serve(asgi, config, shutdown_trigger=stop.wait, task_status=task_status)
            )
            url = binds[0] + "/rpc"
            session = await initialize(client, url)
            answer = await session.post(session.request("ping"))
            assert answer.json()["result"] == {}
            stop.set()
    assert asgi.statistics().sessions == 0


def test_settings_validation() -> None:
    with pytest.raises(ValueError):
        HttpServerSettings(path="mcp")
    with pytest.raises(ValueError):
        HttpServerSettings(max_body_size=0)
    with pytest.raises(ValueError):
        HttpServerSettings(session_idle_timeout=0)
    assert HttpServerSettings(allowed_hosts="example.com").allowed_hosts == ("example.com",)
    server = HttpServer(make_app(), settings=HttpServerSettings(path="/rpc"), max_sessions=3)
    assert (server.asgi.settings.path, server.asgi.settings.max_sessions) == ("/rpc", 3)
    assert "10.1.2.3" in HttpServer(make_app(), host="10.1.2.3").asgi.settings.allowed_hosts
    with pytest.raises(ValueError):
        StreamableHttpApp(make_app(), event_store="redis")
    with pytest.raises(TypeError):
        StreamableHttpApp(42)


def test_sse_decoder_line_endings_and_bounds() -> None:
    decoder = SseDecoder(max_event_size=64)
    events = decoder.feed(b"\xef\xbb\xbfid: 1\r")
    events += decoder.feed(b"\ndata: a\rdata: b\n\n: comment\nretry: 250\nevent: other\ndata: c\r\n\r\n")
    assert [(e.event, e.data, e.id) for e in events] == [("message", "a\nb", "1"), ("other", "c", "1")]
    assert decoder.retry == 250
    from trio_mcp.transports.http._sse import SseError

    with pytest.raises(SseError):
        decoder.feed(b"data: " + b"x" * 100 + b"\n")


# ------------------------------------------- in-process ASGI, virtual time


async def asgi_call(
    app: StreamableHttpApp,
    method: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    *,
    block_body_writes: bool = False,
) -> tuple[int, dict[str, str], bytes]:
    """One request straight into the ASGI app (no sockets: virtual time works)."""
    scope = {
        "type": "http",
        "method": method,
        "path": "/mcp",
        "headers": [
            (k.encode(), v.encode())
            for k, v in {"host": "localhost", **ACCEPT_BOTH, **(headers or {})}.items()
        ],
    }
    delivered = False
    status = 0
    out_headers: dict[str, str] = {}
    out = bytearray()

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            out_headers.update({k.decode(): v.decode() for k, v in message["headers"]})
        else:
            if block_body_writes and message.get("body"):
                await trio.sleep_forever()  # a client that stopped reading
            out.extend(message.get("body", b""))

    await app(scope, receive, send)
    return status, out_headers, bytes(out)


async def test_idle_sessions_expire(autojump_clock: trio.testing.MockClock) -> None:
    asgi = StreamableHttpApp(make_app(), session_idle_timeout=60)
    async with trio.open_nursery() as nursery:
        await nursery.start(asgi.run)
        status, headers, _ = await asgi_call(asgi, "POST", json.dumps(init_message()).encode())
        assert status == 200
        sid = headers["mcp-session-id"]
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        assert (await asgi_call(asgi, "POST", note, {"mcp-session-id": sid}))[0] == 202
        ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode()
        await trio.sleep(50)
        status, _, _ = await asgi_call(asgi, "POST", ping, {"mcp-session-id": sid})
        assert status == 200  # and the session is active again
        await trio.sleep(50)
        assert await asgi.registry.get(sid) is not None
        await trio.sleep(30)
        assert await asgi.registry.get(sid) is None
        assert asgi.statistics().sessions_expired == 1
        status, _, _ = await asgi_call(asgi, "POST", ping, {"mcp-session-id": sid})
        assert status == 404
        await asgi.aclose()


async def test_a_client_that_stops_reading_loses_its_stream_not_the_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app = make_app()
    asgi = StreamableHttpApp(app, write_timeout=5)
    async with trio.open_nursery() as nursery:
        await nursery.start(asgi.run)
        _, headers, _ = await asgi_call(asgi, "POST", json.dumps(init_message()).encode())
        sid = headers["mcp-session-id"]
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        assert (await asgi_call(asgi, "POST", note, {"mcp-session-id": sid}))[0] == 202
        get_headers = {"mcp-session-id": sid, "accept": "text/event-stream"}
        start = trio.current_time()
        status, _, _ = await asgi_call(asgi, "GET", headers=get_headers, block_body_writes=True)
        assert status == 200
        assert trio.current_time() - start == pytest.approx(5)  # dropped after write_timeout
        # The session lives on; a new GET stream works.
        app.add_tool(lambda: "x", name="x")
        session = await asgi.registry.get(sid)
        assert session is not None and session.standalone.conn is None
        await asgi.aclose()
