"""Entry point of the ``trio-mcp`` console script.

    trio-mcp demo
    trio-mcp run FILE.py[:OBJ] -t stdio|http|sse|ws [--host 127.0.0.1] [--port 8000] [--path /mcp]
        [--allowed-host NAME]... [--allowed-origin ORIGIN]... [--json-response] [--stateless]
        [--workers N] [--request-state-key KEY]... [--drain-timeout SECONDS]
    trio-mcp list|tools|resources|templates|prompts TARGET [--json]
    trio-mcp call TARGET TOOL key=value ... [--json]       (and read, prompt, complete, set-level, ping:
                                                          see ._client; connection options: ._connect)
    trio-mcp gateway FILE -t stdio|http|sse|ws [--check] [--input ID=VALUE] [--watch S]   (see _gateway_cmd)
    trio-mcp gateway status URL [--json]
    trio-mcp bench TARGET TOOL key=value ... [-c 16 | --rate 500/s] [-d 10s | -n CALLS] [--json]  (see bench -h)

TARGET is a URL (``http(s)://…/mcp``, ``…/sse``, ``ws://…``) or, after
``--``, a command line that starts a stdio server:
``trio-mcp call echo text=hi -- python server.py``.
"""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any

from ._arguments import coerce_value
from ._serve import serving_options

__all__ = ["coerce_value", "main"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trio-mcp")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked for
    (``importlib.metadata`` is a tenth of a server's start-up otherwise)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(f"trio-mcp {_version()}")
        parser.exit()


def _parser(*, serve_only: bool = False) -> argparse.ArgumentParser:
    """The command line's parser; ``serve_only``: only the ``run`` command
    (``trio-mcp run`` then starts without importing the client, bench and
    gateway commands)."""
    parser = argparse.ArgumentParser(
        prog="trio-mcp",
        description="The Model Context Protocol on trio: serve, supervise, and talk to MCP servers.",
        epilog="TARGET is a URL (http(s)://…/mcp, …/sse, ws://…) or, after --, the command line of a "
        "stdio server. Exit codes: 0 ok, 1 the tool answered isError, 2 usage error, 3 the server "
        "answered an error, 4 connection failure, 5 --timeout ran out.",
    )
    parser.add_argument("--version", action=_VersionAction, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser("demo", help="run an embedded server and client, printing what they exchange")
    demo.add_argument("--calls", type=int, default=2000, help="tools/call round trips to time at the end")
    demo.add_argument("--fleet-calls", type=int, default=300, help="calls of the supervised-fleet load run")
    run = sub.add_parser("run", help="serve a server object from a Python file")
    run.add_argument("app", metavar="FILE.py[:OBJ]")
    serving_options(run)
    if serve_only:
        return parser
    from ._bench import add_bench_parser
    from ._client import add_client_verbs

    add_client_verbs(sub)
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


def _demo_server_parser() -> argparse.ArgumentParser:
    """``trio-mcp demo-server``: internal (the demo's fleet starts it), so not in ``--help``."""
    parser = argparse.ArgumentParser(prog="trio-mcp demo-server")
    parser.add_argument("--crash-after", type=int, default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    words, command = _split(raw)
    # A server's start-up (imports, the app's set-up) makes objects that live
    # as long as the process: the collector's passes over them were about 6 %
    # of it. It runs again once the app is loaded (serving stdio then freezes
    # that heap: see stdio_server_stream).
    paused = words[:1] == ["run"] and gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _main(words, command, paused)
    finally:
        if paused:
            gc.enable()


def _main(words: list[str], command: list[str], gc_paused: bool) -> int:
    if words[:1] == ["serve-worker"]:  # internal: a process of 'run/gateway --workers N'
        args = argparse.Namespace(command="serve-worker")
    elif words[:1] == ["demo-server"]:
        args = _demo_server_parser().parse_args(words[1:])
        args.command = "demo-server"
    elif words[:1] == ["run"]:  # a server's start-up: no client, bench or gateway code
        args = _parser(serve_only=True).parse_args(words)
    else:
        from ._client import CLIENT_VERBS, parse_client_verb, run_client_verb

        if words[:1] and words[0] in CLIENT_VERBS:
            return run_client_verb(parse_client_verb(words[0], words[1:]), command)
        args = _parser().parse_args(words)
    import trio

    from .._util import single
    from ..protocol import McpError

    try:
        if args.command == "serve-worker":
            from ._workers import worker_main

            return worker_main()
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
            from ._gateway_cmd import run_until_signal
            from ._serve import ServeOptions, serve
            from ._targets import load_app

            options = ServeOptions.from_args(args)
            if options.workers > 1:
                from ._workers import run_workers

                if gc_paused:
                    gc.enable()
                return run_workers(args, options)
            app = load_app(args.app)
            if gc_paused:
                gc.enable()
            return run_until_signal(lambda signals: serve(app, options, signals=signals))
        if args.command == "gateway":
            from ._gateway_cmd import run_gateway_command

            return run_gateway_command(args)
        if args.command == "bench":
            from ._bench import main_bench

            return main_bench(args, command)
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
