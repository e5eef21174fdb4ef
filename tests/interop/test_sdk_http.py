"""The official Python SDK client (mcp==2.3.0) against our Streamable HTTP
server: the handshake era in its ``legacy`` mode, the stateless 2026-07-28 era
in its default ``auto`` mode (whose requests mirror their body in headers,
which our server checks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

try:  # run from the repository root or from tests/
    from peers import sdk_path
except ImportError:  # pragma: no cover
    from tests.peers import sdk_path

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("sdk_http_probe.py")


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """examples/everything_server.py served over Streamable HTTP by the CLI."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trio_mcp.cli",
            "run",
            "examples/everything_server.py",
            "-t",
            "http",
            "--port",
            "0",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert "http://127.0.0.1:" in line, line
        yield line.strip().rsplit(" ", 1)[-1]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)


@pytest.mark.parametrize(("mode", "version"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
def test_sdk_client_over_http(http_url: str, mode: str, version: str) -> None:
    python = sdk_path("bin/python")
    out = subprocess.run(
        [str(python), str(PROBE), http_url, mode], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    # In auto mode the 2026-07-28 version shows the SDK's probe was answered as such (a probe
    # left unanswered would fall back to the handshake era).
    assert report["protocol_version"] == version
    assert {"echo", "sample_llm", "long_running_operation"} <= set(report["tools"])
    assert report["echo"] == ["over http"]
    assert not report["sampled_is_error"] and "sdk says hi" in report["sampled"][0]
    assert not report["slow_is_error"] and report["progress"] == [1, 2, 3]
