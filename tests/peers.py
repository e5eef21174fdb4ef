"""Where the real third-party MCP peers live (the interop and conformance
tests share this).

``bash scripts/setup-interop`` installs them (``bash scripts/test`` runs it
first, so in CI every interop test runs):

* ``tests/interop/node_modules``: the npm peers pinned by ``package.json`` /
  ``package-lock.json`` (server-everything and the conformance suite) and a
  Node 22 binary the tests run on (``node_modules/.bin/node``); stamp
  ``node_modules/.installed-lock``. Installing them needs Node >=
  :data:`NODE_MIN_MAJOR` with npm (``scripts/setup-interop``, README.md);
* ``.cache/sdk-venv``: the official Python SDK and the SDK-based server
  (mcp-server-time) pinned by ``requirements-sdk.txt``; stamp ``.cache/sdk-venv/.installed``.

A test needing a peer is skipped only when that setup never ran (or ran for
other pins); when the stamp says it ran but the file is missing, the test
fails. ``loopback.cjs`` (a ``node --require`` preload keeping every server
of a Node process on 127.0.0.1) is part of the repository.
"""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INTEROP = ROOT / "tests" / "interop"
NODE_MODULES = INTEROP / "node_modules"
NPM_LOCK = INTEROP / "package-lock.json"
NPM_STAMP = NODE_MODULES / ".installed-lock"
SDK_VENV = ROOT / ".cache" / "sdk-venv"
SDK_REQUIREMENTS = INTEROP / "requirements-sdk.txt"
SDK_STAMP = SDK_VENV / ".installed"
LOOPBACK = INTEROP / "loopback.cjs"
SETUP = "bash scripts/setup-interop"
#: The oldest system Node that installs the npm peers (stated in README.md and scripts/setup-interop).
NODE_MIN_MAJOR = 20


def _require(pins: Path, stamp: Path, what: str, path: Path) -> Path:
    """``path``, installed by setup-interop for the current ``pins`` (else skip)."""
    if not stamp.is_file():
        pytest.skip(f"{what}: not installed; run `{SETUP}` (`bash scripts/test` runs it)")
    if not filecmp.cmp(pins, stamp, shallow=False):
        pytest.skip(f"{what}: installed for other pins than {pins.name}; run `{SETUP}` again")
    if not path.exists():
        pytest.fail(f"{path} is missing although {stamp} says `{SETUP}` installed it: run it again")
    return path


def npm_path(relative: str) -> Path:
    """A file under ``tests/interop/node_modules`` (skips when the npm setup never ran)."""
    return _require(NPM_LOCK, NPM_STAMP, "the npm interop peers", NODE_MODULES / relative)


def sdk_path(relative: str) -> Path:
    """A file under ``.cache/sdk-venv`` (skips when the SDK setup never ran)."""
    return _require(SDK_REQUIREMENTS, SDK_STAMP, "the official Python SDK", SDK_VENV / relative)
