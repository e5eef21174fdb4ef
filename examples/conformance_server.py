"""The fixture server of the official MCP conformance suite.

Serves the tools, resources, prompts and completions that the server
scenarios of ``@modelcontextprotocol/conformance`` (checked against 0.1.16)
call by name, answering each with what the scenario checks.

Scenarios served (``npx @modelcontextprotocol/conformance server --url ...``):

- ``server-initialize``, ``ping``, ``logging-set-level``, ``completion-complete``
- ``tools-list``, ``tools-call-simple-text``, ``tools-call-image``,
  ``tools-call-audio``, ``tools-call-embedded-resource``,
  ``tools-call-mixed-content``, ``tools-call-with-logging``,
  ``tools-call-error``, ``tools-call-with-progress``, ``tools-call-sampling``,
  ``tools-call-elicitation``, ``elicitation-sep1034-defaults``,
  ``elicitation-sep1330-enums``
- ``json-schema-2020-12`` (pending in 0.1.16; served through a low-level
  override of ``tools/list``, see :func:`_list_tools_with_raw_schemas`)
- ``server-sse-polling`` (``test_reconnection`` closes its SSE stream mid-call)
- ``resources-list``, ``resources-read-text``, ``resources-read-binary``,
  ``resources-templates-read``, ``resources-subscribe``,
  ``resources-unsubscribe``
- ``prompts-list``, ``prompts-get-simple``, ``prompts-get-with-args``,
  ``prompts-get-embedded-resource``, ``prompts-get-with-image``

Not served by this module (transport level): ``server-sse-multiple-streams``,
``dns-rebinding-protection``.

With ``--stateless-fixtures`` (:func:`add_stateless_fixtures`): the diagnostic
tools and the prompt that ``server-stateless`` and ``input-required-result-*``
(conformance 0.2, protocol 2026-07-28) call by name, and ``test_custom_headers``,
whose ``x-mcp-header`` annotations ``http-custom-header-server-validation``
looks for (SEP-2243: the server checks the ``Mcp-Param-*`` headers).

Declared capabilities: tools, resources (with ``subscribe``), prompts,
logging and completions.
"""

from __future__ import annotations

import io
import json
import struct
import sys
import wave
import zlib
from typing import Any

import msgspec
import trio

from trio_mcp.protocol import (
    EmbeddedResource,
    PrimitiveSchemaDefinition,
    PromptMessage,
    ResourceContents,
    TextContent,
)
from trio_mcp.server import Audio, Context, Image, MCPServer

__all__ = ["PNG_1X1_RED", "WAV_SILENCE", "add_stateless_fixtures", "app", "main"]


# ------------------------------------------------------------------ media


def _png_1x1_red() -> bytes:
    """A valid 1x1 PNG holding one opaque red pixel."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)  # 8-bit RGBA
    pixels = zlib.compress(b"\x00\xff\x00\x00\xff")  # filter byte + one RGBA pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _wav_silence(frames: int = 80, rate: int = 8000) -> bytes:
    """A valid mono 16-bit WAV file of ``frames`` silent samples (10 ms)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\x00\x00" * frames)
    return buffer.getvalue()


PNG_1X1_RED = _png_1x1_red()
WAV_SILENCE = _wav_silence()


app = MCPServer(
    "trio-mcp-conformance",
    "0.1.0",
    instructions="Fixture server for the MCP conformance suite.",
)


# ------------------------------------------------------------------ tools


@app.tool
def test_simple_text() -> str:
    """Returns a single text content block."""
    return "This is a simple text response for testing."


@app.tool
def test_image_content() -> Image:
    """Returns a 1x1 red PNG image."""
    return Image(PNG_1X1_RED, "image/png")


@app.tool
def test_audio_content() -> Audio:
    """Returns a short silent WAV clip (audio/wav)."""
    return Audio(WAV_SILENCE, "audio/wav")


@app.tool
def test_embedded_resource() -> EmbeddedResource:
    """Returns an embedded text resource."""
    return EmbeddedResource(
        resource=ResourceContents.from_text(
            "test://embedded-resource", "This is an embedded resource content.", mime_type="text/plain"
        )
    )


@app.tool
def test_multiple_content_types() -> list[str | Image | EmbeddedResource]:
    """Returns text, image and embedded resource content together."""
    return [
        "Multiple content types test:",
        Image(PNG_1X1_RED, "image/png"),
        EmbeddedResource(
            resource=ResourceContents.from_text(
                "test://mixed-content-resource",
                json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
                mime_type="application/json",
            )
        ),
    ]


@app.tool
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log notifications, 50 ms apart, while it runs."""
    await ctx.info("Tool execution started")
    await trio.sleep(0.05)
    await ctx.info("Tool processing data")
    await trio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@app.tool
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0/100, 50/100 and 100/100, 50 ms apart (when asked to)."""
    await ctx.report_progress(0, 100)
    await trio.sleep(0.05)
    await ctx.report_progress(50, 100)
    await trio.sleep(0.05)
    await ctx.report_progress(100, 100)
    return "Tool with progress executed successfully"


@app.tool
def test_error_handling() -> str:
    """Always fails; the failure is reported as an isError result."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@app.tool
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's LLM to answer a prompt (sampling/createMessage).

    Args:
        prompt: The prompt to send to the LLM
    """
    result = await ctx.sample(prompt, max_tokens=100)
    content = result.content
    text = getattr(content, "text", None)
    return f"LLM response: {text if text is not None else msgspec.json.encode(content).decode()}"


@app.tool
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for a username and an email address (elicitation/create).

    Args:
        message: The message to show the user
    """
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    result = await ctx.elicit(message, schema)
    return f"User response: action={result.action}, content={_json(result.content)}"


@app.tool
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits a form whose fields all carry default values (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": PrimitiveSchemaDefinition.string(description="User name", default="John Doe"),
            "age": PrimitiveSchemaDefinition.number(integer=True, description="User age", default=30),
            "score": PrimitiveSchemaDefinition.number(description="User score", default=95.5),
            "status": PrimitiveSchemaDefinition.single_select(
                ["active", "inactive", "pending"], description="User status", default="active"
            ),
            "verified": PrimitiveSchemaDefinition.boolean(description="Verification status", default=True),
        },
    }
    result = await ctx.elicit("Please review and update the form fields with defaults", schema)
    return f"Elicitation completed: action={result.action}, content={_json(result.content)}"


@app.tool
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits a form using all five enum schema variants (SEP-1330)."""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": PrimitiveSchemaDefinition.single_select(
                ["option1", "option2", "option3"], description="Untitled single-select"
            ),
            "titledSingle": PrimitiveSchemaDefinition.single_select(
                {"value1": "First Option", "value2": "Second Option", "value3": "Third Option"},
                description="Titled single-select",
            ),
            "legacyEnum": PrimitiveSchemaDefinition(
                type="string",
                description="Legacy titled enum (enumNames, deprecated)",
                enum=["opt1", "opt2", "opt3"],
                enum_names=["Option One", "Option Two", "Option Three"],
            ),
            "untitledMulti": PrimitiveSchemaDefinition.multi_select(
                ["option1", "option2", "option3"], description="Untitled multi-select"
            ),
            "titledMulti": PrimitiveSchemaDefinition.multi_select(
                {"value1": "First Choice", "value2": "Second Choice", "value3": "Third Choice"},
                description="Titled multi-select",
            ),
        },
    }
    result = await ctx.elicit("Please pick from the enum fields", schema)
    return f"Elicitation completed: action={result.action}, content={_json(result.content)}"


class Address(msgspec.Struct, kw_only=True, omit_defaults=True):
    street: str | None = None
    city: str | None = None


JSON_SCHEMA_2020_12_TOOL = "json_schema_2020_12_tool"
#: The input schema the json-schema-2020-12 scenario expects verbatim.
JSON_SCHEMA_2020_12_INPUT: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    # SEP-2106 (conformance 0.2): composition and conditional keywords survive too.
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@app.tool(
    name=JSON_SCHEMA_2020_12_TOOL,
    description="Tool with JSON Schema 2020-12 features",
    input_schema=JSON_SCHEMA_2020_12_INPUT,
)
def json_schema_2020_12_tool(
    name: str | None = None,
    address: Address | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    return f"Received: name={name!r}, address={_json(address)}"


@app.tool
async def test_reconnection(ctx: Context) -> str:
    """Over Streamable HTTP, closes this call's SSE stream mid-call (SEP-1699):
    the client reconnects with Last-Event-ID and still gets the answer."""
    from trio_mcp.serving.http import close_sse_stream

    await close_sse_stream(ctx)  # a no-op on other transports
    await trio.sleep(0.1)
    return "Reconnection test completed successfully"


# -------------------------------------------------------------- resources


@app.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@app.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a 1x1 PNG image)."""
    return PNG_1X1_RED


@app.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
def template_data(id: str) -> str:
    """Data for any id, substituted from the URI."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))


#: Content of ``test://watched-resource``; change it with :func:`update_watched_resource`.
watched = {"content": "Watched resource content", "version": 0}


@app.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource clients can subscribe to; it changes when the fixture says so."""
    return f"{watched['content']} (version {watched['version']})"


def update_watched_resource(content: str | None = None) -> None:
    """Change ``test://watched-resource`` and notify its subscribers."""
    watched["version"] += 1
    if content is not None:
        watched["content"] = content
    app.resource_updated("test://watched-resource")


# ---------------------------------------------------------------- prompts


@app.prompt
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@app.prompt
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments.

    Args:
        arg1: First test argument
        arg2: Second test argument
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@app.prompt
def test_prompt_with_embedded_resource(resourceUri: str) -> list[PromptMessage]:
    """A prompt embedding a resource.

    Args:
        resourceUri: URI of the resource to embed
    """
    return [
        PromptMessage(
            role="user",
            content=EmbeddedResource(
                resource=ResourceContents.from_text(
                    resourceUri, "Embedded resource content for testing.", mime_type="text/plain"
                )
            ),
        ),
        PromptMessage(role="user", content=TextContent(text="Please process the embedded resource above.")),
    ]


@app.prompt
def test_prompt_with_image() -> list[str | Image]:
    """A prompt with an image."""
    return [Image(PNG_1X1_RED, "image/png"), "Please analyze the image above."]


# ------------------------------------------------------------ completions

_ARG1_VALUES = ("paris", "park", "party", "test", "testing", "tested")
_TEMPLATE_IDS = ("1", "2", "3", "12", "123", "1234")


@app.completion("test_prompt_with_arguments", "arg1")
def complete_arg1(value: str, context: dict[str, str]) -> list[str]:
    return [v for v in _ARG1_VALUES if v.startswith(value)]


@app.completion("test_prompt_with_arguments", "arg2")
def complete_arg2(value: str, context: dict[str, str]) -> list[str]:
    first = context.get("arg1", "")
    return [f"{first}-{suffix}" if first else suffix for suffix in ("one", "two") if suffix.startswith(value)]


@app.completion("test://template/{id}/data", "id")
def complete_template_id(value: str, context: dict[str, str]) -> list[str]:
    return [v for v in _TEMPLATE_IDS if v.startswith(value)]


# ------------------------------------------- stateless-era diagnostic fixtures
#
# The 2026-07-28 scenarios of conformance 0.2 (``server-stateless``,
# ``input-required-result-*``) call diagnostic tools and a prompt by name.
# They are registered by ``add_stateless_fixtures`` (``--stateless-fixtures``),
# not by default, so the default fixture lists what it always listed.


def add_stateless_fixtures(server: MCPServer = app) -> None:
    """Register the tools and the prompt the 2026-07-28 scenarios call.

    Every one asks through the ordinary ``Context`` API (in the stateless era a
    question ends the round with an ``InputRequiredResult`` whose keys
    trio-mcp names itself), except two whose answers the suite fixes: the
    ``user_name`` key of ``test_input_required_result_elicitation`` and the
    three questions in one round of ``test_input_required_result_multiple_inputs``;
    those are answered by a ``tools/call`` wrapper with raw input requests."""
    from trio_mcp.protocol import (
        CallToolRequestParams,
        CallToolResult,
        CreateMessageRequest,
        CreateMessageRequestParams,
        ElicitRequest,
        ElicitRequestParams,
        ElicitResult,
        InputRequiredResult,
        InvalidParams,
        ListRootsRequest,
        SamplingMessage,
        coerce,
    )

    def form(field: str, kind: str = "string") -> dict[str, Any]:
        return {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}

    def answer(result: Any, field: str) -> Any:
        content = result.content if result.content is not msgspec.UNSET else {}
        return content.get(field)

    @server.tool(description="Needs the client's sampling capability (-32021 without it)")
    async def test_missing_capability(ctx: Context) -> str:
        await ctx.sample("Say yes.", max_tokens=5)
        return "Success"

    @server.tool(description="Asks the user through elicitation while the call is open")
    async def test_streaming_elicitation(ctx: Context) -> str:
        result = await ctx.elicit("Continue?", form("ok", "boolean"))
        return f"Streaming complete: {result.action}"

    @server.tool(description="Logs at info level (only when the request asked for logs)")
    async def test_logging_tool(ctx: Context) -> str:
        await ctx.info("Diagnostic trace logging activated")
        return "Logging evaluated"

    @server.tool(description="Re-registers itself: the tool list changes")
    def test_trigger_tool_change() -> str:
        server.add_tool(test_trigger_tool_change, description="Re-registers itself: the tool list changes")
        return "Mutation triggered"

    @server.tool(description="Re-registers a prompt: the prompt list changes")
    def test_trigger_prompt_change() -> str:
        server.prompt(test_simple_prompt)
        return "Mutation triggered"

    @server.tool(description="MRTR: asks for one sampling")
    async def test_input_required_result_sampling(ctx: Context) -> str:
        result = await ctx.sample("What is the capital of France?", max_tokens=100)
        return f"Sampling result: {getattr(result.content, 'text', 'no response')}"

    @server.tool(description="MRTR: asks for the client's roots")
    async def test_input_required_result_list_roots(ctx: Context) -> str:
        return f"Found {len(await ctx.list_roots())} root(s)"

    @server.tool(description="MRTR: asks for a confirmation; the answer comes back with requestState")
    async def test_input_required_result_request_state(ctx: Context) -> str:
        result = await ctx.elicit("Please confirm", form("ok", "boolean"))
        return f"state-ok: confirmed={answer(result, 'ok')}"

    @server.tool(description="MRTR: two rounds, the second asked after the first was answered")
    async def test_input_required_result_multi_round(ctx: Context) -> str:
        name = answer(await ctx.elicit("Step 1: What is your name?", form("name")), "name")
        color = answer(await ctx.elicit("Step 2: What is your favorite color?", form("color")), "color")
        return f"Multi-round complete for {name} who likes {color}"

    @server.tool(description="MRTR: asks for a confirmation (requestState is authenticated)")
    async def test_input_required_result_tampered_state(ctx: Context) -> str:
        await ctx.elicit("Please confirm", form("ok", "boolean"))
        return "integrity-ok: state verified"

    @server.tool(description="MRTR: asks only for what the client declared")
    async def test_input_required_result_capabilities(ctx: Context) -> str:
        caps = ctx.client_capabilities
        received = []
        if caps.elicitation is not msgspec.UNSET:
            await ctx.elicit("Elicitation input", form("value"))
            received.append("elicitation")
        if caps.sampling is not msgspec.UNSET:
            await ctx.sample("Sample request", max_tokens=50)
            received.append("sampling")
        if not received:
            return "No supported capabilities declared"
        return f"capabilities-ok: received {','.join(received)}"

    @server.tool(
        description="SEP-2243: region and priority also travel as Mcp-Param-Region / Mcp-Param-Priority",
        input_schema={
            "type": "object",
            "properties": {
                "region": {"type": "string", "description": "Where to run", "x-mcp-header": "Region"},
                "priority": {"type": "integer", "description": "How urgent", "x-mcp-header": "Priority"},
                "query": {"type": "string", "description": "Not mirrored"},
            },
            "required": ["region"],
        },
    )
    def test_custom_headers(region: str, priority: int | None = None, query: str | None = None) -> str:
        return f"region={region} priority={priority} query={query}"

    @server.prompt(description="MRTR: a prompt that needs elicitation input")
    async def test_input_required_result_prompt(ctx: Context) -> str:
        result = await ctx.elicit("What context should the prompt use?", form("context"))
        return f"Prompt with context: {answer(result, 'context')}"

    # --- the two whose input request keys / batching the suite fixes

    question = {"message": "What is your name?", "requestedSchema": form("name")}
    user_name = ElicitRequest(params=msgspec.convert(question, ElicitRequestParams))
    multiple = {
        "user_name": user_name,
        "greeting": CreateMessageRequest(
            params=CreateMessageRequestParams(
                messages=[SamplingMessage(role="user", content=TextContent(text="Generate a greeting"))],
                max_tokens=50,
            )
        ),
        "client_roots": ListRootsRequest(),
    }

    def responses(params: CallToolRequestParams) -> dict[str, Any]:
        return {} if params.input_responses is msgspec.UNSET else params.input_responses

    def elicited(raw: Any) -> ElicitResult:
        try:
            return coerce(raw, ElicitResult)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise InvalidParams(f"inputResponses['user_name'] is not an ElicitResult: {exc}") from None

    @server.tool(description="MRTR: asks for the user's name (input request key user_name)")
    async def test_input_required_result_elicitation(ctx: Context) -> str:
        result = await ctx.elicit("What is your name?", form("name"))  # handshake era
        return f"Hello, {answer(result, 'name')}!"

    @server.tool(description="MRTR: asks for elicitation, sampling and roots in one round")
    async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
        name = answer(await ctx.elicit("What is your name?", form("name")), "name")  # handshake era
        await ctx.sample("Generate a greeting", max_tokens=50)
        return f"Hello, {name}! ({len(await ctx.list_roots())} root(s))"

    call_tool = server.request_handlers["tools/call"].fn

    async def call_tool_fixed_keys(ctx: Context, params: CallToolRequestParams) -> Any:
        if ctx.modern is None or params.name not in (
            "test_input_required_result_elicitation",
            "test_input_required_result_multiple_inputs",
        ):
            return await call_tool(ctx, params)
        got = responses(params)
        if params.name == "test_input_required_result_elicitation":
            if "user_name" not in got:
                return InputRequiredResult(input_requests={"user_name": user_name})
            name = answer(elicited(got["user_name"]), "name")
            return CallToolResult(content=[TextContent(text=f"Hello, {name}!")])
        if not set(multiple) <= set(got) or params.request_state is msgspec.UNSET:
            return InputRequiredResult(input_requests=multiple, request_state="multiple-inputs-round-1")
        name = answer(elicited(got["user_name"]), "name")
        return CallToolResult(content=[TextContent(text=f"Hello, {name}! All three inputs received.")])

    server.set_request_handler(
        "tools/call", CallToolRequestParams, call_tool_fixed_keys, own_request_state=True
    )
    add_task_fixtures(server)


def add_task_fixtures(server: MCPServer = app) -> None:
    """The tasks extension (SEP-2663): a task runtime and the tools its scenarios call.

    ``greet`` is a plain tool; ``slow_compute``, ``failing_job``,
    ``protocol_error_job``, ``confirm_delete`` and ``multi_input`` run as tasks
    when the client declares the extension (``failing_job`` only then);
    ``test_tool_with_task`` asks for a name in the request (input-required
    rounds), then answers with a task whose result uses it."""
    from trio_mcp.actors import TaskRuntime
    from trio_mcp.protocol import CallToolResult, InternalError

    if server.tasks is None:
        server.enable_tasks(TaskRuntime(poll_interval_ms=200))

    def form(field: str, kind: str = "string") -> dict[str, Any]:
        return {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}

    def content(result: Any) -> dict[str, Any]:
        return {} if result.content is msgspec.UNSET else dict(result.content)

    @server.tool(description="Greets by name (never a task)")
    def greet(name: str) -> str:
        return f"Hello, {name}!"

    @server.tool(task_support="optional", description="Sleeps `seconds`, then answers (a task when asked)")
    async def slow_compute(seconds: float = 1.0, label: str = "") -> str:
        await trio.sleep(seconds)
        return f"computed {label or 'result'} after {seconds}s"

    @server.tool(task_support="required", description="Fails after ~1 s with a tool execution error")
    async def failing_job() -> str:
        await trio.sleep(1)
        raise RuntimeError("failing_job always fails")

    @server.tool(task_support="optional", description="Fails with a protocol error (the task fails)")
    async def protocol_error_job() -> str:
        await trio.sleep(0.1)
        raise InternalError("protocol_error_job: simulated internal failure")

    @server.tool(task_support="optional", description="Asks the user to confirm a deletion")
    async def confirm_delete(filename: str, ctx: Context) -> str:
        result = await ctx.elicit(f"Delete {filename}?", form("confirm", "boolean"))
        confirmed = result.action == "accept" and content(result).get("confirm") is True
        return f"{filename}: {'deleted' if confirmed else 'kept'}"

    @server.tool(task_support="optional", description="Asks two questions at once")
    async def multi_input(ctx: Context) -> str:
        answers: list[str] = []

        async def ask(question: str) -> None:
            result = await ctx.elicit(question, form("name"))
            answers.append(str(content(result).get("name")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "First name?")
            nursery.start_soon(ask, "Second name?")
        return "got " + " and ".join(sorted(answers))

    @server.tool(
        task_support="required",
        task_start="tool",
        description="Asks for a name (input-required rounds), then continues as a task",
    )
    async def test_tool_with_task(ctx: Context) -> Any:
        result = await ctx.elicit("What is your name?", form("name"))
        name = content(result).get("name")

        async def work(task_ctx: Context) -> CallToolResult:
            await trio.sleep(0.2)
            return CallToolResult(content=[TextContent(text=f"Task done for {name}")])

        return await ctx.start_task(work)


# ---------------------------------------------------------------- helpers


def _json(value: Any) -> str:
    return msgspec.json.encode(None if value is msgspec.UNSET else value).decode()


# ------------------------------------------------------- entry point ----


async def serve_stdio() -> None:
    """Serve :data:`app` to one client over this process's stdin / stdout."""
    from trio_mcp.transports.stdio import stdio_server_stream

    async with stdio_server_stream() as stream:
        await app.serve(stream, name="conformance-stdio")


async def serve_http(port: int) -> None:
    """Serve :data:`app` over Streamable HTTP on 127.0.0.1 (what the conformance suite drives)."""
    from trio_mcp.serving.http import HttpServer

    async with app.running(), trio.open_nursery() as nursery:
        info = await nursery.start(HttpServer(app, port=port).run)
        print(info.url, flush=True)


def main(argv: list[str] | None = None) -> int:
    """``python examples/conformance_server.py [--http [--port N]]``: stdio by default."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    parser.add_argument("--port", type=int, default=0, help="HTTP port (0: any free port, printed)")
    parser.add_argument(
        "--stateless-fixtures",
        action="store_true",
        help="also serve the diagnostic tools and prompt of the 2026-07-28 scenarios (conformance 0.2)",
    )
    args = parser.parse_args(argv)
    if args.stateless_fixtures:
        add_stateless_fixtures()
    if args.http:
        trio.run(serve_http, args.port)
    else:
        trio.run(serve_stdio)
    return 0


if __name__ == "__main__":
    sys.exit(main())
