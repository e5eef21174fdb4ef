"""OpenTelemetry spans of sessions: names, kinds, attributes, errors,
notifications, trace context through ``_meta``, both protocol eras."""

from __future__ import annotations

import sys
import textwrap
from typing import Any

import msgspec
import pytest
import trio
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from trio_mcp import ClientSession, Context, InvalidParams, McpError, MCPServer, ServerSession
from trio_mcp.actors._instrument import (
    install_instrumentation,
    installed_instrumentation,
    uninstall_instrumentation,
)
from trio_mcp.observability import Tracing
from trio_mcp.observability._tracing import DEFAULT_TRACING, with_meta
from trio_mcp.protocol import CallToolRequestParams, CreateMessageResult, Root, TextContent
from trio_mcp.testing import connected
from trio_mcp.transports import memory_pair

from .conftest import Spans

MODES = ("zero-copy", "bytes", "inline")


def traced_app(spans: Spans) -> MCPServer:
    app = MCPServer("traced", instrumentation=[spans.tracing])

    @app.tool()
    def add(a: int, b: int) -> int:
        return a + b

    @app.tool()
    def refuse(reason: str) -> str:
        raise InvalidParams(f"refused: {reason}")

    @app.tool()
    async def shout(ctx: Context, text: str) -> str:
        await ctx.info(text)
        return text.upper()

    @app.tool()
    def trace_context(ctx: Context) -> dict[str, Any]:
        return {"traceparent": ctx.meta.get("traceparent")}

    @app.prompt()
    def greet(name: str) -> str:
        return f"Hello {name}"

    @app.resource("memo://one")
    def one() -> str:
        return "one"

    return app


def traced_app_untold() -> MCPServer:
    """An app given no instrumentation: it takes the process defaults."""
    app = MCPServer("untold")

    @app.tool()
    def nothing() -> str:
        return ""

    return app


def _hex(span_id: int) -> str:
    return format(span_id, "016x")


@pytest.mark.parametrize("era", ["handshake", "modern"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_call_is_a_client_span_and_a_server_span_of_one_trace(
    spans: Spans, mode: str, era: str
) -> None:
    with trio.fail_after(10):
        async with connected(traced_app(spans), mode=mode, era=era, instrumentation=[spans.tracing]) as c:
            result = await c.call_tool("add", {"a": 2, "b": 3})
    assert result.structured_content == {"result": 5}
    client = spans.named("tools/call add", "CLIENT")
    server = spans.named("tools/call add", "SERVER")
    assert server.context.trace_id == client.context.trace_id
    assert server.parent is not None and server.parent.span_id == client.context.span_id
    assert server.parent.is_remote  # extracted from _meta, not the ambient context
    for span in (client, server):
        attrs = dict(span.attributes or {})
        assert attrs["mcp.method.name"] == "tools/call"
        assert attrs["gen_ai.tool.name"] == "add"
        assert attrs["gen_ai.operation.name"] == "execute_tool"
        assert attrs["mcp.protocol.version"] == c.protocol_version
        assert attrs["jsonrpc.request.id"].isdigit()
        assert "error.type" not in attrs
        assert span.status.status_code is StatusCode.UNSET
    assert client.attributes is not None and server.attributes is not None
    assert client.attributes["jsonrpc.request.id"] == server.attributes["jsonrpc.request.id"]


async def test_the_handler_sees_the_client_span_in_its_meta(spans: Spans) -> None:
    with trio.fail_after(10):
        async with connected(traced_app(spans), mode="bytes", instrumentation=[spans.tracing]) as c:
            result = await c.call_tool("trace_context", {})
    client = spans.named("tools/call trace_context", "CLIENT")
    ctx = client.context
    traceparent = f"00-{ctx.trace_id:032x}-{_hex(ctx.span_id)}-{int(ctx.trace_flags):02x}"
    assert result.structured_content == {"traceparent": traceparent}


async def test_a_call_made_inside_a_span_of_the_application_joins_its_trace(spans: Spans) -> None:
    tracer = spans.provider.get_tracer("app")
    with trio.fail_after(10):
        async with connected(traced_app(spans), mode="bytes", instrumentation=[spans.tracing]) as c:
            with tracer.start_as_current_span("user work") as outer:
                await c.call_tool("add", {"a": 1, "b": 1})
    client = spans.named("tools/call add", "CLIENT")
    server = spans.named("tools/call add", "SERVER")
    assert client.parent is not None and client.parent.span_id == outer.get_span_context().span_id
    assert server.context.trace_id == outer.get_span_context().trace_id


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_an_error_answer_records_its_json_rpc_code_on_both_sides(spans: Spans, era: str) -> None:
    with trio.fail_after(10):
        async with connected(traced_app(spans), mode="bytes", era=era, instrumentation=[spans.tracing]) as c:
            with pytest.raises(McpError) as raised:
                await c.get_prompt("missing", {})
    code = raised.value.code
    assert code == -32602
    for kind in ("CLIENT", "SERVER"):
        span = spans.named("prompts/get missing", kind)
        attrs = dict(span.attributes or {})
        assert attrs["error.type"] == str(code)
        assert attrs["rpc.response.status_code"] == str(code)
        assert attrs["rpc.jsonrpc.error_code"] == code
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == raised.value.message


async def test_a_tool_that_raises_an_mcp_error_is_a_tool_error_on_both_sides(spans: Spans) -> None:
    with trio.fail_after(10):
        async with connected(traced_app(spans), mode="bytes", instrumentation=[spans.tracing]) as c:
            result = await c.call_tool("refuse", {"reason": "no"})
    assert result.is_error
    for kind in ("CLIENT", "SERVER"):
        span = spans.named("tools/call refuse", kind)
        assert (span.attributes or {})["error.type"] == "tool_error"
        assert span.status.status_code is StatusCode.ERROR


async def test_an_exception_out_of_a_request_handler_is_recorded_as_minus_32603(spans: Spans) -> None:
    app = MCPServer("raw", instrumentation=[spans.tracing])

    async def broken(ctx: Context, params: Any) -> Any:
        raise KeyError("lost")

    app.set_request_handler("tools/list", dict[str, Any], broken)
    with trio.fail_after(10):
        async with connected(app, mode="bytes", instrumentation=[spans.tracing]) as c:
            with pytest.raises(Exception, match="lost"):
                await c.list_tools()
    server = spans.named("tools/list", "SERVER")
    attrs = dict(server.attributes or {})
    assert attrs["error.type"] == "KeyError"
    assert attrs["rpc.response.status_code"] == "-32603"
    assert [e.name for e in server.events] == ["exception"]
    client = spans.named("tools/list", "CLIENT")
    assert (client.attributes or {})["error.type"] == "-32603"


async def test_prompt_and_resource_spans_name_their_target(spans: Spans) -> None:
    updated = trio.Event()

    async def on_updated(uri: str) -> None:
        updated.set()  # the handling span ends before the test runs again (no checkpoint after this)

    app = traced_app(spans)
    with trio.fail_after(10):
        async with connected(
            app, mode="bytes", instrumentation=[spans.tracing], on_resource_updated=on_updated
        ) as c:
            await c.get_prompt("greet", {"name": "Ada"})
            await c.read_resource("memo://one")
            await c.subscribe_resource("memo://one")
            app.resource_updated("memo://one")
            await updated.wait()
    prompt = spans.named("prompts/get greet", "SERVER")
    assert (prompt.attributes or {})["gen_ai.prompt.name"] == "greet"
    assert "gen_ai.operation.name" not in (prompt.attributes or {})
    # The URI is an attribute, never part of the name (cardinality).
    read = spans.named("resources/read", "CLIENT")
    assert (read.attributes or {})["mcp.resource.uri"] == "memo://one"
    assert (spans.named("resources/read", "SERVER").attributes or {})["mcp.resource.uri"] == "memo://one"
    for name, kind in (
        ("resources/subscribe", "SERVER"),
        ("notifications/resources/updated", "CLIENT"),  # sent by the server
        ("notifications/resources/updated", "SERVER"),  # handled by the client
    ):
        assert (spans.named(name, kind).attributes or {})["mcp.resource.uri"] == "memo://one"


@pytest.mark.parametrize("mode", MODES)
async def test_notifications_are_spans_on_both_sides_inside_the_request_trace(
    spans: Spans, mode: str
) -> None:
    got = trio.Event()

    async def on_log(params: Any) -> None:
        got.set()

    with trio.fail_after(10):
        async with connected(
            traced_app(spans), mode=mode, instrumentation=[spans.tracing], on_log=on_log, roots=[]
        ) as c:
            await c.call_tool("shout", {"text": "hi"})
            await got.wait()
            await c.set_roots([Root(uri="file:///tmp")])
    call = spans.named("tools/call shout", "SERVER")
    sent = spans.named("notifications/message", "CLIENT")  # the server sends it
    handled = spans.named("notifications/message", "SERVER")  # the client handles it
    assert sent.parent is not None and sent.parent.span_id == call.context.span_id
    assert handled.parent is not None and handled.parent.span_id == sent.context.span_id
    assert handled.context.trace_id == call.context.trace_id
    # The client's own notifications, and the one the server handles inline.
    initialized = spans.named("notifications/initialized", "SERVER")
    assert initialized.parent is not None
    assert initialized.parent.span_id == spans.named("notifications/initialized", "CLIENT").context.span_id
    spans.named("notifications/roots/list_changed", "CLIENT")


async def test_a_failed_notification_handler_is_an_error_span_without_a_json_rpc_code(spans: Spans) -> None:
    app = traced_app(spans)
    handled = trio.Event()

    async def on_roots_changed(session: ServerSession, params: Any) -> None:
        handled.set()  # no checkpoint from here to the span's end: it has ended when the test wakes
        raise ValueError("cannot list roots now")

    app.notification_handlers["notifications/roots/list_changed"] = on_roots_changed
    with trio.fail_after(10):
        async with connected(app, mode="bytes", instrumentation=[spans.tracing], roots=[]) as c:
            await c.set_roots([Root(uri="file:///tmp")])
            await handled.wait()
    span = spans.named("notifications/roots/list_changed", "SERVER")
    attrs = dict(span.attributes or {})
    assert attrs["error.type"] == "ValueError"
    assert "rpc.response.status_code" not in attrs  # a notification has no answer
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "cannot list roots now"


async def _ask_the_client(spans: Spans, era: str) -> None:
    """Call a tool that asks the client's LLM (a request to the client in
    the handshake era, an input-required round in 2026)."""
    app = MCPServer("asks", instrumentation=[spans.tracing])

    @app.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.sample("hello?", max_tokens=5)
        assert isinstance(answer.content, TextContent)
        return answer.content.text

    async def sampling(params: Any) -> CreateMessageResult:
        return CreateMessageResult(role="assistant", content=TextContent(text="hi"), model="m")

    with trio.fail_after(10):
        async with connected(
            app, mode="bytes", era=era, instrumentation=[spans.tracing], sampling_handler=sampling
        ) as c:
            assert (await c.call_tool("ask", {})).content[0].text == "hi"  # type: ignore[union-attr]


async def test_a_server_to_client_request_is_a_client_span_on_the_server(spans: Spans) -> None:
    await _ask_the_client(spans, "handshake")
    call = spans.named("tools/call ask", "SERVER")
    asked = spans.named("sampling/createMessage", "CLIENT")
    answered = spans.named("sampling/createMessage", "SERVER")
    assert asked.parent is not None and asked.parent.span_id == call.context.span_id
    assert answered.parent is not None and answered.parent.span_id == asked.context.span_id


async def test_a_2026_call_with_an_input_round_is_one_client_span_over_two_server_spans(
    spans: Spans,
) -> None:
    await _ask_the_client(spans, "modern")
    client = spans.named("tools/call ask", "CLIENT")
    rounds = [s for s in spans.all() if s.name == "tools/call ask" and s.kind.name == "SERVER"]
    assert len(rounds) == 2  # the question (input required), then the retry with the answer
    assert all(r.parent is not None and r.parent.span_id == client.context.span_id for r in rounds)
    assert (client.attributes or {})["mcp.protocol.version"] == "2026-07-28"
    assert not [s for s in spans.all() if s.name == "sampling/createMessage"]  # no request to the client


async def test_an_untraced_session_runs_the_peer_unwrapped(spans: Spans) -> None:
    # No global tracer provider in this process: the default Tracing does nothing.
    assert DEFAULT_TRACING in installed_instrumentation()
    assert DEFAULT_TRACING.tracer() is None
    client_end, server_end = memory_pair()
    untraced = (ServerSession(MCPServer("plain"), server_end), ClientSession(client_end))
    for session in untraced:
        assert "request" not in vars(session.peer) and "notify" not in vars(session.peer)
        assert session.peer.dispatcher is session
    traced = ClientSession(memory_pair()[0], instrumentation=[spans.tracing])
    assert "request" in vars(traced.peer) and traced.peer.dispatcher is not traced


async def test_instrumentation_given_to_a_session_replaces_the_defaults(spans: Spans) -> None:
    install_instrumentation(spans.tracing)
    try:
        with trio.fail_after(10):
            # The server takes the defaults (now tracing); the client is given none.
            async with connected(traced_app_untold(), instrumentation=()) as c:
                await c.list_tools()
    finally:
        uninstall_instrumentation(spans.tracing)
    assert [(s.name, s.kind.name) for s in spans.all() if s.name == "tools/list"] == [
        ("tools/list", "SERVER")
    ]
    server = spans.named("tools/list", "SERVER")
    assert server.parent is None  # nothing came in _meta


def test_with_meta_splices_raw_json_params_and_keeps_what_was_there() -> None:
    carrier = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    raw = msgspec.Raw(b' {"name":"t","arguments":{"x":[1,2]}}')
    out = with_meta(raw, carrier)
    assert type(out) is msgspec.Raw
    assert msgspec.json.decode(out) == {"_meta": carrier, "name": "t", "arguments": {"x": [1, 2]}}
    assert msgspec.json.decode(with_meta(msgspec.Raw(b"{ }"), carrier)) == {"_meta": carrier}
    had = msgspec.Raw(b'{"_meta":{"progressToken":3,"traceparent":"old"},"name":"t"}')
    assert msgspec.json.decode(with_meta(had, carrier)) == {
        "_meta": {"progressToken": 3, **carrier},
        "name": "t",
    }
    assert with_meta(None, carrier) == {"_meta": carrier}
    params = {"name": "t", "_meta": {"progressToken": 1}}
    assert with_meta(params, carrier) == {"name": "t", "_meta": {"progressToken": 1, **carrier}}
    assert params == {"name": "t", "_meta": {"progressToken": 1}}  # not changed in place
    struct = with_meta(CallToolRequestParams(name="t"), carrier)
    assert struct.meta == carrier and struct.name == "t"


async def test_with_a_global_tracer_provider_sessions_trace_without_being_told(tmp_path: Any) -> None:
    # The global provider can be set once per process: in a child process.
    script = textwrap.dedent(
        """
        import trio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from trio_mcp import MCPServer
        from trio_mcp.testing import connected

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        app = MCPServer("auto")

        @app.tool()
        def ping_me() -> str:
            return "pong"

        async def main():
            async with connected(app) as c:  # made before the provider is set: not traced
                await c.call_tool("ping_me", {})
            trace.set_tracer_provider(provider)
            async with connected(app) as c:
                await c.call_tool("ping_me", {})
            async with connected(app, instrumentation=()) as c:  # opted out: only the server traces
                await c.call_tool("ping_me", {})

        trio.run(main)
        print(sorted(f"{s.kind.name} {s.name}" for s in exporter.get_finished_spans() if "tools" in s.name))
        """
    )
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-c", script], capture_stdout=True, capture_stderr=True
        )
    assert done.stdout.decode().strip() == str(
        ["CLIENT tools/call ping_me", "SERVER tools/call ping_me", "SERVER tools/call ping_me"]
    ), done.stderr.decode()


def test_tracing_follows_the_global_provider_only_once_one_is_set() -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert Tracing().tracer() is None
