"""Client features driven from server handlers through the Context:
sampling, elicitation (form and URL), roots and ``roots/list_changed``."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio

from trio_mcp.protocol import (
    HANDSHAKE_VERSIONS,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    AudioContent,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ImageContent,
    InvalidParams,
    ListRootsResult,
    Root,
    SamplingMessage,
    TextContent,
    Tool,
)
from trio_mcp.server import Context, MCPServer

from .conftest import TIMEOUT, Inbox

# ---------------------------------------------------------------- the app


class Signup(msgspec.Struct):
    name: str
    age: int
    subscribe: bool = False


def features_app() -> MCPServer:
    app = MCPServer("features")

    @app.tool
    async def ask_llm(ctx: Context, prompt: str) -> str:
        result = await ctx.sample(prompt, max_tokens=55, system_prompt="Be brief.", temperature=0.5)
        assert isinstance(result.content, TextContent)
        return f"{result.model}: {result.content.text}"

    @app.tool
    async def sample_blocks(ctx: Context, kind: str) -> str:
        audio = AudioContent(data="UklGRg==", mime_type="audio/wav")
        image = ImageContent(data="iVBORw==", mime_type="image/png")
        content: Any = {
            "audio": audio,
            "image": image,
            "list": [TextContent(text="first"), TextContent(text="second")],
        }[kind]
        result = await ctx.sample([SamplingMessage(role="user", content=content)], max_tokens=10)
        return repr(msgspec.to_builtins(result.content))

    @app.tool
    async def sample_with_tools(ctx: Context) -> str:
        weather = Tool(
            name="weather", input_schema={"type": "object", "properties": {"city": {"type": "string"}}}
        )
        result = await ctx.sample("What's the weather?", max_tokens=20, tools=[weather])
        return repr(msgspec.to_builtins(result.content))

    @app.tool
    async def signup(ctx: Context) -> str:
        result = await ctx.elicit("Who are you?", Signup)
        return f"{result.action} {msgspec.to_builtins(result.content) if result.content else ''}".strip()

    @app.tool
    async def pick(ctx: Context, multi: bool = False) -> str:
        field: dict[str, Any] = (
            {
                "type": "array",
                "title": "Colours",
                "items": {"type": "string", "enum": ["red", "green", "blue"]},
            }
            if multi
            else {"type": "string", "title": "Colour", "enum": ["red", "green", "blue"]}
        )
        result = await ctx.elicit(
            "Pick", {"type": "object", "properties": {"colour": field}, "required": ["colour"]}
        )
        return f"{result.action} {msgspec.to_builtins(result.content)}"

    @app.tool
    async def authorize(ctx: Context) -> str:
        result = await ctx.elicit_url("Please sign in", "https://example.com/auth?s=1", "elicit-1")
        return result.action

    @app.tool
    async def roots(ctx: Context) -> list[str]:
        return [r.uri for r in await ctx.list_roots()]

    return app


class Sampler:
    """A sampling handler: records what it was asked, answers with ``content``."""

    def __init__(self, content: Any = None) -> None:
        self.content = content if content is not None else TextContent(text="sampled")
        self.requests: list[CreateMessageRequestParams] = []

    async def __call__(self, params: CreateMessageRequestParams) -> CreateMessageResult:
        self.requests.append(params)
        return CreateMessageResult(
            role="assistant", content=self.content, model="test-model", stop_reason="endTurn"
        )


class Eliciter:
    def __init__(self, action: str = "accept", content: dict[str, Any] | None = None) -> None:
        self.action = action
        self.content = content
        self.requests: list[ElicitRequestParams] = []

    async def __call__(self, params: ElicitRequestParams) -> ElicitResult:
        self.requests.append(params)
        return ElicitResult(
            action=self.action, content=msgspec.UNSET if self.content is None else self.content
        )


#: Versions with elicitation (2025-06-18+) and with URL / mode-aware elicitation.
ELICITATION_VERSIONS = [v for v in HANDSHAKE_VERSIONS if v >= V2025_06_18]
MODES_VERSIONS = [v for v in HANDSHAKE_VERSIONS if v >= V2025_11_25]


# ---------------------------------------------------------------- sampling


async def test_sampling(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        sampler = Sampler()
        async with connect(features_app(), sampling_handler=sampler) as conn:
            assert "sampling" in conn.wire.capabilities("client")
            result = await conn.client.call_tool("ask_llm", {"prompt": "Hi there"})
            assert result.is_error is not True, result
            assert result.content[0].text == "test-model: sampled"
            (params,) = sampler.requests
            assert params.max_tokens == 55
            assert params.system_prompt == "Be brief."
            assert params.temperature == 0.5
            (message,) = params.messages
            assert message.role == "user" and message.content == TextContent(text="Hi there")
            (request,) = conn.wire.requests("server", "sampling/createMessage")
            assert request["params"]["maxTokens"] == 55


async def test_sampling_without_the_capability_is_a_clear_tool_error(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(features_app()) as conn:
            assert "sampling" not in conn.wire.capabilities("client")
            result = await conn.client.call_tool("ask_llm", {"prompt": "Hi"})
            assert result.is_error is True
            assert "sampling" in result.content[0].text
            assert "capability" in result.content[0].text
            assert conn.wire.requests("server", "sampling/createMessage") == []


async def test_sampling_failure_in_the_client_is_a_tool_error(connect) -> None:
    with trio.fail_after(TIMEOUT):

        async def refuse(params: CreateMessageRequestParams) -> CreateMessageResult:
            raise InvalidParams("the user rejected the sampling request")

        async with connect(features_app(), sampling_handler=refuse) as conn:
            result = await conn.client.call_tool("ask_llm", {"prompt": "Hi"})
            assert result.is_error is True
            assert "rejected" in result.content[0].text
            assert (await conn.client.call_tool("ask_llm", {"prompt": "again"})).is_error is True


@pytest.mark.parametrize("kind", ["image", "audio", "list"])
async def test_sampling_request_content_degrades_for_older_versions(
    connect, version: str, kind: str, request: pytest.FixtureRequest
) -> None:
    """Audio in a sampling message before 2025-03-26, and a list of blocks
    before 2025-11-25, must be adapted (``_compat.adapt`` knows how) before
    the request goes to an older client."""
    with trio.fail_after(TIMEOUT):
        sampler = Sampler()
        async with connect(features_app(), sampling_handler=sampler) as conn:
            result = await conn.client.call_tool("sample_blocks", {"kind": kind})
            assert result.is_error is not True, result
            received = [m.content for m in sampler.requests[0].messages]
            if kind == "audio" and version < V2025_03_26:
                assert all(isinstance(c, TextContent) for c in received)
            if kind == "list" and version < V2025_11_25:
                assert all(not isinstance(c, list) for c in received)


@pytest.mark.parametrize("kind", ["image", "audio", "list"])
async def test_sampling_result_content_degrades_for_older_versions(
    connect, version: str, kind: str, request: pytest.FixtureRequest
) -> None:
    """The client's answer must be valid for the negotiated version too."""
    with trio.fail_after(TIMEOUT):
        content: Any = {
            "image": ImageContent(data="iVBORw==", mime_type="image/png"),
            "audio": AudioContent(data="UklGRg==", mime_type="audio/wav"),
            "list": [TextContent(text="one"), TextContent(text="two")],
        }[kind]
        async with connect(features_app(), sampling_handler=Sampler(content)) as conn:
            result = await conn.client.call_tool("sample_blocks", {"kind": "image"})
            assert result.is_error is not True, result


async def test_tool_enabled_sampling_needs_the_sampling_tools_capability(connect, version: str) -> None:
    """MCP 2025-11-25: servers MUST NOT send tool-enabled sampling requests to
    clients that did not declare ``sampling.tools`` (and before 2025-11-25
    there is no tool-enabled sampling at all). ClientSession never declares
    it, so the request must be refused on the server with a clear error."""
    with trio.fail_after(TIMEOUT):
        sampler = Sampler()
        async with connect(features_app(), sampling_handler=sampler) as conn:
            assert "tools" not in conn.wire.capabilities("client")["sampling"]
            result = await conn.client.call_tool("sample_with_tools")
            assert result.is_error is True, result
            assert "sampling.tools" in result.content[0].text or "tools" in result.content[0].text
            assert sampler.requests == []
            assert conn.wire.requests("server", "sampling/createMessage") == []


# ------------------------------------------------------------- elicitation


async def test_form_elicitation(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        eliciter = Eliciter("accept", {"name": "Ada", "age": 36, "subscribe": True})
        async with connect(features_app(), elicitation_handler=eliciter) as conn:
            result = await conn.client.call_tool("signup")
            if version < V2025_06_18:
                # Elicitation does not exist yet: a clear error, nothing sent.
                assert result.is_error is True
                assert "elicitation" in result.content[0].text
                assert V2025_06_18 in result.content[0].text
                assert conn.wire.requests("server", "elicitation/create") == []
                return
            assert result.is_error is not True, result
            assert result.content[0].text == "accept {'name': 'Ada', 'age': 36, 'subscribe': True}"
            (params,) = eliciter.requests
            assert params.message == "Who are you?"
            schema = params.requested_schema
            assert set(schema.properties) == {"name", "age", "subscribe"}
            assert schema.properties["name"].type == "string"
            assert schema.properties["age"].type == "integer"
            assert schema.properties["subscribe"].type == "boolean"
            assert set(schema.required) == {"name", "age"}
            (request,) = conn.wire.requests("server", "elicitation/create")
            if version >= V2025_11_25:
                assert request["params"]["mode"] == "form"
            else:
                assert "mode" not in request["params"]


@pytest.mark.parametrize("version", ELICITATION_VERSIONS)
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_form_elicitation_declined_or_cancelled(connect, version: str, action: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(features_app(), elicitation_handler=Eliciter(action)) as conn:
            result = await conn.client.call_tool("signup")
            assert result.content[0].text == action


async def test_elicitation_without_the_capability_is_a_clear_tool_error(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(features_app()) as conn:
            result = await conn.client.call_tool("signup")
            assert result.is_error is True
            assert "elicitation" in result.content[0].text
            assert conn.wire.requests("server", "elicitation/create") == []


@pytest.mark.parametrize("version", ELICITATION_VERSIONS)
async def test_enum_elicitation(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        eliciter = Eliciter("accept", {"colour": "green"})
        async with connect(features_app(), elicitation_handler=eliciter) as conn:
            result = await conn.client.call_tool("pick")
            assert result.content[0].text == "accept {'colour': 'green'}"
            assert eliciter.requests[0].requested_schema.properties["colour"].enum == ["red", "green", "blue"]


@pytest.mark.parametrize("version", ELICITATION_VERSIONS)
async def test_multi_select_elicitation_degrades_before_2025_11_25(
    connect, version: str, request: pytest.FixtureRequest
) -> None:
    """A multi-select field is 2025-11-25; for 2025-06-18 ``_compat.adapt``
    turns it into a described string field."""
    with trio.fail_after(TIMEOUT):
        answer = {"colour": ["red", "blue"]} if version >= V2025_11_25 else {"colour": "red, blue"}
        eliciter = Eliciter("accept", answer)
        async with connect(features_app(), elicitation_handler=eliciter) as conn:
            result = await conn.client.call_tool("pick", {"multi": True})
            assert result.is_error is not True, result
            field = eliciter.requests[0].requested_schema.properties["colour"]
            if version >= V2025_11_25:
                assert field.type == "array"
            else:
                assert field.type == "string" and "red" in field.description


@pytest.mark.parametrize("version", ELICITATION_VERSIONS)
async def test_multi_select_answer_is_joined_for_2025_06_18(
    connect, version: str, request: pytest.FixtureRequest
) -> None:
    """A client handler answering a list for 2025-06-18 must be adapted (joined)."""
    with trio.fail_after(TIMEOUT):
        eliciter = Eliciter("accept", {"colour": ["red", "blue"]})
        async with connect(features_app(), elicitation_handler=eliciter) as conn:
            result = await conn.client.call_tool("pick")
            assert result.is_error is not True, result


async def test_url_elicitation(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        eliciter = Eliciter("accept")
        async with connect(features_app(), elicitation_handler=eliciter) as conn:
            result = await conn.client.call_tool("authorize")
            if version < V2025_11_25:
                assert result.is_error is True
                text = result.content[0].text
                assert "elicitation" in text.lower()
                assert (V2025_11_25 if version >= V2025_06_18 else V2025_06_18) in text
                assert conn.wire.requests("server", "elicitation/create") == []
                return
            assert result.content[0].text == "accept"
            (params,) = eliciter.requests
            assert (params.mode, params.url, params.elicitation_id, params.message) == (
                "url",
                "https://example.com/auth?s=1",
                "elicit-1",
                "Please sign in",
            )
            assert params.requested_schema is msgspec.UNSET


async def test_url_elicitation_needs_the_url_capability(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        eliciter = Eliciter("accept")
        async with connect(features_app(), elicitation_handler=eliciter, elicitation_modes=("form",)) as conn:
            result = await conn.client.call_tool("authorize")
            assert result.is_error is True
            text = result.content[0].text
            assert "elicitation" in text.lower()
            if version >= V2025_11_25:
                assert "elicitation.url" in text
            assert eliciter.requests == []
            assert conn.wire.requests("server", "elicitation/create") == []


@pytest.mark.parametrize("version", MODES_VERSIONS)
async def test_form_elicitation_needs_the_form_capability(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        eliciter = Eliciter("accept", {"name": "x", "age": 1})
        async with connect(features_app(), elicitation_handler=eliciter, elicitation_modes=("url",)) as conn:
            assert conn.wire.capabilities("client")["elicitation"] == {"url": {}}
            result = await conn.client.call_tool("signup")
            assert result.is_error is True
            assert "elicitation.form" in result.content[0].text
            assert eliciter.requests == []


# ------------------------------------------------------------------- roots


async def test_roots(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        roots = [Root(uri="file:///home/ada/project", name="project"), Root(uri="file:///tmp")]
        async with connect(features_app(), roots=roots) as conn:
            assert conn.wire.capabilities("client")["roots"] == {"listChanged": True}
            result = await conn.client.call_tool("roots")
            assert result.structured_content == {"result": ["file:///home/ada/project", "file:///tmp"]}
            (request,) = conn.wire.requests("server", "roots/list")
            answer = conn.wire.response_to("client", request)
            assert answer["result"]["roots"][0] == {"uri": "file:///home/ada/project", "name": "project"}


async def test_roots_without_the_capability_is_a_clear_tool_error(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(features_app()) as conn:
            assert "roots" not in conn.wire.capabilities("client")
            result = await conn.client.call_tool("roots")
            assert result.is_error is True
            assert "roots" in result.content[0].text and "capability" in result.content[0].text
            assert conn.wire.requests("server", "roots/list") == []
            with pytest.raises(RuntimeError):
                await conn.client.set_roots([Root(uri="file:///x")])
            assert conn.wire.notifications("client", "notifications/roots/list_changed") == []


async def test_roots_list_changed_reaches_the_server_and_the_new_roots_are_served(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = MCPServer("roots-watch")
        seen = Inbox()

        @app.on_notification("notifications/roots/list_changed")
        async def roots_changed(session: Any, params: Any) -> None:
            seen.put((session, "notifications/roots/list_changed"))

        @app.tool
        async def roots(ctx: Context) -> list[str]:
            return [r.uri for r in await ctx.list_roots()]

        async with connect(app, roots=[Root(uri="file:///a")]) as conn:
            assert (await conn.client.call_tool("roots")).structured_content == {"result": ["file:///a"]}
            await conn.client.set_roots([Root(uri="file:///b"), Root(uri="file:///c")])
            assert await seen.wait_for(1) == [(conn.server, "notifications/roots/list_changed")]
            assert (await conn.client.call_tool("roots")).structured_content == {
                "result": ["file:///b", "file:///c"]
            }
            assert conn.client.roots == [Root(uri="file:///b"), Root(uri="file:///c")]
            assert len(conn.wire.notifications("client", "notifications/roots/list_changed")) == 1


async def test_server_requests_the_client_cannot_serve_are_method_not_found(connect) -> None:
    """A client without handlers answers server requests with -32601."""
    with trio.fail_after(TIMEOUT):
        async with connect(features_app()) as conn:
            from trio_mcp.protocol import MethodNotFound

            with conn.wire.unchecked("server"):  # requests of undeclared capabilities, on purpose
                with pytest.raises(MethodNotFound):
                    await conn.server.peer.request("roots/list", result_type=ListRootsResult)
                with pytest.raises(MethodNotFound):
                    await conn.server.peer.request(
                        "sampling/createMessage",
                        {
                            "messages": [{"role": "user", "content": {"type": "text", "text": "x"}}],
                            "maxTokens": 1,
                        },
                    )
