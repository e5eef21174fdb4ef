"""trio-mcp's stdio echo server for ``benchmarks/bench_stdio.py``.

    .venv/bin/python benchmarks/servers/trio_echo_server.py                 # serve on stdin/stdout
    .venv/bin/python -X importtime benchmarks/servers/trio_echo_server.py --import-only

One tool, ``async def echo(text: str) -> str`` with ``structured_output=False``
(a single text block, as on the SDK side). Only what serving stdio needs is
imported, inside ``main`` so ``--import-only`` measures exactly that. Serves
until its stdin closes.
"""

import sys


def main(argv: list[str]) -> int:
    import trio

    from trio_mcp.server import MCPServer
    from trio_mcp.transports.stdio import stdio_server_stream

    if "--import-only" in argv:
        return 0

    app = MCPServer("bench-echo", "1.0")

    @app.tool(structured_output=False)
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    async def serve() -> None:
        async with stdio_server_stream() as stream:
            await app.serve(stream)

    trio.run(serve)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
