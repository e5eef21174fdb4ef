"""Fixtures of the interop tests: the real third-party MCP peers, found
where ``bash scripts/setup-interop`` installs them (see ``tests/peers.py``:
a test needing a peer is skipped only when that setup never ran)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

try:  # run from the repository root or from tests/
    from peers import (
        LOOPBACK,
        npm_path,
        sdk_path,
    )
except ImportError:  # pragma: no cover
    from tests.peers import (
        LOOPBACK,
        npm_path,
        sdk_path,
    )


@pytest.fixture(scope="session")
def node() -> Path:
    """The Node 22 binary of the npm package ``node`` (the system Node may be older)."""
    return npm_path(".bin/node")


@pytest.fixture(scope="session")
def npm_bin() -> Callable[[str], Path]:
    """``npm_bin("mcp-server-everything")``: an executable of ``node_modules/.bin``."""
    return lambda name: npm_path(f".bin/{name}")


@pytest.fixture(scope="session")
def npm_package() -> Callable[[str], Path]:
    """``npm_package("@modelcontextprotocol/server-everything")``: a package's folder."""
    return lambda name: npm_path(name)


@pytest.fixture(scope="session")
def server_everything_entry() -> Path:
    """server-everything's launcher (``node <it> stdio|sse|streamableHttp``)."""
    return npm_path("@modelcontextprotocol/server-everything/dist/index.js")


@pytest.fixture(scope="session")
def loopback_preload() -> Path:
    """``node --require <it>``: every ``listen`` of that process goes to 127.0.0.1."""
    return LOOPBACK


@pytest.fixture(scope="session")
def sdk_python() -> Path:
    """The official SDK's interpreter (``mcp==2.3.0`` and the SDK-based servers)."""
    return sdk_path("bin/python")


@pytest.fixture(scope="session")
def project_python() -> Path:
    """The interpreter running trio-mcp (to start our example servers)."""
    return Path(sys.executable)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    """``free_port()``: a TCP port of 127.0.0.1 that was free a moment ago."""
    return _free_port
