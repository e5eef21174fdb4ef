"""Where the real third-party MCP peers live, for the interop tests.

``bash scripts/setup-interop`` installs them (``bash scripts/test`` runs it
first, so in CI every interop test runs):

* ``tests/interop/node_modules``: the npm peers pinned by ``package.json`` /
  ``package-lock.json`` (server-everything, server-filesystem, the
  conformance suite, the inspector) and a Node 22 binary
  (``node_modules/.bin/node``); stamp ``node_modules/.installed-lock``;
* ``.cache/sdk-venv``: the official Python SDK and the SDK-based servers
  pinned by ``requirements-sdk.txt``; stamp ``.cache/sdk-venv/.installed``.

A test needing a peer is skipped only when that setup never ran (or ran for
other pins); when the stamp says it ran but the file is missing, the test
fails. ``loopback.cjs`` (a ``node --require`` preload keeping every server
of a Node process on 127.0.0.1) is part of the repository.
"""

from __future__ import annotations

import filecmp
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node_modules"
NPM_LOCK = HERE / "package-lock.json"
NPM_STAMP = NODE_MODULES / ".installed-lock"
SDK_VENV = ROOT / ".cache" / "sdk-venv"
SDK_REQUIREMENTS = HERE / "requirements-sdk.txt"
SDK_STAMP = SDK_VENV / ".installed"
LOOPBACK_PRELOAD = HERE / "loopback.cjs"
SETUP = "bash scripts/setup-interop"


def _require(pins: Path, stamp: Path, what: str, path: Path) -> Path:
    """``path``, installed by setup-interop for the current ``pins``."""
    if not stamp.is_file():
        pytest.skip(f"{what}: not installed; run `{SETUP}` (`bash scripts/test` runs it)")
    if not filecmp.cmp(pins, stamp, shallow=False):
        pytest.skip(f"{what}: installed for other pins than {pins.name}; run `{SETUP}` again")
    if not path.exists():
        pytest.fail(f"{path} is missing although {stamp} says `{SETUP}` installed it: run it again")
    return path


def npm_path(relative: str) -> Path:
    """A file under ``tests/interop/node_modules`` (skips when npm setup never ran)."""
    return _require(NPM_LOCK, NPM_STAMP, "the npm interop peers", NODE_MODULES / relative)


def sdk_path(relative: str) -> Path:
    """A file under ``.cache/sdk-venv`` (skips when the SDK setup never ran)."""
    return _require(SDK_REQUIREMENTS, SDK_STAMP, "the official Python SDK", SDK_VENV / relative)


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
    return LOOPBACK_PRELOAD


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
