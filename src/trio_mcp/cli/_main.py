"""Entry point of the ``trio-mcp`` console script.

    trio-mcp demo
    trio-mcp run FILE.py[:OBJ] -t stdio|http|sse|ws [--host 127.0.0.1] [--port 8000] [--path /mcp]
        [--allowed-host NAME]... [--allowed-origin ORIGIN]... [--json-response] [--stateless]
    trio-mcp list TARGET [--json]
    trio-mcp call TARGET TOOL key=value ... [--json]
    trio-mcp gateway FILE -t stdio|http|sse|ws [--check] [--input ID=VALUE] [--watch S]   (see _gateway_cmd)
    trio-mcp gateway status URL [--json]
    trio-mcp bench TARGET TOOL key=value ... [-c 16 | --rate 500/s] [-d 10s | -n CALLS] [--json]  (see bench -h)

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
    from ._bench import add_bench_parser
    from ._gateway_cmd import add_gateway_parser

    add_bench_parser(sub)
    add_gateway_parser(sub, serving_options)
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
        arguments = _arguments(pairs, tools[tool].input_schema)
        if client.tasks.required_by(tools[tool]):  # shows the task's status on stderr while it runs
            result = await client.tasks.run_tool(tool, arguments, on_status=client.tasks.print_status)
        else:
            result = await client.call_tool(tool, arguments)
    if as_json:
        _print_json(result)
    else:
        for block in result.content:
            text = getattr(block, "text", None)
            print(text if text is not None else json.dumps(msgspec.to_builtins(block)))
    return 1 if result.is_error is True else 0


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
            from ._gateway_cmd import run_until_signal

            return run_until_signal(lambda _hup: serve(app, ServeOptions.from_args(args)))
        if args.command == "gateway":
            from ._gateway_cmd import run_gateway_command

            return run_gateway_command(args)
        if args.command == "list":
            target = command or args.target
            return trio.run(_list, target, args.json)
        if args.command == "bench":
            from ._bench import main_bench

            return main_bench(args, command)
        if args.command in ("call", "bench"):
            pos = args.words
            if command:
                target, rest = command, pos
            else:
                target, rest = pos[:1], pos[1:]
            if not rest:
                raise SystemExit(f"trio-mcp: {args.command} needs a TOOL name")
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
