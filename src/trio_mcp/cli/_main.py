"""Entry point of the ``trio-mcp`` console script."""

from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trio-mcp", description="The Model Context Protocol on trio.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run an embedded server and client, printing what they exchange")
    demo.add_argument("--calls", type=int, default=2000, help="tools/call round trips to time at the end")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "demo":
        import trio

        from ._demo import run_demo

        trio.run(lambda: run_demo(calls=args.calls))
        return 0
    return 2  # pragma: no cover - argparse rejects unknown commands
