"""One trace from a client call through the gateway to a real stdio server.

The client and the gateway run here and trace into the in-memory exporter;
the stdio server is a child process (``fixtures/traced_server.py``) with its
own global tracer provider, writing its spans as JSON lines to a file the
test names (``TRACE_FILE``). The four spans of one ``tools/call`` must form
one chain of one trace: client (CLIENT) -> gateway (SERVER) -> gateway's call
to the server (CLIENT) -> the server (SERVER), the last one in the child.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from tests.connections.test_faults_stdio import FAST  # fast restarts, bounded waits

from trio_mcp.gateway import open_gateway
from trio_mcp.testing import connected

from .conftest import Spans

SERVER = str(Path(__file__).resolve().parent / "fixtures" / "traced_server.py")
STDIO = {"close_grace": 2.0, "term_grace": 0.3, "kill_timeout": 2.0, "eof_grace": 0.5}


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _child_spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_one_trace_from_the_client_through_the_gateway_to_a_stdio_server(
    spans: Spans, tmp_path: Path, era: str
) -> None:
    trace_file = tmp_path / "server-spans.jsonl"
    config = {
        "mcpServers": {
            "weather": {"command": sys.executable, "args": [SERVER], "env": {"TRACE_FILE": str(trace_file)}}
        }
    }
    pid = 0
    try:
        with trio.fail_after(30):
            async with open_gateway(
                config, settings=FAST, stdio_options=STDIO, instrumentation=[spans.tracing]
            ) as gateway:
                async with connected(gateway, mode="bytes", era=era, instrumentation=[spans.tracing]) as c:
                    pid = (await c.call_tool("weather__pid", {})).structured_content["result"]  # type: ignore[index]
                    result = await c.call_tool("weather__get_weather", {"city": "Oslo"})
            assert result.content[0].text == "sunny in Oslo"  # type: ignore[union-attr]
            with trio.move_on_after(5):
                while not _gone(pid):
                    await trio.sleep(0.05)
            assert _gone(pid), "the stdio server outlived the gateway"
    finally:
        if pid and not _gone(pid):
            os.kill(pid, signal.SIGKILL)

    client = spans.named("tools/call weather__get_weather", "CLIENT")
    gateway_in = spans.named("tools/call weather__get_weather", "SERVER")
    gateway_out = spans.named("tools/call get_weather", "CLIENT")
    [server] = [s for s in _child_spans(trace_file) if s["name"] == "tools/call get_weather"]

    trace_id = client.context.trace_id
    assert gateway_in.context.trace_id == trace_id and gateway_out.context.trace_id == trace_id
    assert int(server["context"]["trace_id"], 16) == trace_id
    assert gateway_in.parent is not None and gateway_in.parent.span_id == client.context.span_id
    assert gateway_out.parent is not None and gateway_out.parent.span_id == gateway_in.context.span_id
    assert int(server["parent_id"], 16) == gateway_out.context.span_id

    assert server["kind"] == "SpanKind.SERVER"
    assert server["attributes"]["gen_ai.tool.name"] == "get_weather"
    assert server["attributes"]["network.transport"] == "pipe"
    assert (gateway_out.attributes or {})["network.transport"] == "pipe"
    assert (gateway_in.attributes or {})["gen_ai.tool.name"] == "weather__get_weather"
