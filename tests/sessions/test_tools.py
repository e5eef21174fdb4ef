"""Tools end to end: listing with pagination, calls, argument validation,
failures, structured output, every content block and its degradation."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest
import trio

from trio_mcp.protocol import (
    INVALID_PARAMS,
    V2025_03_26,
    V2025_06_18,
    Annotations,
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    Icon,
    ImageContent,
    InvalidParams,
    ResourceContents,
    ResourceLink,
    TextContent,
    ToolAnnotations,
)
from trio_mcp.server import Audio, Context, Image, MCPServer

from .conftest import TIMEOUT, result_of

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
WAV = b"RIFF\x00\x00\x00\x00WAVEfmt "


class Point(msgspec.Struct):
    x: int
    y: int


def tools_app(**options: Any) -> MCPServer:
    app = MCPServer("tools", **options)

    @app.tool(
        title="Adder",
        annotations=ToolAnnotations(
            title="Add", read_only_hint=True, idempotent_hint=True, open_world_hint=False
        ),
        icons=[Icon(src="https://example.com/add.png", mime_type="image/png", sizes=["48x48"])],
        meta={"example.com/x": 1},
    )
    def add(a: int, b: int = 1) -> int:
        """Add two numbers.

        Args:
            a: the first addend
            b: the second addend
        """
        return a + b

    @app.tool
    async def point(x: int, y: int) -> Point:
        """A point, as structured content."""
        await trio.lowlevel.checkpoint()
        return Point(x, y)

    @app.tool
    def echo(text: str) -> str:
        return text

    @app.tool
    def fail(message: str) -> str:
        raise RuntimeError(message)

    @app.tool
    def nothing() -> None:
        return None

    @app.tool
    def as_result(flag: bool) -> CallToolResult:
        return CallToolResult(content=[TextContent(text=f"flag={flag}")], is_error=flag)

    return app


# --------------------------------------------------------------------- list


async def test_list_tools_describes_each_tool(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(tools_app()) as conn:
            tools = {t.name: t for t in await conn.client.list_all_tools()}
            assert set(tools) == {"add", "point", "echo", "fail", "nothing", "as_result"}
            add = tools["add"]
            assert add.title == "Adder"
            assert add.description is not msgspec.UNSET and add.description.startswith("Add two numbers.")
            assert add.input_schema["type"] == "object"
            assert add.input_schema["required"] == ["a"]
            assert add.input_schema["properties"]["a"]["type"] == "integer"
            assert add.input_schema["properties"]["a"].get("description") == "the first addend"
            assert add.annotations == ToolAnnotations(
                title="Add", read_only_hint=True, idempotent_hint=True, open_world_hint=False
            )
            assert add.icons == [
                Icon(src="https://example.com/add.png", mime_type="image/png", sizes=["48x48"])
            ]
            assert add.meta == {"example.com/x": 1}
            # Output schemas: an object schema, wrapped for non-object results.
            assert tools["point"].output_schema["type"] == "object"
            assert set(tools["point"].output_schema["required"]) == {"x", "y"}
            assert add.output_schema == {
                "type": "object",
                "properties": {"result": {"type": "integer"}},
                "required": ["result"],
            }
            assert tools["echo"].output_schema is msgspec.UNSET
            # On the wire: the newest-era extras are gone for handshake peers.
            (request,) = conn.wire.requests("client", "tools/list")
            result = result_of(conn.wire, "server", request)
            assert "resultType" not in result and "ttlMs" not in result
            assert "nextCursor" not in result


async def test_tools_list_pagination_with_opaque_cursors(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = MCPServer("many", page_size=3)
        names = [f"tool_{i:02d}" for i in range(8)]
        for name in names:
            app.add_tool(lambda: "x", name=name)
        async with connect(app) as conn:
            pages: list[list[str]] = []
            cursors: list[str] = []
            cursor = None
            while True:
                page = await conn.client.list_tools(cursor)
                pages.append([t.name for t in page.tools])
                if page.next_cursor is msgspec.UNSET:
                    break
                cursor = page.next_cursor
                assert isinstance(cursor, str) and cursor
                cursors.append(cursor)
            assert pages == [names[0:3], names[3:6], names[6:8]]
            # Opaque: not the offsets in clear.
            assert not any(c.isdigit() for c in cursors)
            assert len(set(cursors)) == len(cursors)
            assert [t.name for t in await conn.client.list_all_tools()] == names
            # Re-reading a page with the same cursor gives the same page.
            assert [t.name for t in (await conn.client.list_tools(cursors[0])).tools] == names[3:6]


# "bzo2" decodes to "o:6", one past the end of five tools; "b246LTE" to "o:-1".
@pytest.mark.parametrize("cursor", ["garbage", "!!!", "", "bzo2", "o:3", "b246LTE", "b2YxMDAwMDA", "é"])
async def test_invalid_cursor_is_invalid_params(connect, cursor: str) -> None:
    with trio.fail_after(TIMEOUT):
        app = MCPServer("many", page_size=2)
        for i in range(5):
            app.add_tool(lambda: "x", name=f"t{i}")
        async with connect(app) as conn:
            with pytest.raises(InvalidParams) as caught:
                await conn.client.list_tools(cursor)
            assert caught.value.code == INVALID_PARAMS
            assert "cursor" in caught.value.message.lower()
            # Still serving.
            assert len(await conn.client.list_all_tools()) == 5


# --------------------------------------------------------------------- call


async def test_call_tool_returns_text_and_structured_content(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(tools_app()) as conn:
            result = await conn.client.call_tool("add", {"a": 2, "b": 40})
            assert result.is_error is msgspec.UNSET or result.is_error is False
            assert [c.text for c in result.content] == ["42"]
            assert result.structured_content == {"result": 42}
            result = await conn.client.call_tool("add", {"a": 2})  # default b
            assert result.structured_content == {"result": 3}

            result = await conn.client.call_tool("point", {"x": 1, "y": -2})
            assert result.structured_content == {"x": 1, "y": -2}
            # The text fallback carries the same data, for clients that
            # ignore structuredContent.
            assert json.loads(result.content[0].text) == {"x": 1, "y": -2}

            result = await conn.client.call_tool("echo", {"text": "héllo"})
            assert [c.text for c in result.content] == ["héllo"]
            assert result.structured_content is msgspec.UNSET

            result = await conn.client.call_tool("nothing")
            assert result.content == [] and result.is_error is not True


async def test_a_returned_call_tool_result_passes_through(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(tools_app()) as conn:
            result = await conn.client.call_tool("as_result", {"flag": True})
            assert result.is_error is True
            assert result.content[0].text == "flag=True"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"b": 1}, ["Missing required argument", "`a`"]),
        ({"a": "two"}, ["`a`", "int"]),
        ({"a": 1.5}, ["`a`", "int"]),
        ({"a": True}, ["`a`"]),
        ({"a": 1, "b": None}, ["`b`"]),
        (None, ["Missing required argument", "`a`"]),
    ],
)
async def test_argument_validation_errors_are_tool_errors(connect, arguments, expected: list[str]) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(tools_app()) as conn:
            result = await conn.client.call_tool("add", arguments)
            assert result.is_error is True
            (block,) = result.content
            assert isinstance(block, TextContent)
            assert "add" in block.text
            for fragment in expected:
                assert fragment in block.text, block.text
            # The session goes on.
            assert (await conn.client.call_tool("add", {"a": 1, "b": 1})).content[0].text == "2"


async def test_exception_in_a_tool_is_a_tool_error_and_the_session_keeps_serving(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(tools_app()) as conn:
            for i in range(3):
                result = await conn.client.call_tool("fail", {"message": f"boom {i}"})
                assert result.is_error is True
                text = result.content[0].text
                assert "RuntimeError" in text and f"boom {i}" in text and "fail" in text
            assert (await conn.client.call_tool("echo", {"text": "alive"})).content[0].text == "alive"
            # Answered as results, not protocol errors.
            assert all("result" in m for m in conn.wire.responses("server"))


async def test_unknown_tool_is_invalid_params(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(tools_app()) as conn:
            with pytest.raises(InvalidParams) as caught:
                await conn.client.call_tool("no_such_tool", {})
            assert caught.value.code == INVALID_PARAMS
            assert "no_such_tool" in caught.value.message
            assert (await conn.client.call_tool("echo", {"text": "still here"})).content[
                0
            ].text == "still here"


@pytest.mark.parametrize(
    "params",
    [
        {"arguments": {}},
        {"name": 5},
        {"name": "echo", "arguments": "text"},
        {"name": "echo", "arguments": [1]},
    ],
)
async def test_malformed_tools_call_params_are_invalid_params(connect, params: dict[str, Any]) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(tools_app()) as conn:
            with conn.wire.unchecked("client"), pytest.raises(InvalidParams):
                await conn.client.peer.request("tools/call", params)
            assert (await conn.client.call_tool("echo", {"text": "ok"})).content[0].text == "ok"


async def test_concurrent_calls_are_answered_each_to_its_caller(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = MCPServer("concurrent")
        release = trio.Event()
        arrived = 0

        @app.tool
        async def wait_then_echo(n: int) -> int:
            nonlocal arrived
            arrived += 1
            if arrived == 20:
                release.set()
            await release.wait()
            return n * n

        async with connect(app) as conn:
            results: dict[int, Any] = {}

            async def call(n: int) -> None:
                results[n] = (await conn.client.call_tool("wait_then_echo", {"n": n})).structured_content

            async with trio.open_nursery() as nursery:
                for n in range(20):
                    nursery.start_soon(call, n)
            assert results == {n: {"result": n * n} for n in range(20)}


# ------------------------------------------------------------ content blocks


def content_app() -> MCPServer:
    app = MCPServer("content")
    note = Annotations(audience=["user", "assistant"], priority=0.25)

    @app.tool
    def every_block() -> list:
        return [
            TextContent(text="plain text", annotations=note),
            Image(PNG),
            Audio(WAV),
            ResourceLink(
                uri="file:///report.pdf",
                name="report",
                title="The report",
                description="Quarterly",
                mime_type="application/pdf",
                size=1234,
            ),
            EmbeddedResource(
                resource=ResourceContents.from_text("memo://t", "embedded text", mime_type="text/plain"),
                annotations=note,
            ),
            EmbeddedResource(
                resource=ResourceContents.from_blob(
                    "memo://b", b"\x00\x01\x02", mime_type="application/octet-stream"
                )
            ),
            b"raw bytes",
        ]

    @app.tool
    def annotated_image() -> ImageContent:
        return ImageContent(
            data=base64.b64encode(PNG).decode(),
            mime_type="image/png",
            annotations=Annotations(audience=["user"], priority=1.0),
        )

    @app.tool
    def audio_only() -> AudioContent:
        return AudioContent(data=base64.b64encode(WAV).decode(), mime_type="audio/wav")

    @app.tool
    def link_only() -> ResourceLink:
        return ResourceLink(uri="file:///a.txt", name="a.txt")

    return app


async def test_every_content_block_type_degrades_for_older_versions(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(content_app()) as conn:
            result = await conn.client.call_tool("every_block")
            kinds = [type(b).__name__ for b in result.content]
            expected = [
                "TextContent",
                "ImageContent",
                "AudioContent",
                "ResourceLink",
                "EmbeddedResource",
                "EmbeddedResource",
                "EmbeddedResource",
            ]
            if version < V2025_03_26:
                expected[2] = "TextContent"  # audio described in text
            if version < V2025_06_18:
                expected[3] = "TextContent"  # the link described in text
            assert kinds == expected

            text, image, audio, link, emb_text, emb_blob, raw = result.content
            assert text.text == "plain text"
            assert text.annotations == Annotations(audience=["user", "assistant"], priority=0.25)
            assert base64.b64decode(image.data) == PNG and image.mime_type == "image/png"
            if isinstance(audio, AudioContent):
                assert base64.b64decode(audio.data) == WAV and audio.mime_type == "audio/wav"
            else:
                assert "audio" in audio.text and "audio/wav" in audio.text
            if isinstance(link, ResourceLink):
                assert (link.uri, link.name, link.title, link.size) == (
                    "file:///report.pdf",
                    "report",
                    "The report",
                    1234,
                )
            else:
                assert "file:///report.pdf" in link.text and "The report" in link.text
            assert emb_text.resource.text == "embedded text"
            assert emb_text.annotations == Annotations(audience=["user", "assistant"], priority=0.25)
            assert emb_blob.resource.blob_bytes() == b"\x00\x01\x02"
            assert raw.resource.blob_bytes() == b"raw bytes"
            assert raw.resource.mime_type == "application/octet-stream"


async def test_single_blocks_and_annotations(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(content_app()) as conn:
            (image,) = (await conn.client.call_tool("annotated_image")).content
            assert image.annotations == Annotations(audience=["user"], priority=1.0)
            (audio,) = (await conn.client.call_tool("audio_only")).content
            assert isinstance(audio, AudioContent if version >= V2025_03_26 else TextContent)
            (link,) = (await conn.client.call_tool("link_only")).content
            assert isinstance(link, ResourceLink if version >= V2025_06_18 else TextContent)


async def test_structured_content_that_is_not_an_object_is_dropped_where_forbidden(
    connect, version: str
) -> None:
    """A low-level result with a list as structuredContent: an object is
    required from 2025-06-18, so it is dropped there (the text stays)."""
    with trio.fail_after(TIMEOUT):
        app = MCPServer("odd")

        @app.tool
        def odd() -> CallToolResult:
            return CallToolResult(content=[TextContent(text="[1, 2]")], structured_content=[1, 2])

        async with connect(app) as conn:
            result = await conn.client.call_tool("odd")
            assert result.content[0].text == "[1, 2]"
            if version >= V2025_06_18:
                assert result.structured_content is msgspec.UNSET
            else:
                # Undeclared before 2025-06-18: anything passes through.
                assert result.structured_content in ([1, 2], msgspec.UNSET)


def mismatch_app() -> MCPServer:
    app = MCPServer("mismatch")

    @app.tool
    def wrong_point() -> Point:
        return {"x": "one", "y": 2}  # type: ignore[return-value]

    @app.tool
    def wrong_int() -> int:
        return "forty-two"  # type: ignore[return-value]

    @app.tool
    def listed_content() -> list:
        return [TextContent(text="a"), Image(PNG)]

    return app


@pytest.mark.parametrize("version", [V2025_06_18, "2025-11-25"])
@pytest.mark.parametrize("tool", ["wrong_point", "wrong_int"])
async def test_results_of_tools_with_an_output_schema_conform_to_it(connect, version: str, tool: str) -> None:
    """MCP 2025-06-18+: a tool that declares an outputSchema MUST return
    structured results conforming to it. The wire check validates every
    structuredContent against the listed outputSchema; a value that does not
    fit becomes a tool error instead."""
    with trio.fail_after(TIMEOUT):
        async with connect(mismatch_app()) as conn:
            tools = {t.name: t for t in await conn.client.list_all_tools()}
            assert tools[tool].output_schema is not msgspec.UNSET
            result = await conn.client.call_tool(tool)
            assert result.is_error is True
            assert "does not match its output schema" in result.content[0].text
            assert result.structured_content is msgspec.UNSET


@pytest.mark.parametrize("version", [V2025_06_18, "2025-11-25"])
async def test_an_untyped_list_promises_no_output_schema(connect, version: str) -> None:
    """A bare ``-> list`` may hold content blocks: no outputSchema is advertised
    and the blocks go out as content."""
    with trio.fail_after(TIMEOUT):
        async with connect(mismatch_app()) as conn:
            tools = {t.name: t for t in await conn.client.list_all_tools()}
            assert tools["listed_content"].output_schema is msgspec.UNSET
            result = await conn.client.call_tool("listed_content")
            assert [type(block).__name__ for block in result.content] == ["TextContent", "ImageContent"]
            assert result.structured_content is msgspec.UNSET


async def test_context_is_injected_and_not_part_of_the_schema(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        app = MCPServer("ctx")

        @app.tool
        async def whoami(ctx: Context, suffix: str = "") -> str:
            return f"{ctx.protocol_version} {ctx.client_info.name} {ctx.request_id}{suffix}"

        async with connect(app) as conn:
            (tool,) = await conn.client.list_all_tools()
            assert list(tool.input_schema.get("properties", {})) == ["suffix"]
            result = await conn.client.call_tool("whoami", {"suffix": "!"})
            (request,) = conn.wire.requests("client", "tools/call")
            assert result.content[0].text == f"{version} trio-mcp {request['id']}!"


async def test_options_passed_with_the_function_are_honoured(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = MCPServer("direct")
        app.tool(lambda: "x", name="named_tool", title="Named")
        app.prompt(lambda: "x", name="named_prompt")
        async with connect(app) as conn:
            (tool,) = await conn.client.list_all_tools()
            assert (tool.name, tool.title) == ("named_tool", "Named")
            assert [p.name for p in await conn.client.list_all_prompts()] == ["named_prompt"]


async def test_input_schema_override_is_advertised_and_the_signature_still_validates(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = MCPServer("override")
        schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}

        @app.tool(input_schema=schema)
        def double(n: int) -> int:
            return 2 * n

        async with connect(app) as conn:
            (tool,) = await conn.client.list_all_tools()
            assert tool.input_schema == schema
            assert (await conn.client.call_tool("double", {"n": 4})).structured_content == {"result": 8}
            assert (await conn.client.call_tool("double", {"n": "4"})).is_error is True
