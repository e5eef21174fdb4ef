"""The server side of the stateless 2026-07-28 era, driven by a bare Peer.

A raw client :class:`~trio_mcp.actors.Peer` crafts exact requests: the
``_meta`` rules (version, capabilities, log level), version errors, method
availability and capability gating, stateless serving without a handshake,
the input-required rounds and their ``requestState``, missing client
capabilities, and ``subscriptions/listen``. Every message both sides send is
validated against the 2026-07-28 schema (see ``conftest.Wire``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import msgspec
import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from trio_mcp.actors import Peer
from trio_mcp.protocol import (
    HANDSHAKE_VERSIONS,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    SUPPORTED_VERSIONS,
    McpError,
    ServerCapabilities,
)
from trio_mcp.server import MCPServer, RequestStateKeys

from .conftest import (
    MODERN,
    TIMEOUT,
    RawConn,
    RawDispatcher,
    demo_app,
    modern_meta,
    open_raw_client,
    sampling_answer,
    text_of,
)

SAMPLING = {"sampling": {}}
ACK = "notifications/subscriptions/acknowledged"


async def expect_error(
    raw: RawConn, method: str, params: Any, code: int, *, unchecked: bool = True
) -> McpError:
    """Send a request (outside schema checking when ``unchecked``); return its error."""
    if unchecked:
        with raw.wire.unchecked("client"), pytest.raises(McpError) as excinfo:
            await raw.call(method, params)
    else:
        with pytest.raises(McpError) as excinfo:
            await raw.call(method, params)
    error = excinfo.value
    assert error.code == code, f"{method}: expected {code}, got {error!r} (data {error.data!r})"
    return error


def call(
    name: str, arguments: dict[str, Any] | None = None, *, caps: dict[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    """``tools/call`` params of the stateless era."""
    params: dict[str, Any] = {"_meta": modern_meta(caps=caps), "name": name, **fields}
    if arguments is not None:
        params["arguments"] = arguments
    return params


# ----------------------------------------------------------------- discover


async def test_discover_advertises_versions_capabilities_and_server_info(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        app = demo_app()
        async with open_raw_client(app, wires, mode=mode) as raw:
            result = await raw.call("server/discover")
            assert result["resultType"] == "complete"
            assert MODERN in result["supportedVersions"]
            assert set(HANDSHAKE_VERSIONS) <= set(result["supportedVersions"])
            assert result["capabilities"] == msgspec.to_builtins(app.capabilities())
            assert set(result["capabilities"]) >= {"tools", "prompts", "resources", "logging", "completions"}
            assert result["instructions"] == "Use the tools."
            assert result["_meta"][META_SERVER_INFO] == {"name": "demo", "version": "1.2.3"}
            # Cacheable: both hints always present.
            assert result["ttlMs"] == 0 and result["cacheScope"] == "private"
            # Stateless: discovering is no handshake.
            assert not raw.server.initialized
            assert raw.server.protocol_version is None
            assert raw.server.client_info is None


async def test_discover_without_instructions_omits_them(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(instructions=None), wires, mode=mode) as raw:
            result = await raw.call("server/discover")
            assert "instructions" not in result
            assert result["_meta"][META_SERVER_INFO]["name"] == "demo"


async def test_discover_reports_only_declared_capabilities(wires, mode: str) -> None:
    app = MCPServer("tools-only")

    @app.tool
    def ping_tool() -> str:
        return "pong"

    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode) as raw:
            result = await raw.call("server/discover")
            assert set(result["capabilities"]) == {"tools", "logging"}


# ------------------------------------------------------------- _meta rules

_NO_VERSION: list[Any] = [
    {},
    {"_meta": {}},
    {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}},
    {"_meta": {META_PROTOCOL_VERSION: 20260728, "io.modelcontextprotocol/clientCapabilities": {}}},
    {"_meta": {META_PROTOCOL_VERSION: None, "io.modelcontextprotocol/clientCapabilities": {}}},
]
_NO_CAPS: list[Any] = [
    {"_meta": {META_PROTOCOL_VERSION: MODERN}},
    {"_meta": {META_PROTOCOL_VERSION: MODERN, "io.modelcontextprotocol/clientCapabilities": None}},
    {"_meta": {META_PROTOCOL_VERSION: MODERN, "io.modelcontextprotocol/clientCapabilities": "all"}},
    {"_meta": {META_PROTOCOL_VERSION: MODERN, "io.modelcontextprotocol/clientCapabilities": {"sampling": 5}}},
    {"_meta": {META_PROTOCOL_VERSION: MODERN, "io.modelcontextprotocol/clientCapabilities": {"roots": []}}},
]


@pytest.mark.parametrize("params", _NO_VERSION + _NO_CAPS, ids=lambda p: repr(p)[:60])
@pytest.mark.parametrize("method", ["server/discover", "subscriptions/listen"])
async def test_modern_only_methods_need_version_and_capabilities(
    wires, mode: str, method: str, params: Any
) -> None:
    if method == "subscriptions/listen":
        params = {**params, "notifications": {"toolsListChanged": True}}
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            error = await expect_error(raw, method, params, -32602)
            assert "_meta" in error.message or "capabilities" in error.message
            assert raw.server._listeners == {}


@pytest.mark.parametrize("meta", [5, "x", [1], True], ids=["int", "str", "list", "bool"])
async def test_a_meta_that_is_not_an_object_is_invalid_params(
    wires, mode: str, meta: Any, request: pytest.FixtureRequest
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            await expect_error(raw, "server/discover", {"_meta": meta}, -32602)


@pytest.mark.parametrize("params", _NO_CAPS, ids=lambda p: repr(p)[:60])
@pytest.mark.parametrize(
    "method, fields",
    [
        ("tools/list", {}),
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}),
        ("prompts/get", {"name": "greet", "arguments": {"name": "x"}}),
        ("resources/read", {"uri": "memo://note"}),
    ],
)
async def test_a_versioned_request_without_capabilities_is_invalid(
    wires, mode: str, method: str, fields: dict[str, Any], params: Any
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            await expect_error(raw, method, {**params, **fields}, -32602)


@pytest.mark.parametrize("requested", ["2025-11-25", "2024-11-05", "2026-07-29", "2099-01-01", "draft", ""])
@pytest.mark.parametrize("method", ["server/discover", "tools/list", "tools/call", "subscriptions/listen"])
async def test_an_unsupported_version_gets_32022_with_the_supported_ones(
    wires, mode: str, method: str, requested: str
) -> None:
    params: dict[str, Any] = {"_meta": modern_meta(version=requested)}
    if method == "tools/call":
        params.update(name="add", arguments={"a": 1, "b": 2})
    if method == "subscriptions/listen":
        params["notifications"] = {"toolsListChanged": True}
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            error = await expect_error(raw, method, params, -32022)
            assert error.data == {"supported": list(SUPPORTED_VERSIONS), "requested": requested}
            assert MODERN in error.data["supported"]
            # The wire checks the answer against UnsupportedProtocolVersionError.
            (answer,) = [m for m in raw.wire.responses("server") if "error" in m]
            assert answer["error"]["data"]["requested"] == requested


@pytest.mark.parametrize(
    "method, fields",
    [
        ("logging/setLevel", {"level": "debug"}),
        ("resources/subscribe", {"uri": "memo://note"}),
        ("resources/unsubscribe", {"uri": "memo://note"}),
        ("sampling/createMessage", {"messages": [], "maxTokens": 1}),
        ("roots/list", {}),
        ("elicitation/create", {"message": "x", "requestedSchema": {"type": "object", "properties": {}}}),
        ("no/such/method", {}),
    ],
)
async def test_methods_outside_the_stateless_era_are_not_found(
    wires, mode: str, method: str, fields: dict[str, Any]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            error = await expect_error(raw, method, {"_meta": modern_meta(), **fields}, -32601)
            assert method in error.message
            assert raw.server.log_level is None and raw.server.subscriptions == set()


class _Undeclared(MCPServer):
    """Registers tools but declares no capability but logging."""

    def capabilities(self) -> ServerCapabilities:
        return ServerCapabilities(logging={})


@pytest.mark.parametrize(
    "method, fields", [("tools/list", {}), ("tools/call", {"name": "add", "arguments": {}})]
)
async def test_requests_of_an_undeclared_capability_are_not_found(
    wires, mode: str, method: str, fields: dict[str, Any]
) -> None:
    app = _Undeclared("undeclared")

    @app.tool
    def add(a: int, b: int) -> int:
        return a + b

    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode) as raw:
            discovered = await raw.call("server/discover")
            assert "tools" not in discovered["capabilities"]
            error = await expect_error(
                raw, method, {"_meta": modern_meta(), **fields}, -32601, unchecked=False
            )
            assert "tools" in error.message


@pytest.mark.parametrize(
    "method, fields",
    [
        ("prompts/list", {}),
        ("prompts/get", {"name": "x"}),
        ("resources/list", {}),
        ("resources/read", {"uri": "memo://x"}),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": ""}},
        ),
    ],
)
async def test_features_the_app_lacks_are_not_found(
    wires, mode: str, method: str, fields: dict[str, Any]
) -> None:
    app = MCPServer("tools-only")

    @app.tool
    def only() -> str:
        return "only"

    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode) as raw:
            await expect_error(raw, method, {"_meta": modern_meta(), **fields}, -32601, unchecked=False)


# ---------------------------------------------------------- stateless serving

_SERVED: list[tuple[str, dict[str, Any], Any]] = [
    ("tools/list", {}, lambda r: {"add", "ask_llm", "interview"} <= {t["name"] for t in r["tools"]}),
    ("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, lambda r: text_of(r) == "5"),
    ("resources/list", {}, lambda r: [x["uri"] for x in r["resources"]] == ["memo://note", "memo://asks"]),
    (
        "resources/templates/list",
        {},
        lambda r: [x["uriTemplate"] for x in r["resourceTemplates"]] == ["greeting://{name}"],
    ),
    ("resources/read", {"uri": "memo://note"}, lambda r: r["contents"][0]["text"] == "a note"),
    ("resources/read", {"uri": "greeting://bob"}, lambda r: r["contents"][0]["text"] == "Hello, bob!"),
    ("prompts/list", {}, lambda r: "greet" in {p["name"] for p in r["prompts"]}),
    (
        "prompts/get",
        {"name": "greet", "arguments": {"name": "Ada"}},
        lambda r: r["messages"][0]["content"]["text"] == "Hello, Ada!",
    ),
    (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "al"}},
        lambda r: r["completion"]["values"] == ["alice", "albert"],
    ),
]


@pytest.mark.parametrize(
    "method, fields, check", _SERVED, ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(_SERVED)]
)
async def test_requests_are_served_without_any_handshake(
    wires, mode: str, method: str, fields: dict[str, Any], check: Any
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            result = await raw.call(method, {"_meta": modern_meta(), **fields})
            assert check(result), result
            assert result["resultType"] == "complete"
            if method.endswith("/list") or method == "resources/read":
                assert type(result["ttlMs"]) is int and result["ttlMs"] >= 0
                assert result["cacheScope"] in ("private", "public")
            else:
                assert "ttlMs" not in result and "cacheScope" not in result
            # Nothing of the handshake happened, nor was anything remembered.
            assert not raw.server.initialized and raw.server.protocol_version is None
            assert raw.server.client_capabilities == type(raw.server.client_capabilities)()
            assert raw.wire.requests("server") == []


async def test_every_request_stands_alone(wires, mode: str) -> None:
    """The same session answers a sequence of independent stateless requests,
    each with its own capabilities, and keeps no state between them."""
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            first = await raw.call("tools/call", call("version", {}, caps={"sampling": {}, "roots": {}}))
            second = await raw.call("tools/call", call("version", {}, caps={}))
            third = await raw.call("tools/call", call("version", {}, caps={"elicitation": {}}))
            assert text_of(first) == f"{MODERN} roots,sampling"
            assert text_of(second) == f"{MODERN} "
            assert text_of(third) == f"{MODERN} elicitation"


async def test_lists_paginate_in_the_stateless_era(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(page_size=4), wires, mode=mode) as raw:
            names: list[str] = []
            cursor = None
            for _ in range(10):
                fields = {} if cursor is None else {"cursor": cursor}
                page = await raw.call("tools/list", {"_meta": modern_meta(), **fields})
                assert page["resultType"] == "complete" and "ttlMs" in page and "cacheScope" in page
                names += [t["name"] for t in page["tools"]]
                cursor = page.get("nextCursor")
                if cursor is None:
                    break
            assert len(names) == len(set(names)) > 4
            assert len(raw.wire.requests("client", "tools/list")) > 1


@pytest.mark.parametrize("uri", ["memo://missing", "greeting:/bad", "other://x"])
async def test_an_unknown_resource_is_invalid_params(wires, mode: str, uri: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            error = await expect_error(
                raw, "resources/read", {"_meta": modern_meta(), "uri": uri}, -32602, unchecked=False
            )
            assert error.data == {"uri": uri}
            assert uri in error.message


@pytest.mark.parametrize(
    "method, fields",
    [
        ("tools/call", {"name": "nope"}),
        ("tools/call", {}),
        ("tools/call", {"name": 5}),
        ("prompts/get", {"name": "greet"}),
        ("prompts/get", {"name": "nope"}),
        ("resources/read", {}),
        ("tools/list", {"cursor": "not-a-cursor"}),
        ("tools/call", {"name": "add", "inputResponses": []}),
        ("tools/call", {"name": "add", "requestState": 7}),
    ],
)
async def test_bad_params_are_invalid_params(wires, mode: str, method: str, fields: dict[str, Any]) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            await expect_error(raw, method, {"_meta": modern_meta(), **fields}, -32602)


# ---------------------------------------------------------- input required


async def test_a_question_ends_the_round_with_input_required_and_the_retry_answers_it(
    wires, mode: str
) -> None:
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode) as raw:
            first = await raw.call("tools/call", call("ask_llm", {"question": "Who?"}, caps=SAMPLING))
            assert first["resultType"] == "input_required"
            assert "content" not in first
            (key,) = first["inputRequests"]
            question = first["inputRequests"][key]
            assert question["method"] == "sampling/createMessage"
            assert question["params"]["messages"] == [
                {"role": "user", "content": {"type": "text", "text": "Who?"}}
            ]
            assert question["params"]["maxTokens"] == 50
            state = first["requestState"]
            assert isinstance(state, str) and state
            # No server-to-client request in this era: the question rode in the result.
            assert raw.wire.requests("server") == []

            final = await raw.call(
                "tools/call",
                call(
                    "ask_llm",
                    {"question": "Who?"},
                    caps=SAMPLING,
                    inputResponses={key: sampling_answer("Ada")},
                    requestState=state,
                ),
            )
            assert final["resultType"] == "complete"
            assert text_of(final) == "llm said: Ada"
            assert "isError" not in final
            # The handler ran again from the start.
            assert app.runs["ask_llm"] == 2
            assert raw.wire.requests("server") == []


async def test_two_questions_take_two_rounds_and_the_state_carries_the_first_answer(wires, mode: str) -> None:
    app = demo_app()
    caps = {"sampling": {}, "elicitation": {"form": {}}}
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode) as raw:
            first = await raw.call("tools/call", call("interview", {}, caps=caps))
            assert first["resultType"] == "input_required"
            (k1,) = first["inputRequests"]
            assert first["inputRequests"][k1]["method"] == "sampling/createMessage"

            second = await raw.call(
                "tools/call",
                call(
                    "interview",
                    {},
                    caps=caps,
                    inputResponses={k1: sampling_answer("Ada")},
                    requestState=first["requestState"],
                ),
            )
            assert second["resultType"] == "input_required"
            (k2,) = second["inputRequests"]
            assert k2 != k1
            ask = second["inputRequests"][k2]
            assert ask["method"] == "elicitation/create"
            assert ask["params"]["message"] == "Confirm the name"
            assert ask["params"]["mode"] == "form"
            assert ask["params"]["requestedSchema"]["properties"] == {"name": {"type": "string"}}
            assert second["requestState"] != first["requestState"]

            # Only the new answer is sent: the first one comes back from the state.
            final = await raw.call(
                "tools/call",
                call(
                    "interview",
                    {},
                    caps=caps,
                    inputResponses={k2: {"action": "accept", "content": {"name": "Ada L."}}},
                    requestState=second["requestState"],
                ),
            )
            assert final["resultType"] == "complete"
            assert text_of(final) == "Ada -> accept:{'name': 'Ada L.'}"
            assert app.seen["interview"] == ("Ada", "accept", {"name": "Ada L."})
            assert app.runs["interview"] == 3


async def test_without_the_state_the_earlier_answers_are_gone(wires, mode: str) -> None:
    """The server keeps nothing between rounds: a retry that drops
    ``requestState`` is asked the first question again."""
    caps = {"sampling": {}, "elicitation": {}}
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            first = await raw.call("tools/call", call("interview", {}, caps=caps))
            (k1,) = first["inputRequests"]
            second = await raw.call(
                "tools/call",
                call(
                    "interview",
                    {},
                    caps=caps,
                    inputResponses={k1: sampling_answer()},
                    requestState=first["requestState"],
                ),
            )
            (k2,) = second["inputRequests"]
            again = await raw.call(
                "tools/call", call("interview", {}, caps=caps, inputResponses={k2: {"action": "decline"}})
            )
            assert again["resultType"] == "input_required"
            assert list(again["inputRequests"]) == [k1]


async def test_a_roots_question(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            first = await raw.call("tools/call", call("where", {}, caps={"roots": {}}))
            (key,) = first["inputRequests"]
            assert first["inputRequests"][key]["method"] == "roots/list"
            final = await raw.call(
                "tools/call",
                call(
                    "where",
                    {},
                    caps={"roots": {}},
                    requestState=first["requestState"],
                    inputResponses={
                        key: {"roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "b"}]}
                    },
                ),
            )
            assert text_of(final) == "file:///a,file:///b"


async def test_a_url_elicitation_question(wires, mode: str) -> None:
    caps = {"elicitation": {"url": {}}}
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            first = await raw.call("tools/call", call("visit", {}, caps=caps))
            (key,) = first["inputRequests"]
            ask = first["inputRequests"][key]
            assert ask["method"] == "elicitation/create"
            assert ask["params"]["mode"] == "url"
            assert ask["params"]["url"] == "https://example.com/login"
            final = await raw.call(
                "tools/call",
                call(
                    "visit",
                    {},
                    caps=caps,
                    requestState=first["requestState"],
                    inputResponses={key: {"action": "accept"}},
                ),
            )
            assert text_of(final) == "accept"


@pytest.mark.parametrize(
    "method, fields, expected",
    [
        (
            "prompts/get",
            {"name": "ask_prompt", "arguments": {"topic": "tea"}},
            lambda r: r["messages"][0]["content"]["text"] == "tea: Ada",
        ),
        ("resources/read", {"uri": "memo://asks"}, lambda r: r["contents"][0]["text"] == "memo: Ada"),
    ],
)
async def test_prompts_and_resources_may_require_input_too(
    wires, mode: str, method: str, fields: dict[str, Any], expected: Any
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            first = await raw.call(method, {"_meta": modern_meta(caps=SAMPLING), **fields})
            assert first["resultType"] == "input_required"
            (key,) = first["inputRequests"]
            final = await raw.call(
                method,
                {
                    "_meta": modern_meta(caps=SAMPLING),
                    **fields,
                    "inputResponses": {key: sampling_answer("Ada")},
                    "requestState": first["requestState"],
                },
            )
            assert final["resultType"] == "complete"
            assert expected(final), final


async def test_a_state_is_good_on_any_session_of_the_same_app(wires, mode: str) -> None:
    """Stateless: the retry may reach another session (another connection)."""
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with (
            open_raw_client(app, wires, mode=mode) as one,
            open_raw_client(app, wires, mode=mode) as two,
        ):
            first = await one.call("tools/call", call("ask_llm", {"question": "q"}, caps=SAMPLING))
            (key,) = first["inputRequests"]
            final = await two.call(
                "tools/call",
                call(
                    "ask_llm",
                    {"question": "q"},
                    caps=SAMPLING,
                    inputResponses={key: sampling_answer("X")},
                    requestState=first["requestState"],
                ),
            )
            assert text_of(final) == "llm said: X"


def _tamper_flip(state: str) -> str:
    middle = len(state) // 2
    return state[:middle] + ("B" if state[middle] != "B" else "C") + state[middle + 1 :]


def _forge(state: str) -> str:
    """A well-formed state with a payload of our choosing, MAC'd with a guessed key."""
    payload = msgspec.json.encode({"sampling-1": sampling_answer("forged")})
    mac = hmac.new(b"\0" * 32, payload, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(mac + payload).decode().rstrip("=")


def _reuse_mac(state: str) -> str:
    """The server's MAC over its payload, glued to another payload."""
    blob = base64.urlsafe_b64decode(state + "=" * (-len(state) % 4))
    payload = msgspec.json.encode({"sampling-1": sampling_answer("forged")})
    return base64.urlsafe_b64encode(blob[:16] + payload).decode().rstrip("=")


_TAMPERED = {
    "flipped": _tamper_flip,
    "truncated": lambda s: s[: len(s) // 2],
    "extended": lambda s: s + "AAAA",
    "empty": lambda s: "",
    "not-base64": lambda s: "%%% not base64 %%%",
    "forged": _forge,
    "mac-reused": _reuse_mac,
}


@pytest.mark.parametrize("how", list(_TAMPERED))
async def test_a_forged_or_altered_request_state_is_invalid_params(wires, mode: str, how: str) -> None:
    app = demo_app()
    caps = {"sampling": {}, "elicitation": {}}
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode) as raw:
            first = await raw.call("tools/call", call("interview", {}, caps=caps))
            (k1,) = first["inputRequests"]
            second = await raw.call(
                "tools/call",
                call(
                    "interview",
                    {},
                    caps=caps,
                    inputResponses={k1: sampling_answer("Ada")},
                    requestState=first["requestState"],
                ),
            )
            (k2,) = second["inputRequests"]
            bad = _TAMPERED[how](second["requestState"])
            runs = app.runs["interview"]
            error = await expect_error(
                raw,
                "tools/call",
                call(
                    "interview",
                    {},
                    caps=caps,
                    inputResponses={k2: {"action": "accept", "content": {"name": "x"}}},
                    requestState=bad,
                ),
                -32602,
                unchecked=False,
            )
            assert "requestState" in error.message
            assert app.runs["interview"] == runs  # the handler never ran


async def test_a_request_state_of_another_server_is_invalid_params(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_raw_client(demo_app(), wires, mode=mode) as one,
            open_raw_client(demo_app(), wires, mode=mode) as other,
        ):
            first = await one.call("tools/call", call("ask_llm", {"question": "q"}, caps=SAMPLING))
            (key,) = first["inputRequests"]
            await expect_error(
                other,
                "tools/call",
                call(
                    "ask_llm",
                    {"question": "q"},
                    caps=SAMPLING,
                    inputResponses={key: sampling_answer()},
                    requestState=first["requestState"],
                ),
                -32602,
                unchecked=False,
            )
            # Even a handler that asks nothing refuses a state it did not issue.
            await expect_error(
                other,
                "tools/call",
                call("add", {"a": 1, "b": 1}, requestState=first["requestState"]),
                -32602,
                unchecked=False,
            )


KEY_OLD = "old-request-state-key-0123456789abcdef"
KEY_NEW = "new-request-state-key-0123456789abcdef"


async def _issue_then_retry(wires, mode: str, issuer: Any, retrier: Any) -> Any:
    """``ask_llm``'s question from ``issuer``, its answer retried on
    ``retrier`` (two apps: two processes behind one endpoint)."""
    async with (
        open_raw_client(issuer, wires, mode=mode) as one,
        open_raw_client(retrier, wires, mode=mode) as other,
    ):
        first = await one.call("tools/call", call("ask_llm", {"question": "q"}, caps=SAMPLING))
        (key,) = first["inputRequests"]
        retry = call(
            "ask_llm",
            {"question": "q"},
            caps=SAMPLING,
            inputResponses={key: sampling_answer("shared")},
            requestState=first["requestState"],
        )
        try:
            return await other.call("tools/call", retry)
        except McpError as error:
            return error


async def test_a_request_state_is_accepted_by_another_server_with_the_same_keys(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        result = await _issue_then_retry(
            wires, mode, demo_app(request_state_keys=[KEY_OLD]), demo_app(request_state_keys=[KEY_OLD])
        )
    assert text_of(result) == "llm said: shared"


async def test_rotation_the_new_key_signs_and_the_old_one_is_still_accepted(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        # Signed by a server that has only the old key, retried on one that rotated.
        before = await _issue_then_retry(
            wires,
            mode,
            demo_app(request_state_keys=[KEY_OLD]),
            demo_app(request_state_keys=[KEY_NEW, KEY_OLD]),
        )
        assert text_of(before) == "llm said: shared"
        # Signed after the rotation: with the new key, which an old-key-only server refuses.
        rotated = demo_app(request_state_keys=[KEY_NEW, KEY_OLD])
        refused = await _issue_then_retry(wires, mode, rotated, demo_app(request_state_keys=[KEY_OLD]))
        assert isinstance(refused, McpError) and refused.code == -32602
        accepted = await _issue_then_retry(wires, mode, rotated, demo_app(request_state_keys=[KEY_NEW]))
        assert text_of(accepted) == "llm said: shared"
        # Once the old key is dropped, what it signed is refused.
        dropped = await _issue_then_retry(
            wires, mode, demo_app(request_state_keys=[KEY_OLD]), demo_app(request_state_keys=[KEY_NEW])
        )
    assert isinstance(dropped, McpError) and dropped.code == -32602
    assert "requestState" in dropped.message and "keys" in dropped.message


def test_request_state_keys_are_checked() -> None:
    with pytest.raises(ValueError, match="at least 32"):
        MCPServer("x", request_state_keys=["short"])
    with pytest.raises(ValueError, match="at least one key"):
        MCPServer("x", request_state_keys=[])
    keys = RequestStateKeys([KEY_NEW, KEY_OLD.encode(), KEY_NEW])
    assert keys.keys == (KEY_NEW.encode(), KEY_OLD.encode())  # the signing key first, no duplicates
    assert KEY_NEW not in repr(keys)


async def test_a_malformed_input_response_is_invalid_params_for_a_prompt(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            first = await raw.call(
                "prompts/get",
                {"_meta": modern_meta(caps=SAMPLING), "name": "ask_prompt", "arguments": {"topic": "t"}},
            )
            (key,) = first["inputRequests"]
            await expect_error(
                raw,
                "prompts/get",
                {
                    "_meta": modern_meta(caps=SAMPLING),
                    "name": "ask_prompt",
                    "arguments": {"topic": "t"},
                    "inputResponses": {key: {"role": "assistant"}},
                    "requestState": first["requestState"],
                },
                -32602,
            )


async def test_a_malformed_input_response_is_invalid_params_for_a_tool(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            first = await raw.call("tools/call", call("ask_llm", {"question": "q"}, caps=SAMPLING))
            (key,) = first["inputRequests"]
            await expect_error(
                raw,
                "tools/call",
                call(
                    "ask_llm",
                    {"question": "q"},
                    caps=SAMPLING,
                    inputResponses={key: {"role": "assistant"}},
                    requestState=first["requestState"],
                ),
                -32602,
            )


async def test_a_handler_that_always_asks_never_completes(wires, mode: str) -> None:
    """Each round answers one more question and gets the next one; the state grows."""
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode) as raw:
            fields: dict[str, Any] = {}
            keys: list[str] = []
            for _ in range(5):
                result = await raw.call("tools/call", call("endless", {}, caps=SAMPLING, **fields))
                assert result["resultType"] == "input_required"
                (key,) = result["inputRequests"]
                assert key not in keys
                keys.append(key)
                fields = {
                    "inputResponses": {key: sampling_answer(key)},
                    "requestState": result["requestState"],
                }
            assert app.runs["endless"] == 5


async def test_a_question_asked_from_a_child_task_still_ends_the_round(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            first = await raw.call("tools/call", call("in_child", {}, caps=SAMPLING))
            assert first["resultType"] == "input_required"
            (key,) = first["inputRequests"]
            final = await raw.call(
                "tools/call",
                call(
                    "in_child",
                    {},
                    caps=SAMPLING,
                    inputResponses={key: sampling_answer("kid")},
                    requestState=first["requestState"],
                ),
            )
            assert text_of(final) == "kid"


# ---------------------------------------------------- missing capabilities


@pytest.mark.parametrize(
    "method, fields, caps, required",
    [
        ("prompts/get", {"name": "ask_prompt", "arguments": {"topic": "t"}}, {}, {"sampling": {}}),
        (
            "prompts/get",
            {"name": "ask_prompt", "arguments": {"topic": "t"}},
            {"elicitation": {}, "roots": {}},
            {"sampling": {}},
        ),
        ("prompts/get", {"name": "url_prompt"}, {}, {"elicitation": {"url": {}}}),
        ("prompts/get", {"name": "url_prompt"}, {"elicitation": {}}, {"elicitation": {"url": {}}}),
        ("prompts/get", {"name": "url_prompt"}, {"elicitation": {"form": {}}}, {"elicitation": {"url": {}}}),
        ("prompts/get", {"name": "form_prompt"}, {"sampling": {}}, {"elicitation": {}}),
        ("prompts/get", {"name": "roots_prompt"}, {"sampling": {}}, {"roots": {}}),
        ("resources/read", {"uri": "memo://asks"}, {}, {"sampling": {}}),
    ],
)
async def test_a_missing_client_capability_is_32021(
    wires, mode: str, method: str, fields: dict[str, Any], caps: dict[str, Any], required: dict[str, Any]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            error = await expect_error(
                raw, method, {"_meta": modern_meta(caps=caps), **fields}, -32021, unchecked=False
            )
            # Checked by the wire against MissingRequiredClientCapabilityError too.
            assert error.data == {"requiredCapabilities": required}


async def test_a_form_question_needs_the_form_capability(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            error = await expect_error(
                raw,
                "prompts/get",
                {"_meta": modern_meta(caps={"elicitation": {"url": {}}}), "name": "form_prompt"},
                -32021,
                unchecked=False,
            )
            assert error.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}


@pytest.mark.parametrize(
    "tool, caps, required",
    [
        ("ask_llm", {}, {"sampling": {}}),
        ("where", {"sampling": {}}, {"roots": {}}),
        ("visit", {"elicitation": {}}, {"elicitation": {"url": {}}}),
    ],
)
async def test_a_tool_needing_a_missing_client_capability_is_32021(
    wires, mode: str, tool: str, caps: dict[str, Any], required: dict[str, Any]
) -> None:
    arguments = {"question": "q"} if tool == "ask_llm" else {}
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            error = await expect_error(
                raw, "tools/call", call(tool, arguments, caps=caps), -32021, unchecked=False
            )
            assert error.data == {"requiredCapabilities": required}


async def test_capabilities_are_never_inferred_from_earlier_requests(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            prompt = {"name": "ask_prompt", "arguments": {"topic": "t"}}
            first = await raw.call("prompts/get", {"_meta": modern_meta(caps=SAMPLING), **prompt})
            assert first["resultType"] == "input_required"
            # Another request without the capability: refused.
            await expect_error(
                raw, "prompts/get", {"_meta": modern_meta(caps={}), **prompt}, -32021, unchecked=False
            )
            # Even the retry of the first one must declare it again.
            (key,) = first["inputRequests"]
            await expect_error(
                raw,
                "prompts/get",
                {
                    "_meta": modern_meta(caps={}),
                    **prompt,
                    "inputResponses": {key: sampling_answer()},
                    "requestState": first["requestState"],
                },
                -32021,
                unchecked=False,
            )


# ------------------------------------------------------------------ logging


def _logs(raw: RawConn) -> list[tuple[Any, str, Any]]:
    """(related request id, level, data) of every log notification the server sent."""
    return [
        (entry.related, entry.data["params"]["level"], entry.data["params"]["data"])
        for entry in raw.wire.notification_entries("server", "notifications/message")
    ]


async def test_without_a_log_level_a_request_gets_no_log_messages(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            result = await raw.call("tools/call", call("talk", {"tag": "quiet"}))
            assert text_of(result) == "quiet"
            await wait_all_tasks_blocked()
            assert _logs(raw) == []


@pytest.mark.parametrize(
    "level, expected",
    [
        ("debug", ["debug", "info", "warning", "error"]),
        ("info", ["info", "warning", "error"]),
        ("notice", ["warning", "error"]),
        ("warning", ["warning", "error"]),
        ("error", ["error"]),
        ("critical", []),
        ("emergency", []),
    ],
)
async def test_the_request_log_level_filters_log_messages(
    wires, mode: str, level: str, expected: list[str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            params = {"_meta": modern_meta(log_level=level), "name": "talk", "arguments": {"tag": "t"}}
            await raw.call("tools/call", params)
            # Sent (and recorded) before the answer, on the same stream.
            logs = _logs(raw)
            assert [lvl for _, lvl, _ in logs] == expected
            assert [data for _, _, data in logs] == [f"t:{lvl}" for lvl in expected]
            notes = await raw.dispatcher.wait_notifications(len(expected), "notifications/message")
            assert [p["logger"] for _, p in notes] == ["talk"] * len(expected)
            # The level was this request's only: the session keeps none.
            assert raw.server.log_level is None


async def test_concurrent_requests_each_get_their_own_log_level(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            async with trio.open_nursery() as nursery:
                for tag, level in (("loud", "debug"), ("calm", "error"), ("mute", None)):
                    params = {
                        "_meta": modern_meta(log_level=level),
                        "name": "talk",
                        "arguments": {"tag": tag},
                    }
                    nursery.start_soon(raw.call, "tools/call", params)
            ids = {
                r["params"]["arguments"]["tag"]: r["id"] for r in raw.wire.requests("client", "tools/call")
            }
            logs = _logs(raw)
            by_request = {tag: [data for rel, _, data in logs if rel == ident] for tag, ident in ids.items()}
            assert by_request == {
                "loud": ["loud:debug", "loud:info", "loud:warning", "loud:error"],
                "calm": ["calm:error"],
                "mute": [],
            }


@pytest.mark.parametrize("level", [["debug"], {"level": "debug"}, "verbose", 3])
async def test_an_invalid_log_level_is_invalid_params(wires, mode: str, level: Any) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            await expect_error(raw, "tools/list", {"_meta": modern_meta(log_level=level)}, -32602)


# ------------------------------------------------------- context and flow


async def test_the_handler_sees_the_client_info_of_the_request(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            result = await raw.call("tools/call", call("who", {}))
            assert text_of(result) == "raw-client"


async def test_the_handler_sees_the_version_and_capabilities_of_the_request(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            result = await raw.call(
                "tools/call", call("version", {}, caps={"sampling": {}, "elicitation": {}})
            )
            assert text_of(result) == f"{MODERN} elicitation,sampling"


async def test_progress_is_reported_to_the_requests_token(wires, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            params = {"_meta": modern_meta(progressToken="tok-1"), "name": "slow", "arguments": {"steps": 3}}
            result = await raw.call("tools/call", params)
            assert text_of(result) == "done"
            progress = [n["params"] for n in raw.wire.notifications("server", "notifications/progress")]
            assert progress == [
                {"progressToken": "tok-1", "progress": i, "total": 3, "message": f"step {i}"}
                for i in (1, 2, 3)
            ]


async def test_a_cancelled_stateless_request_is_never_answered(wires, mode: str) -> None:
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode) as raw:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(raw.call, "tools/call", call("blocker", {}))
                    await app.entered.wait()
                    scope.cancel()
            (request,) = raw.wire.requests("client", "tools/call")
            if mode == "inline":  # served in the caller's task: cancelled with it, no notice
                await wait_all_tasks_blocked()
                assert raw.wire.notifications("client", "notifications/cancelled") == []
            else:
                await raw.wire.wait_for(lambda w: bool(w.notifications("client", "notifications/cancelled")))
                (cancel,) = raw.wire.notifications("client", "notifications/cancelled")
                assert cancel["params"]["requestId"] == request["id"]
            await wait_all_tasks_blocked()
            assert app.seen["blocker"] == "cancelled"
            assert raw.wire.response_to("server", request) is None
            # The session serves on.
            assert text_of(await raw.call("tools/call", call("add", {"a": 1, "b": 1}))) == "2"


# ---------------------------------------------------- subscriptions/listen


async def _listen(raw: RawConn, notifications: dict[str, Any], **meta: Any) -> tuple[trio.CancelScope, Any]:
    """Open a listen stream in the background; returns its cancel scope and request id
    once the server acknowledged it."""
    scope = trio.CancelScope()
    before = len(raw.wire.requests("client", "subscriptions/listen"))

    async def run() -> None:
        with scope:
            await raw.peer.request(
                "subscriptions/listen", {"_meta": modern_meta(**meta), "notifications": notifications}
            )

    raw.nursery.start_soon(run)
    await raw.wire.wait_for(lambda w: len(w.requests("client", "subscriptions/listen")) > before)
    ident = raw.wire.requests("client", "subscriptions/listen")[-1]["id"]
    await raw.wire.wait_for(
        lambda w: any(
            n["params"]["_meta"][META_SUBSCRIPTION_ID] == ident for n in w.notifications("server", ACK)
        )
    )
    # The ack is recorded as it is sent; the server registers the stream once
    # the send returned (see test_a_change_right_after_the_acknowledgement_is_delivered).
    await wait_all_tasks_blocked()
    return scope, ident


def _stream(raw: RawConn, ident: Any) -> list[dict[str, Any]]:
    """The notifications the server sent on the subscription ``ident``, in order."""
    out = []
    for n in raw.wire.notifications("server"):
        meta = (n.get("params") or {}).get("_meta") or {}
        if meta.get(META_SUBSCRIPTION_ID) == ident:
            out.append(n)
    return out


ALL = {
    "toolsListChanged": True,
    "promptsListChanged": True,
    "resourcesListChanged": True,
    "resourceSubscriptions": ["memo://note"],
}


async def test_listen_acknowledges_then_streams_what_was_asked_until_cancelled(wires, mode: str) -> None:
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode) as raw:
            scope, ident = await _listen(raw, ALL)
            stream = _stream(raw, ident)
            assert [n["method"] for n in stream] == [ACK]
            assert stream[0]["params"]["notifications"] == ALL
            assert raw.server._listeners.keys() == {ident}

            @app.tool
            def extra() -> str:
                return "x"

            @app.prompt
            def extra_prompt() -> str:
                return "x"

            @app.resource("memo://new")
            def new() -> str:
                return "new"

            app.resource_updated("memo://other")  # not subscribed
            app.resource_updated("memo://note")
            await raw.wire.wait_for(lambda w: len(_stream(raw, ident)) >= 5)
            stream = _stream(raw, ident)
            assert [n["method"] for n in stream] == [
                ACK,
                "notifications/tools/list_changed",
                "notifications/prompts/list_changed",
                "notifications/resources/list_changed",
                "notifications/resources/updated",
            ]
            assert stream[-1]["params"]["uri"] == "memo://note"
            got = await raw.dispatcher.wait_notifications(5)
            assert [m for m, _ in got][:5] == [n["method"] for n in stream]

            # The client cancels the stream: it ends, unanswered.
            scope.cancel()
            await raw.wire.wait_for(lambda w: bool(w.notifications("client", "notifications/cancelled")))
            (cancel,) = raw.wire.notifications("client", "notifications/cancelled")
            assert cancel["params"]["requestId"] == ident
            await wait_all_tasks_blocked()
            assert raw.server._listeners == {}
            app.resource_updated("memo://note")
            app.remove_tool("extra")
            await wait_all_tasks_blocked()
            assert len(_stream(raw, ident)) == 5
            (request,) = raw.wire.requests("client", "subscriptions/listen")
            assert raw.wire.response_to("server", request) is None


async def test_listen_sends_only_the_requested_notifications(wires, mode: str) -> None:
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode) as raw:
            scope, ident = await _listen(raw, {"toolsListChanged": True})

            @app.prompt
            def p2() -> str:
                return "x"

            @app.resource("memo://r2")
            def r2() -> str:
                return "x"

            app.resource_updated("memo://note")

            @app.tool
            def t2() -> str:
                return "x"

            # Posted in order: once the tool change is out, nothing else came before it.
            await raw.wire.wait_for(lambda w: len(_stream(raw, ident)) >= 2)
            await wait_all_tasks_blocked()
            assert [n["method"] for n in raw.wire.notifications("server")] == [
                ACK,
                "notifications/tools/list_changed",
            ]
            scope.cancel()


async def test_listen_honours_only_what_the_server_declares(wires, mode: str) -> None:
    app = MCPServer("tools-only")

    @app.tool
    def one() -> str:
        return "1"

    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode) as raw:
            scope, ident = await _listen(raw, ALL)
            (ack,) = _stream(raw, ident)
            assert ack["params"]["notifications"] == {"toolsListChanged": True}
            scope.cancel()


async def test_two_streams_carry_their_own_subscription_ids(wires, mode: str) -> None:
    app = demo_app()
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(app, wires, mode=mode) as raw:
            scope_a, a = await _listen(raw, {"toolsListChanged": True})
            scope_b, b = await _listen(
                raw, {"toolsListChanged": True, "resourceSubscriptions": ["memo://note"]}
            )
            assert a != b

            @app.tool
            def more() -> str:
                return "x"

            app.resource_updated("memo://note")
            await raw.wire.wait_for(lambda w: len(_stream(raw, a)) >= 2 and len(_stream(raw, b)) >= 3)
            await wait_all_tasks_blocked()
            assert [n["method"] for n in _stream(raw, a)] == [ACK, "notifications/tools/list_changed"]
            assert [n["method"] for n in _stream(raw, b)] == [
                ACK,
                "notifications/tools/list_changed",
                "notifications/resources/updated",
            ]
            # Cancelling one leaves the other streaming.
            scope_a.cancel()
            await raw.wire.wait_for(lambda w: bool(w.notifications("client", "notifications/cancelled")))
            await wait_all_tasks_blocked()
            assert raw.server._listeners.keys() == {b}
            app.resource_updated("memo://note")
            await raw.wire.wait_for(lambda w: len(_stream(raw, b)) >= 4)
            assert len(_stream(raw, a)) == 2
            scope_b.cancel()


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"notifications": None},
        {"notifications": {"toolsListChanged": "yes"}},
        {"notifications": {"resourceSubscriptions": "memo://note"}},
        {"notifications": []},
    ],
)
async def test_listen_with_a_bad_filter_is_invalid_params(wires, mode: str, params: dict[str, Any]) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_raw_client(demo_app(), wires, mode=mode) as raw:
            await expect_error(raw, "subscriptions/listen", {"_meta": modern_meta(), **params}, -32602)
            assert raw.server._listeners == {}
            assert raw.wire.notifications("server", ACK) == []


class _HoldAfterAck:
    """A server stream that delivers the listen acknowledgement at once but
    returns from that ``send`` only when ``release`` is set, as a transport
    still flushing (or under backpressure) would."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.release = trio.Event()

    async def send(self, message: Any) -> None:
        await self.inner.send(message)
        if getattr(message, "method", None) == ACK:
            await self.release.wait()

    async def receive(self) -> Any:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_change_right_after_the_acknowledgement_is_delivered(wires, mode: str) -> None:
    app = demo_app()
    client_end, server_end, wire = wires.recording_pair(mode)
    hold = _HoldAfterAck(server_end)
    with trio.fail_after(TIMEOUT):
        async with app.running(), trio.open_nursery() as nursery:
            await app.start_session(hold, nursery)  # type: ignore[arg-type]
            dispatcher = RawDispatcher()
            peer = Peer(client_end, dispatcher, name="raw-client")
            await nursery.start(peer.run)
            listen_scope = trio.CancelScope()

            async def listen() -> None:
                with listen_scope:
                    params = {"_meta": modern_meta(), "notifications": {"toolsListChanged": True}}
                    await peer.request("subscriptions/listen", params)

            nursery.start_soon(listen)
            await dispatcher.wait_notifications(1, ACK)  # the client is told it is subscribed

            @app.tool
            def late() -> str:
                return "late"

            hold.release.set()
            await wait_all_tasks_blocked()
            methods = [m for m, _ in dispatcher.notifications]
            listen_scope.cancel()
            await wait_all_tasks_blocked()
            await peer.aclose()
            nursery.cancel_scope.cancel()
        assert methods == [ACK, "notifications/tools/list_changed"]
    wire.validate()
