"""The checks of a stateless (2026-07-28) request on the Streamable HTTP
server, over real HTTP (hypercorn on 127.0.0.1:0): the params decoded once
for the checks, the session and the handler; the ladder's fast rung, which
takes only headers that mirror the body literally and leaves every other
case to the whole ladder; the client's capabilities and info, remembered
per distinct JSON, never carried over to a request that sent others."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from trio_mcp.protocol import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    RESULT_INPUT_REQUIRED,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)
from trio_mcp.server import Context, LowLevelServer, MCPServer
from trio_mcp.transports.http._headers import encode_header_value

from .test_server import ACCEPT_BOTH, http, serving

MODERN = "2026-07-28"
WRAPPED_NAME = "=?base64?aGk=?="  # a name that reads as a base64-wrapped header value ("hi")


def body_of(method: str, params: dict[str, Any], ident: int = 1, **meta: Any) -> str:
    meta = {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}, **meta}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": {**params, "_meta": meta}})


def mirrored(method: str, name: str | None = None) -> dict[str, str]:
    headers = {**ACCEPT_BOTH, "mcp-protocol-version": MODERN, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = encode_header_value(name)
    return headers


def checked_app() -> MCPServer:
    app = MCPServer("checks")

    @app.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    @app.tool(name=WRAPPED_NAME)
    def wrapped() -> str:
        """A tool whose name looks base64-wrapped."""
        return "wrapped"

    @app.tool(name="héllo")
    def accented() -> str:
        """A name that needs a base64-wrapped header."""
        return "accented"

    @app.tool
    def who(ctx: Context) -> str:
        """The client's info and whether it declared elicitation, as it sent them."""
        info = ctx.client_info
        caps = ctx.client_capabilities
        declared = caps.elicitation is not msgspec.UNSET
        return f"{info.name if info is not None else '-'}:{'elicits' if declared else 'plain'}"

    @app.tool
    async def ask(ctx: Context) -> str:
        """Asks the user (needs the elicitation capability)."""
        answer = await ctx.elicit("ok?", {"type": "object", "properties": {}})
        return answer.action

    return app


async def _post(client: Any, url: str, body: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    response = await client.post(url, content=body, headers=headers)
    return response.status_code, response.json()


def _text(answer: dict[str, Any]) -> str:
    text: str = answer["result"]["content"][0]["text"]
    return text


async def test_literal_headers_pass_and_wrapped_ones_go_down_the_whole_ladder() -> None:
    async with serving(checked_app()) as (_, url), http() as client:
        status, answer = await _post(
            client,
            url,
            body_of("tools/call", {"name": "echo", "arguments": {"text": "a"}}),
            mirrored("tools/call", "echo"),
        )
        assert (status, _text(answer)) == (200, "a")
        # A name that needs base64 in its header: decoded by the ladder, accepted.
        status, answer = await _post(
            client, url, body_of("tools/call", {"name": "héllo"}), mirrored("tools/call", "héllo")
        )
        assert (status, _text(answer)) == (200, "accented")
        # A name that looks wrapped: its header must be wrapped once more; sent
        # literally it reads as "hi", which does not mirror the body.
        status, answer = await _post(
            client, url, body_of("tools/call", {"name": WRAPPED_NAME}), mirrored("tools/call", WRAPPED_NAME)
        )
        assert (status, _text(answer)) == (200, "wrapped")
        literal = {**mirrored("tools/call"), "mcp-name": WRAPPED_NAME}
        status, answer = await _post(client, url, body_of("tools/call", {"name": WRAPPED_NAME}), literal)
        assert status == 400 and answer["error"]["code"] == -32020
        # A method header base64-wrapped: decoded by the ladder, accepted.
        wrapped_method = {**mirrored("tools/call", "echo"), "mcp-method": "=?base64?dG9vbHMvY2FsbA==?="}
        status, answer = await _post(
            client, url, body_of("tools/call", {"name": "echo", "arguments": {"text": "b"}}), wrapped_method
        )
        assert (status, _text(answer)) == (200, "b")


@pytest.mark.parametrize(
    ("headers", "code", "status"),
    [
        ({"mcp-protocol-version": MODERN, "mcp-method": "tools/list"}, -32020, 400),  # method mismatch
        ({"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "other"}, -32020, 400),
        ({"mcp-protocol-version": MODERN, "mcp-method": "tools/call"}, -32020, 400),  # no Mcp-Name
    ],
)
async def test_headers_that_do_not_mirror_the_body_are_refused(
    headers: dict[str, str], code: int, status: int
) -> None:
    async with serving(checked_app()) as (_, url), http() as client:
        body = body_of("tools/call", {"name": "echo", "arguments": {"text": "a"}})
        got, answer = await _post(client, url, body, {**ACCEPT_BOTH, **headers})
        assert (got, answer["error"]["code"]) == (status, code)


async def test_params_that_do_not_fit_the_handler_get_the_answers_they_always_got() -> None:
    async with serving(checked_app()) as (_, url), http() as client:
        # name is not a string: the Mcp-Name header cannot mirror it (-32020).
        status, answer = await _post(
            client, url, body_of("tools/call", {"name": 5}), mirrored("tools/call", "5")
        )
        assert status == 400 and answer["error"]["code"] == -32020
        # No name at all: the session answers invalid params.
        status, answer = await _post(
            client, url, body_of("tools/call", {"arguments": {}}), mirrored("tools/call")
        )
        assert status == 400 and answer["error"]["code"] == -32602
        # _meta missing its capabilities: the envelope rung (-32602).
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "echo", "_meta": {META_PROTOCOL_VERSION: MODERN}},
            }
        )
        status, answer = await _post(client, url, body, mirrored("tools/call", "echo"))
        assert status == 400 and answer["error"]["code"] == -32602
        # _meta not an object.
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "echo", "_meta": 7}}
        )
        status, answer = await _post(client, url, body, mirrored("tools/call", "echo"))
        assert status == 400 and answer["error"]["code"] == -32602
        # A method this era removed (-32601, 404), its headers mirrored.
        status, answer = await _post(
            client, url, body_of("logging/setLevel", {"level": "info"}), mirrored("logging/setLevel")
        )
        assert status == 404 and answer["error"]["code"] == -32601


async def test_capabilities_and_client_info_are_each_request_s_own() -> None:
    async with serving(checked_app()) as (_, url), http() as client:
        elicits: dict[str, Any] = {"elicitation": {"form": {}}}
        rounds = [
            ({"name": "a", "version": "1"}, elicits, "a:elicits"),
            ({"name": "b", "version": "1"}, {}, "b:plain"),
            ({"name": "b", "version": "1"}, {}, "b:plain"),
            ({"name": "a", "version": "1"}, elicits, "a:elicits"),
            ({"name": "a", "version": "1"}, {}, "a:plain"),
        ]
        for ident, (info, caps, expected) in enumerate(rounds):
            meta = {META_CLIENT_CAPABILITIES: caps, META_CLIENT_INFO: info}
            body = body_of("tools/call", {"name": "who"}, ident, **meta)
            status, answer = await _post(client, url, body, mirrored("tools/call", "who"))
            assert (status, _text(answer)) == (200, expected)
        # A handler that asks: input required with the capability, -32021 without it.
        for ident, (caps, asked) in enumerate([(elicits, True), ({}, False), (elicits, True)], start=10):
            body = body_of("tools/call", {"name": "ask"}, ident, **{META_CLIENT_CAPABILITIES: caps})
            status, answer = await _post(client, url, body, mirrored("tools/call", "ask"))
            if asked:
                assert status == 200 and answer["result"]["resultType"] == RESULT_INPUT_REQUIRED
            else:
                assert status == 400 and answer["error"]["code"] == -32021


async def test_a_low_level_handler_gets_its_params_decoded_and_its_meta() -> None:
    app = LowLevelServer("low")
    seen: list[Any] = []
    listed: list[Any] = []
    schema = {"type": "object", "properties": {"k": {"type": "array"}}}

    async def list_tools(ctx: Context, params: PaginatedRequestParams) -> ListToolsResult:
        listed.append(ctx.request.meta.get(META_PROTOCOL_VERSION))
        return ListToolsResult(tools=[Tool(name="x", input_schema=schema)])

    async def call_tool(ctx: Context, params: CallToolRequestParams) -> CallToolResult:
        seen.append((params.name, params.arguments, ctx.request.meta.get(META_PROTOCOL_VERSION)))
        return CallToolResult(content=[TextContent(text="done")])

    app.set_request_handler("tools/list", PaginatedRequestParams, list_tools)
    app.set_request_handler("tools/call", CallToolRequestParams, call_tool)
    async with serving(app) as (_, url), http() as client:
        body = body_of("tools/call", {"name": "x", "arguments": {"k": [1, 2]}})
        status, answer = await _post(client, url, body, mirrored("tools/call", "x"))
        assert (status, _text(answer)) == (200, "done")
    assert seen == [("x", {"k": [1, 2]}, MODERN)]
    # The Mcp-Param-* check listed the tools with the call's own _meta.
    assert listed == [MODERN]
