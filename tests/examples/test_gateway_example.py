"""The README's gateway example: ``trio-mcp gateway examples/gateway.json``,
run from the repository root with the venv's ``bin`` on PATH (as after
``source .venv/bin/activate``), starts every server the file lists."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "trio_mcp.cli"]


def test_every_server_of_the_example_config_starts() -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    config = json.loads((ROOT / "examples" / "gateway.json").read_text())["mcpServers"]
    enabled = {name for name, entry in config.items() if not entry.get("disabled")}
    gateway = subprocess.Popen(
        [*CLI, "gateway", "examples/gateway.json", "-t", "http", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    try:
        assert gateway.stderr is not None
        line = gateway.stderr.readline()
        assert "serving" in line and "http://127.0.0.1:" in line, line  # nothing was "left out" before it
        url = line.strip().rsplit(" ", 1)[-1]
        listed = subprocess.run(
            [*CLI, "tools", url, "--json"], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT
        )
        assert listed.returncode == 0, listed.stderr
        servers = {tool["name"].split("__", 1)[0] for tool in json.loads(listed.stdout)["tools"]}
        assert servers == enabled
    finally:
        os.killpg(gateway.pid, signal.SIGTERM)
        try:
            gateway.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(gateway.pid, signal.SIGKILL)
            gateway.wait(timeout=10)
