"""The official Python SDK's Streamable HTTP echo server for ``benchmarks/bench_http.py``.

    .cache/sdk-venv/bin/python benchmarks/servers/sdk_http_server.py          # JSON responses
    .cache/sdk-venv/bin/python benchmarks/servers/sdk_http_server.py --sse    # SSE responses

Run with the SDK's own venv (``.cache/sdk-venv``; ``mcp`` never shares a venv
with trio-mcp). The same tool as ``trio_http_server.py``: ``async def
echo(text: str) -> str`` (async: the SDK runs sync tools in a worker thread)
with ``structured_output=False``, server ``log_level="WARNING"``. Served the
way ``MCPServer.run("streamable-http", json_response=...)`` serves it
(``run_streamable_http_async``: ``MCPServer.streamable_http_app(...)`` on
``uvicorn.Server`` with the default config, plain asyncio), except that the
listening socket is bound here first, on 127.0.0.1 and a free port chosen at
run time (``--port`` to pick one), so the URL can be printed before serving:
``url <url>`` on stdout. Serves until SIGINT/SIGTERM (uvicorn's own
handlers) or until its stdin closes.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sse", action="store_true", help="SSE responses (json_response=False)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)

    import uvicorn
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("bench-echo", version="1.0", log_level="WARNING")

    @app.tool(structured_output=False)
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    host = "127.0.0.1"
    asgi = app.streamable_http_app(streamable_http_path="/mcp", json_response=not args.sse, host=host)
    # proto=IPPROTO_TCP as uvicorn's own bind gets it from getaddrinfo: asyncio
    # sets TCP_NODELAY only on sockets whose proto says TCP (with proto 0 every
    # JSON answer, headers then body, would wait ~40 ms on a delayed ACK).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, args.port))
    sock.listen(2048)  # connections wait in the backlog until uvicorn accepts
    port = sock.getsockname()[1]
    config = uvicorn.Config(asgi, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)

    def watch_stdin() -> None:
        try:
            while sys.stdin.buffer.read1(4096):
                pass
        except (OSError, ValueError):
            pass
        server.should_exit = True

    threading.Thread(target=watch_stdin, name="stdin-watch", daemon=True).start()
    print(f"url http://{host}:{port}/mcp", flush=True)
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
