"""trio-mcp's Streamable HTTP echo server for ``benchmarks/bench_http.py``.

    .venv/bin/python benchmarks/servers/trio_http_server.py               # JSON responses
    .venv/bin/python benchmarks/servers/trio_http_server.py --sse         # always SSE
    .venv/bin/python benchmarks/servers/trio_http_server.py --profile out.prof

One tool, ``async def echo(text: str) -> str`` with ``structured_output=False``
(a single text block, as on the SDK side), served by
:class:`trio_mcp.serving.http.HttpServer` on 127.0.0.1 (a free port unless
``--port``) with ``json_response=True`` (``--sse``: ``False``; ``--auto``:
``None``). Prints ``url <url>`` on stdout once it listens, then serves until
SIGINT/SIGTERM or until its stdin closes (so it never outlives the benchmark
that started it). ``--profile FILE`` runs it under cProfile and writes the
stats to FILE on the way out. The module's ``app`` is the same server, for
``trio-mcp run benchmarks/servers/trio_http_server.py -t http`` (``bench_workers_http.py``).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Awaitable, Callable

from trio_mcp.server import MCPServer


def make_app() -> MCPServer:
    app = MCPServer("bench-echo", "1.0")

    @app.tool(structured_output=False)
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    return app


#: For ``trio-mcp run benchmarks/servers/trio_http_server.py -t http`` (``bench_workers_http.py``).
app = make_app()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--sse",
        dest="json_response",
        action="store_const",
        const=False,
        help="answer every POST as an SSE stream (json_response=False)",
    )
    group.add_argument(
        "--auto",
        dest="json_response",
        action="store_const",
        const=None,
        help="JSON unless a related message needs SSE (json_response=None)",
    )
    parser.set_defaults(json_response=True)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument(
        "--profile", metavar="FILE", default=None, help="run under cProfile, write the stats here"
    )
    parser.add_argument("--redis", metavar="URL", help="a node of a cluster on this Redis (bench_cluster.py)")
    parser.add_argument("--node-id", default=None, help="with --redis: this node's id")
    parser.add_argument(
        "--direct-link", action="store_true", help="with --redis: forward over direct links between nodes"
    )
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)

    import trio

    from trio_mcp.serving.http import HttpServer

    app = make_app()

    async def stdin_closed() -> None:
        # Returns at EOF (or an error) on stdin: the benchmark went away.
        stdin = trio.lowlevel.FdStream(sys.stdin.fileno())
        try:
            while await stdin.receive_some(4096):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass

    async def stop_on(nursery: trio.Nursery, server: HttpServer) -> None:
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
        server.stop()
        # HttpServer.stop is graceful and bounded; make sure we end regardless.
        nursery.cancel_scope.deadline = trio.current_time() + 5

    async def serve() -> None:
        cluster = None
        if args.redis:
            from trio_mcp.serving.cluster import ClusterSettings, RedisCluster

            named = {"node_id": args.node_id} if args.node_id else {}
            settings = ClusterSettings(url=args.redis, direct_link=args.direct_link, **named)  # type: ignore[arg-type]
            cluster = RedisCluster(settings)
        server = HttpServer(
            app,
            host="127.0.0.1",
            port=args.port,
            json_response=args.json_response,
            cluster=cluster,
            freeze_heap=True,  # as ``trio-mcp run -t http`` serves
        )
        async with trio.open_nursery() as nursery:
            info = await nursery.start(server.run)
            print(f"url {info.url}", flush=True)
            nursery.start_soon(stop_on, nursery, server)

    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
        try:
            trio.run(serve)
        finally:
            profiler.disable()
            profiler.dump_stats(args.profile)
    else:
        trio.run(serve)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
