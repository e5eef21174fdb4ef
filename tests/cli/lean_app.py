"""A stdio echo server that, when its process ends, writes the name of every
module it loaded to the file ``$LEAN_MODULES_OUT`` (one a line), then
whether the garbage collector was on (``gc enabled: True``).

    python lean_app.py              # served by the library: stdio_server_stream + app.serve
    trio-mcp run lean_app.py        # served by the command line (which imports this file)
"""

import atexit
import gc
import os
import sys

from trio_mcp import MCPServer

app = MCPServer("lean", "1.0")


@app.tool(structured_output=False)
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


def _report_modules() -> None:
    with open(os.environ["LEAN_MODULES_OUT"], "w") as out:
        out.write("\n".join([*sorted(sys.modules), f"gc enabled: {gc.isenabled()}"]))


atexit.register(_report_modules)

if __name__ == "__main__":
    import trio

    from trio_mcp.transports.stdio import stdio_server_stream

    async def serve() -> None:
        async with stdio_server_stream() as stream:
            await app.serve(stream)

    trio.run(serve)
