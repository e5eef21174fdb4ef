"""Connect the official SDK's client to a Streamable HTTP URL and report.

Runs under the SDK's own interpreter (``.cache/sdk-venv/bin/python``)::

    sdk_http_probe.py URL MODE      # MODE: legacy | auto

Prints one JSON object: the negotiated protocol version, the
tool names, an echo, a sampled answer (the server asks the client's LLM) and a
progress-reporting call.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp import Client

warnings.simplefilter("ignore")


async def main(url: str, mode: str) -> dict[str, Any]:
    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="sdk says hi"), model="sdk-model"
        )

    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    report: dict[str, Any] = {}
    with anyio.fail_after(30):
        async with Client(url, mode=mode, sampling_callback=sampling, read_timeout_seconds=10) as client:
            report["protocol_version"] = client.protocol_version
            tools = await client.list_tools()
            report["tools"] = sorted(t.name for t in tools.tools)
            echo = await client.call_tool("echo", {"message": "over http"})
            report["echo"] = [c.text for c in echo.content if isinstance(c, types.TextContent)]
            sampled = await client.call_tool("sample_llm", {"prompt": "hello"})
            report["sampled"] = [c.text for c in sampled.content if isinstance(c, types.TextContent)]
            report["sampled_is_error"] = bool(sampled.is_error)
            slow = await client.call_tool(
                "long_running_operation", {"steps": 3, "duration": 0.03}, progress_callback=on_progress
            )
            report["slow_is_error"] = bool(slow.is_error)
            report["progress"] = progress
    return report


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1], sys.argv[2])))
