"""WebSocket interop with the official Python SDK ``mcp[ws]==1.30.0``
(the last release with a WebSocket transport; subprotocol ``mcp``).

1. Our client (:class:`WebSocketTransport` + ``open_session``) against the
   SDK's WebSocket server: ``sdk_ws_server.py``, a FastMCP app served by
   uvicorn in a subprocess of the SDK's interpreter (``conftest.py``).
2. The SDK's ``websocket_client`` (``sdk_ws_client.py``, a subprocess that
   prints a JSON report) against our :class:`WebSocketServer` serving
   ``examples/everything_server.py``'s ``app`` in this process.

Every server listens on 127.0.0.1 on a port chosen at run time, every
process started is stopped, every wait is bounded. Skipped only when
``bash scripts/setup-interop-ws`` never ran.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest
import trio

from trio_mcp._util import collapse_groups
from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.protocol import (
    ConnectionClosed,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    LoggingMessageNotificationParams,
    Root,
    TextContent,
)
from trio_mcp.transports import TransportError
from trio_mcp.transports.websocket import SUBPROTOCOL, WebSocketServer, WebSocketStream, WebSocketTransport

pytestmark = pytest.mark.interop

HERE = Path(__file__).resolve().parent
EVERYTHING = HERE.parents[1] / "examples" / "everything_server.py"
SDK_WS_CLIENT = HERE / "sdk_ws_client.py"
#: Bound of any one exchange with a peer, and of connecting or closing.
TIMEOUT = 10.0
#: Bound of a whole test of our client (a few exchanges).
TEST_TIMEOUT = 30.0
#: The SDK client's whole run against our server (about two seconds here).
CLIENT_TIMEOUT = 60.0
#: Seconds the CLI may take to report its address.
CLI_START_TIMEOUT = 20.0
SDK_VERSION = "1.30.0"
#: What both sides negotiate: the newest version the SDK 1.30 speaks.
NEGOTIATED = "2025-11-25"
PNG_MAGIC_HEX = "89504e470d0a1a0a"


# ================================================ 1. our client -> SDK server


async def shouting_sampler(params: CreateMessageRequestParams) -> CreateMessageResult:
    text = params.messages[0].content.text  # type: ignore[union-attr]
    return CreateMessageResult(role="assistant", content=TextContent(text=text.upper()), model="trio-shouter")


@asynccontextmanager
async def connect(url: str, **options: Any) -> AsyncIterator[tuple[WebSocketStream, ClientSession]]:
    """A WebSocket connection and a session over it for a test, closed on
    exit; the whole block is bounded by ``TEST_TIMEOUT``."""
    with trio.fail_after(TEST_TIMEOUT), collapse_groups():
        async with trio.open_nursery() as nursery:
            with trio.fail_after(TIMEOUT):
                stream = await nursery.start(WebSocketTransport(url).run)
            try:
                async with open_session(stream, **options) as session:
                    yield stream, session
            finally:
                with trio.fail_after(TIMEOUT):
                    await stream.aclose()


async def test_our_client_initializes_with_the_sdk_server(sdk_ws_server: Any) -> None:
    async with connect(sdk_ws_server.url, sampling_handler=shouting_sampler) as (stream, session):
        assert stream.subprotocol == SUBPROTOCOL
        assert session.era == "handshake"
        assert session.protocol_version == NEGOTIATED
        assert session.server_info is not None
        assert (session.server_info.name, session.server_info.version) == ("sdk-ws-server", SDK_VERSION)
        assert session.instructions == "The SDK 1.30 WebSocket interop peer."
        caps = session.server_capabilities
        for name in ("tools", "resources", "prompts", "logging"):
            assert getattr(caps, name) is not None, name
        with trio.fail_after(TIMEOUT):
            await session.ping()
            # what the SDK server saw of our initialize
            result = await session.call_tool("whoami", {})
        assert not result.is_error
        assert result.structured_content == {
            "client": "trio-mcp",
            "protocol_version": NEGOTIATED,
            "sampling": True,
        }
    assert stream.close_code == 1000


async def test_our_client_lists_and_calls_sdk_tools(sdk_ws_server: Any) -> None:
    async with connect(sdk_ws_server.url) as (_, session):
        with trio.fail_after(TIMEOUT):
            tools = {t.name: t for t in await session.list_all_tools()}
            assert set(tools) >= {"add", "echo", "count", "chatty", "ask", "roots", "signup", "whoami"}
            add_schema = msgspec.to_builtins(tools["add"].input_schema)
            assert add_schema["properties"].keys() == {"a", "b"}
            assert sorted(add_schema["required"]) == ["a", "b"]

            result = await session.call_tool("add", {"a": 2, "b": 40})
            assert not result.is_error
            assert [c.text for c in result.content] == ["42"]  # type: ignore[union-attr]
            assert result.structured_content == {"result": 42}

            result = await session.call_tool("echo", {"text": "héllo ✓ over WebSocket"})
            assert [c.text for c in result.content] == ["héllo ✓ over WebSocket"]  # type: ignore[union-attr]

            # FastMCP answers an unknown tool with a tool error (isError), not a JSON-RPC error
            result = await session.call_tool("no_such_tool", {})
            assert result.is_error
            assert "no_such_tool" in result.content[0].text  # type: ignore[union-attr]

            # a bad argument: also a tool error
            result = await session.call_tool("add", {"a": "two", "b": 40})
            assert result.is_error


async def test_our_client_gets_sdk_progress(sdk_ws_server: Any) -> None:
    async with connect(sdk_ws_server.url) as (_, session):
        events: dict[int, list[tuple[float, float | None, str | None]]] = {}

        async def call(steps: int) -> None:
            seen: list[tuple[float, float | None, str | None]] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                seen.append((progress, total, message))

            result = await session.call_tool("count", {"steps": steps}, on_progress=on_progress)
            assert [c.text for c in result.content] == [f"counted to {steps}"]  # type: ignore[union-attr]
            events[steps] = seen

        with trio.fail_after(TIMEOUT):
            await call(3)
            assert events[3] == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]
            # concurrent calls: each progress token reaches its own callback
            async with trio.open_nursery() as nursery:
                for steps in (4, 5, 6):
                    nursery.start_soon(call, steps)
        for steps in (4, 5, 6):
            assert events[steps] == [(i, steps, f"step {i} of {steps}") for i in range(1, steps + 1)]


async def test_our_client_gets_sdk_log_notifications(sdk_ws_server: Any) -> None:
    logs: list[LoggingMessageNotificationParams] = []
    enough = trio.Event()
    expected = 0

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)
        if len(logs) >= expected:
            enough.set()

    async with connect(sdk_ws_server.url, on_log=on_log) as (_, session):
        with trio.fail_after(TIMEOUT):
            # logging/setLevel reaches the SDK server's handler: debug is filtered out
            await session.set_logging_level("info")
            expected = 3
            result = await session.call_tool("chatty", {})
            assert [c.text for c in result.content] == ["sent 3 log messages"]  # type: ignore[union-attr]
            await enough.wait()
            assert [(p.level, p.logger, p.data) for p in logs] == [
                ("info", "sdk-ws", "info from the SDK"),
                ("warning", "sdk-ws", "warning from the SDK"),
                ("error", "sdk-ws", "error from the SDK"),
            ]
            await session.set_logging_level("debug")  # the level is shared by the server process: reset it
            logs.clear()
            enough = trio.Event()
            expected = 4
            await session.call_tool("chatty", {})
            await enough.wait()
            assert [p.level for p in logs] == ["debug", "info", "warning", "error"]


async def test_our_client_answers_sdk_sampling(sdk_ws_server: Any) -> None:
    asked: list[CreateMessageRequestParams] = []

    async def sampler(params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        return await shouting_sampler(params)

    async with connect(sdk_ws_server.url, sampling_handler=sampler) as (_, session):
        with trio.fail_after(TIMEOUT):
            result = await session.call_tool("ask", {"prompt": "what is trio?"})
    assert not result.is_error
    assert [c.text for c in result.content] == ["trio-shouter: WHAT IS TRIO?"]  # type: ignore[union-attr]
    assert len(asked) == 1
    assert asked[0].max_tokens == 32
    assert asked[0].system_prompt == "Answer briefly."


async def test_our_client_without_sampling_gets_a_tool_error(sdk_ws_server: Any) -> None:
    # no sampling handler: our client answers the SDK's sampling request with
    # an error, which the SDK server turns into a tool error; the session lives on
    async with connect(sdk_ws_server.url) as (_, session):
        with trio.fail_after(TIMEOUT):
            result = await session.call_tool("ask", {"prompt": "anyone?"})
            assert result.is_error
            result = await session.call_tool("add", {"a": 1, "b": 1})
            assert result.structured_content == {"result": 2}


async def test_our_client_answers_sdk_roots_and_elicitation(sdk_ws_server: Any) -> None:
    asked: list[ElicitRequestParams] = []

    async def elicit(params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"name": "Ada", "age": 36, "newsletter": True})

    roots = [Root(uri="file:///srv/project", name="project"), Root(uri="file:///tmp", name="scratch")]
    async with connect(sdk_ws_server.url, roots=roots, elicitation_handler=elicit) as (_, session):
        with trio.fail_after(TIMEOUT):
            result = await session.call_tool("roots", {})
            assert not result.is_error, result
            assert result.structured_content == {
                "result": ["project=file:///srv/project", "scratch=file:///tmp"]
            }

            result = await session.call_tool("signup", {})
            assert not result.is_error, result
            assert [c.text for c in result.content] == ["signed up Ada (36), newsletter True"]  # type: ignore[union-attr]
    [params] = asked
    assert params.message == "Please sign up"
    schema = msgspec.to_builtins(params.requested_schema)
    assert set(schema["properties"]) == {"name", "age", "newsletter"}
    assert schema["required"] == ["name"]


async def test_our_client_cancels_an_sdk_tool_call(sdk_ws_server: Any) -> None:
    async with connect(sdk_ws_server.url) as (_, session):
        with trio.fail_after(TIMEOUT):
            before = (await session.call_tool("cancellations", {})).structured_content["result"]
            with trio.move_on_after(0.5) as scope:  # our notifications/cancelled reaches the SDK server
                await session.call_tool("wait_forever", {})
            assert scope.cancelled_caught
            while (await session.call_tool("cancellations", {})).structured_content["result"] == before:
                await trio.sleep(0.02)
            # the session goes on
            result = await session.call_tool("add", {"a": 20, "b": 22})
            assert result.structured_content == {"result": 42}


async def test_our_client_reads_sdk_resources_and_prompts(sdk_ws_server: Any) -> None:
    async with connect(sdk_ws_server.url) as (_, session):
        with trio.fail_after(TIMEOUT):
            resources = await session.list_all_resources()
            assert [(r.uri, r.mime_type) for r in resources] == [("sdk://greeting", "text/plain")]
            read = await session.read_resource("sdk://greeting")
            assert [(c.uri, c.text) for c in read.contents] == [("sdk://greeting", "hello from the SDK")]

            prompts = await session.list_all_prompts()
            assert [p.name for p in prompts] == ["greet"]
            prompt = await session.get_prompt("greet", {"name": "Ada"})
            assert [(m.role, m.content.text) for m in prompt.messages] == [  # type: ignore[union-attr]
                ("user", "Please greet Ada.")
            ]


async def test_our_client_sees_the_sdk_server_go_away(sdk_ws_server_factory: Any) -> None:
    """The SDK server stops while we are connected: the session ends with a
    connection error, calls fail fast, and nothing hangs."""
    server: Any = sdk_ws_server_factory()
    with trio.fail_after(3 * TIMEOUT):
        with collapse_groups():
            async with trio.open_nursery() as nursery:
                stream = await nursery.start(WebSocketTransport(server.url).run)
                try:
                    async with open_session(stream) as session:
                        result = await session.call_tool("add", {"a": 1, "b": 2})
                        assert result.structured_content == {"result": 3}
                        await trio.to_thread.run_sync(server.stop)
                        await stream.wait_closed()
                        with pytest.raises((ConnectionClosed, TransportError)):
                            await session.call_tool("add", {"a": 1, "b": 2})
                except TransportError:
                    pass  # the session may end with the transport's error: that is the point
        # uvicorn closes open WebSockets with 1012 (Service Restart) when it stops
        assert stream.close_code == 1012


# ================================================ 2. SDK client -> our server


def _load_everything() -> ModuleType:
    """A fresh copy of ``examples/everything_server.py`` (its own ``app``)."""
    name = "_trio_mcp_interop_ws_everything"
    spec = importlib.util.spec_from_file_location(name, EVERYTHING)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


async def _serve_and_run_sdk_client(python: Path, sdk_ws_env: dict[str, str]) -> dict[str, Any]:
    everything = _load_everything()
    server = WebSocketServer(everything.app)
    async with trio.open_nursery() as nursery:
        with trio.fail_after(TIMEOUT):
            info = await nursery.start(server.run)
        try:
            assert info.url.startswith("ws://127.0.0.1:") and info.url.endswith("/mcp")
            with trio.move_on_after(CLIENT_TIMEOUT) as scope:  # cancelling kills the process
                proc = await trio.run_process(
                    [str(python), str(SDK_WS_CLIENT), info.url],
                    env=sdk_ws_env,
                    stdin=b"",
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )
            if scope.cancelled_caught:
                return {"driver_error": f"the SDK client took more than {CLIENT_TIMEOUT} s"}
            stderr = proc.stderr.decode(errors="replace")[-4000:]
            if proc.returncode != 0:
                return {"driver_error": f"the SDK client exited with {proc.returncode}; stderr:\n{stderr}"}
            report: dict[str, Any] = json.loads(proc.stdout)
            report["stderr"] = stderr
            # the SDK client closed its connection: our server lets it go
            with trio.move_on_after(TIMEOUT):
                while server.statistics()["connections"]:
                    await trio.sleep(0.01)
            report["server_statistics"] = server.statistics()
            report["lifespan_counter"] = everything.app.state.counter
            return report
        finally:
            server.stop()


@pytest.fixture(scope="module")
def sdk_report(sdk_ws_python: Path, sdk_ws_env: dict[str, str]) -> dict[str, Any]:
    """The SDK client's report of one session with our server (run once per module)."""
    report = trio.run(_serve_and_run_sdk_client, sdk_ws_python, sdk_ws_env)
    if "driver_error" in report:
        pytest.fail(report["driver_error"])
    assert "error" not in report, f"the SDK client failed: {report['error']}\n{report['stderr']}"
    return report


def step(report: dict[str, Any], name: str) -> dict[str, Any]:
    result = report["steps"].get(name)
    assert result is not None, f"the SDK client did not run {name!r}: {report['steps'].keys()}"
    assert "error" not in result, f"{name}: {result['error']}\n{report['stderr']}"
    return result


def test_sdk_client_initializes_with_our_server(sdk_report: dict[str, Any]) -> None:
    init = step(sdk_report, "initialize")
    assert sdk_report["sdk"] == SDK_VERSION
    assert init["protocol_version"] == NEGOTIATED
    assert init["server"] == {"name": "trio-mcp-everything", "version": "0.1.0"}
    assert init["instructions"].startswith("A demo of every MCP feature")
    assert set(init["capabilities"]) >= {"tools", "resources", "prompts", "logging", "completions"}
    assert step(sdk_report, "ping") == {"ok": True}


def test_sdk_client_closes_cleanly(sdk_report: dict[str, Any]) -> None:
    assert sdk_report["closed"] is True
    stats = sdk_report["server_statistics"]
    assert stats["connections"] == 0, stats
    assert (stats["accepted"], stats["rejected"]) == (1, 0), stats


def test_sdk_client_lists_our_tools(sdk_report: dict[str, Any]) -> None:
    tools = step(sdk_report, "tools_list")
    assert set(tools["names"]) >= {
        "echo",
        "add",
        "long_running_operation",
        "log_messages",
        "sample_llm",
        "collect_preferences",
        "get_weather",
        "get_tiny_image",
    }
    assert tools["echo_input"]["properties"]["message"]["type"] == "string"
    assert tools["echo_input"]["required"] == ["message"]
    assert tools["add_output"]["properties"]["result"]["type"] == "number"
    assert tools["echo_read_only"] is True


def test_sdk_client_calls_our_tools(sdk_report: dict[str, Any]) -> None:
    echo = step(sdk_report, "echo")
    assert (echo["is_error"], echo["texts"]) == (False, ["hello over WebSocket"])
    # structured output, validated by the SDK client against the output schema
    add = step(sdk_report, "add")
    assert add["is_error"] is False
    assert add["structured"] == {"result": 42}
    assert [float(t) for t in add["texts"]] == [42.0]
    weather = step(sdk_report, "weather")
    assert weather["is_error"] is False
    assert weather["structured"]["city"] == "Lisbon"
    assert set(weather["structured"]) == {"city", "temperature_c", "conditions", "humidity"}
    image = step(sdk_report, "image")
    assert [c["type"] for c in image["content"]] == ["text", "image", "text"]
    assert image["content"][1] == {"type": "image", "mimeType": "image/png", "hex": PNG_MAGIC_HEX}


def test_sdk_client_unknown_tool(sdk_report: dict[str, Any]) -> None:
    unknown = step(sdk_report, "unknown_tool")
    # either form is allowed by the specification; ours is the JSON-RPC error
    assert unknown.get("jsonrpc_error") == -32602 or unknown.get("is_error") is True, unknown
    assert "no_such_tool" in json.dumps(unknown)


def test_sdk_client_gets_our_progress(sdk_report: dict[str, Any]) -> None:
    progress = step(sdk_report, "progress")
    assert progress["is_error"] is False
    assert progress["texts"] == ["Long running operation completed: 4 steps in 0.2 seconds."]
    assert progress["events"] == [[i, 4, f"step {i} of 4"] for i in range(1, 5)]


def test_sdk_client_gets_our_logs(sdk_report: dict[str, Any]) -> None:
    logging = step(sdk_report, "logging")
    assert logging["is_error"] is False
    # logging/setLevel "info" from the SDK client: debug is filtered out
    assert [(m["level"], m["logger"]) for m in logging["messages"]] == [
        ("info", "everything"),
        ("notice", "everything"),
        ("warning", "everything"),
        ("error", "everything"),
    ]
    assert logging["messages"][-1]["data"] == {"error": "something failed", "recoverable": True}


def test_sdk_client_answers_our_sampling(sdk_report: dict[str, Any]) -> None:
    sampling = step(sdk_report, "sampling")
    assert sampling["is_error"] is False
    assert sampling["texts"] == ["LLM (sdk-ws-model) says: WHAT IS TRIO?"]
    assert sampling["requests"] == [
        {
            "messages": [{"role": "user", "text": "what is trio?"}],
            "maxTokens": 40,
            "systemPrompt": "You are a helpful assistant.",
            "temperature": 0.2,
        }
    ]


def test_sdk_client_answers_our_elicitation(sdk_report: dict[str, Any]) -> None:
    elicitation = step(sdk_report, "elicitation")
    assert elicitation["is_error"] is False
    assert elicitation["texts"] == ["Hello Ada (36); newsletter: yes; theme: dark."]
    [request] = elicitation["requests"]
    assert request["message"] == "Tell us about yourself"
    assert request["properties"] == ["age", "name", "newsletter", "theme"]
    assert request["required"] == ["name"]


def test_sdk_client_reads_our_resources(sdk_report: dict[str, Any]) -> None:
    listed = step(sdk_report, "resources_list")
    assert set(listed["uris"]) >= {"demo://readme", "demo://logo.png", "demo://counter"}
    assert set(listed["templates"]) >= {"demo://greeting/{name}", "demo://bytes/{size}"}
    [readme] = step(sdk_report, "read_readme")["contents"]
    assert readme["uri"] == "demo://readme"
    assert readme["mimeType"] == "text/markdown"
    assert readme["text"].startswith("# Everything demo")
    [logo] = step(sdk_report, "read_logo")["contents"]
    assert (logo["mimeType"], logo["blob_hex"]) == ("image/png", PNG_MAGIC_HEX)
    [greeting] = step(sdk_report, "read_greeting")["contents"]
    assert (greeting["uri"], greeting["text"]) == ("demo://greeting/Ada", "Hello, Ada!")


def test_sdk_client_gets_our_prompts(sdk_report: dict[str, Any]) -> None:
    listed = step(sdk_report, "prompts_list")
    assert set(listed["names"]) >= {"simple", "code_review", "explain_resource"}
    assert listed["code_review_args"] == [["code", True], ["language", False]]
    review = step(sdk_report, "prompt_code_review")
    assert review["description"] == "Ask for a review of some code."
    assert [(m["role"], m["type"]) for m in review["messages"]] == [("user", "text"), ("assistant", "text")]
    assert "```python\nprint(1)\n```" in review["messages"][0]["text"]
    explain = step(sdk_report, "prompt_explain")
    first, second = explain["messages"]
    assert (first["type"], first["uri"]) == ("resource", "demo://readme")
    assert first["text"].startswith("# Everything demo")
    assert (second["type"], second["text"]) == ("text", "Please explain the resource above.")
    assert step(sdk_report, "completion")["values"] == ["python"]


def test_sdk_client_against_our_cli_ws_server(
    sdk_ws_python: Path, sdk_ws_env: dict[str, str], spawn: Any
) -> None:
    """``trio-mcp run examples/everything_server.py -t ws --port 0`` (a
    subprocess) serves the SDK client too."""
    # The CLI stops cleanly on SIGINT; a process started with SIGINT ignored
    # (a background job of a script) passes that on: then SIGTERM.
    sigint_usable = signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    with tempfile.TemporaryFile() as log:
        server = spawn(
            [sys.executable, "-m", "trio_mcp.cli", "run", str(EVERYTHING), "-t", "ws", "--port", "0"],
            first_signal=signal.SIGINT if sigint_usable else signal.SIGTERM,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        deadline = time.monotonic() + CLI_START_TIMEOUT
        url = None
        while url is None and time.monotonic() < deadline and server.poll() is None:
            # pread: the CLI writes through this same open file, and a seek here
            # would move where its next line lands (over the lines before it).
            said_so_far = os.pread(log.fileno(), 1 << 20, 0)
            found = re.search(rb"serving \S+ over ws at (ws://127\.0\.0\.1:\d+/mcp)\n", said_so_far)
            url = found.group(1).decode() if found else None
            if url is None:
                time.sleep(0.02)
        said = os.pread(log.fileno(), 1 << 20, 0).decode(errors="replace")
    assert url is not None, (
        f"the CLI did not report its address within {CLI_START_TIMEOUT} s; it said:\n{said}"
    )
    client = subprocess.run(
        [str(sdk_ws_python), str(SDK_WS_CLIENT), url],
        env=sdk_ws_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
        timeout=CLIENT_TIMEOUT,  # on expiry the client is killed
    )
    assert client.returncode == 0, client.stderr.decode(errors="replace")[-4000:]
    report = json.loads(client.stdout)
    report["stderr"] = client.stderr.decode(errors="replace")[-4000:]
    assert "error" not in report, report
    assert report["closed"] is True
    assert step(report, "initialize")["protocol_version"] == NEGOTIATED
    failed = {name: result["error"] for name, result in report["steps"].items() if "error" in result}
    assert not failed, failed
    assert step(report, "echo")["texts"] == ["hello over WebSocket"]
