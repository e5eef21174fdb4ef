"""Spans over real Streamable HTTP (hypercorn on 127.0.0.1, port 0) with our
client: the transport and the session id are on both sides' spans, one trace,
in both eras and in stateless mode."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from tests.serving.http.test_middleware import client
from tests.serving.http.test_server import TIMEOUT, serving

from trio_mcp.server import MCPServer

from .conftest import Spans


@pytest.mark.parametrize("mode", ["session", "modern", "stateless"])
async def test_http_spans_name_the_transport_and_the_session(spans: Spans, mode: str) -> None:
    app = MCPServer("http-traced", instrumentation=[spans.tracing])

    @app.tool
    def echo(text: str) -> str:
        return text

    options: dict[str, Any] = {"stateless": True} if mode == "stateless" else {}
    era = "modern" if mode == "modern" else "handshake"
    async with serving(app, **options) as (_, url):
        with trio.fail_after(TIMEOUT):
            async with client(url, era=era, instrumentation=[spans.tracing]) as session:
                await session.call_tool("echo", {"text": "hi"})
                session_id = session.peer.stream.session_id
    sent = spans.named("tools/call echo", "CLIENT")
    served = spans.named("tools/call echo", "SERVER")
    assert served.parent is not None and served.parent.span_id == sent.context.span_id
    for span in (sent, served):
        attrs = dict(span.attributes or {})
        assert attrs["network.transport"] == "tcp"
        assert attrs["network.protocol.name"] == "http"
        if mode == "session":
            assert isinstance(session_id, str) and attrs["mcp.session.id"] == session_id
        else:
            assert session_id is None and "mcp.session.id" not in attrs
