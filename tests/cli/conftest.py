"""Shared by the command-line tests: the everything example served over HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from ._procs import EXAMPLE, ROOT, stop_group

CLI = [sys.executable, "-m", "trio_mcp.cli"]


@pytest.fixture
def http_url() -> Iterator[str]:
    """``trio-mcp run examples/everything_server.py -t http --port 0``: its URL;
    the process (group) is stopped afterwards, SIGKILL if SIGTERM is not enough."""
    server = subprocess.Popen(
        [*CLI, "run", EXAMPLE, "-t", "http", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline()  # "serving … at http://127.0.0.1:PORT/mcp"
        assert "serving" in line and "http://127.0.0.1:" in line, line
        yield line.strip().rsplit(" ", 1)[-1]
    finally:
        stop_group(server)
