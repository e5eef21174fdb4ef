"""``trio-mcp demo``: an embedded server and client talking, with visible output."""

from __future__ import annotations

import time
from typing import Any

import msgspec
import trio

from ..protocol import CreateMessageResult, LoggingMessageNotificationParams, TextContent
from ..server import Context, MCPServer
from ..testing import connected


class Forecast(msgspec.Struct):
    city: str
    celsius: float
    summary: str


def build_demo_server() -> MCPServer:
    app = MCPServer("demo", "1.0", instructions="A small demonstration server.")

    @app.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool
    def forecast(city: str) -> Forecast:
        """A (made-up) weather forecast, as structured content."""
        return Forecast(city=city, celsius=21.5, summary="sunny")

    @app.tool
    async def countdown(n: int, ctx: Context) -> str:
        """Count down from n, reporting progress and logging each step."""
        for i in range(n):
            await ctx.report_progress(i + 1, n, f"step {i + 1}")
            await ctx.info(f"tick {n - i}")
        return "liftoff"

    @app.tool
    async def haiku(topic: str, ctx: Context) -> str:
        """Ask the client's LLM (sampling) for a haiku."""
        result = await ctx.sample(f"Write a haiku about {topic}", max_tokens=60)
        return result.content.text if isinstance(result.content, TextContent) else "?"

    @app.resource("demo://greeting/{name}", mime_type="text/plain")
    def greeting(name: str) -> str:
        """A greeting for anyone."""
        return f"Hello, {name}!"

    @app.prompt
    def review(code: str) -> str:
        """Ask for a code review."""
        return f"Please review this code:\n{code}"

    return app


async def run_demo(*, calls: int = 2000, out: Any = print) -> None:
    app = build_demo_server()

    async def sampling(params: Any) -> CreateMessageResult:
        return CreateMessageResult(
            role="assistant", content=TextContent(text="trio nurseries hum / tasks bloom and then join as one / no orphan remains"),
            model="canned-llm",
        )

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        out(f"  [server log {params.level}] {params.data}")

    async with connected(app, mode="bytes", sampling_handler=sampling, on_log=on_log) as client:
        out(f"connected to {client.server_info.name} {client.server_info.version} "
            f"(protocol {client.protocol_version})")
        tools = await client.list_all_tools()
        out("tools: " + ", ".join(t.name for t in tools))
        result = await client.call_tool("add", {"a": 2, "b": 40})
        out(f"add(2, 40) -> {result.structured_content}")
        result = await client.call_tool("forecast", {"city": "Lisbon"})
        out(f"forecast -> {result.structured_content}")

        async def progress(p: float, total: float | None, message: str | None) -> None:
            out(f"  progress {p}/{total} {message or ''}")

        result = await client.call_tool("countdown", {"n": 3}, on_progress=progress)
        out(f"countdown -> {result.content[0].text}")
        result = await client.call_tool("haiku", {"topic": "trio"})
        out(f"haiku -> {result.content[0].text}")
        read = await client.read_resource("demo://greeting/world")
        out(f"read demo://greeting/world -> {read.contents[0].text}")
        prompt = await client.get_prompt("review", {"code": "print('hi')"})
        out(f"prompt review -> {prompt.messages[0].content.text!r}")
        bad = await client.call_tool("add", {"a": "two"})
        out(f"add with a bad argument -> isError={bad.is_error}: {bad.content[0].text}")
        start = time.perf_counter()
        for i in range(calls):
            await client.call_tool("add", {"a": i, "b": 1})
        elapsed = time.perf_counter() - start
        out(f"{calls} sequential tools/call round trips (bytes mode): {calls / elapsed:,.0f} calls/s")


def main() -> int:
    trio.run(run_demo)
    return 0
