"""The official Python SDK's stdio echo server for ``benchmarks/bench_stdio.py``.

    .cache/sdk-venv/bin/python benchmarks/servers/sdk_echo_server.py

Run with the SDK's own venv (``.cache/sdk-venv``; ``mcp`` never shares a venv
with trio-mcp). The same tool as ``trio_echo_server.py``: ``async def echo(text:
str) -> str`` (async: the SDK runs sync tools in a worker thread) with
``structured_output=False`` (one text block, no output schema), server
``log_level="WARNING"`` (``MCPServer`` configures logging at INFO by default),
served by ``MCPServer.run("stdio")`` on plain asyncio until stdin closes.
"""

import sys


def main(argv: list[str]) -> int:
    from mcp.server.mcpserver import MCPServer

    if "--import-only" in argv:
        return 0

    app = MCPServer("bench-echo", version="1.0", log_level="WARNING")

    @app.tool(structured_output=False)
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    app.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
