"""An "everything" demo server: one of each feature trio-mcp can serve.

Tools
    ``echo``, ``add`` (read-only, ``add`` has structured output),
    ``long_running_operation`` (progress), ``log_messages`` (logging at
    several levels), ``sample_llm`` (sampling), ``collect_preferences``
    (form elicitation), ``authorize_via_url`` (URL elicitation),
    ``get_weather`` (a msgspec Struct as structured output),
    ``get_tiny_image`` / ``get_audio_clip`` (media), ``increment_counter``
    (updates a subscribable resource), ``reset_counter`` (destructive).
Resources
    ``demo://readme`` (text), ``demo://logo.png`` (binary), ``demo://counter``
    (subscribable, lifespan state), templates ``demo://greeting/{name}`` (text)
    and ``demo://bytes/{size}`` (binary).
Prompts
    ``simple``, ``code_review`` (arguments, completion of ``language``),
    ``explain_resource`` (embeds a resource).
Lifespan
    :func:`lifespan` builds a :class:`DemoState` shared by every session
    (``ctx.state``).

Run it with ``python examples/everything_server.py`` (stdio; see :func:`main`).
"""

from __future__ import annotations

import io
import struct
import sys
import time
import uuid
import wave
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import attrs
import msgspec
import trio

from trio_mcp.protocol import InvalidParams, ResourceContents, ToolAnnotations
from trio_mcp.server import Audio, Context, Image, MCPServer

__all__ = ["DemoState", "Weather", "app", "main"]


# ------------------------------------------------------------------ media


def _png(width: int, height: int, rgba: tuple[int, int, int, int]) -> bytes:
    """A valid PNG of one solid colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgba) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


def _wav_tone(ms: int = 50, rate: int = 8000) -> bytes:
    """A short square-wave beep, mono 8-bit WAV."""
    frames = bytes(200 if (i // 10) % 2 else 56 for i in range(rate * ms // 1000))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(1)
        out.setframerate(rate)
        out.writeframes(frames)
    return buffer.getvalue()


TINY_PNG = _png(2, 2, (0x33, 0x66, 0x99, 0xFF))
LOGO_PNG = _png(8, 8, (0xE0, 0x40, 0x20, 0xFF))
BEEP_WAV = _wav_tone()


# --------------------------------------------------------------- lifespan


@attrs.define
class DemoState:
    """What the lifespan builds once and every session shares (``ctx.state``)."""

    started_at: float
    counter: int = 0
    closed: bool = False


@asynccontextmanager
async def lifespan(server: Any) -> AsyncIterator[DemoState]:
    state = DemoState(started_at=time.time())
    try:
        yield state
    finally:
        state.closed = True


app = MCPServer(
    "trio-mcp-everything",
    "0.1.0",
    title="Everything demo",
    instructions="A demo of every MCP feature: try the tools, read demo:// resources, use the prompts.",
    lifespan=lifespan,
)

COUNTER_URI = "demo://counter"

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


# ------------------------------------------------------------------ tools


@app.tool(annotations=READ_ONLY)
def echo(message: str) -> str:
    """Echo the message back.

    Args:
        message: Text to echo
    """
    return message


@app.tool(annotations=READ_ONLY)
def add(a: float, b: float) -> float:
    """Add two numbers (structured output: ``{"result": a + b}``).

    Args:
        a: First number
        b: Second number
    """
    return a + b


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
async def long_running_operation(ctx: Context, duration: float = 1.0, steps: int = 5) -> str:
    """Sleep for a while, reporting progress after each step.

    Args:
        duration: Total seconds to run
        steps: Number of progress steps
    """
    if steps < 1:
        raise ValueError("steps must be at least 1")
    for step in range(1, steps + 1):
        await trio.sleep(duration / steps)
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"Long running operation completed: {steps} steps in {duration} seconds."


@app.tool(annotations=READ_ONLY)
async def log_messages(ctx: Context) -> str:
    """Send one log notification at each of several levels (debug to error);
    the client's ``logging/setLevel`` filters them."""
    await ctx.debug("debug: details only a developer wants", logger="everything")
    await ctx.info("info: something happened", logger="everything")
    await ctx.log("notice", "notice: something worth noting", logger="everything")
    await ctx.warning("warning: something looks odd", logger="everything")
    await ctx.error({"error": "something failed", "recoverable": True}, logger="everything")
    return "Sent 5 log messages (debug, info, notice, warning, error)."


@app.tool
async def sample_llm(ctx: Context, prompt: str, max_tokens: int = 100) -> str:
    """Ask the client's LLM (sampling/createMessage) and return its answer.

    Args:
        prompt: The prompt to send
        max_tokens: Most tokens to generate
    """
    result = await ctx.sample(
        prompt, max_tokens=max_tokens, system_prompt="You are a helpful assistant.", temperature=0.2
    )
    text = getattr(result.content, "text", None)
    return f"LLM ({result.model}) says: {text if text is not None else result.content}"


class Preferences(msgspec.Struct, kw_only=True):
    """The form :func:`collect_preferences` asks the user to fill."""

    name: Annotated[str, msgspec.Meta(description="Your name")]
    age: Annotated[int, msgspec.Meta(description="Your age", ge=0)] = 30
    newsletter: Annotated[bool, msgspec.Meta(description="Subscribe to the newsletter?")] = False
    theme: Annotated[Literal["light", "dark", "system"], msgspec.Meta(description="Colour theme")] = "system"


@app.tool
async def collect_preferences(ctx: Context) -> str:
    """Ask the user to fill a form (form elicitation) and report the answer."""
    result = await ctx.elicit("Tell us about yourself", Preferences)
    if result.action != "accept":
        return f"The user chose to {result.action}."
    answer = msgspec.convert(result.content, Preferences)
    newsletter = "yes" if answer.newsletter else "no"
    return f"Hello {answer.name} ({answer.age}); newsletter: {newsletter}; theme: {answer.theme}."


@app.tool
async def authorize_via_url(ctx: Context, service: str = "example") -> str:
    """Send the user to a URL to authorize a service (URL elicitation, 2025-11-25).

    Args:
        service: Which service to authorize
    """
    # Deterministic: in the stateless era the handler runs again on the retry
    # that carries the answer, and must ask the same question.
    elicitation_id = uuid.uuid5(uuid.NAMESPACE_URL, f"trio-mcp-everything:authorize:{service}").hex
    result = await ctx.elicit_url(
        f"Please authorize access to {service}",
        f"https://auth.example.com/authorize?service={service}&elicitation={elicitation_id}",
        elicitation_id,
    )
    return f"URL elicitation {elicitation_id}: the user chose to {result.action}."


class Weather(msgspec.Struct, kw_only=True):
    """A (made up) weather report."""

    city: str
    temperature_c: float
    conditions: str
    humidity: int


_CONDITIONS = ("sunny", "cloudy", "rainy", "windy", "foggy")


@app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
def get_weather(city: str) -> Weather:
    """Get the weather of a city (structured output from a msgspec Struct).

    Args:
        city: City name
    """
    seed = zlib.crc32(city.lower().encode())
    return Weather(
        city=city,
        temperature_c=round(-5 + (seed % 400) / 10, 1),
        conditions=_CONDITIONS[seed % len(_CONDITIONS)],
        humidity=seed % 101,
    )


@app.tool(annotations=READ_ONLY)
def get_tiny_image() -> list[str | Image]:
    """Return a tiny PNG image between two text blocks."""
    return ["This is a tiny image:", Image(TINY_PNG, "image/png"), "The image above is a 2x2 PNG."]


@app.tool(annotations=READ_ONLY)
def get_audio_clip() -> Audio:
    """Return a 50 ms beep (audio/wav)."""
    return Audio(BEEP_WAV, "audio/wav")


@app.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
def increment_counter(ctx: Context, by: int = 1) -> int:
    """Increment the shared counter; subscribers of demo://counter are notified.

    Args:
        by: How much to add
    """
    state: DemoState = ctx.state
    state.counter += by
    app.resource_updated(COUNTER_URI)
    return state.counter


@app.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True))
def reset_counter(ctx: Context) -> str:
    """Reset the shared counter to zero (destructive)."""
    state: DemoState = ctx.state
    previous, state.counter = state.counter, 0
    app.resource_updated(COUNTER_URI)
    return f"Counter reset (was {previous})."


# -------------------------------------------------------------- resources


README = """# Everything demo

This server exercises every MCP feature trio-mcp supports: tools with
progress, logging, sampling and elicitation; text, binary, templated and
subscribable resources; prompts with completions.
"""


@app.resource("demo://readme", name="readme", title="README", mime_type="text/markdown")
def readme() -> str:
    """What this server is."""
    return README


@app.resource("demo://logo.png", name="logo", title="Logo", mime_type="image/png")
def logo() -> bytes:
    """An 8x8 PNG (binary resource)."""
    return LOGO_PNG


@app.resource(COUNTER_URI, name="counter", mime_type="application/json")
def counter(ctx: Context) -> dict[str, Any]:
    """The shared counter; subscribe to hear about changes."""
    state: DemoState = ctx.state
    return {"counter": state.counter, "uptime_s": round(time.time() - state.started_at, 3)}


@app.resource("demo://greeting/{name}", name="greeting", mime_type="text/plain")
def greeting(name: str) -> str:
    """A greeting for anyone (resource template)."""
    return f"Hello, {name}!"


@app.resource("demo://bytes/{size}", name="bytes", mime_type="application/octet-stream")
def some_bytes(size: int) -> bytes:
    """``size`` bytes counting 0, 1, 2... (binary resource template, at most 4096)."""
    if not 0 <= size <= 4096:
        raise InvalidParams("size must be between 0 and 4096")
    return bytes(i % 256 for i in range(size))


_NAMES = ("Ada", "Alan", "Barbara", "Grace", "Guido", "Linus", "Margaret")


@app.completion("demo://greeting/{name}", "name")
def complete_name(value: str, context: dict[str, str]) -> list[str]:
    return [n for n in _NAMES if n.lower().startswith(value.lower())]


# ---------------------------------------------------------------- prompts


@app.prompt
def simple() -> str:
    """A prompt without arguments."""
    return "Tell me something interesting about trio."


@app.prompt(title="Code review")
def code_review(code: str, language: str = "python") -> list[dict[str, Any]]:
    """Ask for a review of some code.

    Args:
        code: The code to review
        language: Its programming language
    """
    return [
        {"role": "user", "content": f"Please review this {language} code:\n\n```{language}\n{code}\n```"},
        {"role": "assistant", "content": "Sure, here is my review:"},
    ]


_LANGUAGES = ("c", "cpp", "go", "javascript", "python", "rust", "typescript", "zig")


@app.completion("code_review", "language")
def complete_language(value: str, context: dict[str, str]) -> list[str]:
    return [lang for lang in _LANGUAGES if lang.startswith(value.lower())]


@app.prompt
def explain_resource(uri: str = "demo://readme") -> list[Any]:
    """Ask for an explanation of a resource, embedded in the prompt.

    Args:
        uri: demo:// URI of the resource to embed
    """
    if uri == "demo://readme":
        contents = ResourceContents.from_text(uri, README, mime_type="text/markdown")
    elif uri.startswith("demo://greeting/"):
        contents = ResourceContents.from_text(uri, greeting(uri.rsplit("/", 1)[1]), mime_type="text/plain")
    else:
        raise InvalidParams(f"cannot embed {uri!r}; try demo://readme or demo://greeting/<name>")
    return [contents, "Please explain the resource above."]


# ------------------------------------------------------- entry point ----
# stdio today; other transports (Streamable HTTP)
# plug in here as they land.


async def serve_stdio() -> None:
    """Serve :data:`app` to one client over this process's stdin / stdout."""
    from trio_mcp.transports.stdio import stdio_server_stream

    async with stdio_server_stream() as stream:
        await app.serve(stream, name="everything-stdio")


def main(argv: list[str] | None = None) -> int:
    """``python examples/everything_server.py``: serve over stdio until stdin ends."""
    trio.run(serve_stdio)
    return 0


if __name__ == "__main__":
    sys.exit(main())
