"""``trio-mcp gateway``: serve a host's configuration file as one server, check
a file, or show a running gateway's servers.

    trio-mcp gateway FILE [-t stdio|http|sse|ws] [--input ID=VALUE]... [--watch SECONDS | --no-watch]
    trio-mcp gateway --check FILE [--input ID=VALUE]...     # validate, print the fleet, start nothing
    trio-mcp gateway status URL [--json]                      # each server: state, pid/URL, uptime…

The served gateway reloads its file when it changes (checked every
``--watch`` seconds, 1 by default) and on ``SIGHUP``. ``SIGTERM`` and
``SIGINT`` stop it gracefully: over HTTP it drains first (see ``trio-mcp run``),
then every stdio server gets its stdin closed, then SIGTERM, then SIGKILL,
each step bounded; the exit status is 0 after SIGTERM and 130 after SIGINT.
With ``-t http --workers N``, N worker processes serve one port, each
running its own gateway (and so its own stdio servers): see ``._workers``.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from ._serve import ServeOptions

__all__ = ["Signals", "add_gateway_parser", "run_gateway_command", "run_until_signal"]

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
    from ._serve import ServeOptions

    options = ServeOptions.from_args(args)
    if options.workers > 1:
        from ._workers import run_workers

        return run_workers(args, options)
    return run_until_signal(lambda signals: _serve(args, config, inputs, signals, options))


class Signals:
    """What a command's main registers for the signals :func:`run_until_signal`
    receives: handlers for ``SIGHUP``, and graceful stops for the first
    ``SIGTERM``/``SIGINT`` (without any, the signal cancels main at once)."""

    def __init__(self) -> None:
        self.hup: list[Callable[[], None]] = []
        self.stop: list[Callable[[], float]] = []

    def on_hup(self, handler: Callable[[], None]) -> None:
        """Have ``handler()`` run at each SIGHUP."""
        self.hup.append(handler)

    def on_stop(self, handler: Callable[[], float]) -> None:
        """Have ``handler()`` start a graceful stop at the first SIGTERM or
        SIGINT; it returns at once, with the seconds the stop may take (main
        is cancelled after them, or at a second SIGINT)."""
        self.stop.append(handler)


def run_until_signal(
    main: Callable[[Signals], Awaitable[None]], stop_on: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)
) -> int:
    """``trio.run(main)`` until it returns or one of ``stop_on`` arrives; the
    signal starts the graceful stops main registered (else cancels main, so
    every server it started stops gracefully) and gives the status of
    :data:`EXIT_ON`. A repeated SIGTERM changes nothing (a process manager
    may signal every process of a group, and a parent its workers too); a
    second SIGINT cancels main at once."""
    return trio.run(_until_signal, main, stop_on)


async def _until_signal(main: Callable[[Signals], Awaitable[None]], stop_on: tuple[int, ...]) -> int:
    hooks = Signals()
    wanted = list(stop_on)
    if hasattr(signal, "SIGHUP"):
        wanted.append(signal.SIGHUP)
    status = 0
    stopping = False
    with trio.open_signal_receiver(*wanted) as signals:
        async with trio.open_nursery() as nursery:

            async def run_main() -> None:
                await main(hooks)
                nursery.cancel_scope.cancel()

            nursery.start_soon(run_main)
            async for signum in signals:
                if signum in EXIT_ON:
                    if stopping and signum == signal.SIGTERM:
                        continue
                    status = EXIT_ON[signum]
                    if stopping or not hooks.stop:
                        nursery.cancel_scope.cancel()
                        break
                    stopping = True
                    bound = max(handler() for handler in hooks.stop)
                    nursery.cancel_scope.deadline = trio.current_time() + bound
                    continue
                for handler in hooks.hup:
                    handler()
    return status


async def _serve(
    args: argparse.Namespace,
    config: Any,
    inputs: dict[str, str],
    signals: Signals,
    options: ServeOptions,
    out: Any = None,
) -> None:
    from ..gateway import load_config, open_gateway
    from ._serve import gateway_readiness, serve

    path = args.config

    def reload() -> Any:
        return load_config(path, inherit_env=args.inherit_env, inputs=inputs)

    async with open_gateway(config, reload=reload) as gateway:
        if gateway.failed:
            names = ", ".join(gateway.failed)
            print(f"trio-mcp: gateway: could not start (retrying with backoff): {names}", file=sys.stderr)
        fleet = gateway.fleet
        assert fleet is not None  # open_gateway sets it
        signals.on_hup(fleet.request_reload)
        async with trio.open_nursery() as nursery:
            # SIGHUP asks the watcher for a reload; --no-watch only makes it wait longer.
            nursery.start_soon(fleet.watch, 1e9 if args.no_watch else args.watch)
            readiness = gateway_readiness(gateway)
            await serve(gateway, options, readiness=readiness, out=out, signals=signals)
            nursery.cancel_scope.cancel()


async def _status(url: str, as_json: bool) -> int:
    from ..gateway import STATUS_URI
    from ._targets import open_target

    async with open_target([url]) as client:
        result = await client.read_resource(STATUS_URI)
    text = result.contents[0].text
    import json  # here: `trio-mcp run` loads this module (run_until_signal) and reads no JSON

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
