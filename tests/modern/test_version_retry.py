"""The client retries with a version the server supports when its choice is
refused with -32022 (UnsupportedProtocolVersion, ``data.supported``).

* ``server/discover`` refused: retried once with the newest common stateless
  version; with only handshake versions in common, ``era="auto"`` falls back
  to ``initialize`` offering the newest of them (no newer than the client's
  ``protocol_version``), a client pinned to ``era="modern"`` gives up;
* a stateless request refused mid-session: sent again once under the newest
  common stateless version, or after falling back to ``initialize``; several
  refused at once fall back once;
* over Streamable HTTP, a refusal comes as HTTP 400 with the error body.

Scripted servers over the recording memory wire (every message validated
against the schemas) and, for HTTP, a middleware in front of the real app.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from trio_mcp.actors._client import open_session
from trio_mcp.protocol import (
    META_PROTOCOL_VERSION,
    McpError,
    UnsupportedProtocolVersion,
    raw_or_none,
)
from trio_mcp.server import MCPServer
from trio_mcp.serving.http import HttpServerSettings, StreamableHttpApp
from trio_mcp.transports.http import StreamableHttpTransport

from .conftest import MODERN, TIMEOUT, discover_result, error_of, initialize_result, open_raw_server, text_of

LISTED = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "tools": []}


def refusal(supported: list[str] | None, requested: str = "2099-01-01") -> UnsupportedProtocolVersion:
    data = None if supported is None else {"supported": supported, "requested": requested}
    return UnsupportedProtocolVersion("Unsupported protocol version", data=data)


def version_of(request: Any) -> Any:
    params = raw_or_none(request.params) or {}
    return (params.get("_meta") or {}).get(META_PROTOCOL_VERSION)


def refuse_first(
    count: int, supported: list[str] | None, answer: Callable[[Any], Any]
) -> Callable[[Any], Any]:
    """A handler refusing its first ``count`` requests with -32022, then answering."""
    calls = {"n": 0}

    def handler(request: Any) -> Any:
        calls["n"] += 1
        if calls["n"] <= count:
            raise refusal(supported, str(version_of(request)))
        return answer(request)

    return handler


def call_result(text: str) -> Callable[[Any], Any]:
    return lambda request: {"resultType": "complete", "content": [{"type": "text", "text": text}]}


# ------------------------------------------------------------ server/discover


@pytest.mark.parametrize("era", ["modern", "auto"])
async def test_a_refused_discover_is_retried_with_the_version_the_server_names(
    wires: Any, mode: str, era: str
) -> None:
    """The suite's request-metadata case: the first request is refused even
    though the server names the very version it carried; the retry carries it."""
    handlers = {
        "server/discover": refuse_first(1, ["2099-01-01", MODERN], lambda r: discover_result(tools={}))
    }
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, handlers, mode=mode) as rs:
            async with open_session(rs.client_stream, era=era) as client:
                assert client.era == "modern" and client.protocol_version == MODERN
            discovers = rs.wire.requests("client", "server/discover")
            assert len(discovers) == 2 and discovers[0]["id"] != discovers[1]["id"]
            assert [d["params"]["_meta"][META_PROTOCOL_VERSION] for d in discovers] == [MODERN, MODERN]
            assert "initialize" not in rs.wire.methods("client")


@pytest.mark.parametrize(
    ("offered", "supported", "expected"),
    [
        ("2025-11-25", ["2024-11-05", "2025-06-18"], "2025-06-18"),
        ("2025-06-18", ["2025-11-25", "2025-03-26", "2024-11-05"], "2025-03-26"),  # never newer than offered
    ],
)
async def test_auto_falls_back_to_initialize_with_the_newest_common_handshake_version(
    wires: Any, mode: str, offered: str, supported: list[str], expected: str
) -> None:
    handlers = {
        "server/discover": refuse_first(99, supported, lambda r: None),
        "initialize": lambda r: initialize_result(raw_or_none(r.params)["protocolVersion"], tools={}),
    }
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, handlers, mode=mode) as rs:
            async with open_session(rs.client_stream, era="auto", protocol_version=offered) as client:
                assert client.era == "handshake" and client.protocol_version == expected
            assert rs.wire.methods("client")[:2] == ["server/discover", "initialize"]
            (init,) = rs.wire.requests("client", "initialize")
            assert init["params"]["protocolVersion"] == expected


@pytest.mark.parametrize(
    ("supported", "discovers"),
    [
        (["2025-11-25"], 1),  # a handshake version only: a pinned modern client does not fall back
        (None, 1),  # no data.supported: nothing to retry with
        ([MODERN], 2),  # refused again: one retry only
    ],
    ids=["handshake-only", "no-data", "refused-twice"],
)
async def test_a_pinned_modern_client_gives_up(
    wires: Any, mode: str, supported: list[str] | None, discovers: int
) -> None:
    handlers = {"server/discover": refuse_first(99, supported, lambda r: None)}
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, handlers, mode=mode) as rs:
            with rs.wire.unchecked("server"), pytest.raises(BaseException) as excinfo:  # no data: invalid
                async with open_session(rs.client_stream, era="modern"):
                    pass  # pragma: no cover
            assert isinstance(error_of(excinfo), UnsupportedProtocolVersion)
            assert rs.wire.methods("client") == ["server/discover"] * discovers


# ------------------------------------------------------ stateless requests


async def test_a_refused_request_is_sent_again_once_under_the_common_version(wires: Any, mode: str) -> None:
    handlers = {
        "server/discover": lambda r: discover_result(tools={}),
        "tools/call": refuse_first(1, [MODERN], call_result("second time")),
    }
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, handlers, mode=mode) as rs:
            async with open_session(rs.client_stream, era="modern") as client:
                assert text_of(await client.call_tool("t", {"x": 1})) == "second time"
                assert client.era == "modern" and client.protocol_version == MODERN
            calls = rs.wire.requests("client", "tools/call")
            assert len(calls) == 2 and calls[0]["id"] != calls[1]["id"]
            assert calls[0]["params"] == calls[1]["params"]


async def test_a_request_refused_twice_fails(wires: Any, mode: str) -> None:
    handlers = {
        "server/discover": lambda r: discover_result(tools={}),
        "tools/call": refuse_first(99, [MODERN], call_result("never")),
    }
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, handlers, mode=mode) as rs:
            async with open_session(rs.client_stream, era="modern") as client:
                with pytest.raises(UnsupportedProtocolVersion):
                    await client.call_tool("t")
            assert len(rs.wire.requests("client", "tools/call")) == 2


def _era_aware_server(
    refused: list[Any], arrived: trio.Event | None = None, expect: int = 1
) -> dict[str, Any]:
    """Stateless requests refused (only handshake versions supported), handshake ones answered."""

    async def call(request: Any) -> Any:
        if version_of(request) is None:
            return call_result(f"handshake {raw_or_none(request.params)['name']}")(request)
        refused.append(request)
        if arrived is not None:
            if len(refused) >= expect:
                arrived.set()
            await arrived.wait()
        raise refusal(["2024-11-05", "2025-11-25"], MODERN)

    return {
        "server/discover": lambda r: discover_result(tools={}, resources={"subscribe": True}),
        "initialize": lambda r: initialize_result(
            raw_or_none(r.params)["protocolVersion"], tools={}, resources={"subscribe": True}
        ),
        "resources/subscribe": lambda r: {},
        "tools/call": call,
    }


async def test_mid_session_the_auto_client_falls_back_to_initialize_and_sends_the_request_again(
    wires: Any, mode: str
) -> None:
    refused: list[Any] = []
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, _era_aware_server(refused), mode=mode) as rs:
            async with open_session(rs.client_stream, era="auto") as client:
                assert client.era == "modern"
                assert text_of(await client.call_tool("t", {"x": 1})) == "handshake t"
                assert client.era == "handshake" and client.protocol_version == "2025-11-25"
                assert text_of(await client.call_tool("u")) == "handshake u"  # no more stateless requests
            methods = rs.wire.methods("client")
            assert methods == [
                "server/discover",
                "tools/call",
                "initialize",
                "notifications/initialized",
                "tools/call",
                "tools/call",
            ]
            assert len(refused) == 1


async def test_mid_session_the_watched_resources_are_subscribed_the_handshake_way(
    wires: Any, mode: str
) -> None:
    refused: list[Any] = []
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, _era_aware_server(refused), mode=mode) as rs:
            async with open_session(rs.client_stream, era="auto") as client:
                client._modern_subscriptions.add("memo://watched")  # as subscribe_resource records it
                await client.call_tool("t")
            (subscribe,) = rs.wire.requests("client", "resources/subscribe")
            assert subscribe["params"] == {"uri": "memo://watched"}


async def test_requests_refused_together_fall_back_once(wires: Any, mode: str) -> None:
    refused: list[Any] = []
    arrived = trio.Event()
    results: list[str] = []
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, _era_aware_server(refused, arrived, expect=3), mode=mode) as rs:
            async with open_session(rs.client_stream, era="auto") as client:

                async def call(name: str) -> None:
                    results.append(text_of(await client.call_tool(name)))

                async with trio.open_nursery() as nursery:
                    for name in ("a", "b", "c"):
                        nursery.start_soon(call, name)
            assert sorted(results) == ["handshake a", "handshake b", "handshake c"]
            assert len(refused) == 3
            assert rs.wire.methods("client").count("initialize") == 1


async def test_mid_session_a_pinned_modern_client_does_not_fall_back(wires: Any, mode: str) -> None:
    refused: list[Any] = []
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, _era_aware_server(refused), mode=mode) as rs:
            async with open_session(rs.client_stream, era="modern") as client:
                with pytest.raises(UnsupportedProtocolVersion):
                    await client.call_tool("t")
                assert client.era == "modern"
            assert "initialize" not in rs.wire.methods("client")


# ------------------------------------------------------------------ HTTP


class RefuseFirst:
    """ASGI middleware: the first POST of ``method`` is answered as a server
    that does not speak its version (HTTP 400, -32022, ``data.supported``);
    everything else goes to the app. ``seen`` lists (method, version header)
    of every POST."""

    def __init__(self, app: Any, method: str, supported: list[str]) -> None:
        self.app = app
        self.method = method
        self.supported = supported
        self.refused = False
        self.seen: list[tuple[str, str | None]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        data = json.loads(body)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.seen.append((data.get("method"), headers.get("mcp-protocol-version")))
        if data.get("method") == self.method and not self.refused:
            self.refused = True
            error = {
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": self.supported, "requested": headers.get("mcp-protocol-version")},
            }
            out = json.dumps({"jsonrpc": "2.0", "id": data["id"], "error": error}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": out})
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def echo_app() -> MCPServer:
    app = MCPServer("versions")

    @app.tool
    def echo(text: str) -> str:
        return text

    return app


@asynccontextmanager
async def serving_behind(middleware: Callable[[Any], Any]) -> AsyncIterator[str]:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    asgi = StreamableHttpApp(echo_app(), settings=HttpServerSettings())
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 1.0
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: serve(
                middleware(asgi), config, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        try:
            yield binds[0] + "/mcp"
        finally:
            stop.set()


@pytest.mark.parametrize("method", ["server/discover", "tools/call"])
async def test_over_http_a_400_refusal_is_retried(method: str) -> None:
    box: dict[str, RefuseFirst] = {}

    def wrap(app: Any) -> Any:
        box["mw"] = RefuseFirst(app, method, [MODERN])
        return box["mw"]

    with trio.fail_after(TIMEOUT):
        async with serving_behind(wrap) as url, trio.open_nursery() as nursery:
            stream = await nursery.start(StreamableHttpTransport(url).run)
            async with open_session(stream, era="modern") as client:
                assert text_of(await client.call_tool("echo", {"text": "hi"})) == "hi"
            nursery.cancel_scope.cancel()
    seen = box["mw"].seen
    assert seen.count((method, MODERN)) == 2
    assert all(version == MODERN for _, version in seen)


async def test_over_http_an_error_without_supported_versions_is_not_retried() -> None:
    box: dict[str, RefuseFirst] = {}

    def wrap(app: Any) -> Any:
        box["mw"] = RefuseFirst(app, "tools/call", ["1999-01-01"])
        return box["mw"]

    with trio.fail_after(TIMEOUT):
        async with serving_behind(wrap) as url, trio.open_nursery() as nursery:
            stream = await nursery.start(StreamableHttpTransport(url).run)
            async with open_session(stream, era="modern") as client:
                with pytest.raises(McpError) as excinfo:
                    await client.call_tool("echo", {"text": "hi"})
                assert excinfo.value.code == -32022
                assert excinfo.value.data["supported"] == ["1999-01-01"]
            nursery.cancel_scope.cancel()
    assert [m for m, _ in box["mw"].seen].count("tools/call") == 1
