"""Both eras at once: one endpoint serving handshake and stateless requests,
and the client's choice of era (``auto`` probing with ``server/discover``,
falling back to ``initialize``, and the per-server verdict cache).

Every message is validated against the schema of its own era (see
``conftest.Wire``): stateless requests, their answers and subscription
notifications against 2026-07-28, the rest against the negotiated handshake
version.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from trio_mcp.actors._client import DISCOVER_PROBE_TIMEOUT, ERA_CACHE, _EraCache, open_session
from trio_mcp.actors._server import ServerSession
from trio_mcp.protocol import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    V2025_06_18,
    InvalidRequest,
    McpError,
    MethodNotFound,
    raw_or_none,
)

from .conftest import (
    MODERN,
    TIMEOUT,
    Answers,
    Inbox,
    Wire,
    Wires,
    demo_app,
    discover_result,
    error_of,
    initialize_result,
    is_modern_request,
    modern_meta,
    open_connection,
    open_raw_client,
    open_raw_server,
    sampling_answer,
    text_of,
)

SAMPLING = {"sampling": {}}


def modern_call(
    name: str, arguments: dict[str, Any], *, caps: dict[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    return {"_meta": modern_meta(caps=caps), "name": name, "arguments": arguments, **fields}


def handshake_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


# ------------------------------------------------- one endpoint, two eras


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
async def test_handshake_and_stateless_requests_interleave_on_one_session(
    wires, mode: str, version: str
) -> None:
    app = demo_app()
    asked = trio.Event()
    release = trio.Event()

    async def sample(request: Any) -> Any:
        asked.set()
        await release.wait()
        return sampling_answer("from-handshake")

    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode, handlers={"sampling/createMessage": sample}) as raw:
            # Stateless requests need no handshake...
            listed = await raw.call("tools/list")
            assert listed["resultType"] == "complete" and "ttlMs" in listed
            # ... handshake ones do.
            with pytest.raises(InvalidRequest):
                await raw.peer.request("tools/list")

            init = await raw.initialize(version, capabilities=SAMPLING)
            assert init["protocolVersion"] == version

            # Each kind of request gets the answer of its own era.
            handshake_list = raw_or_none(await raw.peer.request("tools/list"))
            modern_list = await raw.call("tools/list")
            assert {t["name"] for t in handshake_list["tools"]} == {t["name"] for t in modern_list["tools"]}
            assert "resultType" not in handshake_list and "ttlMs" not in handshake_list
            assert modern_list["resultType"] == "complete" and modern_list["cacheScope"] == "private"

            # A handshake call waits on a real server-to-client request while a
            # stateless call of the same tool completes two rounds.
            results: dict[str, Any] = {}

            async def handshake() -> None:
                results["handshake"] = raw_or_none(
                    await raw.peer.request("tools/call", handshake_call("ask_llm", {"question": "hs?"}))
                )

            async with trio.open_nursery() as nursery:
                nursery.start_soon(handshake)
                await asked.wait()
                first = await raw.call(
                    "tools/call", modern_call("ask_llm", {"question": "st?"}, caps=SAMPLING)
                )
                assert first["resultType"] == "input_required"
                (key,) = first["inputRequests"]
                assert first["inputRequests"][key]["params"]["messages"][0]["content"]["text"] == "st?"
                final = await raw.call(
                    "tools/call",
                    modern_call(
                        "ask_llm",
                        {"question": "st?"},
                        caps=SAMPLING,
                        inputResponses={key: sampling_answer("from-stateless")},
                        requestState=first["requestState"],
                    ),
                )
                assert text_of(final) == "llm said: from-stateless"
                assert "handshake" not in results
                release.set()
            assert text_of(results["handshake"]) == "llm said: from-handshake"
            assert "resultType" not in results["handshake"]

            # Exactly one server-to-client request, made for the handshake call.
            (server_request,) = [s for s in raw.wire.sent if s.side == "server" and s.is_request]
            assert server_request.method == "sampling/createMessage"
            assert server_request.data["params"]["messages"][0]["content"]["text"] == "hs?"
            (handshake_request,) = [
                r for r in raw.wire.requests("client", "tools/call") if not is_modern_request(r)
            ]
            assert server_request.related == handshake_request["id"]

            # The stateless requests left the session's handshake state alone.
            assert raw.server.protocol_version == version
            assert raw.server.client_capabilities.sampling is not None
            with pytest.raises(InvalidRequest):
                await raw.initialize(version)


async def test_capabilities_and_versions_do_not_leak_between_eras(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            await raw.initialize(V2025_06_18, capabilities={"sampling": {}, "roots": {}})
            handshake = raw_or_none(await raw.peer.request("tools/call", handshake_call("version", {})))
            modern = await raw.call("tools/call", modern_call("version", {}, caps={"elicitation": {}}))
            assert text_of(handshake) == f"{V2025_06_18} roots,sampling"
            assert text_of(modern) == f"{MODERN} elicitation"
            # The session declared sampling; this stateless request did not.
            with pytest.raises(McpError) as excinfo:
                await raw.call(
                    "prompts/get",
                    {"_meta": modern_meta(caps={}), "name": "ask_prompt", "arguments": {"topic": "t"}},
                )
            assert excinfo.value.code == -32021


async def test_log_levels_do_not_leak_between_eras(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            await raw.initialize()
            await raw.peer.request("logging/setLevel", {"level": "error"})
            await raw.call("tools/call", modern_call("talk", {"tag": "silent"}))
            await raw.call(
                "tools/call", {**modern_call("talk", {"tag": "loud"}), "_meta": modern_meta(log_level="info")}
            )
            await raw.peer.request("tools/call", handshake_call("talk", {"tag": "session"}))
            logs = [n["params"]["data"] for n in raw.wire.notifications("server", "notifications/message")]
            assert logs == ["loud:info", "loud:warning", "loud:error", "session:error"]
            assert raw.server.log_level == "error"


async def test_an_unknown_resource_gets_the_code_of_each_era(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            await raw.initialize()
            with pytest.raises(McpError) as handshake:
                await raw.peer.request("resources/read", {"uri": "memo://missing"})
            with pytest.raises(McpError) as modern:
                await raw.call("resources/read", uri="memo://missing")
            assert handshake.value.code == -32002
            assert modern.value.code == -32602
            assert handshake.value.data == modern.value.data == {"uri": "memo://missing"}


async def test_a_handshake_client_and_a_stateless_client_share_one_app(wires, mode: str) -> None:
    app = demo_app()
    old, new = Inbox(), Inbox()
    with trio.fail_after(TIMEOUT):
        async with (
            open_connection(app, wires, mode=mode, era="handshake", on_tools_changed=old) as hs,
            open_connection(app, wires, mode=mode, era="modern", on_tools_changed=new) as st,
        ):
            assert (hs.client.era, st.client.era) == ("handshake", "modern")
            await hs.server.wait_initialized()
            await st.client.open_listen()
            await wait_all_tasks_blocked()
            assert len(app.sessions) == 2

            @app.tool(inline=True)
            def shared() -> str:
                return "shared"

            await old.wait_for(1)
            await new.wait_for(1)
            (plain,) = hs.wire.notifications("server", "notifications/tools/list_changed")
            (streamed,) = st.wire.notifications("server", "notifications/tools/list_changed")
            assert META_SUBSCRIPTION_ID not in ((plain.get("params") or {}).get("_meta") or {})
            (listen,) = st.wire.requests("client", "subscriptions/listen")
            assert streamed["params"]["_meta"][META_SUBSCRIPTION_ID] == listen["id"]
            assert text_of(await hs.client.call_tool("shared", {})) == "shared"
            assert text_of(await st.client.call_tool("shared", {})) == "shared"


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_the_same_handlers_serve_both_eras(wires, mode: str, era: str) -> None:
    """Handlers asking the client for input, and the client's answering
    handlers, are written once and work in either era."""
    answers = Answers(text="Ada", content={"name": "Ada"})
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode, era=era, **answers.options()) as conn:
            client = conn.client
            assert client.era == era
            assert text_of(await client.call_tool("ask_llm", {"question": "q"})) == "llm said: Ada"
            assert text_of(await client.call_tool("interview", {})) == "Ada -> accept:{'name': 'Ada'}"
            assert text_of(await client.call_tool("where", {})) == "file:///work,file:///tmp"
            assert text_of(await client.call_tool("visit", {})) == "accept"
            prompt = await client.get_prompt("ask_prompt", {"topic": "tea"})
            assert prompt.messages[0].content.text == "tea: Ada"
            read = await client.read_resource("memo://asks")
            assert read.contents[0].text == "memo: Ada"
            assert len(answers.sampled) == 4 and len(answers.elicited) == 2
            server_requests = conn.wire.requests("server")
            if era == "handshake":
                assert {r["method"] for r in server_requests} == {
                    "sampling/createMessage",
                    "elicitation/create",
                    "roots/list",
                }
            else:
                assert server_requests == []
                assert all(is_modern_request(r) for r in conn.wire.requests("client"))


# ------------------------------------------------------------ choosing era


async def test_auto_picks_the_stateless_era_of_a_modern_server(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode, era="auto", server_key="demo") as conn:
            assert conn.client.era == "modern" and conn.client.protocol_version == MODERN
            assert conn.client.server_info is not None and conn.client.server_info.name == "demo"
            assert conn.wire.methods("client") == ["server/discover"]
            assert ERA_CACHE.get("demo") == "modern"


HANDSHAKE_ONLY = {
    "initialize": lambda r: initialize_result(tools={}),
    "tools/list": lambda r: {"tools": []},
}


async def test_auto_falls_back_to_initialize_when_discover_is_not_found(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, HANDSHAKE_ONLY, mode=mode) as rs:
            async with open_session(rs.client_stream, era="auto", server_key="old") as client:
                assert client.era == "handshake"
                assert client.protocol_version == LATEST_HANDSHAKE_VERSION
                assert client.server_info is not None and client.server_info.name == "scripted-handshake"
                await client.list_tools()
            assert rs.wire.methods("client") == [
                "server/discover",
                "initialize",
                "notifications/initialized",
                "tools/list",
            ]
            (probe,) = rs.wire.requests("client", "server/discover")
            answer = rs.wire.response_to("server", probe)
            assert answer is not None and answer["error"]["code"] == -32601
            # After the fallback, requests are plain handshake requests.
            (listing,) = rs.wire.requests("client", "tools/list")
            assert META_PROTOCOL_VERSION not in ((listing.get("params") or {}).get("_meta") or {})
            assert ERA_CACHE.get("old") == "handshake"


class HandshakeOnlySession(ServerSession):
    """A real server session that refuses everything of the stateless era."""

    async def handle_request(self, request: Any) -> Any:
        if (
            request.method in ("server/discover", "subscriptions/listen")
            or META_PROTOCOL_VERSION in request.meta
        ):
            raise MethodNotFound(f"Method not found: {request.method}")
        return await super().handle_request(request)


async def test_auto_falls_back_against_a_handshake_only_server_session(wires: Wires, mode: str) -> None:
    app = demo_app()
    answers = Answers(text="fallback")
    client_end, server_end, wire = wires.recording_pair(mode)
    with trio.fail_after(TIMEOUT):
        async with app.running(), trio.open_nursery() as nursery:
            server = await nursery.start(HandshakeOnlySession(app, server_end).run)
            async with open_session(client_end, era="auto", **answers.options()) as client:
                assert client.era == "handshake"
                assert text_of(await client.call_tool("ask_llm", {"question": "q"})) == "llm said: fallback"
                assert server.initialized
            nursery.cancel_scope.cancel()
        wire.validate()
    assert wire.methods("client")[:3] == ["server/discover", "initialize", "notifications/initialized"]
    assert [r["method"] for r in wire.requests("server")] == ["sampling/createMessage"]


@pytest.mark.parametrize(
    "discover",
    [
        lambda r: discover_result(["2099-01-01"]),
        lambda r: discover_result(list(HANDSHAKE_VERSIONS)),
        lambda r: {"resultType": "complete", "supportedVersions": [MODERN]},
        lambda r: {"unexpected": True},
    ],
    ids=["future-only", "handshake-only-versions", "no-capabilities", "garbage"],
)
async def test_auto_falls_back_on_any_answer_but_a_modern_one(wires, mode: str, discover: Any) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, {**HANDSHAKE_ONLY, "server/discover": discover}, mode=mode) as rs:
            with rs.wire.unchecked("server"):
                async with open_session(rs.client_stream, era="auto") as client:
                    assert client.era == "handshake"
            assert rs.wire.methods("client") == ["server/discover", "initialize", "notifications/initialized"]


@pytest.mark.parametrize(
    "error",
    [InvalidRequest("Session not initialized"), McpError("odd", code=-32099), McpError("down", code=-32022)],
    ids=["invalid-request", "custom", "unsupported-version"],
)
async def test_auto_falls_back_on_an_error_answer(wires, mode: str, error: McpError) -> None:
    def discover(request: Any) -> Any:
        raise error

    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, {**HANDSHAKE_ONLY, "server/discover": discover}, mode=mode) as rs:
            with rs.wire.unchecked("server"):
                async with open_session(rs.client_stream, era="auto") as client:
                    assert client.era == "handshake"


async def test_auto_falls_back_after_the_probe_timeout_when_discover_is_ignored(
    wires, mode: str, autojump_clock: Any
) -> None:
    cancelled = trio.Event()

    async def ignore(request: Any) -> Any:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    with trio.fail_after(DISCOVER_PROBE_TIMEOUT * 3):
        async with open_raw_server(wires, {**HANDSHAKE_ONLY, "server/discover": ignore}, mode=mode) as rs:
            start = trio.current_time()
            async with open_session(rs.client_stream, era="auto", server_key="slow") as client:
                elapsed = trio.current_time() - start
                assert client.era == "handshake"
            assert DISCOVER_PROBE_TIMEOUT <= elapsed < DISCOVER_PROBE_TIMEOUT + 1
            # The probe was cancelled (on the wire, unless it was served in
            # the caller's task), and the server stopped working on it.
            (probe,) = rs.wire.requests("client", "server/discover")
            assert rs.wire.response_to("server", probe) is None
            await cancelled.wait()
            cancels = rs.wire.notifications("client", "notifications/cancelled")
            if mode == "inline":
                assert cancels == []
            else:
                (cancel,) = cancels
                assert cancel["params"]["requestId"] == probe["id"]
            assert rs.wire.methods("client") == [
                "server/discover",
                *(["notifications/cancelled"] if mode != "inline" else []),
                "initialize",
                "notifications/initialized",
            ]
            assert ERA_CACHE.get("slow") == "handshake"


async def test_a_pinned_handshake_client_never_probes(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_connection(
            demo_app(), wires, mode=mode, era="handshake", server_key="pinned"
        ) as conn:
            assert conn.client.era == "handshake"
            assert conn.wire.methods("client") == ["initialize", "notifications/initialized"]
        assert ERA_CACHE.get("pinned") == "handshake"


async def test_a_failed_connection_caches_nothing(wires, mode: str) -> None:
    def refuse(request: Any) -> Any:
        raise MethodNotFound("nothing here")

    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, {"initialize": refuse}, mode=mode) as rs:
            with pytest.raises(BaseException) as excinfo:
                async with open_session(rs.client_stream, era="auto", server_key="broken"):
                    pass  # pragma: no cover
            assert isinstance(error_of(excinfo), MethodNotFound)
    assert ERA_CACHE.get("broken") is None


# ------------------------------------------------------------- the cache


async def test_a_cached_handshake_verdict_skips_the_probe(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, HANDSHAKE_ONLY, mode=mode) as rs:
            async with open_session(rs.client_stream, era="auto", server_key="k"):
                pass
            assert rs.wire.methods("client")[0] == "server/discover"
        assert ERA_CACHE.get("k") == "handshake"
        # Next connection to the same server: straight to initialize, no probe,
        # even to a server that would speak the stateless era.
        async with open_connection(demo_app(), wires, mode=mode, era="auto", server_key="k") as conn:
            assert conn.client.era == "handshake"
            assert conn.wire.methods("client") == ["initialize", "notifications/initialized"]


async def test_a_cached_modern_verdict_connects_with_one_discover(wires, mode: str) -> None:
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_connection(app, wires, mode=mode, era="auto", server_key="m"):
            pass
        assert ERA_CACHE.get("m") == "modern"
        async with open_connection(app, wires, mode=mode, era="auto", server_key="m") as conn:
            assert conn.client.era == "modern"
            # discover is needed anyway (capabilities); never an initialize.
            assert conn.wire.methods("client") == ["server/discover"]


async def test_verdicts_are_kept_per_server_key(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, HANDSHAKE_ONLY, mode=mode) as rs:
            async with open_session(rs.client_stream, era="auto", server_key="one"):
                pass
        async with open_connection(demo_app(), wires, mode=mode, era="auto", server_key="two") as conn:
            assert conn.client.era == "modern"
            assert conn.wire.methods("client") == ["server/discover"]
        assert (ERA_CACHE.get("one"), ERA_CACHE.get("two")) == ("handshake", "modern")


async def test_without_a_server_key_every_connection_probes(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        for _ in range(2):
            async with open_raw_server(wires, HANDSHAKE_ONLY, mode=mode) as rs:
                async with open_session(rs.client_stream, era="auto") as client:
                    assert client.era == "handshake"
                assert rs.wire.methods("client")[0] == "server/discover"
        assert ERA_CACHE._verdicts == {}


async def test_a_stale_modern_verdict_is_probed_again_and_replaced(wires, mode: str) -> None:
    ERA_CACHE.set("moved", "modern")
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, HANDSHAKE_ONLY, mode=mode) as rs:
            async with open_session(rs.client_stream, era="auto", server_key="moved") as client:
                assert client.era == "handshake"
            methods = rs.wire.methods("client")
            assert methods[-2:] == ["initialize", "notifications/initialized"]
            assert set(methods[:-2]) == {"server/discover"}
        assert ERA_CACHE.get("moved") == "handshake"


MODERN_ONLY = {
    "server/discover": lambda r: discover_result(tools={}),
    "tools/list": lambda r: {"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "tools": []},
}


async def test_a_stale_handshake_verdict_is_probed_again_and_replaced(wires, mode: str) -> None:
    ERA_CACHE.set("upgraded", "handshake")
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, MODERN_ONLY, mode=mode) as rs:
            async with open_session(rs.client_stream, era="auto", server_key="upgraded") as client:
                assert client.era == "modern"
                await client.list_tools()
        assert ERA_CACHE.get("upgraded") == "modern"


async def test_a_modern_only_server_is_reached_by_an_uncached_auto_client(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, MODERN_ONLY, mode=mode) as rs:
            async with open_session(rs.client_stream, era="auto", server_key="new") as client:
                assert client.era == "modern"
                assert client.server_info is not None and client.server_info.name == "scripted-modern"
                assert (await client.list_tools()).tools == []
            assert rs.wire.methods("client") == ["server/discover", "tools/list"]
        assert ERA_CACHE.get("new") == "modern"


def test_the_cache_is_bounded_and_evicts_the_oldest() -> None:
    cache = _EraCache()
    cache.max_entries = 3
    for key in ("a", "b", "c"):
        cache.set(key, "modern")
    cache.set("a", "handshake")  # refreshed: now the newest
    cache.set("d", "modern")
    assert (cache.get("a"), cache.get("b"), cache.get("c"), cache.get("d")) == (
        "handshake",
        None,
        "modern",
        "modern",
    )
    cache.set(None, "modern")
    cache.forget("c")
    cache.forget(None)
    assert cache.get(None) is None and cache.get("c") is None
    cache.clear()
    assert cache.get("a") is None


# ------------------------------------------------------------- the checker
# conftest.Wire must catch what it is there to catch.


def _checked(*messages: tuple[Any, ...]) -> None:
    wire = Wire()
    for side, message, *related in messages:
        wire.record(side, message, related[0] if related else None)
    wire.validate()


MODERN_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}
HANDSHAKE_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": V2025_06_18,
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "id": 1, "result": initialize_result(V2025_06_18, tools={})}


def test_the_checker_accepts_valid_exchanges_of_both_eras() -> None:
    _checked(
        ("client", MODERN_LIST),
        (
            "server",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "tools": []},
            },
        ),
    )
    _checked(
        ("client", INITIALIZE),
        ("server", INITIALIZED),
        ("client", HANDSHAKE_LIST),
        ("server", {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}),
        ("server", {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    )


@pytest.mark.parametrize(
    "answer, related",
    [
        ({"jsonrpc": "2.0", "id": 1, "result": {"ttlMs": 0, "cacheScope": "private", "tools": []}}, None),
        ({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "tools": []}}, None),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32022, "message": "no"}}, None),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32021, "message": "no", "data": {}}}, None),
        ({"jsonrpc": "2.0", "id": 9, "result": {"resultType": "complete", "tools": []}}, None),
        ({"jsonrpc": "2.0", "id": 5, "method": "roots/list"}, 1),
        (
            {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": [1]}},
            },
            None,
        ),
    ],
    ids=[
        "no-resultType",
        "no-ttl",
        "32022-without-data",
        "32021-without-required",
        "unknown-id",
        "server-request-in-modern-era",
        "bad-subscription-id",
    ],
)
def test_the_checker_catches_invalid_modern_messages(answer: dict[str, Any], related: Any) -> None:
    with pytest.raises(AssertionError):
        _checked(("client", MODERN_LIST), ("server", answer, related))


def test_the_checker_holds_handshake_messages_to_the_negotiated_version() -> None:
    # Elicitation does not exist in 2024-11-05.
    initialize = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "2024-11-05"}}
    answer = {"jsonrpc": "2.0", "id": 1, "result": initialize_result("2024-11-05")}
    elicit = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "elicitation/create",
        "params": {"message": "x", "requestedSchema": {"type": "object", "properties": {}}},
    }
    with pytest.raises(AssertionError):
        _checked(("client", initialize), ("server", answer), ("server", elicit))
