"""Drive trio-mcp's example servers with the official Python SDK's client.

Runs under the SDK's own interpreter (``.cache/sdk-venv/bin/python``, with
``mcp==2.3.0``), never beside trio-mcp::

    .cache/sdk-venv/bin/python tests/interop/sdk_client_driver.py \\
        --python .venv/bin/python --examples examples [--run everything/auto ...]

For each run (``<server>/<mode>``: servers ``everything``, ``conformance``,
``roots``; modes ``legacy`` (the initialize handshake) and ``auto`` (the
SDK's default: a ``server/discover`` probe first)) it starts
``<python> <examples>/<server>_server.py`` through the SDK's stdio client
(``mcp.Client(StdioServerParameters(...), mode=...)``), exercises what that
server offers and prints one JSON report on stdout::

    {"sdk": "2.3.0", "runs": {"everything/auto": {"connect": {...},
     "steps": {"echo": <observed>, "sampling": {"error": "..."}, ...}}}}

Each step records what it observed (texts, progress values, log levels,
what the callbacks were asked...), or ``{"error": "<type>: <message>"}``:
the pytest side decides what is right. Every step and every run is bounded.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

warnings.simplefilter("ignore")  # the SDK flags handshake-era calls as deprecated

SERVERS = ("everything", "conformance", "roots")
MODES = ("legacy", "auto")
STEP_TIMEOUT = 10.0
RUN_TIMEOUT = 40.0
LOG_LEVEL = "warning"
SAMPLED_TEXT = "The SDK's sampling callback answers."
SAMPLED_MODEL = "sdk-test-model"


def dump(value: Any) -> Any:
    """JSON-ready: pydantic models by their wire names."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, list | tuple):
        return [dump(v) for v in value]
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items()}
    return value


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


class Callbacks:
    """The SDK client's callbacks; they record what the server asked."""

    def __init__(self, roots: list[types.Root]) -> None:
        self.roots = roots
        self.sampling: list[Any] = []
        self.elicitations: list[Any] = []
        self.roots_requests = 0
        self.logs: list[Any] = []
        self.notifications: list[Any] = []
        self.elicit_answers: list[types.ElicitResult] = []

    async def sampling_callback(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        self.sampling.append(dump(params))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLED_TEXT),
            model=SAMPLED_MODEL,
            stop_reason="endTurn",
        )

    async def elicitation_callback(self, context: Any, params: types.ElicitRequestParams) -> Any:
        self.elicitations.append(dump(params))
        if self.elicit_answers:
            return self.elicit_answers.pop(0)
        return types.ElicitResult(action="decline")

    async def list_roots_callback(self, context: Any) -> Any:
        self.roots_requests += 1
        return types.ListRootsResult(roots=list(self.roots))

    async def logging_callback(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(dump(params))

    async def message_handler(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.notifications.append({"exception": repr(message)})
            return
        root = getattr(message, "root", message)
        self.notifications.append(
            {
                "method": getattr(root, "method", type(root).__name__),
                "params": dump(getattr(root, "params", None)),
            }
        )

    def updated_uris(self) -> list[str]:
        return [
            n["params"]["uri"]
            for n in self.notifications
            if n.get("method") == "notifications/resources/updated" and isinstance(n.get("params"), dict)
        ]


class Run:
    """One connection: the SDK client, its callbacks, and the recorded steps."""

    def __init__(self, client: Client, callbacks: Callbacks, mode: str) -> None:
        self.client = client
        self.cb = callbacks
        self.mode = mode
        self.steps: dict[str, Any] = {}

    async def step(self, name: str, body: Callable[[], Awaitable[Any]]) -> None:
        try:
            with anyio.fail_after(STEP_TIMEOUT):
                self.steps[name] = dump(await body())
        except Exception as exc:
            self.steps[name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"[{self.mode}] step {name} failed:\n{traceback.format_exc()}", file=sys.stderr)

    @property
    def modern(self) -> bool:
        return self.client.protocol_version == "2026-07-28"

    async def set_log_level(self) -> Any:
        if self.modern:
            return {"via": "_meta", "level": LOG_LEVEL}  # Client(log_level=...) stamps every request
        await self.client.set_logging_level(LOG_LEVEL)
        return {"via": "logging/setLevel", "level": LOG_LEVEL}

    async def watch(self, uri: str, trigger: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
        """Subscribe to ``uri`` (resources/subscribe, or subscriptions/listen in
        the 2026-07-28 era), run ``trigger`` and wait for the update."""
        if not self.modern:
            await self.client.subscribe_resource(uri)
            await trigger()
            with anyio.fail_after(5):
                while uri not in self.cb.updated_uris():
                    await anyio.sleep(0.02)
            await self.client.unsubscribe_resource(uri)
            return {"via": "resources/subscribe", "updated": self.cb.updated_uris()}
        async with self.client.listen(resource_subscriptions=[uri]) as subscription:
            await trigger()
            with anyio.fail_after(5):
                async for event in subscription:
                    return {"via": "subscriptions/listen", "updated": [getattr(event, "uri", repr(event))]}
        return {"via": "subscriptions/listen", "updated": []}


# ------------------------------------------------------------ transport


def _children() -> set[int]:
    """This process's child pids (Linux /proc; empty elsewhere)."""
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{os.getpid()}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{os.getpid()}/task/{task}/children") as f:
                found.update(int(pid) for pid in f.read().split())
        except (OSError, ValueError):
            pass
    return found


def _idle(pid: int, last: list[int]) -> bool:
    """True once ``pid`` waits for input: blocked in epoll (trio's idle loop),
    or, where the kernel does not say, sleeping with a CPU time that stopped moving."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            if "epoll" in f.read():
                return True
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return True  # gone, or nothing to watch: do not wait
    cpu = int(fields[11]) + int(fields[12])  # utime + stime
    last.append(cpu)
    return fields[0] == "S" and len(last) >= 5 and len(set(last[-5:])) == 1


@asynccontextmanager
async def settled_stdio(params: StdioServerParameters, timing: dict[str, float]) -> AsyncIterator[Any]:
    """The SDK's stdio client, handed to ``Client`` only once the server
    process is up and waiting for input, so that the connect time measures
    the handshake itself rather than the Python start-up of the server."""
    before = _children()
    spawned = time.perf_counter()
    async with stdio_client(params) as streams:
        new = sorted(_children() - before)
        last: list[int] = []
        with anyio.move_on_after(5):
            while new and not _idle(new[-1], last):
                await anyio.sleep(0.025)
        timing["startup_seconds"] = round(time.perf_counter() - spawned, 4)
        timing["settled_at"] = time.perf_counter()
        yield streams


# ------------------------------------------------------------ per server


async def everything(run: Run) -> None:
    c, cb = run.client, run.cb

    async def tools() -> Any:
        listed = await c.list_tools()
        return {
            t.name: {"annotations": dump(t.annotations), "output_schema": t.output_schema is not None}
            for t in listed.tools
        }

    await run.step("tools", tools)
    await run.step("echo", lambda: _texts_of(c.call_tool("echo", {"message": "hello from the SDK"})))

    async def add() -> Any:
        result = await c.call_tool("add", {"a": 2, "b": 3})
        return {"texts": texts(result), "structured": result.structured_content, "is_error": result.is_error}

    await run.step("add", add)

    async def weather() -> Any:
        result = await c.call_tool("get_weather", {"city": "Lisbon"})
        return result.structured_content

    await run.step("structured", weather)

    async def media() -> Any:
        image = (await c.call_tool("get_tiny_image", {})).content
        audio = (await c.call_tool("get_audio_clip", {})).content
        return {
            "image": [b.type for b in image],
            "png": [base64.b64decode(b.data)[:8].hex() for b in image if b.type == "image"],
            "audio": [(b.type, b.mime_type) for b in audio],
        }

    await run.step("media", media)

    async def progress() -> Any:
        seen: list[list[Any]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            seen.append([value, total, message])

        result = await c.call_tool(
            "long_running_operation", {"duration": 0.2, "steps": 4}, progress_callback=on_progress
        )
        return {"texts": texts(result), "progress": seen}

    await run.step("progress", progress)
    await run.step("log_level", run.set_log_level)

    async def logging() -> Any:
        before = len(cb.logs)
        result = await c.call_tool("log_messages", {})
        await anyio.sleep(0.1)  # notifications travel before the result; leave the handler a moment
        return {"texts": texts(result), "levels": [log["level"] for log in cb.logs[before:]]}

    await run.step("logging", logging)

    async def sampling() -> Any:
        result = await c.call_tool("sample_llm", {"prompt": "Say hi", "max_tokens": 33})
        return {"texts": texts(result), "asked": cb.sampling[-1] if cb.sampling else None}

    await run.step("sampling", sampling)

    async def elicitation() -> Any:
        cb.elicit_answers.append(
            types.ElicitResult(
                action="accept", content={"name": "Grace", "age": 85, "newsletter": True, "theme": "dark"}
            )
        )
        accepted = texts(await c.call_tool("collect_preferences", {}))
        asked = cb.elicitations[-1] if cb.elicitations else None
        cb.elicit_answers.append(types.ElicitResult(action="decline"))
        declined = texts(await c.call_tool("collect_preferences", {}))
        return {"accepted": accepted, "declined": declined, "asked": asked}

    await run.step("elicitation", elicitation)

    async def url_elicitation() -> Any:
        cb.elicit_answers.append(types.ElicitResult(action="accept"))
        result = texts(await c.call_tool("authorize_via_url", {"service": "sdk"}))
        return {"texts": result, "asked": cb.elicitations[-1] if cb.elicitations else None}

    await run.step("url_elicitation", url_elicitation)

    async def resources() -> Any:
        listed = await c.list_resources()
        templates = await c.list_resource_templates()
        readme = (await c.read_resource("demo://readme")).contents[0]
        logo = (await c.read_resource("demo://logo.png")).contents[0]
        greeting = (await c.read_resource("demo://greeting/Ada")).contents[0]
        some = (await c.read_resource("demo://bytes/5")).contents[0]
        return {
            "resources": sorted(r.uri for r in listed.resources),
            "templates": sorted(t.uri_template for t in templates.resource_templates),
            "readme": [readme.mime_type, readme.text.splitlines()[0]],
            "logo": [logo.mime_type, base64.b64decode(logo.blob)[:8].hex()],
            "greeting": greeting.text,
            "bytes": list(base64.b64decode(some.blob)),
        }

    await run.step("resources", resources)

    async def subscription() -> Any:
        return await run.watch("demo://counter", lambda: c.call_tool("increment_counter", {"by": 2}))

    await run.step("subscription", subscription)

    async def prompts() -> Any:
        listed = await c.list_prompts()
        simple = await c.get_prompt("simple")
        review = await c.get_prompt("code_review", {"code": "print(1)", "language": "python"})
        embedded = await c.get_prompt("explain_resource", {"uri": "demo://greeting/Linus"})
        return {
            "prompts": sorted(p.name for p in listed.prompts),
            "simple": [m.content.text for m in simple.messages],
            "review": [[m.role, m.content.text] for m in review.messages],
            "embedded": [m.content.type for m in embedded.messages],
            "embedded_text": embedded.messages[0].content.resource.text,
        }

    await run.step("prompts", prompts)

    async def completion() -> Any:
        language = await c.complete(
            types.PromptReference(type="ref/prompt", name="code_review"), {"name": "language", "value": "py"}
        )
        name = await c.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="demo://greeting/{name}"),
            {"name": "name", "value": "al"},
        )
        return {"language": language.completion.values, "name": name.completion.values}

    await run.step("completion", completion)


async def _texts_of(call: Awaitable[Any]) -> list[str]:
    return texts(await call)


async def conformance(run: Run) -> None:
    c, cb = run.client, run.cb

    async def tools() -> Any:
        return sorted(t.name for t in (await c.list_tools()).tools)

    await run.step("tools", tools)

    async def content() -> Any:
        out = {}
        for name in (
            "test_simple_text",
            "test_image_content",
            "test_audio_content",
            "test_embedded_resource",
            "test_multiple_content_types",
        ):
            result = await c.call_tool(name, {})
            out[name] = [block.type for block in result.content]
        return out

    await run.step("content", content)

    async def error() -> Any:
        result = await c.call_tool("test_error_handling", {})
        return {"is_error": result.is_error, "texts": texts(result)}

    await run.step("error", error)

    async def logging() -> Any:
        before = len(cb.logs)
        result = await c.call_tool(
            "test_tool_with_logging", {}, meta={"io.modelcontextprotocol/logLevel": "info"}
        )
        await anyio.sleep(0.1)
        return {"texts": texts(result), "logs": [[log["level"], log["data"]] for log in cb.logs[before:]]}

    await run.step("logging", logging)

    async def progress() -> Any:
        seen: list[list[Any]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            seen.append([value, total])

        result = await c.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
        return {"texts": texts(result), "progress": seen}

    await run.step("progress", progress)

    async def sampling() -> Any:
        return texts(await c.call_tool("test_sampling", {"prompt": "Is this a test?"}))

    await run.step("sampling", sampling)

    async def elicitation() -> Any:
        cb.elicit_answers.append(
            types.ElicitResult(action="accept", content={"username": "sdk", "email": "sdk@example.com"})
        )
        basic = texts(await c.call_tool("test_elicitation", {"message": "Who are you?"}))
        cb.elicit_answers.append(types.ElicitResult(action="accept", content={"name": "John Doe", "age": 30}))
        defaults = texts(await c.call_tool("test_elicitation_sep1034_defaults", {}))
        defaults_schema = cb.elicitations[-1]["requestedSchema"]["properties"]
        cb.elicit_answers.append(
            types.ElicitResult(
                action="accept",
                content={"untitledSingle": "option2", "untitledMulti": ["option1", "option3"]},
            )
        )
        enums = texts(await c.call_tool("test_elicitation_sep1330_enums", {}))
        enum_schema = cb.elicitations[-1]["requestedSchema"]["properties"]
        return {
            "basic": basic,
            "defaults": defaults,
            "defaults_schema": {k: v.get("default") for k, v in defaults_schema.items()},
            "enums": enums,
            "enum_keys": sorted(enum_schema),
        }

    await run.step("elicitation", elicitation)

    async def resources() -> Any:
        text = (await c.read_resource("test://static-text")).contents[0]
        binary = (await c.read_resource("test://static-binary")).contents[0]
        templated = (await c.read_resource("test://template/42/data")).contents[0]
        templates = await c.list_resource_templates()
        return {
            "text": text.text,
            "binary": [binary.mime_type, base64.b64decode(binary.blob)[:8].hex()],
            "template": json.loads(templated.text),
            "templates": [t.uri_template for t in templates.resource_templates],
        }

    await run.step("resources", resources)

    async def subscribe() -> Any:
        # Nothing updates the watched resource from outside; subscribing (and
        # unsubscribing, or opening the listen stream) must simply succeed.
        if run.modern:
            async with c.listen(resource_subscriptions=["test://watched-resource"]) as subscription:
                return {"via": "subscriptions/listen", "honored": dump(subscription.honored)}
        await c.subscribe_resource("test://watched-resource")
        await c.unsubscribe_resource("test://watched-resource")
        return {"via": "resources/subscribe", "ok": True}

    await run.step("subscribe", subscribe)

    async def prompts() -> Any:
        listed = sorted(p.name for p in (await c.list_prompts()).prompts)
        args = await c.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        image = await c.get_prompt("test_prompt_with_image")
        return {
            "prompts": listed,
            "args": args.messages[0].content.text,
            "image": [m.content.type for m in image.messages],
        }

    await run.step("prompts", prompts)

    async def completion() -> Any:
        ref = types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments")
        arg1 = await c.complete(ref, {"name": "arg1", "value": "pa"})
        arg2 = await c.complete(ref, {"name": "arg2", "value": ""}, context_arguments={"arg1": "paris"})
        template = await c.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="test://template/{id}/data"),
            {"name": "id", "value": "12"},
        )
        return {
            "arg1": arg1.completion.values,
            "arg2": arg2.completion.values,
            "template": template.completion.values,
        }

    await run.step("completion", completion)


async def roots(run: Run) -> None:
    c, cb = run.client, run.cb

    async def listed() -> Any:
        result = await c.call_tool("list_roots", {})
        return {"structured": result.structured_content, "texts": texts(result), "asked": cb.roots_requests}

    await run.step("list_roots", listed)

    async def read() -> Any:
        root = Path(str(cb.roots[0].uri).removeprefix("file://"))
        result = await c.call_tool("read_file", {"uri": (root / "hello.txt").as_uri()})
        return texts(result)

    await run.step("read_file", read)

    async def changed() -> Any:
        if run.modern:
            return {"skipped": "2026-07-28 has no roots/list_changed; every request carries its input"}
        before = cb.roots_requests
        cb.roots.append(types.Root(uri="file:///nonexistent-trio-mcp-root", name="gone"))
        await c.send_roots_list_changed()
        with anyio.fail_after(5):
            while not any(log.get("logger") == "roots" for log in cb.logs):
                await anyio.sleep(0.02)
        result = await c.call_tool("list_roots", {})
        return {
            "asked_again": cb.roots_requests - before,
            "roots": [r["uri"] for r in result.structured_content["result"]],
        }

    await run.step("roots_changed", changed)


DRIVERS = {"everything": everything, "conformance": conformance, "roots": roots}


async def one_run(server: str, mode: str, python: str, examples: Path, workdir: Path) -> dict[str, Any]:
    root_dir = workdir / f"{server}-{mode}"
    root_dir.mkdir()
    (root_dir / "hello.txt").write_text("hello from a root\n")
    callbacks = Callbacks([types.Root(uri=root_dir.as_uri(), name="workspace")])
    params = StdioServerParameters(command=python, args=[str(examples / f"{server}_server.py")])
    timing: dict[str, float] = {}
    client = Client(
        settled_stdio(params, timing),
        mode=mode,
        read_timeout_seconds=STEP_TIMEOUT,
        sampling_callback=callbacks.sampling_callback,
        elicitation_callback=callbacks.elicitation_callback,
        list_roots_callback=callbacks.list_roots_callback,
        logging_callback=callbacks.logging_callback,
        message_handler=callbacks.message_handler,
        log_level=LOG_LEVEL,
        client_info=types.Implementation(name="sdk-client-driver", version="1.0"),
    )
    report: dict[str, Any] = {}
    try:
        with anyio.fail_after(RUN_TIMEOUT):
            async with client:
                connected = time.perf_counter()
                report["connect"] = {
                    # The handshake (discover probe, or initialize), the server being up already.
                    "seconds": round(connected - timing["settled_at"], 4),
                    "startup_seconds": timing["startup_seconds"],
                    "protocol_version": client.protocol_version,
                    "server_info": dump(client.server_info),
                    "capabilities": dump(client.server_capabilities),
                    "instructions": client.instructions,
                }
                run = Run(client, callbacks, mode)
                await DRIVERS[server](run)
                report["steps"] = run.steps
            report["close_seconds"] = round(time.perf_counter() - connected, 4)
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
        print(f"[{server}/{mode}] failed:\n{traceback.format_exc()}", file=sys.stderr)
    report["notifications"] = sorted({n.get("method", "?") for n in callbacks.notifications})
    return report


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from importlib.metadata import version

    runs = args.run or [f"{s}/{m}" for s in SERVERS for m in MODES]
    report: dict[str, Any] = {"sdk": version("mcp"), "runs": {}}
    with tempfile.TemporaryDirectory(prefix="sdk-driver-") as tmp:
        for name in runs:
            server, mode = name.split("/")
            # abspath, not resolve(): a venv's python is a symbolic link that must stay one.
            python = os.path.abspath(args.python)
            report["runs"][name] = await one_run(
                server, mode, python, Path(args.examples).resolve(), Path(tmp)
            )
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="interpreter that runs trio-mcp's examples")
    parser.add_argument("--examples", required=True, help="trio-mcp's examples folder")
    parser.add_argument("--run", action="append", help="<server>/<mode> (repeatable; default: all)")
    json.dump(anyio.run(main, parser.parse_args()), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
