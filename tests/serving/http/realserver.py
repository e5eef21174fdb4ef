"""A real Streamable HTTP server process (``hard_server.py``) for the
hardening and soak tests, and what it holds, read from /proc (Linux): its
resident memory, its file descriptors and its TCP sockets by state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

SCRIPT = Path(__file__).with_name("hard_server.py")
#: Bound of the server's start and of its stop.
START_TIMEOUT = 30.0


@attrs.define
class RealServer:
    process: trio.Process
    url: str
    stderr: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")


@asynccontextmanager
async def real_server(tmp_path: Path, **settings: Any) -> AsyncIterator[RealServer]:
    """``hard_server.py`` with these :class:`HttpServerSettings` on
    127.0.0.1 (a free port); stopped on exit (stdin closed, then killed
    if it has not exited within the bound)."""
    stderr = tmp_path / f"server-{len(list(tmp_path.glob('server-*')))}.stderr"
    with stderr.open("wb") as err:
        process = await trio.lowlevel.open_process(
            [sys.executable, str(SCRIPT), json.dumps(settings)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    try:
        assert process.stdout is not None and process.stdin is not None
        line = b""
        with trio.fail_after(START_TIMEOUT):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(64)
                if not chunk:
                    raise RuntimeError(f"the server exited: {stderr.read_text()}")
                line += chunk
        port = int(line.split()[1])
        yield RealServer(process, f"http://127.0.0.1:{port}/mcp", stderr)
    finally:
        # Shielded (the test may be cancelled), bounded inside the shield.
        with trio.CancelScope(shield=True):
            with trio.move_on_after(START_TIMEOUT) as stopping:
                if process.stdin is not None:
                    await process.stdin.aclose()
                await process.wait()
            if stopping.cancelled_caught:
                process.kill()
                await process.wait()


#: /proc/net/tcp's state codes.
CLOSE_WAIT = "08"
ESTABLISHED = "01"


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid``, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def socket_states(pid: int) -> dict[str, int]:
    """How many of ``pid``'s TCP sockets are in each state (``CLOSE_WAIT``...)."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    states: dict[str, int] = {}
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[9] in inodes:
                states[fields[3]] = states.get(fields[3], 0) + 1
    return states


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))
