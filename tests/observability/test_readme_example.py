"""The README's tracing example runs and prints one trace of the tool call."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import trio

from trio_mcp.protocol import LATEST_HANDSHAKE_VERSION

ROOT = Path(__file__).resolve().parents[2]


def _objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed one after the other."""
    decoder = json.JSONDecoder()
    found, at = [], 0
    while (start := text.find("{", at)) != -1:
        value, at = decoder.raw_decode(text, start)
        found.append(value)
    return found


async def test_the_readme_tracing_example_prints_one_trace_of_the_call() -> None:
    section = (ROOT / "README.md").read_text().split("## Observability", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[0]
    with trio.fail_after(60):
        done = await trio.run_process([sys.executable, "-c", code], capture_stdout=True, capture_stderr=True)
    spans = {(s["name"], s["kind"]): s for s in _objects(done.stdout.decode())}
    client = spans["tools/call get_weather", "SpanKind.CLIENT"]
    server = spans["tools/call get_weather", "SpanKind.SERVER"]
    assert server["context"]["trace_id"] == client["context"]["trace_id"]
    assert server["parent_id"] == client["context"]["span_id"]
    assert server["attributes"]["gen_ai.tool.name"] == "get_weather"
    assert (
        spans["initialize", "SpanKind.CLIENT"]["attributes"]["mcp.protocol.version"]
        == LATEST_HANDSHAKE_VERSION
    )
