"""The floor of ``benchmarks/bench_http.py``: hypercorn serving a do-nothing ASGI app.

    .venv/bin/python benchmarks/servers/floor_http_server.py
    .venv/bin/python benchmarks/servers/floor_http_server.py --port 8000

hypercorn's trio worker, configured as :class:`trio_mcp.serving.http.HttpServer`
configures it (bind, ``graceful_timeout``, no access log, error log to a
logger), on 127.0.0.1 (a free port unless ``--port``), serving an ASGI app that
does no MCP work at all: it reads the request body and answers every request
with the same fixed JSON-RPC result (what the echo tool's ``tools/call``
answer looks like), ``content-type: application/json`` and a
``content-length``. What it serves is the most any MCP server on this HTTP
stack could serve. With ``--our-connection`` it is served through the
connection trio-mcp's :class:`HttpServer` uses over hypercorn (one socket
write per answer, one keep-alive timer per connection), so that ours over it
is what the MCP layer alone adds. Prints ``url <url>`` on stdout once it listens, then serves
until SIGINT/SIGTERM or until its stdin closes (so it never outlives the
benchmark that started it).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

#: The answer to every request: the echo tool's ``tools/call`` result for
#: the benchmark's payload, as trio-mcp's server sends it.
BODY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello, benchmark"}]}}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]
PATH = "/mcp"
GRACEFUL_TIMEOUT = 2.0  # HttpServer's default

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    while True:  # read the whole body, discard it
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            break
    if message["type"] == "http.disconnect":
        return
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument(
        "--our-connection",
        action="store_true",
        help="serve through trio-mcp's hypercorn connection (one write per answer, one keep-alive"
        " timer per connection: trio_mcp.serving.http._hypercorn) instead of stock hypercorn's",
    )
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)

    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve as stock_serve

    serve: Any = stock_serve
    if args.our_connection:
        from trio_mcp.serving.http._hypercorn import serve

    async def stdin_closed() -> None:
        # Returns at EOF (or an error) on stdin: the benchmark went away.
        stdin = trio.lowlevel.FdStream(sys.stdin.fileno())
        try:
            while await stdin.receive_some(4096):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass

    async def stop_requested() -> None:
        async def signals() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
                async for _ in received:
                    return

        async with trio.open_nursery() as watchers:

            async def first(fn: Callable[[], Awaitable[None]]) -> None:
                await fn()
                watchers.cancel_scope.cancel()

            watchers.start_soon(first, signals)
            watchers.start_soon(first, stdin_closed)

    async def run_hypercorn(
        config: Config, trigger: Callable[[], Awaitable[None]], *, task_status: trio.TaskStatus[list[str]]
    ) -> None:
        await serve(app, config, shutdown_trigger=trigger, task_status=task_status)

    async def serve_until_stopped() -> None:
        config = Config()
        config.bind = [f"127.0.0.1:{args.port}"]
        config.graceful_timeout = GRACEFUL_TIMEOUT
        config.accesslog = None
        config.errorlog = logging.getLogger("floor_http_server.hypercorn")  # type: ignore[assignment]
        stopping = trio.Event()

        async def trigger() -> None:
            await stopping.wait()

        async with trio.open_nursery() as nursery:
            binds = await nursery.start(run_hypercorn, config, trigger)
            port = int(binds[0].rpartition(":")[2]) if binds else args.port
            print(f"url http://127.0.0.1:{port}{PATH}", flush=True)
            await stop_requested()
            stopping.set()
            # hypercorn's shutdown is graceful and bounded; make sure we end regardless.
            nursery.cancel_scope.deadline = trio.current_time() + GRACEFUL_TIMEOUT + 3

    trio.run(serve_until_stopped)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
