"""Entry point of the ``trio-mcp`` console script.

    trio-mcp demo
    trio-mcp run FILE.py[:OBJ] -t stdio|http|sse|ws [--host 127.0.0.1] [--port 8000] [--path /mcp]
    trio-mcp list|tools|resources|templates|prompts TARGET [--json]
    trio-mcp call TARGET TOOL key=value ... [--json]       (and read, prompt, complete, set-level, ping:
                                                          see ._client; connection options: ._connect)
    trio-mcp gateway CONFIG.json -t stdio|http|sse|ws [--host 127.0.0.1] [--port 8000] [--path /mcp]
    trio-mcp bench TARGET TOOL key=value ... [-c 16] [-d 10 | -n CALLS] [--warmup 1] [--json]

TARGET is a URL (``http(s)://…/mcp``, ``…/sse``, ``ws://…``) or, after
``--``, a command line that starts a stdio server:
``trio-mcp call echo text=hi -- python server.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import msgspec

from ._arguments import UsageError, coerce_value, tool_arguments

__all__ = ["coerce_value", "main"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trio-mcp")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    from ._client import add_client_verbs

    parser = argparse.ArgumentParser(
        prog="trio-mcp",
        description="The Model Context Protocol on trio: serve, supervise, and talk to MCP servers.",
        epilog="TARGET is a URL (http(s)://…/mcp, …/sse, ws://…) or, after --, the command line of a "
        "stdio server. Exit codes: 0 ok, 1 the tool answered isError, 2 usage error, 3 the server "
        "answered an error, 4 connection failure, 5 --timeout ran out.",
    )
    parser.add_argument("--version", action="version", version=f"trio-mcp {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser("demo", help="run an embedded server and client, printing what they exchange")
    demo.add_argument("--calls", type=int, default=2000, help="tools/call round trips to time at the end")
    demo.add_argument("--fleet-calls", type=int, default=300, help="calls of the supervised-fleet load run")
    run = sub.add_parser("run", help="serve a server object from a Python file")
    run.add_argument("app", metavar="FILE.py[:OBJ]")
    _serving_options(run)
    add_client_verbs(sub)
    bench = sub.add_parser("bench", help="a tools/call load run against a server: calls/s and latency")
    bench.add_argument("words", nargs="*", metavar="[TARGET] TOOL key=value")
    bench.add_argument("-c", "--concurrency", type=int, default=16, help="callers at once (default 16)")
    bench.add_argument(
        "-d",
        "--duration",
        type=float,
        default=None,
        help="seconds to measure (default 10; unbounded with --calls alone)",
    )
    bench.add_argument("-n", "--calls", type=int, default=None, help="stop after this many calls")
    bench.add_argument(
        "--warmup", type=float, default=1.0, help="seconds of calls before measuring (default 1)"
    )
    bench.add_argument("--call-timeout", type=float, default=30.0, help="bound of each call, in seconds")
    bench.add_argument(
        "--era",
        choices=("auto", "handshake", "modern"),
        default="auto",
        help="protocol era to speak (default: probe)",
    )
    bench.add_argument("--json", action="store_true", help="one JSON object instead of the report")
    gateway = sub.add_parser("gateway", help="serve the servers of an mcpServers config file as one server")
    gateway.add_argument("config", metavar="CONFIG.json")
    _serving_options(gateway)
    gateway.add_argument(
        "--inherit-env",
        action="store_true",
        help="stdio servers get our whole environment (default: a safe subset plus their env)",
    )
    return parser


def _serving_options(parser: argparse.ArgumentParser) -> None:
    """How ``run`` and ``gateway`` serve: transport, address and path."""
    parser.add_argument("-t", "--transport", choices=("stdio", "http", "sse", "ws"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--path", default="/mcp")


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """Words before ``--`` and the command after it."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def _arguments(pairs: list[str], schema: dict[str, Any]) -> dict[str, Any]:
    try:
        return tool_arguments(pairs, schema, check_keys=False)  # bench: the server's first answer tells
    except UsageError as exc:
        raise SystemExit(f"trio-mcp: {exc}") from None


def _print_json(value: Any) -> None:
    print(json.dumps(msgspec.to_builtins(value), indent=2))


async def _bench(target: list[str], tool: str, pairs: list[str], args: argparse.Namespace) -> int:
    from ._bench import format_result, run_bench
    from ._targets import open_target

    duration = args.duration if args.duration is not None else (0.0 if args.calls is not None else 10.0)
    async with open_target(target, era=args.era) as client:
        tools = {t.name: t for t in await client.list_all_tools()}
        if tool not in tools:
            print(
                f"trio-mcp: no tool {tool!r}; the server has: {', '.join(sorted(tools)) or 'none'}",
                file=sys.stderr,
            )
            return 2
        arguments = _arguments(pairs, tools[tool].input_schema)
        first = await client.call_tool(tool, arguments)  # a bad argument shows here, not 10,000 times
        if first.is_error is True:
            text = " ".join(getattr(b, "text", "") for b in first.content).strip()
            print(f"trio-mcp: {tool} answered isError before the load run: {text}", file=sys.stderr)
            return 1
        try:
            result = await run_bench(
                client,
                tool,
                arguments,
                concurrency=args.concurrency,
                duration=duration,
                calls=args.calls,
                warmup=args.warmup,
                call_timeout=args.call_timeout,
            )
        except ValueError as exc:
            raise SystemExit(f"trio-mcp: {exc}") from None
    if args.json:
        _print_json(result)
    else:
        print(format_result(result, " ".join(target)))
    return 0 if result.ok == result.calls and result.stopped is None else 1


async def _gateway(args: argparse.Namespace) -> None:
    from ..gateway import load_config, open_gateway
    from ._targets import serve

    config = load_config(args.config, inherit_env=args.inherit_env)
    async with open_gateway(config) as gateway:
        if gateway.failed:
            print(
                f"trio-mcp: gateway: left out (could not start): {', '.join(gateway.failed)}", file=sys.stderr
            )
        await serve(gateway, args.transport, host=args.host, port=args.port, path=args.path)


def _demo_server_parser() -> argparse.ArgumentParser:
    """``trio-mcp demo-server``: internal (the demo's fleet starts it), so not in ``--help``."""
    parser = argparse.ArgumentParser(prog="trio-mcp demo-server")
    parser.add_argument("--crash-after", type=int, default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    words, command = _split(raw)
    from ._client import CLIENT_VERBS, parse_client_verb, run_client_verb

    if words[:1] == ["demo-server"]:
        args = _demo_server_parser().parse_args(words[1:])
        args.command = "demo-server"
    elif words[:1] and words[0] in CLIENT_VERBS:
        return run_client_verb(parse_client_verb(words[0], words[1:]), command)
    else:
        args = _parser().parse_args(words)
    import trio

    from .._util import single
    from ..protocol import McpError

    try:
        if args.command == "demo":
            from ._demo import run_demo, run_fleet

            print("== one server and one client, in memory")
            trio.run(lambda: run_demo(calls=args.calls))
            print(
                "== three supervised stdio servers (one crashes now and then) behind one gateway, under load"
            )
            trio.run(lambda: run_fleet(calls=args.fleet_calls))
            return 0
        if args.command == "demo-server":
            from ._demo import serve_demo_stdio

            serve_demo_stdio(crash_after=args.crash_after)
            return 0
        if args.command == "run":
            from ._targets import load_app, serve

            app = load_app(args.app)
            trio.run(lambda: serve(app, args.transport, host=args.host, port=args.port, path=args.path))
            return 0
        if args.command == "gateway":
            trio.run(_gateway, args)
            return 0
        if args.command == "bench":
            pos = args.words
            if command:
                target, rest = command, pos
            else:
                target, rest = pos[:1], pos[1:]
            if not rest:
                raise SystemExit(f"trio-mcp: {args.command} needs a TOOL name")
            return trio.run(_bench, target, rest[0], rest[1:], args)
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:  # the public edge: one clear line, no traceback
        inner = single(exc)
        if isinstance(inner, SystemExit):
            raise inner from None
        from ..gateway import ConfigError, GatewayStartError
        from ..transports import TransportError
        from ._targets import TargetError

        if isinstance(
            inner, (McpError, TransportError, TargetError, OSError, ConfigError, GatewayStartError)
        ):
            print(f"trio-mcp: {inner}", file=sys.stderr)
            return 1
        raise
    return 2  # pragma: no cover - argparse rejects unknown commands
