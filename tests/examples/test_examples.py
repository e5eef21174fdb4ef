"""End-to-end tests of the example servers under ``examples/``.

Every test drives an example's ``app`` through :func:`trio_mcp.testing.connected`
in both in-memory modes ("zero-copy" and "bytes"). Every message that crosses
the connection is recorded and validated against the official MCP JSON schema
of the negotiated version (``tests/schema_check.py``).
"""

from __future__ import annotations

import base64
import enum
import importlib.util
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import msgspec
import pytest
import trio
import trio.testing
from jsonschema import Draft202012Validator
from msgspec import UNSET

import trio_mcp.testing._pairs as pairs
from trio_mcp.protocol import (
    AudioContent,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    LoggingMessageNotificationParams,
    McpError,
    PromptReference,
    ResourceTemplateReference,
    Root,
    TextContent,
)
from trio_mcp.protocol._jsonrpc import ErrorResponse, InvalidMessage, Notification, Request, Response
from trio_mcp.server import Context, MCPServer
from trio_mcp.testing import connected

try:
    from schema_check import validate_message
except ImportError:  # pragma: no cover - depends on how pytest was started
    from tests.schema_check import validate_message

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TIMEOUT = 10
INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002


def _load(name: str) -> ModuleType:
    module_name = f"_trio_mcp_example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


conformance = _load("conformance_server")
everything = _load("everything_server")
roots_example = _load("roots_server")


# ------------------------------------------------------------------ wire tap


class Tap:
    """Wraps the client's end of the memory pair; records every frame."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.frames: list[tuple[str, Any]] = []  # (sender, frame)

    async def send(self, message: Any) -> None:
        self.frames.append(("client", message))
        await self.inner.send(message)

    async def receive(self) -> Any:
        frame = await self.inner.receive()
        self.frames.append(("server", frame))
        return frame

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Wire:
    def __init__(self) -> None:
        self.taps: list[Tap] = []
        self.checked = 0

    def validate(self, tap: Tap, version: str) -> int:
        """Validate every frame of one connection; returns how many."""
        pending: dict[tuple[str, Any], str] = {}  # (requester, id) -> method
        count = 0
        for sender, frame in tap.frames:
            assert not isinstance(frame, (InvalidMessage, list)), f"unexpected frame from {sender}: {frame!r}"
            if isinstance(frame, Request):
                pending[(sender, frame.id)] = frame.method
                validate_message(frame, version, sender=sender)  # type: ignore[arg-type]
            elif isinstance(frame, Notification):
                validate_message(frame, version, sender=sender)  # type: ignore[arg-type]
            elif isinstance(frame, Response):
                requester = "server" if sender == "client" else "client"
                method = pending.pop((requester, frame.id))
                validate_message(frame, version, method=method, sender=sender)  # type: ignore[arg-type]
            elif isinstance(frame, ErrorResponse):
                requester = "server" if sender == "client" else "client"
                pending.pop((requester, frame.id), None)
                validate_message(frame, version)
            else:  # pragma: no cover
                raise AssertionError(f"unknown frame {frame!r}")  # noqa: TRY004 (a test failure, not a type error)
            count += 1
        return count


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    recorder = Wire()
    original = pairs.memory_pair

    def tapped_pair(**kwargs: Any) -> Any:
        client_end, server_end = original(**kwargs)
        tap = Tap(client_end)
        recorder.taps.append(tap)
        return tap, server_end

    monkeypatch.setattr(pairs, "memory_pair", tapped_pair)
    return recorder


@pytest.fixture(params=["zero-copy", "bytes"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@asynccontextmanager
async def session(app: Any, mode: str, wire: Wire, **options: Any) -> AsyncIterator[Any]:
    """``connected(app)``, then every frame exchanged validated against the schema."""
    async with connected(app, mode=mode, **options) as client:  # type: ignore[arg-type]
        tap = wire.taps[-1]
        yield client
        version = client.protocol_version
    wire.checked += wire.validate(tap, version)


# ----------------------------------------------------------------- helpers


class Inbox:
    """Collects callback arguments; ``await inbox.wait(n)`` until n arrived."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._changed = trio.Event()

    async def __call__(self, *args: Any) -> None:
        self.items.append(args[0] if len(args) == 1 else args)
        self._changed.set()
        self._changed = trio.Event()

    async def wait(self, n: int) -> list[Any]:
        while len(self.items) < n:
            await self._changed.wait()
        return self.items


def only_text(result: Any) -> str:
    assert result.is_error is not True, result
    (block,) = result.content
    assert isinstance(block, TextContent), block
    return block.text


def error_text(result: Any) -> str:
    assert result.is_error is True, result
    assert isinstance(result.content[0], TextContent)
    return result.content[0].text


def check_structured(tool: Any, result: Any) -> Any:
    """structuredContent must validate against the tool's outputSchema."""
    assert tool.output_schema is not UNSET
    data = msgspec.to_builtins(result.structured_content)
    Draft202012Validator(tool.output_schema).validate(data)
    return data


async def sampling_answer(params: CreateMessageRequestParams) -> CreateMessageResult:
    return CreateMessageResult(
        role="assistant",
        content=TextContent(text="This is a test response from the client"),
        model="test-model",
        stop_reason="endTurn",
    )


def schema_json(params: ElicitRequestParams) -> dict[str, Any]:
    return json.loads(msgspec.json.encode(params.requested_schema))


async def quiesce() -> None:
    """Let every notification already sent reach its callback."""
    await trio.testing.wait_all_tasks_blocked()


def is_png(data: bytes) -> bool:
    return data.startswith(b"\x89PNG\r\n\x1a\n")


def is_wav(data: bytes) -> bool:
    return data[:4] == b"RIFF" and data[8:12] == b"WAVE"


# ================================================================ conformance

CONFORMANCE_TOOLS = {
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_logging",
    "test_tool_with_progress",
    "test_error_handling",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "json_schema_2020_12_tool",
    "test_reconnection",
}
CONFORMANCE_PROMPTS = {
    "test_simple_prompt",
    "test_prompt_with_arguments",
    "test_prompt_with_embedded_resource",
    "test_prompt_with_image",
}


async def test_conformance_initialize(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire) as client:
            caps = client.server_capabilities
            assert caps.logging == {}
            assert caps.completions == {}
            assert caps.resources.subscribe is True
            assert caps.tools is not UNSET and caps.prompts is not UNSET
            assert client.server_info.name == "trio-mcp-conformance"
            await client.ping()
            await client.set_logging_level("info")
    assert wire.checked >= 5


async def test_conformance_tools_list(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire) as client:
            tools = {t.name: t for t in await client.list_all_tools()}
    assert set(tools) == CONFORMANCE_TOOLS
    for tool in tools.values():
        assert tool.description, tool.name
        assert tool.input_schema.get("type") == "object", tool.name
    raw = tools["json_schema_2020_12_tool"]
    assert raw.description == "Tool with JSON Schema 2020-12 features"
    assert raw.input_schema == conformance.JSON_SCHEMA_2020_12_INPUT
    assert raw.input_schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert "address" in raw.input_schema["$defs"]
    assert raw.input_schema["additionalProperties"] is False
    assert tools["test_sampling"].input_schema["required"] == ["prompt"]
    assert tools["test_elicitation"].input_schema["required"] == ["message"]


async def test_conformance_content_tools(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire) as client:
            text = await client.call_tool("test_simple_text")
            image = await client.call_tool("test_image_content", {})
            audio = await client.call_tool("test_audio_content", {})
            embedded = await client.call_tool("test_embedded_resource", {})
            mixed = await client.call_tool("test_multiple_content_types", {})

    assert only_text(text) == "This is a simple text response for testing."

    (block,) = image.content
    assert isinstance(block, ImageContent) and block.mime_type == "image/png"
    assert is_png(base64.b64decode(block.data))

    (block,) = audio.content
    assert isinstance(block, AudioContent) and block.mime_type == "audio/wav"
    assert is_wav(base64.b64decode(block.data))

    (block,) = embedded.content
    assert isinstance(block, EmbeddedResource)
    assert block.resource.uri == "test://embedded-resource"
    assert block.resource.mime_type == "text/plain"
    assert block.resource.text == "This is an embedded resource content."

    assert [type(b) for b in mixed.content] == [TextContent, ImageContent, EmbeddedResource]
    assert mixed.content[0].text == "Multiple content types test:"
    resource = mixed.content[2].resource
    assert (resource.uri, resource.mime_type) == ("test://mixed-content-resource", "application/json")
    assert json.loads(resource.text) == {"test": "data", "value": 123}
    for result in (text, image, audio, embedded, mixed):
        assert result.is_error is not True and result.structured_content is UNSET


async def test_conformance_logging(mode: str, wire: Wire) -> None:
    logs = Inbox()
    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire, on_log=logs) as client:
            await client.set_logging_level("debug")
            result = await client.call_tool("test_tool_with_logging", {})
            received: list[LoggingMessageNotificationParams] = await logs.wait(3)
            assert only_text(result)
            assert [(m.level, m.data) for m in received] == [
                ("info", "Tool execution started"),
                ("info", "Tool processing data"),
                ("info", "Tool execution completed"),
            ]
            # above the threshold: filtered out by the server
            await client.set_logging_level("warning")
            await client.call_tool("test_tool_with_logging", {})
            await quiesce()
            assert len(logs.items) == 3


async def test_conformance_progress(mode: str, wire: Wire) -> None:
    progress = Inbox()
    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire) as client:
            result = await client.call_tool("test_tool_with_progress", {}, on_progress=progress)
            quiet = await client.call_tool("test_tool_with_progress", {})
    assert only_text(result) == only_text(quiet) == "Tool with progress executed successfully"
    assert [(p, t) for p, t, _ in progress.items] == [(0, 100), (50, 100), (100, 100)]
    # the call made without a progress token got no progress notifications
    frames = [frame for _, frame in wire.taps[-1].frames]
    sent = [f for f in frames if isinstance(f, Notification) and f.method == "notifications/progress"]
    assert len(sent) == 3


async def test_conformance_error_and_unknown_tool(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire) as client:
            result = await client.call_tool("test_error_handling", {})
            assert "This tool intentionally returns an error for testing" in error_text(result)
            with pytest.raises(McpError) as info:
                await client.call_tool("no_such_tool", {})
            assert info.value.code == INVALID_PARAMS
            # wrong argument types are a tool error, not a protocol error
            bad = await client.call_tool("test_sampling", {"prompt": 42})
            assert "prompt" in error_text(bad)
            await client.ping()  # the session survived


async def test_conformance_sampling(mode: str, wire: Wire) -> None:
    requests = Inbox()

    async def handler(params: CreateMessageRequestParams) -> CreateMessageResult:
        await requests(params)
        return await sampling_answer(params)

    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire, sampling_handler=handler) as client:
            result = await client.call_tool("test_sampling", {"prompt": "Test prompt for sampling"})
    assert only_text(result) == "LLM response: This is a test response from the client"
    (params,) = requests.items
    assert params.max_tokens == 100
    (message,) = params.messages
    assert message.role == "user" and message.content.text == "Test prompt for sampling"


async def test_conformance_sampling_unsupported(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire) as client:
            result = await client.call_tool("test_sampling", {"prompt": "hello"})
            assert "sampling" in error_text(result)
            result = await client.call_tool("test_elicitation", {"message": "hello"})
            assert "elicitation" in error_text(result)


async def test_conformance_elicitation(mode: str, wire: Wire) -> None:
    requests = Inbox()

    async def handler(params: ElicitRequestParams) -> ElicitResult:
        await requests(params)
        return ElicitResult(action="accept", content={"username": "testuser", "email": "test@example.com"})

    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire, elicitation_handler=handler) as client:
            message = "Please provide your information"
            result = await client.call_tool("test_elicitation", {"message": message})
    (params,) = requests.items
    assert params.message == "Please provide your information"
    assert schema_json(params) == {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    assert only_text(result) == (
        'User response: action=accept, content={"username":"testuser","email":"test@example.com"}'
    )


async def test_conformance_elicitation_decline(mode: str, wire: Wire) -> None:
    async def handler(params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="decline")

    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire, elicitation_handler=handler) as client:
            result = await client.call_tool("test_elicitation", {"message": "?"})
    assert only_text(result) == "User response: action=decline, content=null"


async def test_conformance_elicitation_sep1034_defaults(mode: str, wire: Wire) -> None:
    requests = Inbox()

    async def handler(params: ElicitRequestParams) -> ElicitResult:
        await requests(params)
        return ElicitResult(
            action="accept",
            content={"name": "Jane Smith", "age": 25, "score": 88, "status": "inactive", "verified": False},
        )

    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire, elicitation_handler=handler) as client:
            result = await client.call_tool("test_elicitation_sep1034_defaults", {})
    props = schema_json(requests.items[0])["properties"]
    assert (props["name"]["type"], props["name"]["default"]) == ("string", "John Doe")
    assert (props["age"]["type"], props["age"]["default"]) == ("integer", 30)
    assert (props["score"]["type"], props["score"]["default"]) == ("number", 95.5)
    assert (props["status"]["type"], props["status"]["default"]) == ("string", "active")
    assert props["status"]["enum"] == ["active", "inactive", "pending"]
    assert (props["verified"]["type"], props["verified"]["default"]) == ("boolean", True)
    text = only_text(result)
    assert text.startswith("Elicitation completed: action=accept, content=")
    assert json.loads(text.split("content=", 1)[1])["name"] == "Jane Smith"


async def test_conformance_elicitation_sep1330_enums(mode: str, wire: Wire) -> None:
    requests = Inbox()

    async def handler(params: ElicitRequestParams) -> ElicitResult:
        await requests(params)
        return ElicitResult(
            action="accept",
            content={
                "untitledSingle": "option1",
                "titledSingle": "value1",
                "legacyEnum": "opt1",
                "untitledMulti": ["option1", "option2"],
                "titledMulti": ["value1", "value2"],
            },
        )

    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire, elicitation_handler=handler) as client:
            result = await client.call_tool("test_elicitation_sep1330_enums", {})
    props = schema_json(requests.items[0])["properties"]

    single = props["untitledSingle"]
    assert single["type"] == "string" and single["enum"] == ["option1", "option2", "option3"]
    assert "oneOf" not in single and "enumNames" not in single

    titled = props["titledSingle"]
    assert titled["type"] == "string" and "enum" not in titled
    assert titled["oneOf"][0] == {"const": "value1", "title": "First Option"}
    assert all(isinstance(o["const"], str) and isinstance(o["title"], str) for o in titled["oneOf"])

    legacy = props["legacyEnum"]
    assert legacy["type"] == "string" and legacy["enum"] == ["opt1", "opt2", "opt3"]
    assert len(legacy["enumNames"]) == len(legacy["enum"])

    multi = props["untitledMulti"]
    assert multi["type"] == "array"
    assert multi["items"] == {"type": "string", "enum": ["option1", "option2", "option3"]}

    titled_multi = props["titledMulti"]
    assert titled_multi["type"] == "array" and "enum" not in titled_multi["items"]
    assert titled_multi["items"]["anyOf"][0] == {"const": "value1", "title": "First Choice"}

    assert only_text(result).startswith("Elicitation completed: action=accept, content=")


async def test_conformance_json_schema_tool_and_reconnection(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire) as client:
            arguments = {"name": "Ada", "address": {"street": "1 Main St", "city": "London"}}
            result = await client.call_tool("json_schema_2020_12_tool", arguments)
            assert "Ada" in only_text(result) and "London" in only_text(result)
            assert only_text(await client.call_tool("test_reconnection", {})) == (
                "Reconnection test completed successfully"
            )


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_conformance_every_tool_per_version(mode: str, wire: Wire, version: str) -> None:
    """Each fixture tool once, under both versions the suite targets."""

    async def elicit(params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="cancel")

    arguments = {"test_sampling": {"prompt": "hi"}, "test_elicitation": {"message": "hi"}}
    if version < "2025-11-25":
        skip = {"test_elicitation_sep1330_enums"}  # multi-select enums are 2025-11-25 only
    else:
        skip = set()
    with trio.fail_after(TIMEOUT):
        async with session(
            conformance.app,
            mode,
            wire,
            protocol_version=version,
            sampling_handler=sampling_answer,
            elicitation_handler=elicit,
            elicitation_modes=("form",),
        ) as client:
            assert client.protocol_version == version
            for name in sorted(CONFORMANCE_TOOLS - skip):
                result = await client.call_tool(name, arguments.get(name, {}))
                assert (result.is_error is True) == (name == "test_error_handling"), (name, result)


async def test_conformance_resources(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire) as client:
            resources = {r.uri: r for r in await client.list_all_resources()}
            templates = await client.list_all_resource_templates()
            text = await client.read_resource("test://static-text")
            binary = await client.read_resource("test://static-binary")
            templated = await client.read_resource("test://template/123/data")
            with pytest.raises(McpError) as info:
                await client.read_resource("test://no-such-resource")
            assert info.value.code == RESOURCE_NOT_FOUND

    assert {"test://static-text", "test://static-binary", "test://watched-resource"} <= set(resources)
    for resource in resources.values():
        assert resource.name and resource.description
    assert [t.uri_template for t in templates] == ["test://template/{id}/data"]

    (contents,) = text.contents
    assert (contents.uri, contents.mime_type) == ("test://static-text", "text/plain")
    assert contents.text == "This is the content of the static text resource."

    (contents,) = binary.contents
    assert (contents.uri, contents.mime_type) == ("test://static-binary", "image/png")
    assert is_png(contents.blob_bytes())

    (contents,) = templated.contents
    assert (contents.uri, contents.mime_type) == ("test://template/123/data", "application/json")
    assert json.loads(contents.text) == {"id": "123", "templateTest": True, "data": "Data for ID: 123"}


async def test_conformance_subscribe_and_update(mode: str, wire: Wire) -> None:
    updates = Inbox()
    uri = "test://watched-resource"
    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire, on_resource_updated=updates) as client:
            before = (await client.read_resource(uri)).contents[0].text
            await client.subscribe_resource(uri)
            conformance.update_watched_resource("changed")
            assert await updates.wait(1) == [uri]
            after = (await client.read_resource(uri)).contents[0].text
            assert after != before and after.startswith("changed")

            await client.unsubscribe_resource(uri)
            conformance.update_watched_resource()  # not subscribed: no notification
            await client.subscribe_resource(uri)
            conformance.update_watched_resource()
            await updates.wait(2)
            await quiesce()
            assert updates.items == [uri, uri]

            with pytest.raises(McpError) as info:
                await client.subscribe_resource("test://no-such-resource")
            assert info.value.code == RESOURCE_NOT_FOUND


async def test_conformance_prompts(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire) as client:
            prompts = {p.name: p for p in await client.list_all_prompts()}
            simple = await client.get_prompt("test_simple_prompt")
            with_args = await client.get_prompt(
                "test_prompt_with_arguments", {"arg1": "testValue1", "arg2": "testValue2"}
            )
            embedded = await client.get_prompt(
                "test_prompt_with_embedded_resource", {"resourceUri": "test://example-resource"}
            )
            image = await client.get_prompt("test_prompt_with_image")
            with pytest.raises(McpError) as missing:
                await client.get_prompt("test_prompt_with_arguments", {"arg1": "only one"})
            with pytest.raises(McpError) as unknown:
                await client.get_prompt("no_such_prompt")

    assert set(prompts) == CONFORMANCE_PROMPTS
    assert all(p.description for p in prompts.values())
    args = prompts["test_prompt_with_arguments"].arguments
    assert [(a.name, a.required) for a in args] == [("arg1", True), ("arg2", True)]
    assert [a.name for a in prompts["test_prompt_with_embedded_resource"].arguments] == ["resourceUri"]
    assert prompts["test_simple_prompt"].arguments is UNSET

    (message,) = simple.messages
    assert message.role == "user" and message.content.text == "This is a simple prompt for testing."

    (message,) = with_args.messages
    assert message.content.text == "Prompt with arguments: arg1='testValue1', arg2='testValue2'"

    first, second = embedded.messages
    assert isinstance(first.content, EmbeddedResource)
    assert first.content.resource.uri == "test://example-resource"
    assert first.content.resource.mime_type == "text/plain"
    assert first.content.resource.text == "Embedded resource content for testing."
    assert second.content.text == "Please process the embedded resource above."

    first, second = image.messages
    assert isinstance(first.content, ImageContent) and first.content.mime_type == "image/png"
    assert is_png(base64.b64decode(first.content.data))
    assert second.content.text == "Please analyze the image above."

    assert missing.value.code == INVALID_PARAMS and "arg2" in str(missing.value)
    assert unknown.value.code == INVALID_PARAMS


async def test_conformance_completions(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(conformance.app, mode, wire) as client:
            prompt = PromptReference(name="test_prompt_with_arguments")
            arg1 = await client.complete(prompt, "arg1", "pa")
            empty = await client.complete(prompt, "arg1", "zzz")
            arg2 = await client.complete(prompt, "arg2", "t", context={"arg1": "paris"})
            template = ResourceTemplateReference(uri="test://template/{id}/data")
            ids = await client.complete(template, "id", "12")
            with pytest.raises(McpError) as info:
                await client.complete(PromptReference(name="no_such_prompt"), "x", "")
    assert arg1.completion.values == ["paris", "park", "party"]
    assert arg1.completion.total == 3 and arg1.completion.has_more is False
    assert empty.completion.values == []
    assert arg2.completion.values == ["paris-two"]
    assert ids.completion.values == ["12", "123", "1234"]
    assert info.value.code == INVALID_PARAMS


# ================================================================ everything


async def test_everything_tools_list(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(everything.app, mode, wire) as client:
            tools = {t.name: t for t in await client.list_all_tools()}
    assert {
        "echo", "add", "long_running_operation", "log_messages", "sample_llm", "collect_preferences",
        "authorize_via_url", "get_weather", "get_tiny_image", "get_audio_clip", "increment_counter",
        "reset_counter",
    } == set(tools)  # fmt: skip
    assert all(t.description for t in tools.values())
    assert tools["echo"].annotations.read_only_hint is True
    assert tools["reset_counter"].annotations.destructive_hint is True
    assert tools["increment_counter"].annotations.destructive_hint is False
    assert tools["get_weather"].output_schema["properties"].keys() >= {"city", "temperature_c"}
    assert tools["echo"].output_schema is UNSET


async def test_everything_basic_tools(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(everything.app, mode, wire) as client:
            tools = {t.name: t for t in await client.list_all_tools()}
            echo = await client.call_tool("echo", {"message": "hello, trio"})
            added = await client.call_tool("add", {"a": 2, "b": 3.5})
            weather = await client.call_tool("get_weather", {"city": "Paris"})
            image = await client.call_tool("get_tiny_image")
            audio = await client.call_tool("get_audio_clip")
            missing = await client.call_tool("echo", {})

    assert only_text(echo) == "hello, trio"
    assert check_structured(tools["add"], added) == {"result": 5.5}
    assert json.loads(only_text(added)) == 5.5

    data = check_structured(tools["get_weather"], weather)
    assert data["city"] == "Paris" and json.loads(only_text(weather)) == data
    assert msgspec.convert(data, everything.Weather) == everything.get_weather("Paris")

    kinds = [type(b) for b in image.content]
    assert kinds == [TextContent, ImageContent, TextContent]
    assert is_png(base64.b64decode(image.content[1].data))

    (clip,) = audio.content
    assert isinstance(clip, AudioContent) and clip.mime_type == "audio/wav"
    assert is_wav(base64.b64decode(clip.data))

    assert "message" in error_text(missing)


async def test_everything_progress(mode: str, wire: Wire) -> None:
    progress = Inbox()
    with trio.fail_after(TIMEOUT):
        async with session(everything.app, mode, wire) as client:
            result = await client.call_tool(
                "long_running_operation", {"duration": 0.05, "steps": 4}, on_progress=progress
            )
            bad = await client.call_tool("long_running_operation", {"steps": 0})
    assert "4 steps" in only_text(result)
    assert progress.items == [(i, 4, f"step {i} of 4") for i in range(1, 5)]
    assert "steps must be at least 1" in error_text(bad)


async def test_everything_logging_levels(mode: str, wire: Wire) -> None:
    logs = Inbox()
    with trio.fail_after(TIMEOUT):
        async with session(everything.app, mode, wire, on_log=logs) as client:
            await client.set_logging_level("debug")
            await client.call_tool("log_messages")
            await logs.wait(5)
            assert [m.level for m in logs.items] == ["debug", "info", "notice", "warning", "error"]
            assert all(m.logger == "everything" for m in logs.items)
            assert logs.items[-1].data == {"error": "something failed", "recoverable": True}

            await client.set_logging_level("warning")
            await client.call_tool("log_messages")
            await logs.wait(7)
            await quiesce()
            assert [m.level for m in logs.items[5:]] == ["warning", "error"]


async def test_everything_sampling(mode: str, wire: Wire) -> None:
    requests = Inbox()

    async def handler(params: CreateMessageRequestParams) -> CreateMessageResult:
        await requests(params)
        return await sampling_answer(params)

    with trio.fail_after(TIMEOUT):
        async with session(everything.app, mode, wire, sampling_handler=handler) as client:
            result = await client.call_tool("sample_llm", {"prompt": "What is trio?", "max_tokens": 42})
    assert only_text(result) == "LLM (test-model) says: This is a test response from the client"
    (params,) = requests.items
    assert params.max_tokens == 42 and params.temperature == 0.2
    assert params.system_prompt == "You are a helpful assistant."
    assert params.messages[0].content.text == "What is trio?"


async def test_everything_form_elicitation(mode: str, wire: Wire) -> None:
    requests = Inbox()
    answers = [
        ElicitResult(
            action="accept", content={"name": "Grace", "age": 85, "newsletter": True, "theme": "dark"}
        ),
        ElicitResult(action="decline"),
    ]

    async def handler(params: ElicitRequestParams) -> ElicitResult:
        await requests(params)
        return answers.pop(0)

    with trio.fail_after(TIMEOUT):
        async with session(everything.app, mode, wire, elicitation_handler=handler) as client:
            accepted = await client.call_tool("collect_preferences")
            declined = await client.call_tool("collect_preferences")
    assert only_text(accepted) == "Hello Grace (85); newsletter: yes; theme: dark."
    assert only_text(declined) == "The user chose to decline."
    params = requests.items[0]
    assert params.mode == "form"
    schema = schema_json(params)
    assert schema["required"] == ["name"]
    assert schema["properties"]["name"] == {"type": "string", "description": "Your name"}
    assert schema["properties"]["age"]["type"] == "integer" and schema["properties"]["age"]["default"] == 30
    assert schema["properties"]["newsletter"]["type"] == "boolean"
    theme = schema["properties"]["theme"]
    assert theme["type"] == "string" and sorted(theme["enum"]) == ["dark", "light", "system"]
    assert theme["default"] == "system"


async def test_everything_url_elicitation(mode: str, wire: Wire) -> None:
    requests = Inbox()

    async def handler(params: ElicitRequestParams) -> ElicitResult:
        await requests(params)
        return ElicitResult(action="accept")

    with trio.fail_after(TIMEOUT):
        async with session(everything.app, mode, wire, elicitation_handler=handler) as client:
            result = await client.call_tool("authorize_via_url", {"service": "github"})
        async with session(
            everything.app, mode, wire, elicitation_handler=handler, elicitation_modes=("form",)
        ) as form_only:
            refused = await form_only.call_tool("authorize_via_url", {"service": "github"})
    (params,) = requests.items
    assert params.mode == "url" and params.url.startswith("https://auth.example.com/authorize?service=github")
    assert params.elicitation_id and params.elicitation_id in params.url
    assert only_text(result) == f"URL elicitation {params.elicitation_id}: the user chose to accept."
    assert "elicitation.url" in error_text(refused)


async def test_everything_counter_subscription_and_lifespan(mode: str, wire: Wire) -> None:
    updates = Inbox()
    with trio.fail_after(TIMEOUT):
        async with session(everything.app, mode, wire, on_resource_updated=updates) as client:
            state = everything.app.state
            assert isinstance(state, everything.DemoState) and not state.closed
            await client.subscribe_resource("demo://counter")
            tool = next(t for t in await client.list_all_tools() if t.name == "increment_counter")
            incremented = await client.call_tool("increment_counter", {"by": 2})
            assert check_structured(tool, incremented) == {"result": 2}
            await updates.wait(1)
            counter = json.loads((await client.read_resource("demo://counter")).contents[0].text)
            assert counter["counter"] == 2
            assert only_text(await client.call_tool("reset_counter")) == "Counter reset (was 2)."
            assert await updates.wait(2) == ["demo://counter", "demo://counter"]
            counter = json.loads((await client.read_resource("demo://counter")).contents[0].text)
            assert counter["counter"] == 0
    assert state.closed  # the lifespan ended with the last session


async def test_everything_resources(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(everything.app, mode, wire) as client:
            resources = {r.uri: r for r in await client.list_all_resources()}
            templates = {t.uri_template: t for t in await client.list_all_resource_templates()}
            readme = await client.read_resource("demo://readme")
            logo = await client.read_resource("demo://logo.png")
            hello = await client.read_resource("demo://greeting/Ada%20L")
            blob = await client.read_resource("demo://bytes/300")
            with pytest.raises(McpError) as too_big:
                await client.read_resource("demo://bytes/99999")
            with pytest.raises(McpError) as not_int:
                await client.read_resource("demo://bytes/many")
            with pytest.raises(McpError) as unknown:
                await client.read_resource("demo://nothing")
            greeting = ResourceTemplateReference(uri="demo://greeting/{name}")
            names = await client.complete(greeting, "name", "g")

    assert set(resources) == {"demo://readme", "demo://logo.png", "demo://counter"}
    assert set(templates) == {"demo://greeting/{name}", "demo://bytes/{size}"}
    assert resources["demo://logo.png"].mime_type == "image/png"

    (contents,) = readme.contents
    assert contents.mime_type == "text/markdown" and contents.text.startswith("# Everything demo")
    (contents,) = logo.contents
    assert contents.mime_type == "image/png" and is_png(contents.blob_bytes())
    (contents,) = hello.contents
    assert contents.text == "Hello, Ada L!"
    (contents,) = blob.contents
    assert contents.mime_type == "application/octet-stream"
    assert contents.blob_bytes() == bytes(i % 256 for i in range(300))

    assert too_big.value.code == INVALID_PARAMS
    assert not_int.value.code == INVALID_PARAMS
    assert unknown.value.code == RESOURCE_NOT_FOUND
    assert names.completion.values == ["Grace", "Guido"]


async def test_everything_prompts(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(everything.app, mode, wire) as client:
            prompts = {p.name: p for p in await client.list_all_prompts()}
            simple = await client.get_prompt("simple")
            review = await client.get_prompt("code_review", {"code": "print(1)", "language": "python"})
            explain = await client.get_prompt("explain_resource", {"uri": "demo://greeting/Linus"})
            with pytest.raises(McpError) as missing:
                await client.get_prompt("code_review", {"language": "rust"})
            with pytest.raises(McpError) as bad_uri:
                await client.get_prompt("explain_resource", {"uri": "file:///etc/passwd"})
            languages = await client.complete(PromptReference(name="code_review"), "language", "ty")

    assert set(prompts) == {"simple", "code_review", "explain_resource"}
    assert prompts["code_review"].title == "Code review"
    assert [(a.name, a.required) for a in prompts["code_review"].arguments] == [
        ("code", True),
        ("language", False),
    ]
    assert simple.messages[0].content.text.startswith("Tell me")
    assert [m.role for m in review.messages] == ["user", "assistant"]
    assert "```python\nprint(1)\n```" in review.messages[0].content.text
    first, _second = explain.messages
    assert isinstance(first.content, EmbeddedResource) and first.content.resource.text == "Hello, Linus!"
    assert missing.value.code == INVALID_PARAMS
    assert bad_uri.value.code == INVALID_PARAMS
    assert languages.completion.values == ["typescript"]


# ================================================================ roots


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "project"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "sub" / "b.txt").write_text("beta\n")
    (root / "sub" / "deeper" / "c.md").write_text("# gamma\n")
    (root / "bin.dat").write_bytes(b"\xff\x00\xfe\x01")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "z.txt").write_text("zeta\n")
    os.symlink(outside, root / "escape")
    os.symlink(outside / "secret.txt", root / "sneaky.txt")
    return {"root": root, "outside": outside, "other": other}


def structured(result: Any) -> Any:
    assert result.is_error is not True, result
    return msgspec.to_builtins(result.structured_content)


async def test_roots_listing_and_reading(mode: str, wire: Wire, tree: dict[str, Path]) -> None:
    root = tree["root"]
    roots = [Root(uri=root.as_uri(), name="project"), Root(uri="https://example.com/not-a-file")]
    with trio.fail_after(TIMEOUT):
        async with session(roots_example.app, mode, wire, roots=roots) as client:
            listed = structured(await client.call_tool("list_roots"))
            top = structured(await client.call_tool("list_directory"))
            txt = structured(
                await client.call_tool("list_directory", {"pattern": "*.txt", "recursive": True})
            )
            sub = structured(await client.call_tool("list_directory", {"uri": (root / "sub").as_uri()}))
            limited = structured(await client.call_tool("list_directory", {"recursive": True, "limit": 2}))
            text = await client.call_tool("read_file", {"uri": (root / "a.txt").as_uri()})
            by_path = await client.call_tool("read_file", {"uri": str(root / "sub" / "b.txt")})
            binary = await client.call_tool("read_file", {"uri": (root / "bin.dat").as_uri()})
            resource = await client.read_resource((root / "sub" / "deeper" / "c.md").as_uri())

    assert listed["result"] == [
        {"uri": root.as_uri(), "name": "project", "path": str(root), "exists": True},
        {"uri": "https://example.com/not-a-file", "name": None, "path": None, "exists": False},
    ]
    # the symbolic links leading out of the root are not listed
    assert [(e["name"], e["is_dir"]) for e in top["entries"]] == [
        ("a.txt", False),
        ("bin.dat", False),
        ("sub", True),
    ]
    assert top["entries"][0]["size"] == 6 and top["entries"][0]["root"] == root.as_uri()
    assert [e["name"] for e in txt["entries"]] == ["a.txt", "sub/b.txt"]
    assert [e["name"] for e in sub["entries"]] == ["b.txt", "deeper"]
    assert len(limited["entries"]) == 2 and limited["truncated"] is True
    assert only_text(text) == "alpha\n"
    assert only_text(by_path) == "beta\n"
    (block,) = binary.content
    assert isinstance(block, EmbeddedResource) and block.resource.blob_bytes() == b"\xff\x00\xfe\x01"
    assert resource.contents[0].text == "# gamma\n"


async def test_roots_never_outside(mode: str, wire: Wire, tree: dict[str, Path]) -> None:
    root, outside = tree["root"], tree["outside"]
    attempts = [
        (outside / "secret.txt").as_uri(),
        str(outside / "secret.txt"),
        f"{root.as_uri()}/../outside/secret.txt",
        (root / "escape" / "secret.txt").as_uri(),
        (root / "sneaky.txt").as_uri(),
        "/etc/passwd",
    ]
    with trio.fail_after(TIMEOUT):
        async with session(roots_example.app, mode, wire, roots=[Root(uri=root.as_uri())]) as client:
            for target in attempts:
                result = await client.call_tool("read_file", {"uri": target})
                assert "not inside any root" in error_text(result), target
                assert "top secret" not in error_text(result)
            listing = await client.call_tool("list_directory", {"uri": (root / "escape").as_uri()})
            assert "not inside any root" in error_text(listing)
            relative = await client.call_tool("read_file", {"uri": "a.txt"})
            assert "absolute path" in error_text(relative)
            for target in attempts[:1] + attempts[3:5]:
                with pytest.raises(McpError) as info:
                    await client.read_resource(target)
                assert info.value.code == RESOURCE_NOT_FOUND
            with pytest.raises(McpError) as info:
                await client.read_resource((root / "missing.txt").as_uri())
            assert info.value.code == RESOURCE_NOT_FOUND


async def test_roots_list_changed(mode: str, wire: Wire, tree: dict[str, Path]) -> None:
    root, other = tree["root"], tree["other"]
    updates = Inbox()
    logs = Inbox()
    with trio.fail_after(TIMEOUT):
        async with session(
            roots_example.app,
            mode,
            wire,
            roots=[Root(uri=root.as_uri(), name="project")],
            on_resource_updated=updates,
            on_log=logs,
        ) as client:
            before = json.loads((await client.read_resource("roots://current")).contents[0].text)
            assert before == [{"uri": root.as_uri(), "name": "project"}]
            await client.subscribe_resource("roots://current")

            await client.set_roots([Root(uri=other.as_uri(), name="other")])
            assert await updates.wait(1) == ["roots://current"]
            (log,) = await logs.wait(1)
            assert log.logger == "roots" and log.data == {"event": "roots changed", "roots": [other.as_uri()]}

            after = json.loads((await client.read_resource("roots://current")).contents[0].text)
            assert after == [{"uri": other.as_uri(), "name": "other"}]
            top = structured(await client.call_tool("list_directory"))
            assert [e["name"] for e in top["entries"]] == ["z.txt"]
            gone = await client.call_tool("read_file", {"uri": (root / "a.txt").as_uri()})
            assert "not inside any root" in error_text(gone)


async def test_roots_client_without_roots(mode: str, wire: Wire) -> None:
    with trio.fail_after(TIMEOUT):
        async with session(roots_example.app, mode, wire) as client:
            result = await client.call_tool("list_roots")
            assert "roots" in error_text(result)


# ================================================================ regressions (API bugs found here)


class _ColorEnum(enum.Enum):
    RED = "red"
    GREEN = "green"


class _LiteralChoice(msgspec.Struct):
    color: Literal["red", "green"]


class _EnumChoice(msgspec.Struct):
    color: _ColorEnum


@pytest.mark.parametrize("form", [_LiteralChoice, _EnumChoice], ids=["literal", "enum"])
async def test_elicit_struct_with_choice_field(mode: str, wire: Wire, form: type) -> None:
    """Context.elicit(message, Struct) turns Literal / Enum fields into enum form fields."""
    app = MCPServer("choices")

    @app.tool
    async def pick(ctx: Context) -> str:
        result = await ctx.elicit("Pick a colour", form)
        color = msgspec.convert(result.content, form).color
        return f"{result.action}: {getattr(color, 'value', color)}"

    requests = Inbox()

    async def handler(params: ElicitRequestParams) -> ElicitResult:
        await requests(params)
        return ElicitResult(action="accept", content={"color": "red"})

    with trio.fail_after(TIMEOUT):
        async with session(app, mode, wire, elicitation_handler=handler) as client:
            result = await client.call_tool("pick")
    field = schema_json(requests.items[0])["properties"]["color"]
    assert field["type"] == "string" and sorted(field["enum"]) == ["green", "red"]
    assert only_text(result) == "accept: red"


def test_decorators_with_options_return_the_function() -> None:
    app = MCPServer("decorators")

    @app.tool(name="renamed")
    def tool_fn() -> str:
        return "ok"

    @app.prompt(title="A prompt")
    def prompt_fn() -> str:
        return "ok"

    assert tool_fn() == "ok" and prompt_fn() == "ok"
    assert [t.name for t in app.tools] == ["renamed"]


# ================================================================ over stdio


@pytest.mark.parametrize(
    ("example", "tool", "arguments"),
    [
        ("conformance_server", "test_simple_text", {}),
        ("everything_server", "echo", {"message": "over a pipe"}),
        ("roots_server", "list_roots", {}),
    ],
)
async def test_examples_serve_over_stdio(example: str, tool: str, arguments: dict[str, Any]) -> None:
    """``python examples/<name>.py`` serves its app over stdio (one subprocess each)."""
    stdio = pytest.importorskip("trio_mcp.transports.stdio")
    from trio_mcp.actors._client import open_session

    params = stdio.StdioServerParameters(command=sys.executable, args=[str(EXAMPLES / f"{example}.py")])
    roots = [Root(uri=EXAMPLES.as_uri(), name="examples")]
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(stdio.StdioTransport(params).run)
            async with open_session(stream, roots=roots) as client:
                module = {"conformance_server": conformance, "everything_server": everything}.get(
                    example, roots_example
                )
                assert client.server_info.name == module.app.info.name
                assert {t.name for t in await client.list_all_tools()} == {t.name for t in module.app.tools}
                result = await client.call_tool(tool, arguments)
                assert result.is_error is not True, result
            await stream.aclose()
