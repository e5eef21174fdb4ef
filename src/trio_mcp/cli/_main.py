"""Entry point of the ``trio-mcp`` console script."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    print("trio-mcp: no commands yet", args, file=sys.stderr)
    return 2
