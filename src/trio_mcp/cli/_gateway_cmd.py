"""``trio-mcp gateway``: serve a host's configuration file as one server, check
a file, or show a running gateway's servers.

    trio-mcp gateway FILE [-t stdio|http|sse|ws] [--input ID=VALUE]... [--watch SECONDS | --no-watch]
    trio-mcp gateway --check FILE [--input ID=VALUE]...     # validate, print the fleet, start nothing
    trio-mcp gateway status URL [--json]                      # each server: state, pid/URL, uptime…

The served gateway reloads its file when it changes (checked every
``--watch`` seconds, 1 by default) and on ``SIGHUP``. ``SIGTERM`` and
``SIGINT`` stop it gracefully: every stdio server gets its stdin closed, then
SIGTERM, then SIGKILL, each step bounded; the exit status is 0 after SIGTERM
and 130 after SIGINT.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

__all__ = ["add_gateway_parser", "run_gateway_command", "run_until_signal"]

#: Exit statuses after a graceful stop on each signal.
EXIT_ON: dict[int, int] = {signal.SIGTERM: 0, signal.SIGINT: 130}


def add_gateway_parser(
    sub: Any, serving_options: Callable[[argparse.ArgumentParser], None]
) -> argparse.ArgumentParser:
    """The ``gateway`` sub-command and its options."""
    gateway: argparse.ArgumentParser = sub.add_parser(
        "gateway",
        help="serve the servers of an MCP host's config file as one server (or: gateway status URL)",
        description="Serve the servers of an MCP host's configuration file (Claude Desktop, VS Code, "
        "Cursor, Zed, Codex, Gemini, Windsurf, Goose, Continue, opencode, mcp-proxy: JSON, JSONC, "
        "TOML or YAML) as one MCP server. 'trio-mcp gateway status URL' shows a running gateway's servers.",
    )
    gateway.add_argument("config", metavar="FILE", help="the configuration file (or the word 'status')")
    gateway.add_argument("url", nargs="?", metavar="URL", help="with 'status': the gateway to ask")
    serving_options(gateway)
    gateway.add_argument(
        "--inherit-env",
        action="store_true",
        help="stdio servers get our whole environment (default: a safe subset plus their env)",
    )
    gateway.add_argument(
        "--check",
        action="store_true",
        help="validate the file and print the fleet it would run; start nothing",
    )
    gateway.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="ID=VALUE",
        help="the value of a VS Code input ${input:ID} (repeatable; or set TRIO_MCP_INPUT_ID)",
    )
    gateway.add_argument(
        "--watch",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="check the file for changes this often and reload it (default 1; SIGHUP reloads at once)",
    )
    gateway.add_argument("--no-watch", action="store_true", help="reload only on SIGHUP")
    gateway.add_argument("--json", action="store_true", help="with 'status': print the status as JSON")
    return gateway


def _inputs(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"trio-mcp: --input takes ID=VALUE, not {pair!r}")
        out[key] = value
    return out


def run_gateway_command(args: argparse.Namespace) -> int:
    """Run ``trio-mcp gateway`` with parsed ``args``; the exit status."""
    if args.config == "status":
        if not args.url:
            raise SystemExit("trio-mcp: gateway status needs the URL of a running gateway")
        return trio.run(_status, args.url, args.json)
    if args.url:
        raise SystemExit(f"trio-mcp: unexpected argument {args.url!r} (did you mean 'gateway status URL'?)")
    from ..gateway import load_config

    inputs = _inputs(args.input)
    config = load_config(args.config, inherit_env=args.inherit_env, inputs=inputs)
    for warning in config.warnings:
        print(f"trio-mcp: warning: {warning}", file=sys.stderr)
    if args.check:
        print(config.describe() or "(no servers)")
        return 0
    return run_until_signal(lambda on_hup: _serve(args, config, inputs, on_hup))


#: ``on_hup(handler)``: have ``handler()`` run at each SIGHUP.
OnHup = Callable[[Callable[[], None]], None]


def run_until_signal(main: Callable[[OnHup], Awaitable[None]]) -> int:
    """``trio.run(main)`` until it returns or SIGTERM/SIGINT arrives; a signal
    cancels ``main`` (so every server it started stops gracefully) and gives
    the status of :data:`EXIT_ON`. ``main`` gets an :data:`OnHup` to register
    its SIGHUP handlers with."""
    return trio.run(_until_signal, main)


async def _until_signal(main: Callable[[OnHup], Awaitable[None]]) -> int:
    hup: list[Callable[[], None]] = []
    wanted = [signal.SIGTERM, signal.SIGINT]
    if hasattr(signal, "SIGHUP"):
        wanted.append(signal.SIGHUP)
    status = 0
    with trio.open_signal_receiver(*wanted) as signals:
        async with trio.open_nursery() as nursery:

            async def run_main() -> None:
                await main(hup.append)
                nursery.cancel_scope.cancel()

            nursery.start_soon(run_main)
            async for signum in signals:
                if signum in EXIT_ON:
                    status = EXIT_ON[signum]
                    nursery.cancel_scope.cancel()
                    break
                for handler in hup:
                    handler()
    return status


async def _serve(args: argparse.Namespace, config: Any, inputs: dict[str, str], on_hup: OnHup) -> None:
    from ..gateway import load_config, open_gateway
    from ._serve import ServeOptions, gateway_readiness, serve

    path = args.config

    def reload() -> Any:
        return load_config(path, inherit_env=args.inherit_env, inputs=inputs)

    async with open_gateway(config, reload=reload) as gateway:
        if gateway.failed:
            names = ", ".join(gateway.failed)
            print(f"trio-mcp: gateway: could not start (retrying with backoff): {names}", file=sys.stderr)
        fleet = gateway.fleet
        assert fleet is not None  # open_gateway sets it
        on_hup(fleet.request_reload)
        async with trio.open_nursery() as nursery:
            # SIGHUP asks the watcher for a reload; --no-watch only makes it wait longer.
            nursery.start_soon(fleet.watch, 1e9 if args.no_watch else args.watch)
            await serve(gateway, ServeOptions.from_args(args), readiness=gateway_readiness(gateway))
            nursery.cancel_scope.cancel()


async def _status(url: str, as_json: bool) -> int:
    from ..gateway import STATUS_URI
    from ._targets import open_target

    async with open_target([url]) as client:
        result = await client.read_resource(STATUS_URI)
    text = result.contents[0].text
    status = json.loads(text if isinstance(text, str) else "{}")
    if as_json:
        print(json.dumps(status, indent=2))
    else:
        print(format_status(status))
    return 0 if status.get("ready") else 1


def format_status(status: dict[str, Any]) -> str:
    """One line per server: name, state, pid or URL, uptime, restarts, tools, last error."""
    lines = [f"ready: {'yes' if status.get('ready') else 'no'}"]
    for name, info in status.get("servers", {}).items():
        where = f"pid {info['pid']}" if info.get("pid") is not None else info.get("url") or "-"
        uptime = info.get("uptime")
        up = "-" if uptime is None else f"{uptime:.0f}s"
        tools = info.get("tools", [])
        line = (
            f"{name}: {info.get('state')}  {where}  up {up}  restarts {info.get('restarts', 0)}  "
            f"tools {len(tools)}"
        )
        if info.get("last_error"):
            line += f"  last error: {info['last_error']}"
        lines.append(line)
    return "\n".join(lines)
