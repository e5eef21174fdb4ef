"""Entry point of the ``trio-mcp`` console script.

    trio-mcp demo
    trio-mcp run FILE.py[:OBJ] -t stdio|http|sse|ws [--host 127.0.0.1] [--port 8000] [--path /mcp]
        [--allowed-host NAME]... [--allowed-origin ORIGIN]... [--json-response] [--stateless]
    trio-mcp list TARGET [--json]
    trio-mcp call TARGET TOOL key=value ... [--json]
    trio-mcp gateway CONFIG.json -t stdio|http|sse|ws [--host …] [--port …] [--path …] (as run)
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

from ._serve import serving_options


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trio-mcp", description="The Model Context Protocol on trio.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run an embedded server and client, printing what they exchange")
    demo.add_argument("--calls", type=int, default=2000, help="tools/call round trips to time at the end")
    demo.add_argument("--fleet-calls", type=int, default=300, help="calls of the supervised-fleet load run")
    served = sub.add_parser("demo-server", help=argparse.SUPPRESS)
    served.add_argument("--crash-after", type=int, default=None)
    run = sub.add_parser("run", help="serve a server object from a Python file")
    run.add_argument("app", metavar="FILE.py[:OBJ]")
    serving_options(run)
    ls = sub.add_parser("list", help="list a server's tools, prompts and resources")
    ls.add_argument("target", nargs="*", metavar="TARGET")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    call = sub.add_parser("call", help="call a tool")
    call.add_argument("words", nargs="*", metavar="[TARGET] TOOL key=value")
    call.add_argument("--json", action="store_true", help="print the whole result as JSON")
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
    serving_options(gateway)
    gateway.add_argument(
        "--inherit-env",
        action="store_true",
        help="stdio servers get our whole environment (default: a safe subset plus their env)",
    )
    return parser


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """Words before ``--`` and the command after it."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def coerce_value(raw: str, schema: dict[str, Any] | None) -> Any:
    """A command-line string as the type the tool's input schema wants."""
    kind = (schema or {}).get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    try:
        if kind == "string":
            return raw
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw)
        if kind == "boolean":
            if raw.lower() in ("true", "1", "yes", "on"):
                return True
            if raw.lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError(f"not a boolean: {raw!r}")
        if kind in ("array", "object"):
            return json.loads(raw)
    except (ValueError, json.JSONDecodeError) as exc:
        raise SystemExit(f"trio-mcp: cannot read {raw!r} as {kind}: {exc}") from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _arguments(pairs: list[str], schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"trio-mcp: arguments are key=value, not {pair!r}")
        out[key] = coerce_value(value, props.get(key))
    return out


def _print_json(value: Any) -> None:
    print(json.dumps(msgspec.to_builtins(value), indent=2))


async def _list(target: list[str], as_json: bool) -> int:
    from ._targets import open_target

    async with open_target(target) as client:
        tools = await client.list_all_tools() if client.supports("tools/list") else []
        prompts = await client.list_all_prompts() if client.supports("prompts/list") else []
        resources = await client.list_all_resources() if client.supports("resources/list") else []
        templates = await client.list_all_resource_templates() if client.supports("resources/list") else []
    if as_json:
        _print_json(
            {"tools": tools, "prompts": prompts, "resources": resources, "resourceTemplates": templates}
        )
        return 0

    def line(name: str, desc: Any) -> str:
        return f"  {name}" + (f" — {desc.splitlines()[0]}" if isinstance(desc, str) and desc else "")

    for title, items, key in (
        ("tools", tools, "name"),
        ("prompts", prompts, "name"),
        ("resources", resources, "uri"),
        ("resource templates", templates, "uri_template"),
    ):
        print(f"{title} ({len(items)}):")
        for item in items:
            print(line(getattr(item, key), getattr(item, "description", None)))
    return 0


async def _call(target: list[str], tool: str, pairs: list[str], as_json: bool) -> int:
    from ._targets import open_target

    async with open_target(target) as client:
        tools = {t.name: t for t in await client.list_all_tools()}
        if tool not in tools:
            print(
                f"trio-mcp: no tool {tool!r}; the server has: {', '.join(sorted(tools)) or 'none'}",
                file=sys.stderr,
            )
            return 2
        result = await client.call_tool(tool, _arguments(pairs, tools[tool].input_schema))
    if as_json:
        _print_json(result)
    else:
        for block in result.content:
            text = getattr(block, "text", None)
            print(text if text is not None else json.dumps(msgspec.to_builtins(block)))
    return 1 if result.is_error is True else 0


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
    from ._serve import ServeOptions, gateway_readiness, serve

    config = load_config(args.config, inherit_env=args.inherit_env)
    async with open_gateway(config) as gateway:
        if gateway.failed:
            print(
                f"trio-mcp: gateway: left out (could not start): {', '.join(gateway.failed)}", file=sys.stderr
            )
        await serve(gateway, ServeOptions.from_args(args), readiness=gateway_readiness(gateway))


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    words, command = _split(raw)
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
            from ._serve import ServeOptions, serve
            from ._targets import load_app

            app = load_app(args.app)
            trio.run(lambda: serve(app, ServeOptions.from_args(args)))
            return 0
        if args.command == "gateway":
            trio.run(_gateway, args)
            return 0
        if args.command == "list":
            target = command or args.target
            return trio.run(_list, target, args.json)
        if args.command in ("call", "bench"):
            pos = args.words
            if command:
                target, rest = command, pos
            else:
                target, rest = pos[:1], pos[1:]
            if not rest:
                raise SystemExit(f"trio-mcp: {args.command} needs a TOOL name")
            if args.command == "bench":
                return trio.run(_bench, target, rest[0], rest[1:], args)
            return trio.run(_call, target, rest[0], rest[1:], args.json)
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
