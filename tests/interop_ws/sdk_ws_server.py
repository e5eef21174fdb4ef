"""A FastMCP server of the official Python SDK (``mcp[ws]==1.30.0``) over WebSocket.

Runs under ``.cache/sdk-ws-venv/bin/python`` (never the project's
interpreter): ``python sdk_ws_server.py``. It binds 127.0.0.1 on a port the
system picks, serves the SDK's ``mcp.server.websocket.websocket_server``
(subprotocol ``mcp``) at ``/ws`` through Starlette and uvicorn, and prints
one line ``listening ws://127.0.0.1:<port>/ws`` on stdout once uvicorn
accepts connections. It stops (gracefully, bounded) on SIGTERM / SIGINT or
when its stdin ends, so a parent that dies takes it down too.

Tools: ``add`` (structured output), ``echo``, ``count`` (progress),
``chatty`` (log notifications, filtered by ``logging/setLevel``), ``ask``
(sampling: asks the client), ``roots`` (roots/list: asks the client),
``signup`` (form elicitation: asks the client), ``whoami`` (what the client
sent in ``initialize``), ``wait_forever`` / ``cancellations`` (how many
``wait_forever`` calls a ``notifications/cancelled`` ended). Resource
``sdk://greeting``, prompt ``greet``.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import warnings

warnings.simplefilter("ignore", DeprecationWarning)  # the SDK deprecates its WebSocket transport

import anyio
import uvicorn
from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.transport_security import TransportSecuritySettings
from mcp.server.websocket import websocket_server
from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

PATH = "/ws"
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

mcp = FastMCP("sdk-ws-server", instructions="The SDK 1.30 WebSocket interop peer.", log_level="WARNING")
_level = {"value": "debug"}
_cancelled = {"count": 0}


@mcp._mcp_server.set_logging_level()
async def set_level(level: types.LoggingLevel) -> None:
    _level["value"] = level


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@mcp.tool()
async def count(steps: int, ctx: Context) -> str:
    """Count to ``steps``, reporting progress after each step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"counted to {steps}"


@mcp.tool()
async def chatty(ctx: Context) -> str:
    """Log one message at each of debug, info, warning and error."""
    sent = 0
    for level in ("debug", "info", "warning", "error"):
        if LEVELS.index(level) >= LEVELS.index(_level["value"]):
            await ctx.log(level, f"{level} from the SDK", logger_name="sdk-ws")  # type: ignore[arg-type]
            sent += 1
    return f"sent {sent} log messages"


@mcp.tool()
async def ask(prompt: str, ctx: Context) -> str:
    """Ask the client's LLM (sampling/createMessage)."""
    result = await ctx.session.create_message(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=32,
        system_prompt="Answer briefly.",
    )
    text = result.content.text if isinstance(result.content, types.TextContent) else repr(result.content)
    return f"{result.model}: {text}"


@mcp.tool()
async def roots(ctx: Context) -> list[str]:
    """The client's roots (roots/list)."""
    result = await ctx.session.list_roots()
    return [f"{root.name}={root.uri}" for root in result.roots]


class Signup(BaseModel):
    name: str = Field(description="Your name")
    age: int = Field(default=30, description="Your age")
    newsletter: bool = Field(default=False, description="Subscribe?")


@mcp.tool()
async def signup(ctx: Context) -> str:
    """Ask the user to fill a form (elicitation/create)."""
    result = await ctx.elicit("Please sign up", Signup)
    if result.action != "accept":
        return f"the user chose to {result.action}"
    return f"signed up {result.data.name} ({result.data.age}), newsletter {result.data.newsletter}"


@mcp.tool()
async def wait_forever() -> str:
    """Wait until cancelled (then ``cancellations`` counts it)."""
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        _cancelled["count"] += 1
        raise
    return "waited a minute"


@mcp.tool()
def cancellations() -> int:
    """How many ``wait_forever`` calls were cancelled."""
    return _cancelled["count"]


@mcp.tool()
async def whoami(ctx: Context) -> dict[str, object]:
    """What the client sent in ``initialize``."""
    params = ctx.session.client_params
    assert params is not None
    return {
        "client": params.clientInfo.name,
        "protocol_version": params.protocolVersion,
        "sampling": params.capabilities.sampling is not None,
    }


@mcp.resource("sdk://greeting", mime_type="text/plain")
def greeting() -> str:
    """A fixed greeting."""
    return "hello from the SDK"


@mcp.prompt()
def greet(name: str) -> str:
    """Greet someone."""
    return f"Please greet {name}."


async def handle(ws: WebSocket) -> None:
    security = TransportSecuritySettings(allowed_hosts=["127.0.0.1:*", "localhost:*"], allowed_origins=[])
    async with websocket_server(ws.scope, ws.receive, ws.send, security_settings=security) as (read, write):
        server = mcp._mcp_server
        await server.run(read, write, server.create_initialization_options())


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = Starlette(routes=[WebSocketRoute(PATH, endpoint=handle)])
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    loop = asyncio.get_running_loop()

    def watch_stdin() -> None:  # the parent went away (or closed our stdin): stop
        while sys.stdin.buffer.read(4096):
            pass
        loop.call_soon_threadsafe(setattr, server, "should_exit", True)

    threading.Thread(target=watch_stdin, daemon=True).start()

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.01)
        print(f"listening ws://127.0.0.1:{port}{PATH}", flush=True)

    announcer = asyncio.create_task(announce())
    await server.serve(sockets=[sock])
    announcer.cancel()


if __name__ == "__main__":
    asyncio.run(main())
