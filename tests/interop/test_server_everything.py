"""Our client against the official reference server, ``@modelcontextprotocol/server-everything``.

``ClientSession`` drives server-everything (2026.8.31, on the TypeScript SDK)
through each of its feature triggers: tools and their content types,
sampling, form and URL elicitation, roots, logging, progress, resource
subscriptions, completions, resources and prompts. Every test runs over
stdio (``node .../dist/index.js stdio``, one server process per test), over
Streamable HTTP (``... streamableHttp``) and over the legacy HTTP+SSE
transport (``... sse``); the two HTTP servers are shared by the tests of
this module (every test opens its own session) and run under
``loopback.cjs``, on a port chosen at run time, listening on 127.0.0.1 only.

What the peer does, read from its ``dist`` sources: the tools that need a
client capability (``get-roots-list``, ``trigger-sampling-request``,
``trigger-elicitation-request``, ``trigger-url-elicitation``) are registered
after ``notifications/initialized`` (announced with
``notifications/tools/list_changed``); 350 ms after the handshake the server
asks for the roots and logs ``Roots updated: N root(s) received from
client``; ``toggle-simulated-logging`` / ``toggle-subscriber-updates`` send
a random-levelled log message / a ``notifications/resources/updated`` for
each subscribed URI at once and then every 5 s (the tests only wait for the
first one); ``resources/subscribe`` logs ``Received Subscribe Resource
request`` at info level, through the level the client set.
"""

from __future__ import annotations

import base64
import os
import re
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import UNSET

from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.protocol import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    LoggingMessageNotificationParams,
    McpError,
    PromptReference,
    ResourceLink,
    ResourceTemplateReference,
    Root,
    TextContent,
    UrlElicitationRequired,
)
from trio_mcp.transports.stdio import StdioServerParameters, StdioTransport

pytestmark = pytest.mark.interop

#: Bound of every test body (a healthy run takes well under a second per test).
TIMEOUT = 20.0
#: Bound of every wait for a notification the server sends at once.
NOTIFY_WAIT = 5.0

TRANSPORTS = ("stdio", "streamable-http", "sse")

TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"
BLOB_TEMPLATE = "demo://resource/dynamic/blob/{resourceId}"
ROOTS = [Root(uri="file:///srv/project", name="project")]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------ HTTP servers


def _listening_addresses(port: int) -> set[str]:
    """Local addresses of the LISTEN sockets on ``port`` (Linux /proc), hex as the kernel writes them."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


@contextmanager
def _node_http_server(
    node: Path, preload: Path, entry: Path, mode: str, free_port: Callable[[], int], log_dir: Path
) -> Iterator[str]:
    """Run ``node --require loopback.cjs <entry> <mode>`` on a free port; yield ``http://127.0.0.1:<port>``.

    Its output goes to a file (it logs every request); the process is
    stopped (SIGTERM, then SIGKILL) when the block ends.
    """
    last_output = ""
    for attempt in range(3):
        port = free_port()
        log_path = log_dir / f"server-everything-{mode}-{attempt}.log"
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": os.environ.get("HOME", "/"),
            "PORT": str(port),
        }
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(
                [str(node), "--require", str(preload), str(entry), mode],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 15
            while proc.poll() is None and time.monotonic() < deadline:
                if _listening_addresses(port) or _can_connect(port):
                    break
                time.sleep(0.05)
            if proc.poll() is None and time.monotonic() < deadline:
                addresses = _listening_addresses(port)
                # 0100007F is 127.0.0.1; anything else (0.0.0.0, ::) would escape loopback.
                assert addresses <= {"0100007F"}, (
                    f"server-everything {mode} listens on {addresses}, not loopback only"
                )
                yield f"http://127.0.0.1:{port}"
                return
            last_output = log_path.read_text(errors="replace")
            if "EADDRINUSE" not in last_output and "already in use" not in last_output:
                break  # not a port race: do not retry
        finally:
            _stop(proc)
    pytest.fail(f"server-everything {mode} did not start listening:\n{last_output[-2000:]}")


def _can_connect(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=3)


@pytest.fixture(scope="module")
def everything_http_url(
    node: Path,
    loopback_preload: Path,
    server_everything_entry: Path,
    free_port: Callable[[], int],
    tmp_path_factory,
) -> Iterator[str]:
    with _node_http_server(
        node,
        loopback_preload,
        server_everything_entry,
        "streamableHttp",
        free_port,
        tmp_path_factory.mktemp("http"),
    ) as base:
        yield f"{base}/mcp"


@pytest.fixture(scope="module")
def everything_sse_url(
    node: Path,
    loopback_preload: Path,
    server_everything_entry: Path,
    free_port: Callable[[], int],
    tmp_path_factory,
) -> Iterator[str]:
    with _node_http_server(
        node, loopback_preload, server_everything_entry, "sse", free_port, tmp_path_factory.mktemp("sse")
    ) as base:
        yield f"{base}/sse"


# ---------------------------------------------------------------- recorder


class Recorder:
    """What the server sent us; the handlers answering its requests."""

    def __init__(self) -> None:
        self.logs: list[LoggingMessageNotificationParams] = []
        self.updated: list[str] = []
        self.tools_changed = 0
        self.other: list[tuple[str, Any]] = []
        self.sampling: list[CreateMessageRequestParams] = []
        self.elicitations: list[ElicitRequestParams] = []
        self.sampling_text = "Hello from trio-mcp's sampling handler"
        self.elicit: Callable[[ElicitRequestParams], ElicitResult] = lambda p: ElicitResult(action="decline")
        self._changed = trio.Event()

    def _bump(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[], bool], what: str, timeout: float = NOTIFY_WAIT) -> None:
        with trio.move_on_after(timeout):
            while not predicate():
                await self._changed.wait()
            return
        pytest.fail(
            f"no {what} within {timeout} s; logs: {[log.data for log in self.logs]}, updated: {self.updated}"
        )

    def log_texts(self) -> list[str]:
        return [str(log.data) for log in self.logs]

    # -- handlers

    async def on_log(self, params: LoggingMessageNotificationParams) -> None:
        self.logs.append(params)
        self._bump()

    async def on_resource_updated(self, uri: str) -> None:
        self.updated.append(uri)
        self._bump()

    async def on_tools_changed(self) -> None:
        self.tools_changed += 1
        self._bump()

    async def on_notification(self, method: str, params: Any) -> None:
        self.other.append((method, params))
        self._bump()

    async def sampling_handler(self, params: CreateMessageRequestParams) -> CreateMessageResult:
        self.sampling.append(params)
        self._bump()
        return CreateMessageResult(
            role="assistant",
            content=TextContent(text=self.sampling_text),
            model="trio-mcp-test-model",
            stop_reason="endTurn",
        )

    async def elicitation_handler(self, params: ElicitRequestParams) -> ElicitResult:
        self.elicitations.append(params)
        self._bump()
        return self.elicit(params)

    def session_options(self) -> dict[str, Any]:
        return {
            "on_log": self.on_log,
            "on_resource_updated": self.on_resource_updated,
            "on_tools_changed": self.on_tools_changed,
            "on_notification": self.on_notification,
            "sampling_handler": self.sampling_handler,
            "elicitation_handler": self.elicitation_handler,
        }


# ------------------------------------------------------------- connecting


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def connect(
    transport: str,
    request: pytest.FixtureRequest,
    node: Path,
    server_everything_entry: Path,
    recorder: Recorder,
) -> Callable[..., Any]:
    """``async with connect(**session_options) as client``: a session with server-everything."""
    if transport == "stdio":
        params = StdioServerParameters(
            command=str(node),
            args=[str(server_everything_entry), "stdio"],
            name="server-everything",
            close_grace=0.5,
            term_grace=1.0,
        )

        def make() -> Any:
            return StdioTransport(params)

    elif transport == "streamable-http":
        from trio_mcp.transports.http import StreamableHttpTransport

        url = request.getfixturevalue("everything_http_url")

        def make() -> Any:
            return StreamableHttpTransport(url)

    else:
        from trio_mcp.transports.sse import SseTransport

        url = request.getfixturevalue("everything_sse_url")

        def make() -> Any:
            return SseTransport(url)

    @asynccontextmanager
    async def open_client(**options: Any) -> AsyncIterator[ClientSession]:
        options = {"roots": list(ROOTS), **recorder.session_options(), **options}
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(make().run)
            try:
                async with open_session(stream, name=f"everything-{transport}", **options) as client:
                    yield client
            finally:
                with trio.move_on_after(5, shield=True):
                    await stream.aclose()

    return open_client


#: The tools server-everything registers once it knows the client's capabilities.
GATED_TOOLS = frozenset(
    {"get-roots-list", "trigger-sampling-request", "trigger-elicitation-request", "trigger-url-elicitation"}
)


async def _gated_tools(client: ClientSession) -> list[Any]:
    """The tool list, once it holds the capability-gated tools (registered when
    the server handles ``notifications/initialized``)."""
    with trio.move_on_after(NOTIFY_WAIT):
        while True:
            tools = await client.list_all_tools()
            if GATED_TOOLS <= {tool.name for tool in tools}:
                return tools
            await trio.sleep(0.05)
    pytest.fail(
        f"server-everything did not register {sorted(GATED_TOOLS)} for a client declaring their capabilities"
    )


def _texts(result: Any) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


# ------------------------------------------------------------------ tests


async def test_handshake_and_tools(connect: Callable[..., Any], recorder: Recorder, transport: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            assert client.protocol_version == "2025-11-25"
            assert client.server_info.name == "mcp-servers/everything"
            caps = client.server_capabilities
            assert caps.tools is not UNSET and caps.resources.subscribe is True
            assert caps.logging is not UNSET and caps.completions is not UNSET
            assert (
                "Everything" in (client.instructions or "") or client.instructions
            )  # its docs/instructions.md
            await client.ping()

            tools = {tool.name: tool for tool in await _gated_tools(client)}
            if transport == "stdio":
                # Registering the capability-gated tools announced them. (Over HTTP
                # that happens while the client's notifications/initialized is
                # being POSTed, before the GET stream can exist: the server drops
                # the notifications, as the transport allows it to.)
                await _gated_tools(client)
            assert {
                "echo",
                "get-sum",
                "get-tiny-image",
                "get-structured-content",
                "get-annotated-message",
                "get-resource-links",
                "get-resource-reference",
                "trigger-long-running-operation",
                "toggle-simulated-logging",
                "toggle-subscriber-updates",
                "get-roots-list",
                "trigger-sampling-request",
                "trigger-elicitation-request",
                "trigger-url-elicitation",
            } <= set(tools)
            echo = tools["echo"]
            assert echo.title == "Echo Tool"
            assert echo.input_schema["properties"]["message"]["type"] == "string"
            assert echo.annotations.read_only_hint is True and echo.annotations.destructive_hint is False
            assert tools["get-structured-content"].output_schema["properties"].keys() == {
                "temperature",
                "conditions",
                "humidity",
            }

            result = await client.call_tool("echo", {"message": "hello, everything"})
            assert _texts(result) == ["Echo: hello, everything"] and result.is_error is not True

            result = await client.call_tool("get-sum", {"a": 2.5, "b": 4})
            assert _texts(result) == ["The sum of 2.5 and 4 is 6.5."]

            result = await client.call_tool("get-structured-content", {"location": "Chicago"})
            assert result.structured_content == {
                "temperature": 36,
                "conditions": "Light rain / drizzle",
                "humidity": 82,
            }

            result = await client.call_tool("get-tiny-image", {})
            images = [block for block in result.content if isinstance(block, ImageContent)]
            assert len(images) == 1 and images[0].mime_type == "image/png"
            assert base64.b64decode(images[0].data).startswith(PNG_MAGIC)

            result = await client.call_tool(
                "get-annotated-message", {"messageType": "error", "includeImage": True}
            )
            first, image = result.content
            assert isinstance(first, TextContent) and first.text == "Error: Operation failed"
            assert first.annotations.priority == 1.0 and first.annotations.audience == ["user", "assistant"]
            assert isinstance(image, ImageContent) and image.annotations.audience == ["user"]

            result = await client.call_tool("get-resource-links", {"count": 2})
            links = [block for block in result.content if isinstance(block, ResourceLink)]
            assert [link.uri for link in links] == [
                "demo://resource/dynamic/blob/1",
                "demo://resource/dynamic/text/2",
            ]
            assert links[1].mime_type == "text/plain" and links[1].name == "Text Resource 2"

            result = await client.call_tool(
                "get-resource-reference", {"resourceType": "Text", "resourceId": 4}
            )
            embedded = [block for block in result.content if isinstance(block, EmbeddedResource)]
            assert embedded[0].resource.uri == "demo://resource/dynamic/text/4"
            assert embedded[0].resource.text.startswith("Resource 4: This is a plaintext resource")

            # Bad arguments and unknown tools: the SDK reports both as isError results.
            result = await client.call_tool("get-sum", {"a": "two"})
            assert result.is_error is True and "a" in " ".join(_texts(result))
            result = await client.call_tool("no-such-tool", {})
            assert result.is_error is True and "no-such-tool" in " ".join(_texts(result))


async def test_sampling(connect: Callable[..., Any], recorder: Recorder) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            await _gated_tools(client)
            result = await client.call_tool(
                "trigger-sampling-request", {"prompt": "What is trio?", "maxTokens": 42}
            )
            (request,) = recorder.sampling
            assert request.max_tokens == 42 and request.temperature == 0.7
            assert request.system_prompt == "You are a helpful test server."
            (message,) = request.messages
            assert message.role == "user"
            assert message.content.text == "Resource trigger-sampling-request context: What is trio?"
            text = _texts(result)[0]
            assert text.startswith("LLM sampling result:")
            assert recorder.sampling_text in text and '"model": "trio-mcp-test-model"' in text


async def test_form_elicitation(connect: Callable[..., Any], recorder: Recorder) -> None:
    answer = {
        "name": "Ada Lovelace",
        "check": True,
        "email": "ada@example.com",
        "integer": 7,
        "untitledMultipleSelectEnum": ["Piano", "Drums"],
        "legacyTitledEnum": "pet-2",
    }
    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            await _gated_tools(client)

            recorder.elicit = lambda params: ElicitResult(action="accept", content=answer)
            result = await client.call_tool("trigger-elicitation-request", {})
            (request,) = recorder.elicitations
            assert request.message == "Please provide inputs for the following fields:"
            assert request.mode is UNSET or request.mode == "form"
            # Every primitive and enum variant of the form schema decoded.
            schema = request.requested_schema
            assert schema.required == ["name"]
            assert set(schema.properties) == {
                "name",
                "check",
                "firstLine",
                "email",
                "homepage",
                "birthdate",
                "integer",
                "number",
                "untitledSingleSelectEnum",
                "untitledMultipleSelectEnum",
                "titledSingleSelectEnum",
                "titledMultipleSelectEnum",
                "legacyTitledEnum",
            }
            texts = "\n".join(_texts(result))
            assert "User provided the requested information" in texts
            assert "- Name: Ada Lovelace" in texts and "- Favorite Integer: 7" in texts

            recorder.elicit = lambda params: ElicitResult(action="decline")
            result = await client.call_tool("trigger-elicitation-request", {})
            assert "declined" in _texts(result)[0]

            recorder.elicit = lambda params: ElicitResult(action="cancel")
            result = await client.call_tool("trigger-elicitation-request", {})
            assert "cancelled" in _texts(result)[0]


async def test_url_elicitation(connect: Callable[..., Any], recorder: Recorder) -> None:
    url = "https://auth.example.com/authorize?state=trio"
    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            await _gated_tools(client)
            recorder.elicit = lambda params: ElicitResult(action="accept")

            # Request path: elicitation/create in URL mode.
            result = await client.call_tool("trigger-url-elicitation", {"url": url, "elicitationId": "el-1"})
            (request,) = recorder.elicitations
            assert request.mode == "url" and request.url == url and request.elicitation_id == "el-1"
            assert "User completed the URL elicitation flow" in _texts(result)[0]

            # Error path: -32042 names a prerequisite URL elicitation; a retry proceeds.
            with pytest.raises(UrlElicitationRequired) as raised:
                await client.call_tool("trigger-url-elicitation", {"url": url, "errorPath": True})
            assert raised.value.code == -32042
            (prerequisite,) = raised.value.data["elicitations"]
            assert prerequisite["mode"] == "url" and prerequisite["url"] == "https://modelcontextprotocol.io"
            result = await client.call_tool("trigger-url-elicitation", {"url": url, "errorPath": True})
            assert "User completed the URL elicitation flow" in _texts(result)[0]
            assert len(recorder.elicitations) == 2


async def test_roots(connect: Callable[..., Any], recorder: Recorder) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            # 350 ms after the handshake the server asks for our roots by itself.
            await recorder.wait_for(
                lambda: "Roots updated: 1 root(s) received from client" in recorder.log_texts(),
                "roots/list request",
            )
            result = await client.call_tool("get-roots-list", {})
            text = _texts(result)[0]
            assert "Current MCP Roots (1 total)" in text and "URI: file:///srv/project" in text

            # roots/list_changed makes it ask again.
            await client.set_roots([*ROOTS, Root(uri="file:///srv/other", name="other")])
            await recorder.wait_for(
                lambda: "Roots updated: 2 root(s) received from client" in recorder.log_texts(),
                "roots/list request after notifications/roots/list_changed",
            )
            text = _texts(await client.call_tool("get-roots-list", {}))[0]
            assert "Current MCP Roots (2 total)" in text and "2. other\n   URI: file:///srv/other" in text


_SIMULATED = re.compile(r"^(Debug|Info|Notice|Warning|Error|Critical|Alert|Emergency)[- ]level[- ]message")


async def test_logging(connect: Callable[..., Any], recorder: Recorder) -> None:
    uri = "demo://resource/dynamic/text/1"
    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            # The subscribe handler logs at info level, through the level we set.
            await client.set_logging_level("emergency")
            await client.subscribe_resource(uri)
            await client.ping()
            await client.set_logging_level("info")
            await client.unsubscribe_resource(uri)
            await recorder.wait_for(
                lambda: any(
                    t.startswith(f"Received Unsubscribe Resource request: {uri}")
                    for t in recorder.log_texts()
                ),
                "info log of resources/unsubscribe",
            )
            assert not any(t.startswith("Received Subscribe Resource request") for t in recorder.log_texts())
            unsubscribed = next(
                log for log in recorder.logs if str(log.data).startswith("Received Unsubscribe")
            )
            assert unsubscribed.level == "info"

            # Simulated logging: one random-levelled message at once, then every 5 s.
            await client.set_logging_level("debug")
            result = await client.call_tool("toggle-simulated-logging", {})
            assert _texts(result)[0].startswith("Started simulated, random-leveled logging")
            await recorder.wait_for(
                lambda: any(_SIMULATED.match(t) for t in recorder.log_texts()), "simulated log message"
            )
            simulated = next(log for log in recorder.logs if _SIMULATED.match(str(log.data)))
            assert str(simulated.data).lower().startswith(simulated.level)  # "Error-level message" at "error"
            result = await client.call_tool("toggle-simulated-logging", {})
            assert _texts(result)[0].startswith("Stopped simulated logging")


async def test_progress(connect: Callable[..., Any]) -> None:
    progress: list[tuple[float, float | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total))

    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            result = await client.call_tool(
                "trigger-long-running-operation", {"duration": 0.3, "steps": 3}, on_progress=on_progress
            )
            assert _texts(result) == ["Long running operation completed. Duration: 0.3 seconds, Steps: 3."]
            assert progress == [(1, 3), (2, 3), (3, 3)]


async def test_resource_subscription(connect: Callable[..., Any], recorder: Recorder) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            resources = await client.list_all_resources()
            watched = next(r.uri for r in resources if r.uri.endswith("/features.md"))
            await client.subscribe_resource(watched)
            result = await client.call_tool("toggle-subscriber-updates", {})
            assert _texts(result)[0].startswith("Started simulated resource updated notifications")
            await recorder.wait_for(
                lambda: watched in recorder.updated, f"notifications/resources/updated for {watched}"
            )
            result = await client.call_tool("toggle-subscriber-updates", {})
            assert _texts(result)[0].startswith("Stopped simulated resource updates")
            await client.unsubscribe_resource(watched)
            assert set(recorder.updated) == {watched}


async def test_completions(connect: Callable[..., Any]) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            prompt = PromptReference(name="completable-prompt")
            result = await client.complete(prompt, "department", "E")
            assert result.completion.values == ["Engineering"]
            # The second argument's completer reads the first from the context.
            result = await client.complete(prompt, "name", "", context={"department": "Sales"})
            assert result.completion.values == ["David", "Eve", "Frank"]
            result = await client.complete(prompt, "name", "A", context={"department": "Engineering"})
            assert result.completion.values == ["Alice"]

            result = await client.complete(PromptReference(name="resource-prompt"), "resourceType", "B")
            assert result.completion.values == ["Blob"]

            template = ResourceTemplateReference(uri=TEXT_TEMPLATE)
            assert (await client.complete(template, "resourceId", "12")).completion.values == ["12"]
            assert (await client.complete(template, "resourceId", "x")).completion.values == []


async def test_resources(connect: Callable[..., Any]) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            resources = {r.uri: r for r in await client.list_all_resources()}
            features = resources["demo://resource/static/document/features.md"]
            assert features.name == "features.md" and features.mime_type == "text/markdown"
            (contents,) = (await client.read_resource(features.uri)).contents
            assert contents.uri == features.uri and contents.mime_type == "text/markdown"
            assert contents.text.startswith("# Everything Server - Features")

            templates = {t.uri_template: t for t in await client.list_all_resource_templates()}
            assert {TEXT_TEMPLATE, BLOB_TEMPLATE} <= set(templates)
            assert templates[TEXT_TEMPLATE].name == "Dynamic Text Resource"

            (text,) = (await client.read_resource("demo://resource/dynamic/text/7")).contents
            assert text.mime_type == "text/plain" and text.text.startswith(
                "Resource 7: This is a plaintext resource"
            )
            (blob,) = (await client.read_resource("demo://resource/dynamic/blob/7")).contents
            assert blob.text is UNSET
            assert base64.b64decode(blob.blob).decode().startswith("Resource 7: This is a base64 blob")

            with pytest.raises(McpError):
                await client.read_resource("demo://resource/dynamic/text/not-a-number")
            with pytest.raises(McpError):
                await client.read_resource("demo://no/such/resource")


async def test_prompts(connect: Callable[..., Any]) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            prompts = {p.name: p for p in await client.list_all_prompts()}
            assert {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"} <= set(prompts)
            arguments = {a.name: a.required for a in prompts["args-prompt"].arguments}
            assert arguments == {"city": True, "state": False}

            (message,) = (await client.get_prompt("simple-prompt")).messages
            assert (
                message.role == "user"
                and message.content.text == "This is a simple prompt without arguments."
            )

            (message,) = (
                await client.get_prompt("args-prompt", {"city": "Paris", "state": "Texas"})
            ).messages
            assert message.content.text == "What's weather in Paris, Texas?"

            intro, embedded = (
                await client.get_prompt("resource-prompt", {"resourceType": "Blob", "resourceId": "3"})
            ).messages
            assert intro.content.text.startswith("This prompt includes the Blob resource with id: 3")
            assert isinstance(embedded.content, EmbeddedResource)
            assert embedded.content.resource.uri == "demo://resource/dynamic/blob/3"
            assert base64.b64decode(embedded.content.resource.blob).decode().startswith("Resource 3:")

            with pytest.raises(McpError):
                await client.get_prompt("args-prompt", {})  # city is required


async def test_cancellation(connect: Callable[..., Any]) -> None:
    """A cancel scope around a call sends notifications/cancelled: the TypeScript SDK then never
    answers the request, and the session goes on."""
    progress: list[float] = []
    scope = trio.CancelScope()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)
        scope.cancel()  # at the first step (0.2 s in; the next one comes 0.2 s later)

    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            with scope:
                await client.call_tool(
                    "trigger-long-running-operation", {"duration": 0.8, "steps": 4}, on_progress=on_progress
                )
            assert scope.cancelled_caught and progress == [1]
            await trio.sleep(0.8)  # past the operation's end: an answer would have arrived by now
            assert _texts(await client.call_tool("echo", {"message": "still here"})) == ["Echo: still here"]
            stats = client.statistics()
            assert stats.unmatched_responses == 0 and stats.pending_calls == 0
            assert progress == [1]  # no progress for a cancelled request either


async def test_concurrent_calls(connect: Callable[..., Any], recorder: Recorder) -> None:
    """Calls, progress and a server-to-client request interleaved on one session."""
    results: dict[str, Any] = {}
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def call(key: str, name: str, arguments: dict[str, Any], **options: Any) -> None:
        results[key] = _texts(await client.call_tool(name, arguments, **options))

    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            await _gated_tools(client)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    lambda: call(
                        "slow",
                        "trigger-long-running-operation",
                        {"duration": 0.3, "steps": 3},
                        on_progress=on_progress,
                    )
                )
                nursery.start_soon(call, "sampling", "trigger-sampling-request", {"prompt": "concurrently"})
                for i in range(8):
                    nursery.start_soon(call, f"sum{i}", "get-sum", {"a": i, "b": 100})
            assert results["slow"] == ["Long running operation completed. Duration: 0.3 seconds, Steps: 3."]
            assert progress == [1, 2, 3]
            assert recorder.sampling_text in results["sampling"][0]
            for i in range(8):
                assert results[f"sum{i}"] == [f"The sum of {i} and 100 is {i + 100}."]


# ------------------------------------------------------------------ tasks
#
# ``simulate-research-query`` is task-required (``execution.taskSupport``):
# it moves through four stages with a status message each (~1.5 s apart),
# and with ``ambiguous: true`` turns ``input_required`` and sends an
# elicitation (tied to the task by ``io.modelcontextprotocol/related-task``)
# on the ``tasks/result`` request the client then has open.


async def test_task_required_tool_runs_as_a_task(connect: Callable[..., Any], recorder: Recorder) -> None:
    from trio_mcp.protocol import META_RELATED_TASK

    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            tools = {t.name: t for t in await _gated_tools(client)}
            assert client.tasks.required_by(tools["simulate-research-query"])
            # called plainly, it refuses (as a tool error carrying the -32601 text)
            plain = await client.call_tool("simulate-research-query", {"topic": "trio"})
            assert plain.is_error is True and "requires task augmentation" in "".join(_texts(plain))
            recorder.elicit = lambda params: ElicitResult(
                action="accept", content={"interpretation": "technical"}
            )
            statuses: list[tuple[str, str | None]] = []
            result = await client.tasks.run_tool(
                "simulate-research-query",
                {"topic": "trio", "ambiguous": True},
                on_status=lambda info: statuses.append((info.status, info.status_message)),
            )
            text = "".join(_texts(result))
            assert text.startswith("# Research Report: trio (technical)")
            assert result.meta[META_RELATED_TASK]["taskId"]
            (question,) = recorder.elicitations
            assert question.meta[META_RELATED_TASK]["taskId"] == result.meta[META_RELATED_TASK]["taskId"]
            seen = [status for status, _ in statuses]
            assert seen[0] == "working" and "input_required" in seen and seen[-1] == "completed"


async def test_task_cancelled_by_the_client(connect: Callable[..., Any]) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            info = await client.tasks.call_tool("simulate-research-query", {"topic": "cancel me"})
            assert info.status == "working" and info.ttl_ms and info.poll_interval_ms
            await client.tasks.cancel(info.task_id)
            assert (await client.tasks.get(info.task_id)).status == "cancelled"
            assert info.task_id in {t.task_id for t in await client.tasks.list_tasks()}


def test_cli_call_runs_a_task_required_tool(node: Path, server_everything_entry: Path) -> None:
    """``trio-mcp call simulate-research-query topic=...`` over stdio: the result, statuses on stderr."""
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "trio_mcp.cli",
            "call",
            "simulate-research-query",
            "topic=trio",
            "--",
            str(node),
            str(server_everything_entry),
            "stdio",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# Research Report: trio")
    statuses = re.findall(r"^task \w+: (\w+)", out.stderr, re.MULTILINE)
    assert statuses[0] == "working" and statuses[-1] == "completed", out.stderr
