"""Traced sessions on a recorded, validated wire, in both eras: every request
and notification either side sends carries the W3C trace context in its
``params._meta``, and every message still validates against the schema of
its era (the wire is validated when the connection closes)."""

from __future__ import annotations

import re

import pytest
import trio
from opentelemetry.sdk.trace import TracerProvider

from trio_mcp.observability import Tracing
from trio_mcp.protocol import Root

from .conftest import TIMEOUT, Answers, demo_app, open_connection, text_of

TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_every_message_sent_carries_the_trace_context_and_stays_valid(
    wires, mode: str, era: str
) -> None:
    provider = TracerProvider()  # spans recorded, none exported
    tracing = Tracing(provider)
    answers = Answers(text="Grace")
    app = demo_app(instrumentation=[tracing])
    try:
        with trio.fail_after(TIMEOUT):
            async with open_connection(
                app, wires, mode=mode, era=era, instrumentation=[tracing], **answers.options()
            ) as conn:
                assert text_of(await conn.client.call_tool("add", {"a": 1, "b": 2})) == "3"
                assert (
                    text_of(await conn.client.call_tool("ask_llm", {"question": "Who?"})) == "llm said: Grace"
                )
                await conn.client.list_tools()
                await conn.client.set_roots([Root(uri="file:///elsewhere")])
                await conn.wire.wait_for(
                    lambda w: bool(w.notifications("client", "notifications/roots/list_changed"))
                )
    finally:
        provider.shutdown()
    wire = conn.wire
    sent = [m for side in ("client", "server") for m in wire.messages(side) if "method" in m]
    assert {m["method"] for m in sent} >= {"tools/call", "tools/list", "notifications/roots/list_changed"}
    if era == "handshake":
        assert {"initialize", "notifications/initialized", "sampling/createMessage"} <= {
            m["method"] for m in sent
        }
    for message in sent:
        assert TRACEPARENT.fullmatch(message["params"]["_meta"]["traceparent"]), message
    # The call, its input-required retry (2026) or the question it asked
    # (handshake era) are one trace; the retry carries the same client span.
    ask = [m for m in sent if m["method"] == "tools/call" and m["params"]["name"] == "ask_llm"]
    followers = ask[1:] + [m for m in sent if m["method"] == "sampling/createMessage"]
    assert len(followers) == 1
    first, then = (m["params"]["_meta"]["traceparent"].split("-") for m in (ask[0], followers[0]))
    assert then[1] == first[1]
    if era == "modern":
        assert then[2] == first[2]
