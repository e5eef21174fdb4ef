"""Lifecycle: version negotiation, the initialize handshake, what is served
before it completes, capabilities declared and enforced, bad input."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.protocol import (
    HANDSHAKE_VERSIONS,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_HANDSHAKE_VERSION,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    Implementation,
    InvalidParams,
    InvalidRequest,
    ListResourcesResult,
    McpError,
    MethodNotFound,
    Notification,
    PaginatedRequestParams,
    PromptReference,
    Request,
    SubscribeRequestParams,
    UnsupportedProtocolVersion,
)
from trio_mcp.server import LowLevelServer, MCPServer
from trio_mcp.transports import memory_pair

from .conftest import TIMEOUT, initialize_result, open_raw_client, open_raw_server

# --------------------------------------------------------------------- apps


def demo_app(**options: Any) -> MCPServer:
    app = MCPServer("demo", "1.2.3", instructions="Use the add tool.", **options)

    @app.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @app.prompt
    def review(code: str) -> str:
        return f"Review:\n{code}"

    @app.resource("memo://note")
    def note() -> str:
        return "a note"

    return app


# ------------------------------------------------------- version negotiation


async def test_handshake_negotiates_the_requested_version(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(demo_app(), client_info=Implementation(name="tester", version="9")) as conn:
            assert conn.client.protocol_version == version
            assert conn.server.protocol_version == version
            assert conn.client.server_info is not None
            assert (conn.client.server_info.name, conn.client.server_info.version) == ("demo", "1.2.3")
            assert conn.client.instructions == "Use the add tool."
            assert conn.server.client_info == Implementation(name="tester", version="9")
            assert conn.server.initialized
            (request,) = conn.wire.requests("client", "initialize")
            assert request["params"]["protocolVersion"] == version
            answer = conn.wire.response_to("server", request)
            assert answer is not None and answer["result"]["protocolVersion"] == version
            # The client confirms with notifications/initialized, once.
            assert len(conn.wire.notifications("client", "notifications/initialized")) == 1


async def test_initialize_is_the_first_message_and_initialized_follows_the_answer(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(demo_app()) as conn:
            await conn.client.ping()
            sent = [(s.side, s.data.get("method"), "id" in s.data) for s in conn.wire.sent]
            assert sent[0] == ("client", "initialize", True)
            assert sent[1] == ("server", None, True)  # the initialize result
            assert sent[2] == ("client", "notifications/initialized", False)


@pytest.mark.parametrize("requested", ["1999-01-01", "2026-07-28", "2099-12-31", "latest", ""])
async def test_server_answers_its_newest_version_when_the_request_is_unsupported(
    wires, requested: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires) as raw:
            result = await raw.initialize(requested)
            assert result["protocolVersion"] == LATEST_HANDSHAKE_VERSION
            assert raw.server.protocol_version == LATEST_HANDSHAKE_VERSION
            tools = await raw.peer.request("tools/list")
            assert tools is not None


@pytest.mark.parametrize("requested", HANDSHAKE_VERSIONS)
async def test_server_answers_each_supported_version_as_requested(wires, requested: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires) as raw:
            result = await raw.initialize(requested)
            assert result["protocolVersion"] == requested


@pytest.mark.parametrize("answered", HANDSHAKE_VERSIONS)
async def test_client_accepts_an_older_supported_answer(wires, answered: str) -> None:
    with trio.fail_after(TIMEOUT):
        handlers = {"initialize": lambda req: initialize_result(answered, tools={})}
        async with open_raw_server(wires, handlers) as fake:
            async with open_session(fake.client_stream, protocol_version=LATEST_HANDSHAKE_VERSION) as client:
                assert client.protocol_version == answered
                assert client.offered_version == LATEST_HANDSHAKE_VERSION
            await wait_all_tasks_blocked()
            assert [m for m, _ in fake.dispatcher.notifications] == ["notifications/initialized"]


@pytest.mark.parametrize("answered", ["1999-01-01", "2026-07-28", "not-a-version"])
async def test_client_refuses_an_unsupported_answer(wires, answered: str) -> None:
    """The error itself reaches the user of ``open_session`` (no exception group)."""
    with trio.fail_after(TIMEOUT):
        handlers = {"initialize": lambda req: initialize_result(answered)}
        async with open_raw_server(wires, handlers) as fake:
            with fake.wire.unchecked("server"):
                with pytest.raises(UnsupportedProtocolVersion) as caught:
                    async with open_session(fake.client_stream):
                        pytest.fail("the session must not open")  # pragma: no cover
            error = caught.value
            assert answered in error.message
            assert error.data["requested"] == answered
            assert set(error.data["supported"]) == set(HANDSHAKE_VERSIONS)
            # The client never confirmed the handshake and hung up.
            await fake.peer.wait_stopped()
            assert fake.dispatcher.notifications == []
            assert fake.wire.notifications("client", "notifications/initialized") == []


def test_client_refuses_to_offer_an_unknown_version() -> None:
    client_end, _ = memory_pair()
    with pytest.raises(ValueError):
        ClientSession(client_end, protocol_version="1999-01-01")


# ----------------------------------------------------------- before initialize


@pytest.mark.parametrize("method", ["server/discover", "tools/list", "resources/list", "logging/setLevel"])
async def test_request_before_initialize_is_answered_at_once_with_an_error(wires, method: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires) as raw:
            with raw.wire.unchecked("client"), pytest.raises(McpError) as caught:
                await raw.peer.request(method, {})
            if method == "server/discover":
                # A 2026-era probe: refused for want of its _meta version.
                assert caught.value.code in (INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS)
            else:
                assert caught.value.code == INVALID_REQUEST
                assert "initialize" in caught.value.message
            # The session is still usable: the handshake can happen now.
            result = await raw.initialize()
            assert result["protocolVersion"] == LATEST_HANDSHAKE_VERSION
            assert await raw.peer.request("tools/list")


async def test_ping_is_answered_before_initialize(wires) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires) as raw:
            await raw.peer.ping()
            await raw.initialize()


async def test_only_ping_and_logging_before_initialized_notification(wires, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires) as raw:
            await raw.initialize(version, initialized=False)
            assert not raw.server.initialized
            await raw.peer.ping()
            await raw.peer.request("logging/setLevel", {"level": "error"})
            assert raw.server.log_level == "error"
            for method in ("tools/list", "prompts/list", "resources/list"):
                with pytest.raises(InvalidRequest) as caught:
                    await raw.peer.request(method)
                assert "notifications/initialized" in caught.value.message
            with pytest.raises(InvalidRequest):
                await raw.peer.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
            await raw.peer.notify("notifications/initialized")
            tools = await raw.peer.request("tools/list")
            assert tools is not None
            assert raw.server.initialized


async def test_initialized_notification_before_initialize_does_not_unlock_requests(wires) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires) as raw:
            with raw.wire.unchecked("client"):
                await raw.peer.notify("notifications/initialized")
            await raw.peer.ping()
            assert not raw.server.initialized
            with pytest.raises(InvalidRequest):
                await raw.peer.request("tools/list")
            await raw.initialize()
            assert await raw.peer.request("tools/list")


async def test_pipelined_initialized_notification_is_honoured(wires) -> None:
    """A client may write notifications/initialized right behind initialize,
    without waiting for the answer; the server must not lose it."""
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires) as raw:
            params = {
                "protocolVersion": LATEST_HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "pipelined", "version": "1"},
            }
            await raw.client_stream.send(Request(id="init", method="initialize", params=params))
            await raw.client_stream.send(Notification(method="notifications/initialized"))
            await raw.server.wait_initialized()
            assert await raw.peer.request("tools/list")
            answer = raw.wire.response_to("server", raw.wire.requests("client", "initialize")[0])
            assert answer["result"]["protocolVersion"] == LATEST_HANDSHAKE_VERSION


async def test_second_initialize_is_refused_and_the_session_keeps_serving(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(demo_app()) as conn:
            params = {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"},
            }
            with pytest.raises(InvalidRequest):
                await conn.client.peer.request("initialize", params)
            assert conn.server.protocol_version == version
            assert (await conn.client.call_tool("add", {"a": 2, "b": 3})).content[0].text == "5"


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"protocolVersion": LATEST_HANDSHAKE_VERSION},
        {"protocolVersion": 20251125, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}},
        {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": [],
            "clientInfo": {"name": "x", "version": "1"},
        },
    ],
)
async def test_malformed_initialize_is_invalid_params(wires, params: dict[str, Any]) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires) as raw:
            with raw.wire.unchecked("client"), pytest.raises(InvalidParams):
                await raw.peer.request("initialize", params)
            # Not initialized by the bad attempt: a good one still works.
            assert (await raw.initialize())["protocolVersion"] == LATEST_HANDSHAKE_VERSION


async def test_ping_both_ways(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(demo_app()) as conn:
            await conn.client.ping()
            await conn.server.peer.ping()
            assert len(conn.wire.requests("client", "ping")) == 1
            assert len(conn.wire.requests("server", "ping")) == 1


async def test_unknown_method_after_initialize_is_method_not_found(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(demo_app()) as conn:
            with conn.wire.unchecked("client"):
                with pytest.raises(MethodNotFound):
                    await conn.client.peer.request("tools/frobnicate", {})
                # An unknown notification is ignored.
                await conn.client.peer.notify("notifications/frobnicated", {})
            assert (await conn.client.call_tool("add", {"a": 1, "b": 1})).content[0].text == "2"


async def test_client_close_ends_the_server_session(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(demo_app()) as conn:
            app_sessions = conn.server.app.sessions
            assert conn.server in app_sessions
            await conn.client.aclose()
            await conn.server.peer.wait_stopped()
            assert conn.server.peer.closed


# ------------------------------------------------------------- capabilities


def _tools_only() -> MCPServer:
    app = MCPServer("t")
    app.tool(lambda: "x", name="x")
    return app


def _prompts_only() -> MCPServer:
    app = MCPServer("p")
    app.prompt(lambda: "x", name="x")
    return app


def _resources_only() -> MCPServer:
    app = MCPServer("r")
    app.resource("memo://x")(lambda: "x")
    return app


@pytest.mark.parametrize(
    ("factory", "expected"),
    [
        (lambda: MCPServer("empty"), {"logging": {}}),
        (_tools_only, {"logging": {}, "tools": {"listChanged": True}}),
        (_prompts_only, {"logging": {}, "prompts": {"listChanged": True}, "completions": {}}),
        (
            _resources_only,
            {"logging": {}, "resources": {"subscribe": True, "listChanged": True}, "completions": {}},
        ),
        (
            demo_app,
            {
                "logging": {},
                "tools": {"listChanged": True},
                "prompts": {"listChanged": True},
                "resources": {"subscribe": True, "listChanged": True},
                "completions": {},
            },
        ),
    ],
    ids=["empty", "tools", "prompts", "resources", "all"],
)
async def test_capabilities_are_declared_from_what_is_registered(connect, factory, expected) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(factory()) as conn:
            assert conn.wire.capabilities("server") == expected


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/list", {}),
        ("tools/call", {"name": "x"}),
        ("resources/list", {}),
        ("resources/read", {"uri": "memo://x"}),
        ("resources/subscribe", {"uri": "memo://x"}),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": ""}},
        ),
    ],
)
async def test_methods_of_undeclared_capabilities_are_method_not_found(connect, method, params) -> None:
    """A tools-only server: everything else is -32601, on the server side, and
    the typed client methods refuse before sending anything."""
    with trio.fail_after(TIMEOUT):
        app = MCPServer("tools-only")

        @app.tool
        def x() -> str:
            return "x"

        if method.startswith("tools/"):
            app = MCPServer("nothing")  # not even tools
        async with connect(app) as conn:
            with pytest.raises(MethodNotFound) as caught:
                await conn.client.peer.request(method, params)
            assert caught.value.code == METHOD_NOT_FOUND
            before = len(conn.wire.sent)
            with pytest.raises(MethodNotFound):
                if method == "tools/list":
                    await conn.client.list_tools()
                elif method == "resources/list":
                    await conn.client.list_resources()
                elif method == "resources/read":
                    await conn.client.read_resource("memo://x")
                elif method == "resources/subscribe":
                    await conn.client.subscribe_resource("memo://x")
                elif method == "tools/call":
                    await conn.client.call_tool("x")
                else:
                    await conn.client.complete(PromptReference(name="x"), "a", "")
            assert len(conn.wire.sent) == before  # refused locally


async def test_handlers_registered_after_the_handshake_stay_undeclared_and_refused(connect) -> None:
    """Capabilities are fixed by the handshake: a handler added later is not
    served to a session that was not told about it."""
    with trio.fail_after(TIMEOUT):
        app = LowLevelServer("late")

        async def list_tools(ctx, params):
            return {"tools": []}

        async with connect(app) as conn:
            app.set_request_handler("tools/list", PaginatedRequestParams, list_tools)
            with pytest.raises(MethodNotFound) as caught:
                await conn.client.peer.request("tools/list", {})
            assert "tools" in caught.value.message
        # A new session declares and serves it.
        async with connect(app) as conn:
            assert conn.wire.capabilities("server")["tools"] == {"listChanged": True}
            assert (await conn.client.list_tools()).tools == []


async def test_sub_capability_is_enforced(connect) -> None:
    """``resources/subscribe`` needs ``resources.subscribe``, not just ``resources``."""
    with trio.fail_after(TIMEOUT):
        app = LowLevelServer("no-subscribe")

        async def list_resources(ctx, params):
            return ListResourcesResult(resources=[])

        async def subscribe(ctx, params):  # pragma: no cover - never reached
            raise AssertionError("served an undeclared capability")

        app.set_request_handler("resources/list", PaginatedRequestParams, list_resources)
        async with connect(app) as conn:
            caps = conn.wire.capabilities("server")
            assert "subscribe" not in caps["resources"]
            app.set_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
            with pytest.raises(MethodNotFound):
                await conn.client.peer.request("resources/subscribe", {"uri": "x://y"})
            with pytest.raises(MethodNotFound):
                await conn.client.subscribe_resource("x://y")


# ---------------------------------------------------------------- bad input

GARBAGE: list[tuple[bytes, int | None, Any]] = [
    # (frame, expected error code or None for "no answer", expected answer id)
    (b"this is not json", PARSE_ERROR, None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": ', PARSE_ERROR, None),
    (b"\xff\xfe\x00garbage", PARSE_ERROR, None),
    (b"[]", INVALID_REQUEST, None),
    (b'"just a string"', INVALID_REQUEST, None),
    (b"42", INVALID_REQUEST, None),
    (b'{"jsonrpc": "1.0", "id": "g1", "method": "ping"}', INVALID_REQUEST, "g1"),
    (b'{"jsonrpc": "2.0", "id": "g2", "method": 7}', INVALID_REQUEST, "g2"),
    (b'{"jsonrpc": "2.0", "id": "g3", "method": "tools/call", "params": [1, 2]}', INVALID_PARAMS, "g3"),
    (
        b'{"jsonrpc": "2.0", "id": "g4", "method": "tools/call", "params": {"arguments": 5}}',
        INVALID_PARAMS,
        "g4",
    ),
    (b'{"jsonrpc": "2.0", "id": "g5"}', INVALID_REQUEST, "g5"),
    (b'{"jsonrpc": "2.0", "id": {"nested": 1}, "method": "ping"}', INVALID_REQUEST, None),
    (b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": []}}', None, None),
    (b'{"jsonrpc": "2.0", "method": "notifications/progress", "params": "x"}', None, None),
    (b'{"jsonrpc": "2.0", "id": 987654, "result": {}}', None, None),
    (b'{"jsonrpc": "2.0", "id": 987655, "error": {"code": -1, "message": "stray"}}', None, None),
    (b'[{"jsonrpc": "2.0", "id": "g6", "method": "ping"}, 5]', INVALID_REQUEST, None),
]


async def test_garbage_frames_never_kill_the_server_session(connect_bytes) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect_bytes(demo_app()) as conn:
            for frame, _, _ in GARBAGE:
                await conn.client_stream.send_raw(frame)
                await conn.client.ping()
            await wait_all_tasks_blocked()
            answers = [m for m in conn.wire.responses("server") if "error" in m]
            codes = sorted((str(m["id"]), m["error"]["code"]) for m in answers)
            expected = sorted((str(ident), code) for _, code, ident in GARBAGE if code is not None)
            # The batch: its ping is answered, its 5 is an invalid request;
            # in one array where the protocol has batches (2025-03-26).
            assert codes == expected
            pings = [m for m in conn.wire.responses("server") if m.get("id") == "g6"]
            assert pings and pings[0]["result"] == {}
            batched = [s.data.get("id") for s in conn.wire.sent if s.side == "server" and s.in_batch_answer]
            assert sorted(map(str, batched)) == (["None", "g6"] if conn.version == "2025-03-26" else [])
            # Still serving, and the session state is intact.
            assert (await conn.client.call_tool("add", {"a": 20, "b": 22})).content[0].text == "42"
            assert conn.server.peer.statistics().invalid_frames >= 10


async def test_garbage_frames_never_kill_the_client_session(connect_bytes) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect_bytes(demo_app()) as conn:
            for frame, _, _ in GARBAGE:
                await conn.server_stream.send_raw(frame)
            await conn.client.ping()
            await wait_all_tasks_blocked()
            assert (await conn.client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"
            assert not conn.client.peer.closed
