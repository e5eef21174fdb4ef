"""The client side of the stateless 2026-07-28 era.

A :class:`ClientSession` with ``era="modern"`` against the real server (over
both memory modes) and against scripted raw servers: ``_meta`` on every
request, the input-required loop through the same handlers as the handshake
era (bounded by ``MAX_INPUT_ROUNDS``), the per-request log level, and
``subscriptions/listen`` for resource subscriptions and list changes. Every
message both sides send is validated against the 2026-07-28 schema.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from msgspec import UNSET
from trio.testing import wait_all_tasks_blocked

from trio_mcp.actors._client import DEFAULT_CLIENT_INFO, MAX_INPUT_ROUNDS, ClientSession, open_session
from trio_mcp.protocol import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    CallToolResult,
    Implementation,
    McpError,
    MissingClientCapability,
    PromptReference,
    UnsupportedProtocolVersion,
    encode,
)
from trio_mcp.server import MCPServer
from trio_mcp.testing import connected
from trio_mcp.transports import memory_pair

from .conftest import (
    MODERN,
    TIMEOUT,
    Answers,
    Inbox,
    demo_app,
    discover_result,
    error_of,
    initialize_result,
    open_connection,
    open_raw_server,
    text_of,
)

ACK = "notifications/subscriptions/acknowledged"


def client_meta(request: dict[str, Any]) -> dict[str, Any]:
    return request["params"]["_meta"]


# ---------------------------------------------------------------- connecting


async def test_a_modern_client_connects_without_a_handshake(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode, era="modern") as conn:
            client = conn.client
            assert client.era == "modern"
            assert client.protocol_version == MODERN
            assert client.server_info == Implementation(name="demo", version="1.2.3")
            assert client.instructions == "Use the tools."
            assert client.server_capabilities == conn.server._capabilities
            assert conn.wire.methods("client") == ["server/discover"]
            assert not conn.server.initialized and conn.server.protocol_version is None


async def test_the_test_kit_connects_in_the_modern_era(mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connected(demo_app(), mode=mode, era="modern") as client:
            assert client.era == "modern" and client.protocol_version == MODERN
            result = await client.call_tool("add", {"a": 20, "b": 22})
            assert text_of(result) == "42"
            assert result.result_type == "complete"
        async with connected(demo_app(), mode=mode, era="auto") as client:
            assert client.era == "modern"


async def test_every_request_carries_version_capabilities_and_client_info(wires, mode: str) -> None:
    answers = Answers()
    info = Implementation(name="tester", version="9.9")
    with trio.fail_after(TIMEOUT):
        async with open_connection(
            demo_app(), wires, mode=mode, client_info=info, **answers.options()
        ) as conn:
            client = conn.client
            await client.list_tools()
            await client.call_tool("add", {"a": 1, "b": 2}, meta={"custom/key": 1})
            await client.list_resources()
            await client.list_resource_templates()
            await client.read_resource("memo://note")
            await client.list_prompts()
            await client.get_prompt("greet", {"name": "x"})
            await client.complete(PromptReference(name="greet"), "name", "a")
            await client.ping()
            requests = conn.wire.requests("client")
            assert [r["method"] for r in requests] == [
                "server/discover",
                "tools/list",
                "tools/call",
                "resources/list",
                "resources/templates/list",
                "resources/read",
                "prompts/list",
                "prompts/get",
                "completion/complete",
                "server/discover",
            ]
            expected_caps = {
                "sampling": {},
                "elicitation": {"form": {}, "url": {}},
                "roots": {"listChanged": True},
            }
            for request in requests:
                meta = client_meta(request)
                assert meta[META_PROTOCOL_VERSION] == MODERN
                assert meta[META_CLIENT_CAPABILITIES] == expected_caps
                assert meta[META_CLIENT_INFO] == {"name": "tester", "version": "9.9"}
                assert META_LOG_LEVEL not in meta
            # The caller's own _meta is kept alongside.
            (call,) = conn.wire.requests("client", "tools/call")
            assert client_meta(call)["custom/key"] == 1


async def test_a_client_without_handlers_declares_no_capabilities(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode) as conn:
            await conn.client.list_tools()
            for request in conn.wire.requests("client"):
                assert client_meta(request)[META_CLIENT_CAPABILITIES] == {}
                assert client_meta(request)[META_CLIENT_INFO] == {
                    "name": DEFAULT_CLIENT_INFO.name,
                    "version": DEFAULT_CLIENT_INFO.version,
                }


async def test_every_feature_works_and_results_carry_the_2026_fields(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode) as conn:
            client = conn.client
            tools = await client.list_tools()
            assert "add" in {t.name for t in tools.tools}
            assert (tools.result_type, tools.ttl_ms, tools.cache_scope) == ("complete", 0, "private")
            result = await client.call_tool("add", {"a": 2, "b": 3})
            assert isinstance(result, CallToolResult) and text_of(result) == "5"
            assert result.result_type == "complete" and result.is_error is UNSET
            resources = await client.list_resources()
            assert [r.uri for r in resources.resources] == ["memo://note", "memo://asks"]
            templates = await client.list_resource_templates()
            assert [t.uri_template for t in templates.resource_templates] == ["greeting://{name}"]
            read = await client.read_resource("greeting://ada")
            assert read.contents[0].text == "Hello, ada!"
            assert (read.ttl_ms, read.cache_scope) == (0, "private")
            prompts = await client.list_prompts()
            assert "greet" in {p.name for p in prompts.prompts}
            prompt = await client.get_prompt("greet", {"name": "Ada"})
            assert prompt.messages[0].content.text == "Hello, Ada!"
            completion = await client.complete(PromptReference(name="greet"), "name", "b")
            assert completion.completion.values == ["bob"]
            await client.ping()
            # All of it validated as 2026-07-28 on the way (conftest.Wire).
            for answer in conn.wire.responses("server"):
                assert answer["result"]["resultType"] == "complete"


async def test_list_all_follows_cursors(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(page_size=2), wires, mode=mode) as conn:
            tools = await conn.client.list_all_tools()
            assert len(tools) == len({t.name for t in tools}) > 2
            prompts = await conn.client.list_all_prompts()
            assert {"greet", "ask_prompt"} <= {p.name for p in prompts}
            resources = await conn.client.list_all_resources()
            assert [r.uri for r in resources] == ["memo://note", "memo://asks"]
            pages = conn.wire.requests("client", "tools/list")
            assert len(pages) > 1 and "cursor" in pages[1]["params"]
            assert all(client_meta(p)[META_PROTOCOL_VERSION] == MODERN for p in pages)


async def test_errors_reach_the_caller_typed(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode) as conn:
            with pytest.raises(McpError) as excinfo:
                await conn.client.read_resource("memo://missing")
            assert excinfo.value.code == -32602 and excinfo.value.data == {"uri": "memo://missing"}
            with pytest.raises(McpError) as excinfo:
                await conn.client.get_prompt("nope")
            assert excinfo.value.code == -32602


# ------------------------------------------------------------ input required


async def test_a_sampling_question_is_answered_by_the_sampling_handler(wires, mode: str) -> None:
    answers = Answers(text="Grace")
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_connection(app, wires, mode=mode, **answers.options()) as conn:
            result = await conn.client.call_tool("ask_llm", {"question": "Who wrote COBOL?"})
            assert text_of(result) == "llm said: Grace"
            (params,) = answers.sampled
            assert params.messages[0].content.text == "Who wrote COBOL?"
            assert params.max_tokens == 50
            calls = conn.wire.requests("client", "tools/call")
            assert len(calls) == 2
            first_answer = conn.wire.response_to("server", calls[0])
            assert first_answer is not None and first_answer["result"]["resultType"] == "input_required"
            (key,) = first_answer["result"]["inputRequests"]
            retry = calls[1]["params"]
            assert retry["requestState"] == first_answer["result"]["requestState"]
            assert retry["inputResponses"] == {
                key: {
                    "role": "assistant",
                    "content": {"type": "text", "text": "Grace"},
                    "model": "test-model",
                }
            }
            assert retry["name"] == "ask_llm" and retry["arguments"] == {"question": "Who wrote COBOL?"}
            assert app.runs["ask_llm"] == 2
            # No server-to-client request: nothing for the client to answer on the wire.
            assert conn.wire.requests("server") == [] and conn.wire.responses("client") == []


async def test_two_questions_two_rounds_through_both_handlers(wires, mode: str) -> None:
    answers = Answers(text="Ada", content={"name": "Ada Lovelace"})
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_connection(app, wires, mode=mode, **answers.options()) as conn:
            result = await conn.client.call_tool("interview", {})
            assert text_of(result) == "Ada -> accept:{'name': 'Ada Lovelace'}"
            assert len(answers.sampled) == 1 and len(answers.elicited) == 1
            form = answers.elicited[0]
            assert form.message == "Confirm the name" and form.mode == "form"
            assert list(form.requested_schema.properties) == ["name"]
            calls = conn.wire.requests("client", "tools/call")
            assert len(calls) == 3
            assert "inputResponses" not in calls[0]["params"]
            assert list(calls[1]["params"]["inputResponses"]) == ["sampling-1"]
            assert list(calls[2]["params"]["inputResponses"]) == ["elicitation-2"]
            assert app.runs["interview"] == 3


async def test_roots_and_url_questions(wires, mode: str) -> None:
    answers = Answers(action="accept")
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode, **answers.options()) as conn:
            assert text_of(await conn.client.call_tool("where", {})) == "file:///work,file:///tmp"
            assert text_of(await conn.client.call_tool("visit", {})) == "accept"
            (url,) = answers.elicited
            assert url.mode == "url" and url.url == "https://example.com/login"


async def test_prompts_and_resources_run_the_loop_too(wires, mode: str) -> None:
    answers = Answers(text="green")
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode, **answers.options()) as conn:
            prompt = await conn.client.get_prompt("ask_prompt", {"topic": "tea"})
            assert prompt.messages[0].content.text == "tea: green"
            read = await conn.client.read_resource("memo://asks")
            assert read.contents[0].text == "memo: green"
            assert len(conn.wire.requests("client", "prompts/get")) == 2
            assert len(conn.wire.requests("client", "resources/read")) == 2


@pytest.mark.parametrize(
    "call, options, required",
    [
        (("get_prompt", "ask_prompt", {"topic": "t"}), {}, {"sampling": {}}),
        (("read_resource", "memo://asks"), {}, {"sampling": {}}),
        (("get_prompt", "roots_prompt"), "answers", {"roots": {}}),
        (("get_prompt", "url_prompt"), "form-only", {"elicitation": {"url": {}}}),
    ],
)
async def test_a_missing_capability_is_raised_to_the_caller(
    wires, mode: str, call: tuple[Any, ...], options: Any, required: dict[str, Any]
) -> None:
    answers = Answers()
    if options == "answers":
        options = answers.options(roots=False)
    elif options == "form-only":
        options = {**answers.options(), "elicitation_modes": ("form",)}
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode, **options) as conn:
            method, *args = call
            with pytest.raises(MissingClientCapability) as excinfo:
                await getattr(conn.client, method)(*args)
            assert excinfo.value.code == -32021
            assert excinfo.value.data == {"requiredCapabilities": required}
            assert answers.sampled == [] and answers.elicited == []


async def test_a_tool_needing_a_missing_capability_raises_to_the_caller(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode) as conn:
            with pytest.raises(MissingClientCapability) as excinfo:
                await conn.client.call_tool("ask_llm", {"question": "q"})
            assert excinfo.value.data == {"requiredCapabilities": {"sampling": {}}}


# -------------------------------------------------------- scripted servers


def scripted_modern(tools_call: Any, **more: Any) -> dict[str, Any]:
    handlers = {"server/discover": lambda r: discover_result(tools={}), "tools/call": tools_call}
    handlers.update(more)
    return handlers


def _params(request: Any) -> dict[str, Any]:
    """A snapshot (JSON) of a request's params as the scripted server received them."""
    return json.loads(encode(request.params))


SAMPLE_Q = {
    "method": "sampling/createMessage",
    "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5},
}
ROOTS_Q = {"method": "roots/list"}
ELICIT_Q = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "name?", "requestedSchema": {"type": "object", "properties": {}}},
}
DONE = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}


async def test_several_questions_in_one_round_are_all_answered(wires, mode: str) -> None:
    answers = Answers()
    seen: list[dict[str, Any]] = []

    def tools_call(request: Any) -> Any:
        params = _params(request)
        seen.append(params)
        if "inputResponses" not in params:
            return {
                "resultType": "input_required",
                "requestState": "st-1",
                "inputRequests": {"s": SAMPLE_Q, "r": ROOTS_Q, "e": ELICIT_Q},
            }
        return DONE

    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, scripted_modern(tools_call), mode=mode) as rs:
            async with open_session(rs.client_stream, era="modern", **answers.options()) as client:
                result = await client.call_tool("x", {})
                assert text_of(result) == "done"
            assert len(seen) == 2
            retry = seen[1]
            assert retry["requestState"] == "st-1"
            assert set(retry["inputResponses"]) == {"s", "r", "e"}
            assert retry["inputResponses"]["s"]["content"]["text"] == "Ada"
            assert retry["inputResponses"]["r"] == {
                "roots": [{"uri": "file:///work", "name": "work"}, {"uri": "file:///tmp"}]
            }
            assert retry["inputResponses"]["e"] == {"action": "accept", "content": {"name": "Ada"}}
            assert len(answers.sampled) == len(answers.elicited) == 1


async def test_a_state_only_round_is_retried_with_the_state(wires, mode: str) -> None:
    seen: list[dict[str, Any]] = []

    def tools_call(request: Any) -> Any:
        params = _params(request)
        seen.append(params)
        if len(seen) == 1:
            return {"resultType": "input_required", "requestState": "only-state"}
        return DONE

    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, scripted_modern(tools_call), mode=mode) as rs:
            async with open_session(rs.client_stream, era="modern") as client:
                assert text_of(await client.call_tool("x")) == "done"
            assert seen[1]["requestState"] == "only-state"
            assert seen[1].get("inputResponses", {}) == {}


async def test_a_state_is_not_echoed_once_the_server_stops_sending_one(wires, mode: str) -> None:
    seen: list[dict[str, Any]] = []

    def tools_call(request: Any) -> Any:
        seen.append(_params(request))
        if len(seen) == 1:
            return {"resultType": "input_required", "requestState": "s1", "inputRequests": {"a": ROOTS_Q}}
        if len(seen) == 2:
            return {"resultType": "input_required", "inputRequests": {"b": ROOTS_Q}}
        return DONE

    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, scripted_modern(tools_call), mode=mode) as rs:
            async with open_session(rs.client_stream, era="modern", roots=[]) as client:
                assert text_of(await client.call_tool("x")) == "done"
            assert "requestState" not in seen[0]
            assert seen[1]["requestState"] == "s1" and list(seen[1]["inputResponses"]) == ["a"]
            assert "requestState" not in seen[2] and list(seen[2]["inputResponses"]) == ["b"]


async def test_the_params_of_a_sent_round_are_never_mutated(wires) -> None:
    received: list[Any] = []

    def tools_call(request: Any) -> Any:
        received.append((request.params, _params(request)))
        if len(received) == 1:
            return {"resultType": "input_required", "requestState": "s1", "inputRequests": {"a": ROOTS_Q}}
        if len(received) == 2:
            return {"resultType": "input_required", "inputRequests": {"b": ROOTS_Q}}
        return DONE

    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, scripted_modern(tools_call), mode="zero-copy") as rs:
            async with open_session(rs.client_stream, era="modern", roots=[]) as client:
                await client.call_tool("x")
            for live, snapshot in received:
                assert json.loads(encode(live)) == snapshot


async def test_a_server_that_always_asks_is_given_up_after_max_rounds(wires, mode: str) -> None:
    answers = Answers()
    count = 0

    def tools_call(request: Any) -> Any:
        nonlocal count
        count += 1
        return {
            "resultType": "input_required",
            "requestState": f"s{count}",
            "inputRequests": {f"q{count}": SAMPLE_Q},
        }

    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, scripted_modern(tools_call), mode=mode) as rs:
            async with open_session(rs.client_stream, era="modern", **answers.options()) as client:
                with pytest.raises(McpError) as excinfo:
                    await client.call_tool("x")
                assert str(MAX_INPUT_ROUNDS) in excinfo.value.message
                # The session is still usable.
                await client.ping()
            assert count == MAX_INPUT_ROUNDS
            assert len(answers.sampled) == MAX_INPUT_ROUNDS


async def test_a_handler_that_keeps_asking_is_given_up_after_max_rounds(wires, mode: str) -> None:
    answers = Answers()
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_connection(app, wires, mode=mode, **answers.options()) as conn:
            with pytest.raises(McpError) as excinfo:
                await conn.client.call_tool("endless", {})
            assert "input-required rounds" in excinfo.value.message
            assert app.runs["endless"] == MAX_INPUT_ROUNDS
            assert len(conn.wire.requests("client", "tools/call")) == MAX_INPUT_ROUNDS
            assert text_of(await conn.client.call_tool("add", {"a": 1, "b": 1})) == "2"


async def test_a_question_the_client_cannot_answer_fails_the_call(wires, mode: str) -> None:
    def tools_call(request: Any) -> Any:
        return {"resultType": "input_required", "requestState": "s", "inputRequests": {"q": SAMPLE_Q}}

    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, scripted_modern(tools_call), mode=mode) as rs:
            async with open_session(rs.client_stream, era="modern") as client:
                with pytest.raises(McpError) as excinfo:
                    await client.call_tool("x")
                assert "sampling/createMessage" in excinfo.value.message
            assert len(rs.wire.requests("client", "tools/call")) == 1


async def test_a_result_without_result_type_is_complete(wires, mode: str) -> None:
    """What an older server would answer: the client must read it as complete."""
    handlers = scripted_modern(lambda r: {"content": [{"type": "text", "text": "legacy"}]})
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, handlers, mode=mode) as rs:
            async with open_session(rs.client_stream, era="modern") as client:
                with rs.wire.unchecked("server"):  # invalid in 2026 on purpose
                    result = await client.call_tool("x")
                assert text_of(result) == "legacy" and result.result_type == "complete"


# ------------------------------------------------- pinned modern, refusals


async def test_a_pinned_modern_client_refuses_a_handshake_only_server(wires, mode: str) -> None:
    handlers = {"initialize": lambda r: initialize_result(tools={})}
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, handlers, mode=mode) as rs:
            with pytest.raises(BaseException) as excinfo:
                async with open_session(rs.client_stream, era="modern"):
                    pass  # pragma: no cover
            assert isinstance(error_of(excinfo), UnsupportedProtocolVersion)
            assert rs.wire.methods("client") == ["server/discover"]


@pytest.mark.parametrize(
    "answer",
    [
        discover_result(["2025-11-25"]),
        discover_result(["2099-01-01"]),
        {"resultType": "complete", "supportedVersions": [MODERN]},  # no capabilities
    ],
    ids=["handshake-versions-only", "future-only", "malformed"],
)
async def test_a_pinned_modern_client_refuses_a_discover_answer_without_a_common_version(
    wires, mode: str, answer: dict[str, Any]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_server(wires, {"server/discover": lambda r: answer}, mode=mode) as rs:
            with rs.wire.unchecked("server"), pytest.raises(BaseException) as excinfo:
                async with open_session(rs.client_stream, era="modern"):
                    pass  # pragma: no cover
            assert isinstance(error_of(excinfo), UnsupportedProtocolVersion)
            assert "initialize" not in rs.wire.methods("client")


def test_an_unknown_era_is_refused() -> None:
    client_end, _ = memory_pair()
    with pytest.raises(ValueError):
        ClientSession(client_end, era="stateless")  # type: ignore[arg-type]


# ------------------------------------------------------------------ logging


async def test_set_logging_level_rides_on_later_requests(wires, mode: str) -> None:
    logs = Inbox()
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode, on_log=logs) as conn:
            client = conn.client
            assert text_of(await client.call_tool("talk", {"tag": "before"})) == "before"
            await wait_all_tasks_blocked()
            assert logs.items == []

            await client.set_logging_level("warning")
            assert conn.wire.requests("client", "logging/setLevel") == []  # no such request in this era
            await client.call_tool("talk", {"tag": "warn"})
            await logs.wait_for(2)
            await client.set_logging_level("debug")
            await client.call_tool("talk", {"tag": "all"})
            await logs.wait_for(6)
            await wait_all_tasks_blocked()
            assert [(p.level, p.data, p.logger) for p in logs.items] == [
                ("warning", "warn:warning", "talk"),
                ("error", "warn:error", "talk"),
                ("debug", "all:debug", "talk"),
                ("info", "all:info", "talk"),
                ("warning", "all:warning", "talk"),
                ("error", "all:error", "talk"),
            ]
            calls = conn.wire.requests("client", "tools/call")
            assert [client_meta(c).get(META_LOG_LEVEL) for c in calls] == [None, "warning", "debug"]
            assert conn.server.log_level is None


# ----------------------------------------------------- subscriptions/listen


def _listens(conn: Any) -> list[dict[str, Any]]:
    return conn.wire.requests("client", "subscriptions/listen")


async def test_subscribe_resource_opens_a_listen_stream(wires, mode: str) -> None:
    updated = Inbox()
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_connection(app, wires, mode=mode, on_resource_updated=updated) as conn:
            client = conn.client
            await client.subscribe_resource("memo://note")
            (listen,) = _listens(conn)
            assert listen["params"]["notifications"] == {"resourceSubscriptions": ["memo://note"]}
            assert client_meta(listen)[META_PROTOCOL_VERSION] == MODERN
            assert conn.wire.requests("client", "resources/subscribe") == []
            await wait_all_tasks_blocked()
            assert set(conn.server._listeners) == {listen["id"]}

            app.resource_updated("memo://note")
            app.resource_updated("memo://other")
            await updated.wait_for(1)
            await wait_all_tasks_blocked()
            assert updated.items == ["memo://note"]
            (update,) = conn.wire.notifications("server", "notifications/resources/updated")
            assert update["params"]["_meta"][META_SUBSCRIPTION_ID] == listen["id"]

            # A second subscription replaces the stream with a wider one.
            await client.subscribe_resource("greeting://ada")
            first, second = _listens(conn)
            assert second["params"]["notifications"] == {
                "resourceSubscriptions": ["greeting://ada", "memo://note"]
            }
            cancels = conn.wire.notifications("client", "notifications/cancelled")
            assert [c["params"]["requestId"] for c in cancels] == [first["id"]]
            await wait_all_tasks_blocked()
            assert set(conn.server._listeners) == {second["id"]}
            app.resource_updated("greeting://ada")
            await updated.wait_for(2)
            assert updated.items == ["memo://note", "greeting://ada"]

            # Unsubscribing the last one closes the stream.
            await client.unsubscribe_resource("memo://note")
            await client.unsubscribe_resource("greeting://ada")
            await wait_all_tasks_blocked()
            assert conn.server._listeners == {}
            assert len(_listens(conn)) == 3
            assert conn.wire.requests("client", "resources/unsubscribe") == []
            app.resource_updated("greeting://ada")
            app.resource_updated("memo://note")
            await wait_all_tasks_blocked()
            assert updated.items == ["memo://note", "greeting://ada"]
            # Stream requests are cancelled, never answered.
            for request in _listens(conn):
                assert conn.wire.response_to("server", request) is None


async def test_open_listen_delivers_list_changes_to_the_callbacks(wires, mode: str) -> None:
    tools, prompts, resources = Inbox(), Inbox(), Inbox()
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_connection(
            app,
            wires,
            mode=mode,
            on_tools_changed=tools,
            on_prompts_changed=prompts,
            on_resources_changed=resources,
        ) as conn:
            await conn.client.open_listen()
            (listen,) = _listens(conn)
            assert listen["params"]["notifications"] == {
                "toolsListChanged": True,
                "promptsListChanged": True,
                "resourcesListChanged": True,
            }
            (ack,) = conn.wire.notifications("server", ACK)
            assert ack["params"]["_meta"][META_SUBSCRIPTION_ID] == listen["id"]
            await wait_all_tasks_blocked()

            @app.tool
            def fresh() -> str:
                return "fresh"

            await tools.wait_for(1)

            @app.prompt
            def fresh_prompt() -> str:
                return "p"

            await prompts.wait_for(1)

            @app.resource("memo://fresh")
            def fresh_memo() -> str:
                return "m"

            await resources.wait_for(1)
            app.remove_tool("fresh")
            await tools.wait_for(2)
            await wait_all_tasks_blocked()
            assert (len(tools), len(prompts), len(resources)) == (2, 1, 1)
            for note in conn.wire.notifications("server"):
                if note["method"] != ACK:
                    assert note["params"]["_meta"][META_SUBSCRIPTION_ID] == listen["id"]


async def test_open_listen_without_callbacks_sends_nothing(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode) as conn:
            await conn.client.open_listen()
            assert _listens(conn) == []


async def test_listen_asks_only_for_what_the_server_declares(wires, mode: str) -> None:
    app = MCPServer("tools-only")

    @app.tool
    def one() -> str:
        return "1"

    noop = Inbox()
    with trio.fail_after(TIMEOUT):
        async with open_connection(
            app, wires, mode=mode, on_tools_changed=noop, on_prompts_changed=noop, on_resources_changed=noop
        ) as conn:
            await conn.client.open_listen()
            (listen,) = _listens(conn)
            assert listen["params"]["notifications"] == {"toolsListChanged": True}


# ----------------------------------------------------- progress, cancelling


async def test_progress_reaches_the_callback(wires, mode: str) -> None:
    progress = Inbox()
    with trio.fail_after(TIMEOUT):
        async with open_connection(demo_app(), wires, mode=mode) as conn:
            result = await conn.client.call_tool("slow", {"steps": 3}, on_progress=progress)
            assert text_of(result) == "done"
            assert progress.items == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
            (call,) = conn.wire.requests("client", "tools/call")
            meta = client_meta(call)
            assert meta["progressToken"] == call["id"] and meta[META_PROTOCOL_VERSION] == MODERN


async def test_a_cancelled_call_cancels_the_handler(wires, mode: str) -> None:
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_connection(app, wires, mode=mode) as conn:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(conn.client.call_tool, "blocker", {})
                    await app.entered.wait()
                    scope.cancel()
            await wait_all_tasks_blocked()
            assert app.seen["blocker"] == "cancelled"
            (call,) = conn.wire.requests("client", "tools/call")
            cancels = conn.wire.notifications("client", "notifications/cancelled")
            if mode == "inline":
                # Served in the caller's task: its cancellation reached the handler itself.
                assert cancels == []
            else:
                (cancel,) = cancels
                assert cancel["params"]["requestId"] == call["id"]
            assert conn.wire.response_to("server", call) is None
            assert text_of(await conn.client.call_tool("add", {"a": 1, "b": 2})) == "3"
