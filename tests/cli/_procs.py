"""What the command-line tests share: the example server, a raw initialize,
and stopping a server's process group (also run as a plain module by
``wildcard_driver.py`` inside its network namespace)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "everything_server.py")
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def stop_group(process: subprocess.Popen[str]) -> None:
    """Stop a process started with ``start_new_session=True`` and its group:
    SIGTERM, then SIGKILL if it has not ended within 10 s."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
