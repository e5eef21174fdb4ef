"""The official Python MCP SDK side of the in-process benchmark.

Run by ``benchmarks/bench_inprocess.py`` with ``.cache/sdk-venv/bin/python``
(the SDK's import name ``mcp`` never shares a venv with trio-mcp). Prints one
JSON line per row on stdout; notes go to stderr.

Configuration, chosen to be the SDK's fastest reasonable one:

* the tool is ``async def``: the SDK runs a *sync* tool in a worker thread
  (``anyio.to_thread.run_sync``), trio-mcp calls it inline; async is the
  fast path on both sides;
* ``structured_output=False``: ``-> str`` would otherwise add an output schema
  and a ``{"result": ...}`` structured copy, which trio-mcp does not do for
  ``str`` (text is content); both sides now return the same single TextContent;
* ``log_level="WARNING"`` on the server (``MCPServer`` calls
  ``logging.basicConfig`` with its level, INFO by default);
* ``cache=None`` on the client (the response cache only serves list verbs,
  this only removes its bookkeeping);
* plain asyncio (``anyio.run``), no uvloop (not in the SDK's dependencies).

Rows: ``mode="legacy"`` (initialize handshake, JSON-RPC dispatcher over the
in-memory streams of ``InMemoryTransport``; messages are pydantic objects,
never bytes) and, when it works, ``mode="auto"`` which for an in-process
server skips streams and framing altogether (direct dispatcher, protocol
2026-07-28).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from importlib.metadata import version

import anyio
from _report import PAYLOAD, default_warmup, json_line, make_row, measure
from mcp import Client
from mcp.server.mcpserver import MCPServer

IMPL = "mcp-sdk"


def build_server() -> MCPServer:
    app = MCPServer("bench", log_level="WARNING")

    @app.tool(structured_output=False)
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    return app


async def run_mode(app: MCPServer, client_mode: str, label: str, args: argparse.Namespace) -> None:
    sdk_version = version("mcp")
    async with Client(app, mode=client_mode, cache=None) as client:
        protocol = client.protocol_version

        async def call() -> None:
            await client.call_tool("echo", {"text": PAYLOAD})

        check = await client.call_tool("echo", {"text": PAYLOAD})
        if check.is_error or check.content[0].text != PAYLOAD:
            raise RuntimeError(f"unexpected echo result: {check!r}")
        for concurrency in (1, args.concurrency):
            latencies = await measure(
                call,
                concurrency=concurrency,
                warmup=args.warmup,
                seconds=args.seconds,
                open_group=anyio.create_task_group,
            )
            json_line(
                make_row(
                    IMPL,
                    label,
                    concurrency,
                    latencies,
                    args.seconds,
                    protocol=protocol,
                    sdk_version=sdk_version,
                )
            )


async def main(args: argparse.Namespace) -> int:
    app = build_server()
    await run_mode(app, "legacy", "legacy", args)
    if not args.legacy_only:
        try:
            await run_mode(app, "auto", "2026-07-28", args)
        except Exception:  # the 2026 path is optional: report, keep the legacy rows
            print("sdk_inprocess: mode='auto' (2026-07-28) failed, row skipped:", file=sys.stderr)
            traceback.print_exc()
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measured duration per row")
    parser.add_argument(
        "--warmup", type=float, default=None, help="warm-up per row (default: min(0.5, seconds/2))"
    )
    parser.add_argument(
        "--concurrency", type=int, default=64, help="callers in flight for the concurrent rows"
    )
    parser.add_argument("--legacy-only", action="store_true", help="skip the mode='auto' (2026-07-28) rows")
    args = parser.parse_args(argv)
    if args.warmup is None:
        args.warmup = default_warmup(args.seconds)
    return args


if __name__ == "__main__":
    sys.exit(anyio.run(main, parse_args()))
