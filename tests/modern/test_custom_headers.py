"""SEP-2243 custom parameter headers (2026-07-28): ``x-mcp-header`` annotations
in tool input schemas, mirrored as ``Mcp-Param-<Name>`` on Streamable HTTP.

* the annotation rules and the value encoding (``_headers``), as functions;
* the client: tools with invalid annotations are left out of what
  ``list_tools`` / ``list_all_tools`` return (stateless era only), and
  ``call_tool`` publishes the call's headers for the transport in the
  caller's task, to that call only;
* the server: a stateless ``tools/call`` whose ``Mcp-Param-*`` headers do not
  mirror its arguments under the listed schema is HTTP 400 / -32020 (raw
  httpx against a real server on 127.0.0.1:0);
* both ends over HTTP: what the client sends is what the server checks (the
  exact header values recorded by an httpx event hook).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import msgspec
import pytest
import trio

from trio_mcp.actors._client import open_session
from trio_mcp.protocol import (
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    CallToolRequestParams,
    CallToolResult,
    HeaderMismatch,
    ListToolsResult,
    PaginatedRequestParams,
    Request,
    TextContent,
    Tool,
)
from trio_mcp.server import Context, LowLevelServer, MCPServer
from trio_mcp.server._lowlevel import paginate
from trio_mcp.serving.http import HttpServer
from trio_mcp.transports.http import StreamableHttpTransport
from trio_mcp.transports.http._headers import (
    PARAM_HEADERS,
    InvalidParamHeader,
    ParamHeaders,
    decode_header_value,
    modern_headers,
    param_header_map,
    param_header_mismatch,
    param_headers,
)

from .conftest import MODERN, TIMEOUT, Answers, error_of, text_of

ACCEPT_BOTH = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

ROUTED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
        "query": {"type": "string"},
    },
    "required": ["region"],
}
NESTED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "target": {"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}},
    },
}
BROKEN: dict[str, Any] = {
    "type": "object",
    "properties": {"data": {"type": "object", "x-mcp-header": "Data"}},
}


def header_app() -> MCPServer:
    app = MCPServer("headers")

    @app.tool(input_schema=ROUTED)
    def route(
        region: str, priority: int | None = None, verbose: bool | None = None, query: str | None = None
    ) -> str:
        return f"{region}|{priority}|{verbose}|{query}"

    @app.tool(input_schema=NESTED)
    def locate(target: dict[str, Any] | None = None) -> str:
        return json.dumps(target)

    @app.tool(input_schema=BROKEN)
    def broken(data: dict[str, Any] | None = None) -> str:
        return "broken ran"

    @app.tool
    def plain(text: str) -> str:
        return text

    return app


# ------------------------------------------------------------ annotations


def test_the_annotations_of_a_schema_by_property_path() -> None:
    assert param_header_map(ROUTED) == {
        ("region",): "Region",
        ("priority",): "Priority",
        ("verbose",): "Verbose",
    }
    assert param_header_map(NESTED) == {("target", "zone"): "Zone"}
    assert param_header_map({"type": "object", "properties": {"q": {"type": "string"}}}) == {}
    # Instance data is not schema: an x-mcp-header key inside a default is no annotation.
    data = {"type": "object", "properties": {"o": {"type": "object", "default": {"x-mcp-header": 1}}}}
    assert param_header_map(data) == {}


def _prop(**prop: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"p": prop}}


@pytest.mark.parametrize(
    ("schema", "rule"),
    [
        (_prop(type="string", **{"x-mcp-header": ""}), "HTTP token"),
        (_prop(type="string", **{"x-mcp-header": "My Region"}), "HTTP token"),
        (_prop(type="string", **{"x-mcp-header": "Region:Primary"}), "HTTP token"),
        (_prop(type="string", **{"x-mcp-header": "Région"}), "HTTP token"),
        (_prop(type="string", **{"x-mcp-header": "Region\t1"}), "HTTP token"),
        (_prop(type="string", **{"x-mcp-header": 7}), "HTTP token"),
        (_prop(type="object", **{"x-mcp-header": "Data"}), "string, integer and boolean"),
        (
            _prop(type="array", items={"type": "string"}, **{"x-mcp-header": "Items"}),
            "string, integer and boolean",
        ),
        (_prop(type="null", **{"x-mcp-header": "Nil"}), "string, integer and boolean"),
        (_prop(type="number", **{"x-mcp-header": "Score"}), "string, integer and boolean"),
        (_prop(type=["string", "null"], **{"x-mcp-header": "Maybe"}), "string, integer and boolean"),
        (_prop(**{"x-mcp-header": "Untyped"}), "string, integer and boolean"),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "x-mcp-header": "Region"},
                    "b": {"type": "string", "x-mcp-header": "Region"},
                },
            },
            "also used by",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "x-mcp-header": "MyField"},
                    "b": {"type": "string", "x-mcp-header": "myfield"},
                },
            },
            "also used by",
        ),
        ({"type": "object", "x-mcp-header": "Root"}, "reachable"),
        (_prop(type="array", items={"type": "string", "x-mcp-header": "Item"}), "reachable"),
        (_prop(anyOf=[{"type": "string", "x-mcp-header": "Either"}]), "reachable"),
        (
            {
                "type": "object",
                "$defs": {"d": {"type": "string", "x-mcp-header": "Def"}},
                "properties": {"p": {"$ref": "#/$defs/d"}},
            },
            "reachable",
        ),
        (
            {"type": "object", "additionalProperties": {"type": "string", "x-mcp-header": "Extra"}},
            "reachable",
        ),
        (
            _prop(
                type="object",
                properties={"q": {"type": "string"}},
                patternProperties={"^x": {"type": "string", "x-mcp-header": "Pattern"}},
            ),
            "reachable",
        ),
    ],
    ids=[
        "empty",
        "space",
        "colon",
        "non-ascii",
        "control-char",
        "not-a-string",
        "object",
        "array",
        "null",
        "number",
        "type-list",
        "no-type",
        "duplicate",
        "duplicate-other-case",
        "root",
        "under-items",
        "under-anyOf",
        "under-defs",
        "under-additionalProperties",
        "under-patternProperties",
    ],
)
def test_invalid_annotations_are_refused_with_the_rule_they_break(schema: dict[str, Any], rule: str) -> None:
    with pytest.raises(InvalidParamHeader, match=rule):
        param_header_map(schema)


# --------------------------------------------------------------- encoding


@pytest.mark.parametrize(
    ("value", "header"),
    [
        ("us-west1", "us-west1"),
        ("us west 1", "us west 1"),
        ("", ""),
        (42, "42"),
        (-7, "-7"),
        (42.0, "42"),
        (True, "true"),
        (False, "false"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("\tindented", "=?base64?CWluZGVudGVk?="),
        ("=?base64?SGk=?=", "=?base64?PT9iYXNlNjQ/U0drPT89?="),  # looks encoded: wrapped, not taken as is
    ],
)
def test_argument_values_become_header_values(value: Any, header: str) -> None:
    assert param_headers({("v",): "Val"}, {"v": value}) == {"mcp-param-val": header}
    if isinstance(value, str):
        assert decode_header_value(header) == value


def test_absent_null_and_non_primitive_arguments_get_no_header() -> None:
    header_map = {("a",): "A", ("b",): "B", ("c",): "C", ("d", "e"): "E"}
    assert param_headers(header_map, {"b": None, "c": {"x": 1}, "d": "not an object"}) == {}
    assert param_headers(header_map, {"d": {"e": "deep"}}) == {"mcp-param-e": "deep"}


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("=?base64?SGVsbG8=?=", "Hello"),
        ("=?base64?SGVsbG8?=", None),  # padding missing
        ("=?base64?SGVs!!!bG8=?=", None),  # not the alphabet
        ("=?base64?SGVsbG9=?=", None),  # stray bits: not what an encoder sends
        ("=?base64?/w==?=", None),  # not UTF-8
        ("SGVsbG8=", "SGVsbG8="),  # no wrapper: literal
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),  # no closing ?=: literal
    ],
)
def test_header_values_decode_strictly(header: str, value: str | None) -> None:
    assert decode_header_value(header) == value


@pytest.mark.parametrize(
    ("arguments", "headers", "problem"),
    [
        ({"region": "us"}, {"mcp-param-region": "us"}, None),
        ({"region": "us"}, {"mcp-param-region": " us\t"}, None),  # optional whitespace around a value
        ({"region": "us"}, {}, "is missing"),
        ({"region": "us"}, {"mcp-param-region": "eu"}, "does not match"),
        ({"region": "Hello"}, {"mcp-param-region": "=?base64?SGVsbG8=?="}, None),
        ({"region": "Hello"}, {"mcp-param-region": "=?base64?SGVsbG8?="}, "malformed"),
        ({"region": "x", "priority": 42}, {"mcp-param-region": "x", "mcp-param-priority": "42"}, None),
        ({"region": "x", "priority": 42}, {"mcp-param-region": "x", "mcp-param-priority": "42.0"}, None),
        (
            {"region": "x", "priority": 42},
            {"mcp-param-region": "x", "mcp-param-priority": "41"},
            "does not match",
        ),
        (
            {"region": "x", "priority": 42},
            {"mcp-param-region": "x", "mcp-param-priority": "4.2e1"},
            "does not match",
        ),
        ({"region": "x", "verbose": False}, {"mcp-param-region": "x", "mcp-param-verbose": "false"}, None),
        (
            {"region": "x", "verbose": False},
            {"mcp-param-region": "x", "mcp-param-verbose": "False"},
            "does not match",
        ),
        ({"region": "x", "verbose": None}, {"mcp-param-region": "x"}, None),
        (
            {"region": "x"},
            {"mcp-param-region": "x", "mcp-param-priority": "1"},
            "argument 'priority' is absent",
        ),
        ({"region": "x", "query": "q"}, {"mcp-param-region": "x", "mcp-param-query": "other"}, None),
    ],
)
def test_the_server_rule_header_and_argument_go_together(
    arguments: dict[str, Any], headers: dict[str, str], problem: str | None
) -> None:
    found = param_header_mismatch(ROUTED, arguments, headers)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_a_duplicated_header_never_matches_and_an_invalid_schema_is_not_enforced() -> None:
    headers = {"mcp-param-region": "us"}
    duplicated = frozenset({"mcp-param-region"})
    assert "more than once" in (
        param_header_mismatch(ROUTED, {"region": "us"}, headers, duplicated=duplicated) or ""
    )
    assert param_header_mismatch(BROKEN, {"data": {"a": 1}}, {}) is None


# ------------------------------------------------- the client, in memory


class Capturing:
    """A client stream recording, for each tools/call it sends, the headers
    an HTTP transport would put on its POST (read in ``send``, like HTTP)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[str, dict[str, str]]] = []

    async def send(self, message: Any) -> None:
        if type(message) is Request and message.method == "tools/call":
            name = msgspec.to_builtins(message.params)["name"]
            self.calls.append(
                (name, {k: v for k, v in modern_headers(message).items() if k.startswith("mcp-param-")})
            )
        await self.inner.send(message)

    async def receive(self) -> Any:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def capturing_client(
    app: Any, wires: Any, mode: str, **options: Any
) -> AsyncIterator[tuple[Any, Capturing]]:
    client_end, server_end, wire = wires.recording_pair(mode)
    stream = Capturing(client_end)
    async with app.running(), trio.open_nursery() as nursery:
        await app.start_session(server_end, nursery)
        async with open_session(stream, **options) as client:
            yield client, stream
        nursery.cancel_scope.cancel()
    wire.validate()


async def test_the_modern_client_leaves_out_tools_with_invalid_annotations(
    wires: Any, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(TIMEOUT), caplog.at_level(logging.WARNING, logger="trio_mcp.client"):
        async with capturing_client(header_app(), wires, mode, era="modern") as (client, _):
            page = await client.list_tools()
            assert [t.name for t in page.tools] == ["route", "locate", "plain"]
            assert [t.name for t in await client.list_all_tools()] == ["route", "locate", "plain"]
    assert any(
        "'broken'" in r.getMessage() and "string, integer and boolean" in r.getMessage()
        for r in caplog.records
    )


async def test_the_handshake_era_lists_every_tool_and_publishes_nothing(wires: Any, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with capturing_client(header_app(), wires, mode, era="handshake") as (client, stream):
            assert [t.name for t in await client.list_all_tools()] == ["route", "locate", "broken", "plain"]
            assert text_of(await client.call_tool("route", {"region": "us"})) == "us|None|None|None"
            assert stream.calls == [("route", {})]


async def test_call_tool_publishes_the_headers_of_that_call(wires: Any, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with capturing_client(header_app(), wires, mode, era="modern") as (client, stream):
            await client.call_tool("route", {"region": "us"})  # not listed yet: nothing known
            await client.list_all_tools()
            result = await client.call_tool(
                "route", {"region": " us ", "priority": 3, "verbose": None, "query": "q"}
            )
            assert text_of(result) == " us |3|None|q"
            await client.call_tool("locate", {"target": {"zone": "z1"}})
            await client.call_tool("plain", {"text": "t"})
            assert stream.calls == [
                ("route", {}),
                ("route", {"mcp-param-region": "=?base64?IHVzIA==?=", "mcp-param-priority": "3"}),
                ("locate", {"mcp-param-zone": "z1"}),
                ("plain", {}),
            ]
            assert PARAM_HEADERS.get() is None  # nothing left behind in the caller's context


async def test_a_call_made_during_another_calls_input_round_gets_only_its_own_headers(
    wires: Any, mode: str
) -> None:
    """tool ``ask`` (annotated) asks the LLM; the sampling handler calls ``route``
    and ``plain`` on the same session in the same task before answering."""
    app = header_app()
    asked = {"type": "object", "properties": {"topic": {"type": "string", "x-mcp-header": "Topic"}}}

    @app.tool(input_schema=asked)
    async def ask(ctx: Context, topic: str) -> str:
        answer = await ctx.sample(f"about {topic}", max_tokens=5)
        return f"{topic}: {answer.content.text}"

    answers = Answers(text="fine")
    holder: dict[str, Any] = {}

    async def sample(params: Any) -> Any:
        await holder["client"].call_tool("plain", {"text": "inner"})
        await holder["client"].call_tool("route", {"region": "inner"})
        return await answers.sample(params)

    with trio.fail_after(TIMEOUT):
        async with capturing_client(app, wires, mode, era="modern", sampling_handler=sample) as (
            client,
            stream,
        ):
            holder["client"] = client
            await client.list_all_tools()
            assert text_of(await client.call_tool("ask", {"topic": "tea"})) == "tea: fine"
            assert stream.calls == [
                ("ask", {"mcp-param-topic": "tea"}),  # first round
                ("plain", {}),
                ("route", {"mcp-param-region": "inner"}),
                ("ask", {"mcp-param-topic": "tea"}),  # the retry with the answer
            ]


def test_published_headers_apply_to_the_same_call_only() -> None:
    arguments = {"region": "us"}
    token = PARAM_HEADERS.set(ParamHeaders("route", arguments, {"mcp-param-region": "us"}))
    try:

        def call(name: str, args: Any) -> dict[str, str]:
            meta = {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}}
            params = CallToolRequestParams(name=name, arguments=args, meta=meta)
            return {
                k: v
                for k, v in modern_headers(Request(id=1, method="tools/call", params=params)).items()
                if k.startswith("mcp-param-")
            }

        assert call("route", arguments) == {"mcp-param-region": "us"}
        assert call("route", {"region": "us"}) == {"mcp-param-region": "us"}  # equal arguments
        assert call("route", {"region": "eu"}) == {}
        assert call("other", arguments) == {}
    finally:
        PARAM_HEADERS.reset(token)


# ------------------------------------------------------ the server, raw HTTP


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    server = HttpServer(app)
    async with trio.open_nursery() as nursery:
        info = await nursery.start(server.run)
        try:
            yield info.url
        finally:
            server.stop()


async def post_call(
    http: httpx.AsyncClient,
    url: str,
    arguments: dict[str, Any],
    extra: dict[str, str] | list[tuple[str, str]],
    name: str = "route",
) -> httpx.Response:
    meta = {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}}
    body = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta},
    }
    base = {**ACCEPT_BOTH, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name}
    headers = list(base.items()) + (list(extra.items()) if isinstance(extra, dict) else extra)
    return await http.post(url, content=json.dumps(body), headers=headers)


def assert_rejected(response: httpx.Response, problem: str) -> None:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["id"] == 5 and body["error"]["code"] == -32020, body
    assert problem in body["error"]["message"]


def assert_answered(response: httpx.Response, text: str) -> None:
    assert response.status_code == 200, response.text
    assert response.json()["result"]["content"][0]["text"] == text


@pytest.mark.parametrize(
    ("arguments", "extra", "answer", "problem"),
    [
        ({"region": "us-west1"}, {"Mcp-Param-Region": "us-west1"}, "us-west1|None|None|None", None),
        ({"region": "us-west1"}, {"MCP-PARAM-REGION": "us-west1"}, "us-west1|None|None|None", None),
        ({"region": "us-west1"}, {}, None, "Mcp-Param-Region header is missing"),
        ({"region": "us-west1"}, {"Mcp-Param-Region": "eu-west1"}, None, "does not match argument 'region'"),
        ({"region": "Hello"}, {"Mcp-Param-Region": "=?base64?SGVsbG8=?="}, "Hello|None|None|None", None),
        ({"region": "Hello"}, {"Mcp-Param-Region": "=?base64?SGVsbG8?="}, None, "malformed"),
        ({"region": "Hello"}, {"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?="}, None, "malformed"),
        ({"region": "SGVsbG8="}, {"Mcp-Param-Region": "SGVsbG8="}, "SGVsbG8=|None|None|None", None),
        (
            {"region": "a", "priority": 42},
            {"Mcp-Param-Region": "a", "Mcp-Param-Priority": "42.0"},
            "a|42|None|None",
            None,
        ),
        (
            {"region": "a", "verbose": True},
            {"Mcp-Param-Region": "a", "Mcp-Param-Verbose": "TRUE"},
            None,
            "does not match argument 'verbose'",
        ),
        ({"region": "a"}, {"Mcp-Param-Region": "a", "Mcp-Param-Priority": "1"}, None, "is absent"),
    ],
    ids=[
        "plain",
        "name-case",
        "missing",
        "mismatch",
        "base64",
        "bad-padding",
        "bad-chars",
        "literal",
        "integer-as-number",
        "boolean-case",
        "header-without-argument",
    ],
)
async def test_a_stateless_call_is_checked_against_the_tools_annotations(
    arguments: dict[str, Any], extra: dict[str, str], answer: str | None, problem: str | None
) -> None:
    with trio.fail_after(TIMEOUT):
        async with serving(header_app()) as url, httpx.AsyncClient(timeout=TIMEOUT) as http:
            response = await post_call(http, url, arguments, extra)
            if problem is None:
                assert answer is not None
                assert_answered(response, answer)
            else:
                assert_rejected(response, problem)


async def test_a_repeated_header_is_rejected_even_when_each_copy_matches() -> None:
    with trio.fail_after(TIMEOUT):
        async with serving(header_app()) as url, httpx.AsyncClient(timeout=TIMEOUT) as http:
            twice = [("Mcp-Param-Region", "us"), ("Mcp-Param-Region", "us")]
            assert_rejected(await post_call(http, url, {"region": "us"}, twice), "more than once")


async def test_what_cannot_be_checked_is_left_to_the_session() -> None:
    """An invalid annotation is not enforced; an unknown tool is the handler's
    error (-32602); a handshake-era session's calls carry no such headers."""
    with trio.fail_after(TIMEOUT):
        async with serving(header_app()) as url, httpx.AsyncClient(timeout=TIMEOUT) as http:
            assert_answered(await post_call(http, url, {"data": {"k": 1}}, {}, name="broken"), "broken ran")
            unknown = await post_call(http, url, {"region": "us"}, {}, name="nowhere")
            assert unknown.json()["error"]["code"] == -32602
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
            response = await http.post(url, content=json.dumps(init), headers=ACCEPT_BOTH)
            session = {
                **ACCEPT_BOTH,
                "mcp-session-id": response.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            }
            await http.post(
                url,
                content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                headers=session,
            )
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "route", "arguments": {"region": "us"}},
            }
            assert_answered(
                await http.post(url, content=json.dumps(call), headers=session), "us|None|None|None"
            )


async def test_a_changed_tool_is_checked_against_its_new_schema() -> None:
    app = header_app()
    with trio.fail_after(TIMEOUT):
        async with serving(app) as url, httpx.AsyncClient(timeout=TIMEOUT) as http:
            assert_answered(
                await post_call(http, url, {"region": "us"}, {"Mcp-Param-Region": "us"}), "us|None|None|None"
            )
            zoned = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Zone"}}}
            app.add_tool(lambda region: f"zone {region}", name="route", input_schema=zoned)
            assert_rejected(
                await post_call(http, url, {"region": "us"}, {"Mcp-Param-Region": "us"}),
                "Mcp-Param-Zone header is missing",
            )
            assert_answered(await post_call(http, url, {"region": "us"}, {"Mcp-Param-Zone": "us"}), "zone us")


async def test_a_low_level_server_is_checked_against_what_its_tools_list_handler_lists() -> None:
    """No ``app.tools`` here: the schema comes from the app's own paginated
    ``tools/list`` handler (the annotated tool is on the second page)."""
    app = LowLevelServer("low", page_size=1)
    tools = [
        Tool(name="first", input_schema={"type": "object"}),
        Tool(
            name="second",
            input_schema={"type": "object", "properties": {"key": {"type": "string", "x-mcp-header": "Key"}}},
        ),
    ]
    listings: list[Any] = []

    async def list_tools(ctx: Context, params: PaginatedRequestParams) -> ListToolsResult:
        listings.append(params.cursor)
        page, cursor = paginate(tools, params.cursor, app.page_size)
        return ListToolsResult(tools=page, next_cursor=cursor)

    async def call_tool(ctx: Context, params: CallToolRequestParams) -> CallToolResult:
        return CallToolResult(content=[TextContent(text=f"called {params.name}")])

    app.set_request_handler("tools/list", PaginatedRequestParams, list_tools)
    app.set_request_handler("tools/call", CallToolRequestParams, call_tool)
    with trio.fail_after(TIMEOUT):
        async with serving(app) as url, httpx.AsyncClient(timeout=TIMEOUT) as http:
            assert_rejected(
                await post_call(http, url, {"key": "k"}, {}, name="second"), "Mcp-Param-Key header is missing"
            )
            assert len(listings) == 2
            assert_answered(
                await post_call(http, url, {"key": "k"}, {"Mcp-Param-Key": "k"}, name="second"),
                "called second",
            )


# -------------------------------------------------- both ends, over HTTP


@asynccontextmanager
async def http_client(url: str, seen: list[dict[str, str]], **options: Any) -> AsyncIterator[Any]:
    async def record(request: httpx.Request) -> None:
        if request.method == "POST" and request.headers.get("mcp-method") == "tools/call":
            seen.append({k: v for k, v in request.headers.items() if k.startswith("mcp-param-")})

    transport_options = options.pop("transport", {})
    async with httpx.AsyncClient(event_hooks={"request": [record]}) as http:
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(
                StreamableHttpTransport(url, http_client=http, **transport_options).run
            )
            async with open_session(stream, era="modern", **options) as client:
                yield client
            nursery.cancel_scope.cancel()


async def test_over_http_the_client_sends_what_the_server_checks() -> None:
    seen: list[dict[str, str]] = []
    with trio.fail_after(TIMEOUT):
        async with serving(header_app()) as url, http_client(url, seen) as client:
            assert [t.name for t in await client.list_all_tools()] == ["route", "locate", "plain"]
            arguments = {"region": "Hello, 世界", "priority": 7, "verbose": False, "query": "SELECT 1"}
            assert text_of(await client.call_tool("route", arguments)) == "Hello, 世界|7|False|SELECT 1"
            assert (
                text_of(await client.call_tool("route", {"region": "", "verbose": None})) == "|None|None|None"
            )
            assert text_of(await client.call_tool("locate", {"target": {"zone": " z "}})) == '{"zone": " z "}'
            assert seen == [
                {
                    "mcp-param-region": "=?base64?SGVsbG8sIOS4lueVjA==?=",
                    "mcp-param-priority": "7",
                    "mcp-param-verbose": "false",
                },
                {"mcp-param-region": ""},
                {"mcp-param-zone": "=?base64?IHog?="},
            ]


async def test_over_http_a_call_without_the_headers_is_refused() -> None:
    """The negative control of the test above: a session that never listed the
    tool knows no annotations, sends no Mcp-Param-* header and gets -32020."""
    seen: list[dict[str, str]] = []
    with trio.fail_after(TIMEOUT):
        async with serving(header_app()) as url, http_client(url, seen) as client:
            with pytest.raises(BaseException) as excinfo:
                await client.call_tool("route", {"region": "us"})
            error = error_of(excinfo)
            assert isinstance(error, HeaderMismatch) and "Mcp-Param-Region" in error.message
            assert seen == [{}]


async def test_configured_param_headers_never_stand_in_for_arguments() -> None:
    seen: list[dict[str, str]] = []
    with trio.fail_after(TIMEOUT):
        async with (
            serving(header_app()) as url,
            http_client(url, seen, transport={"headers": {"Mcp-Param-Region": "forged"}}) as client,
        ):
            await client.list_all_tools()
            assert text_of(await client.call_tool("route", {"region": "us"})) == "us|None|None|None"
            assert text_of(await client.call_tool("plain", {"text": "t"})) == "t"
            assert seen == [{"mcp-param-region": "us"}, {}]
