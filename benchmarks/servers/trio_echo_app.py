"""The echo server of ``servers/trio_echo_server.py`` as a module-level
``app``, for ``trio-mcp run`` (``benchmarks/bench_startup.py``).

    trio-mcp run benchmarks/servers/trio_echo_app.py -t stdio
"""

from trio_mcp.server import MCPServer

app = MCPServer("bench-echo", "1.0")


@app.tool(structured_output=False)
async def echo(text: str) -> str:
    """Echo the text back."""
    return text
