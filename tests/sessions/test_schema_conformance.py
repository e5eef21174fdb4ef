"""Schema conformance: one session per handshake version and memory mode that
drives every method the runtime implements, so that the recording wire
validates each kind of message against that version's official schema; a
coverage check that nothing the schema defines was left out unnoticed; and
self-tests of the wire validator itself."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from trio_mcp.protocol import (
    V2025_06_18,
    V2025_11_25,
    Annotations,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    InvalidParams,
    MethodNotFound,
    PromptReference,
    ResourceLink,
    ResourceNotFound,
    ResourceTemplateReference,
    Root,
    TextContent,
    ToolAnnotations,
)
from trio_mcp.server import Audio, Context, Image, MCPServer

from .conftest import TIMEOUT, Inbox, Wire

try:
    from schema_check import schema_methods
except ImportError:  # pragma: no cover
    from tests.schema_check import schema_methods

PNG = b"\x89PNG\r\n\x1a\n" + b"\x03" * 8
WAV = b"RIFF\x00\x00\x00\x00WAVEfmt "

#: Methods of the schemas this kitchen sink leaves out, listed explicitly: the
#: coverage check fails when one of them starts being used (update the list)
#: or when anything else is missing. The tasks methods (2025-11-25) are driven
#: and validated by ``test_tasks_wire.py``; elicitation/complete is not implemented.
NOT_IMPLEMENTED = {
    ("request", "tasks/get"),
    ("request", "tasks/list"),
    ("request", "tasks/result"),
    ("request", "tasks/cancel"),
    ("notification", "notifications/tasks/status"),
    ("notification", "notifications/elicitation/complete"),
}
#: (sender, kind, method) the runtime never sends: a client has no API to
#: report progress on the server's requests it serves.
NEVER_SENT = {("client", "notification", "notifications/progress")}


class Point(msgspec.Struct):
    x: int
    y: int


def kitchen_sink(state: dict[str, Any]) -> MCPServer:
    app = MCPServer("sink", "2.0", title="Kitchen sink", instructions="Everything.", page_size=2)

    @app.tool(title="Add", annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @app.tool
    def point() -> Point:
        return Point(x=1, y=2)

    @app.tool
    def media():  # unannotated: content, no outputSchema
        return [
            "text",
            Image(PNG),
            Audio(WAV),
            ResourceLink(uri="memo://a", name="a"),
            TextContent(text="annotated", annotations=Annotations(priority=0.5)),
        ]

    @app.tool
    def fail() -> str:
        raise RuntimeError("nope")

    @app.tool
    async def everything(ctx: Context) -> str:
        await ctx.report_progress(0.5, 1.0, "half")
        await ctx.info("info log", logger="sink")
        await ctx.debug("filtered out")
        sampled = await ctx.sample("Say hi", max_tokens=5)
        roots = await ctx.list_roots()
        out = [sampled.content.text, *[r.uri for r in roots]]
        if (ctx.protocol_version or "") >= V2025_06_18:
            out.append(
                (
                    await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
                ).action
            )
        if (ctx.protocol_version or "") >= V2025_11_25:
            out.append((await ctx.elicit_url("Sign in", "https://example.com/login", "e-1")).action)
        await ctx.report_progress(1.0, 1.0)
        return " ".join(out)

    @app.tool
    async def hang(ctx: Context) -> str:
        state["hang"].set()
        await ctx.sample("never answered")
        return "unreachable"  # pragma: no cover

    @app.resource("memo://a", mime_type="text/plain")
    def a() -> str:
        return "A"

    @app.resource("memo://b")
    def b() -> bytes:
        return b"\x00B"

    @app.resource("memo://c")
    def c() -> dict:
        return {"c": 3}

    @app.resource("item://{id}", complete={"id": lambda value, ctx: ["1", "2", "10"]})
    def item(id: int) -> str:
        return f"item {id}"

    @app.prompt(complete={"tone": lambda value, ctx: [t for t in ["calm", "curt"] if t.startswith(value)]})
    def greet(name: str, tone: str = "calm") -> list:
        return [
            {"role": "user", "content": f"Greet {name}, {tone}."},
            {"role": "assistant", "content": Image(PNG)},
        ]

    @app.prompt
    def plain() -> str:
        return "plain"

    @app.prompt
    def third() -> str:
        return "third"

    return app


async def drive_everything(
    conn: Any, app: MCPServer, state: dict[str, Any], updates: Inbox, changed: Inbox
) -> None:
    client = conn.client
    await client.ping()
    await conn.server.peer.ping()
    await client.set_logging_level("info")

    # tools
    assert len(await client.list_all_tools()) == 6
    assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}
    assert (await client.call_tool("add", {"a": "x"})).is_error is True
    assert (await client.call_tool("point")).structured_content == {"x": 1, "y": 2}
    assert (await client.call_tool("media")).content
    assert (await client.call_tool("fail")).is_error is True
    with pytest.raises(InvalidParams):
        await client.call_tool("missing")
    progress = Inbox()
    result = await client.call_tool("everything", on_progress=progress)
    assert result.is_error is not True, result
    assert len(progress) == 2

    # cancellation both ways: the client cancels tools/call, the server then
    # cancels its sampling request
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.call_tool, "hang")
            await state["sampling"].wait()
            scope.cancel()

    # resources
    assert len(await client.list_all_resources()) == 3
    assert len(await client.list_all_resource_templates()) == 1
    for uri in ("memo://a", "memo://b", "memo://c", "item://7"):
        assert (await client.read_resource(uri)).contents
    with pytest.raises(ResourceNotFound):
        await client.read_resource("memo://zzz")
    await client.subscribe_resource("memo://a")
    app.resource_updated("memo://a")
    await updates.wait_for(1)
    await client.unsubscribe_resource("memo://a")

    # prompts and completion
    assert len(await client.list_all_prompts()) == 3
    assert len((await client.get_prompt("greet", {"name": "Ada"})).messages) == 2
    with pytest.raises(InvalidParams):
        await client.get_prompt("greet", {})
    assert (await client.complete(PromptReference(name="greet"), "tone", "c")).completion.values == [
        "calm",
        "curt",
    ]
    assert (await client.complete(ResourceTemplateReference(uri="item://{id}"), "id", "")).completion.values

    # list_changed, all three, and the client's roots
    app.tool(name="late_tool")(lambda: "late")
    app.prompt(name="late_prompt")(lambda: "late")
    app.resource("memo://late")(lambda: "late")
    await changed.wait_for(3)
    await client.set_roots([Root(uri="file:///new")])

    # a method of no capability
    with pytest.raises(MethodNotFound), conn.wire.unchecked("client"):
        await client.peer.request("nothing/here", {})
    await wait_all_tasks_blocked()


async def test_every_message_of_a_full_session_validates(connect, version: str, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        state = {"hang": trio.Event(), "sampling": trio.Event()}
        app = kitchen_sink(state)
        updates, changed = Inbox(), Inbox()

        async def sampler(params: CreateMessageRequestParams) -> CreateMessageResult:
            if params.messages[0].content.text == "never answered":
                state["sampling"].set()
                await trio.sleep_forever()
            return CreateMessageResult(role="assistant", content=TextContent(text="hi"), model="m")

        async def eliciter(params: ElicitRequestParams) -> ElicitResult:
            if params.mode == "url":
                return ElicitResult(action="accept")
            return ElicitResult(action="accept", content={"name": "Ada"})

        async with connect(
            app,
            sampling_handler=sampler,
            elicitation_handler=eliciter,
            roots=[Root(uri="file:///work", name="work")],
            on_resource_updated=updates,
            on_tools_changed=changed.signal("tools"),
            on_prompts_changed=changed.signal("prompts"),
            on_resources_changed=changed.signal("resources"),
        ) as conn:
            await drive_everything(conn, app, state, updates, changed)
            wire = conn.wire
        # ``connect`` validated every message on exit; now check coverage.
        seen = {
            (s.side, "request" if s.is_request else "notification", s.method)
            for s in wire.sent
            if s.method is not None and s.checked
        }
        expected = {
            (sender, kind, method)
            for (kind, method), senders in schema_methods(version).items()
            for sender in senders
            if (kind, method) not in NOT_IMPLEMENTED and (sender, kind, method) not in NEVER_SENT
        }
        if mode == "inline":
            # Requests served in the caller's task are cancelled with it: no notice.
            expected -= {
                ("client", "notification", "notifications/cancelled"),
                ("server", "notification", "notifications/cancelled"),
            }
        assert expected - seen == set(), f"never exercised: {sorted(expected - seen)}"
        assert seen - expected == set(), f"sent but not in the {version} schema: {sorted(seen - expected)}"
        # Results of every request kind were validated too.
        assert len([m for m in wire.responses("server") if "result" in m]) >= 20
        assert len(wire.sent) > 60


async def test_initialize_messages_per_version(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        app = MCPServer(
            "init",
            "1.0",
            title="Init",
            description="An app",
            website_url="https://example.com",
            instructions="Read the docs.",
        )
        async with connect(app, roots=[]) as conn:
            (request,) = conn.wire.requests("client", "initialize")
            assert request["params"]["protocolVersion"] == version
            assert request["params"]["clientInfo"]["name"] == "trio-mcp"
            result = conn.wire.response_to("server", request)["result"]
            assert result["protocolVersion"] == version
            assert result["serverInfo"]["name"] == "init"
            assert result["instructions"] == "Read the docs."
            # The 2026-only result fields never reach a handshake-era client.
            assert not {"resultType", "ttlMs", "cacheScope"} & set(result)


async def test_results_never_carry_2026_fields(connect) -> None:
    with trio.fail_after(TIMEOUT):
        state = {"hang": trio.Event(), "sampling": trio.Event()}
        async with connect(kitchen_sink(state)) as conn:
            await conn.client.list_all_tools()
            await conn.client.list_all_resources()
            await conn.client.list_all_prompts()
            await conn.client.read_resource("memo://a")
            await conn.client.call_tool("add", {"a": 1, "b": 1})
            await conn.client.get_prompt("plain")
            for answer in conn.wire.responses("server"):
                assert not {"resultType", "ttlMs", "cacheScope"} & set(answer.get("result", {})), answer


# ---------------------------------------------------------- the validator


def _wire_with_handshake(
    version: str = "2025-11-25",
    server_caps: dict[str, Any] | None = None,
    client_caps: dict[str, Any] | None = None,
) -> Wire:
    wire = Wire(fallback_version=version)
    wire.record(
        "client",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": client_caps or {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        },
    )
    wire.record(
        "server",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "protocolVersion": version,
                "capabilities": server_caps or {},
                "serverInfo": {"name": "s", "version": "1"},
            },
        },
    )
    wire.record("client", {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return wire


def test_validator_accepts_a_valid_exchange() -> None:
    wire = _wire_with_handshake(server_caps={"tools": {"listChanged": True}})
    wire.record("client", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    wire.record("server", {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}})
    wire.record("server", {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    wire.record("server", {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    wire.validate()
    assert wire.version == "2025-11-25"


@pytest.mark.parametrize(
    ("side", "message", "complaint"),
    [
        ("client", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}}, "CallToolRequest"),
        ("server", {"jsonrpc": "2.0", "id": 2, "result": {"nope": 1}}, "ListToolsResult"),
        ("server", {"jsonrpc": "2.0", "id": 77, "result": {}}, "never used"),
        ("server", {"jsonrpc": "2.0", "id": 78, "error": {"code": 1, "message": "x"}}, "never used"),
        ("server", {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"}, "prompts.listChanged"),
        ("server", {"jsonrpc": "2.0", "id": 9, "method": "roots/list"}, "roots"),
        ("client", {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}, "roots.listChanged"),
        ("server", {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, "may not send"),
        ("client", {"jsonrpc": "2.0", "id": 3, "method": "server/discover"}, "not a request"),
        ("server", {"jsonrpc": "2.0", "id": None, "error": {"code": "x", "message": "x"}}, "malformed"),
    ],
)
def test_validator_rejects(side: str, message: dict[str, Any], complaint: str) -> None:
    wire = _wire_with_handshake(server_caps={"tools": {}})
    if complaint == "ListToolsResult":
        wire.record("client", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    wire.record(side, message)
    with pytest.raises(AssertionError) as caught:
        wire.validate()
    assert complaint in str(caught.value), str(caught.value)


def test_validator_uses_the_negotiated_version() -> None:
    """Elicitation does not exist in 2025-03-26: the same request that is
    valid in 2025-06-18 is rejected there."""
    request = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "elicitation/create",
        "params": {"message": "m", "requestedSchema": {"type": "object", "properties": {}}},
    }
    ok = _wire_with_handshake("2025-06-18", client_caps={"elicitation": {}})
    ok.record("server", request)
    ok.validate()
    old = _wire_with_handshake("2025-03-26", client_caps={"elicitation": {}})
    old.record("server", request)
    with pytest.raises(AssertionError, match="not a request of MCP 2025-03-26"):
        old.validate()


def test_validator_skips_unchecked_and_raw_frames() -> None:
    wire = _wire_with_handshake()
    with wire.unchecked("client"):
        wire.record("client", {"jsonrpc": "2.0", "id": "x", "method": "made/up"})
    wire.record_raw("client", b"\xff garbage")
    wire.record("server", {"jsonrpc": "2.0", "id": "x", "error": {"code": -32601, "message": "no"}})
    wire.record("server", {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    wire.validate()
