"""The official Python SDK's WebSocket client (``mcp[ws]==1.30.0``) against a server.

Runs under ``.cache/sdk-ws-venv/bin/python`` (never the project's
interpreter): ``python sdk_ws_client.py ws://127.0.0.1:<port>/mcp``. It
connects with ``mcp.client.websocket.websocket_client`` (subprotocol
``mcp``), runs one ``ClientSession`` through the features of
``examples/everything_server.py`` (its callbacks answer sampling and
elicitation, and record progress and log notifications), closes, and prints
one JSON report on stdout::

    {"sdk": "1.30.0", "steps": {"<step>": {...} | {"error": "..."}}, "closed": true}

Every step has its own time limit and its failure is recorded, not raised,
so one misbehaving feature does not hide the others. A failure to connect
or to close is reported as a top-level ``"error"``.
"""

from __future__ import annotations

import base64
import json
import sys
import traceback
import warnings
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

warnings.simplefilter("ignore", DeprecationWarning)  # the SDK deprecates its WebSocket transport

import anyio
from mcp import ClientSession, types
from mcp.client.websocket import websocket_client
from mcp.shared.context import RequestContext
from pydantic import AnyUrl

STEP_TIMEOUT = 10.0
SAMPLING_MODEL = "sdk-ws-model"
ELICITED = {"name": "Ada", "age": 36, "newsletter": True, "theme": "dark"}


def _error(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()[-2000:]


def _texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


def _tool(result: types.CallToolResult) -> dict[str, Any]:
    return {"is_error": result.isError, "texts": _texts(result), "structured": result.structuredContent}


class Recorder:
    """What the SDK client's callbacks saw."""

    def __init__(self) -> None:
        self.progress: list[list[Any]] = []
        self.logs: list[dict[str, Any]] = []
        self.log_event = anyio.Event()
        self.expected_logs = 0
        self.sampling: list[dict[str, Any]] = []
        self.elicitation: list[dict[str, Any]] = []
        self.notifications: list[str] = []

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append([progress, total, message])

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append({"level": params.level, "logger": params.logger, "data": params.data})
        if len(self.logs) >= self.expected_logs:
            self.log_event.set()

    async def on_sampling(
        self, context: RequestContext[Any, Any], params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        messages = [
            {"role": m.role, "text": m.content.text if isinstance(m.content, types.TextContent) else None}
            for m in params.messages
        ]
        self.sampling.append(
            {
                "messages": messages,
                "maxTokens": params.maxTokens,
                "systemPrompt": params.systemPrompt,
                "temperature": params.temperature,
            }
        )
        prompt = messages[0]["text"] or ""
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=prompt.upper()),
            model=SAMPLING_MODEL,
        )

    async def on_elicitation(
        self, context: RequestContext[Any, Any], params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        schema = getattr(params, "requestedSchema", None) or {}
        self.elicitation.append(
            {
                "mode": getattr(params, "mode", None),
                "message": params.message,
                "properties": sorted(schema.get("properties", {})),
                "required": schema.get("required", []),
            }
        )
        return types.ElicitResult(action="accept", content=dict(ELICITED))

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            self.notifications.append(message.root.method)


async def scenario(session: ClientSession, rec: Recorder, steps: dict[str, Any]) -> None:
    async def step(name: str, body: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        try:
            with anyio.fail_after(STEP_TIMEOUT):
                steps[name] = await body()
        except Exception as exc:
            steps[name] = {"error": _error(exc)}

    async def initialize() -> dict[str, Any]:
        result = await session.initialize()
        caps = result.capabilities
        return {
            "protocol_version": result.protocolVersion,
            "server": {"name": result.serverInfo.name, "version": result.serverInfo.version},
            "instructions": result.instructions,
            "capabilities": sorted(k for k, v in caps.model_dump(exclude_none=True).items() if v is not None),
        }

    await step("initialize", initialize)
    if "error" in steps["initialize"]:
        return

    async def ping() -> dict[str, Any]:
        await session.send_ping()
        return {"ok": True}

    async def tools_list() -> dict[str, Any]:
        tools = (await session.list_tools()).tools
        by_name = {t.name: t for t in tools}
        return {
            "names": sorted(by_name),
            "echo_input": by_name["echo"].inputSchema if "echo" in by_name else None,
            "add_output": by_name["add"].outputSchema if "add" in by_name else None,
            "echo_read_only": by_name["echo"].annotations.readOnlyHint
            if "echo" in by_name and by_name["echo"].annotations
            else None,
        }

    async def echo() -> dict[str, Any]:
        return _tool(await session.call_tool("echo", {"message": "hello over WebSocket"}))

    async def add() -> dict[str, Any]:
        return _tool(await session.call_tool("add", {"a": 2, "b": 40}))

    async def weather() -> dict[str, Any]:
        return _tool(await session.call_tool("get_weather", {"city": "Lisbon"}))

    async def image() -> dict[str, Any]:
        result = await session.call_tool("get_tiny_image", {})
        content = []
        for c in result.content:
            if isinstance(c, types.ImageContent):
                content.append(
                    {"type": "image", "mimeType": c.mimeType, "hex": base64.b64decode(c.data)[:8].hex()}
                )
            elif isinstance(c, types.TextContent):
                content.append({"type": "text", "text": c.text})
            else:
                content.append({"type": c.type})
        return {"is_error": result.isError, "content": content}

    async def progress() -> dict[str, Any]:
        result = await session.call_tool(
            "long_running_operation", {"duration": 0.2, "steps": 4}, progress_callback=rec.on_progress
        )
        return {**_tool(result), "events": rec.progress}

    async def logging() -> dict[str, Any]:
        await session.set_logging_level("info")
        rec.expected_logs = 4  # info, notice, warning, error (debug is filtered out)
        result = await session.call_tool("log_messages", {})
        with anyio.move_on_after(2):
            await rec.log_event.wait()
        return {**_tool(result), "messages": rec.logs}

    async def sampling() -> dict[str, Any]:
        result = await session.call_tool("sample_llm", {"prompt": "what is trio?", "max_tokens": 40})
        return {**_tool(result), "requests": rec.sampling}

    async def elicitation() -> dict[str, Any]:
        result = await session.call_tool("collect_preferences", {})
        return {**_tool(result), "requests": rec.elicitation}

    async def unknown_tool() -> dict[str, Any]:
        try:
            return _tool(await session.call_tool("no_such_tool", {}))
        except Exception as exc:
            error = getattr(exc, "error", None)
            return {"jsonrpc_error": getattr(error, "code", None), "message": str(exc)}

    async def resources_list() -> dict[str, Any]:
        resources = (await session.list_resources()).resources
        templates = (await session.list_resource_templates()).resourceTemplates
        return {
            "uris": sorted(str(r.uri) for r in resources),
            "templates": sorted(t.uriTemplate for t in templates),
        }

    def _contents(result: types.ReadResourceResult) -> list[dict[str, Any]]:
        out = []
        for c in result.contents:
            item: dict[str, Any] = {"uri": str(c.uri), "mimeType": c.mimeType}
            if isinstance(c, types.TextResourceContents):
                item["text"] = c.text
            else:
                item["blob_hex"] = base64.b64decode(c.blob)[:8].hex()
                item["blob_len"] = len(base64.b64decode(c.blob))
            out.append(item)
        return out

    async def read_readme() -> dict[str, Any]:
        return {"contents": _contents(await session.read_resource(AnyUrl("demo://readme")))}

    async def read_logo() -> dict[str, Any]:
        return {"contents": _contents(await session.read_resource(AnyUrl("demo://logo.png")))}

    async def read_greeting() -> dict[str, Any]:
        return {"contents": _contents(await session.read_resource(AnyUrl("demo://greeting/Ada")))}

    async def prompts_list() -> dict[str, Any]:
        prompts = (await session.list_prompts()).prompts
        return {
            "names": sorted(p.name for p in prompts),
            "code_review_args": sorted(
                (a.name, bool(a.required))
                for p in prompts
                if p.name == "code_review"
                for a in p.arguments or []
            ),
        }

    def _messages(result: types.GetPromptResult) -> list[dict[str, Any]]:
        out = []
        for m in result.messages:
            item: dict[str, Any] = {"role": m.role, "type": m.content.type}
            if isinstance(m.content, types.TextContent):
                item["text"] = m.content.text
            elif isinstance(m.content, types.EmbeddedResource):
                item["uri"] = str(m.content.resource.uri)
                item["text"] = getattr(m.content.resource, "text", None)
            out.append(item)
        return out

    async def prompt_code_review() -> dict[str, Any]:
        result = await session.get_prompt("code_review", {"code": "print(1)", "language": "python"})
        return {"description": result.description, "messages": _messages(result)}

    async def prompt_explain() -> dict[str, Any]:
        result = await session.get_prompt("explain_resource", {"uri": "demo://readme"})
        return {"messages": _messages(result)}

    async def completion() -> dict[str, Any]:
        result = await session.complete(
            types.PromptReference(type="ref/prompt", name="code_review"), {"name": "language", "value": "py"}
        )
        return {"values": result.completion.values}

    for name, body in [
        ("ping", ping),
        ("tools_list", tools_list),
        ("echo", echo),
        ("add", add),
        ("weather", weather),
        ("image", image),
        ("progress", progress),
        ("logging", logging),
        ("sampling", sampling),
        ("elicitation", elicitation),
        ("unknown_tool", unknown_tool),
        ("resources_list", resources_list),
        ("read_readme", read_readme),
        ("read_logo", read_logo),
        ("read_greeting", read_greeting),
        ("prompts_list", prompts_list),
        ("prompt_code_review", prompt_code_review),
        ("prompt_explain", prompt_explain),
        ("completion", completion),
    ]:
        await step(name, body)


async def main(url: str) -> dict[str, Any]:
    report: dict[str, Any] = {"sdk": version("mcp"), "steps": {}, "closed": False}
    rec = Recorder()
    try:
        async with (
            websocket_client(url) as (read, write),
            ClientSession(
                read,
                write,
                sampling_callback=rec.on_sampling,
                elicitation_callback=rec.on_elicitation,
                logging_callback=rec.on_log,
                message_handler=rec.on_message,
            ) as session,
        ):
            await scenario(session, rec, report["steps"])
        report["closed"] = True
    except Exception as exc:
        report["error"] = _error(exc)
    report["notifications"] = rec.notifications
    return report


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: sdk_ws_client.py ws://HOST:PORT/PATH")
    print(json.dumps(anyio.run(main, sys.argv[1])), flush=True)
