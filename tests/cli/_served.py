"""A real ``trio-mcp run tests/cli/scale_app.py -t http`` process tree for the
scale-out tests (the workers, the drain, the ``requestState`` keys): start it,
talk raw JSON-RPC to it, freeze one of its processes, watch processes end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

from ._procs import HEADERS, INIT, ROOT

CLI = [sys.executable, "-m", "trio_mcp.cli"]
APP = str(Path(__file__).with_name("scale_app.py"))
MODERN = "2026-07-28"
#: Bound of a start, of a stop, and of any one exchange.
TIMEOUT = 60.0


class Log:
    """The lines a process wrote on stderr, as they come."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = trio.Event()

    def add(self, lines: list[str]) -> None:
        self.lines.extend(lines)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, text: str) -> str:
        """The first line containing ``text``, once there is one."""
        while True:
            for line in self.lines:
                if text in line:
                    return line
            await self._changed.wait()


@attrs.define
class Served:
    process: trio.Process
    url: str
    lines: list[str]
    log: Log

    @property
    def worker_pids(self) -> list[int]:
        """The worker processes the parent named (``--workers N``)."""
        for line in self.lines:
            found = re.search(r"\(pids ([\d, ]+)\)", line)
            if found:
                return [int(p) for p in found.group(1).split(", ")]
        return []


@asynccontextmanager
async def served(*args: str, env: Mapping[str, str] | None = None, app: str = APP) -> AsyncIterator[Served]:
    """``trio-mcp run APP -t http --port 0 ARGS`` once it serves (its start-up
    lines read from stderr, which is drained for its whole life); stopped
    afterwards (SIGTERM, then SIGKILL beyond the bound)."""
    workers = "--workers" in args and args[args.index("--workers") + 1] != "1"
    process = await trio.lowlevel.open_process(
        [*CLI, "run", app, "-t", "http", "--port", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    log = Log()
    try:
        async with trio.open_nursery() as nursery:
            ready = trio.Event()
            wanted = 4 if workers else 3
            nursery.start_soon(_drain_stderr, process, log, wanted, ready)
            with trio.fail_after(TIMEOUT):
                await ready.wait()
            seen = log.lines
            lines = [line for line in seen if line.startswith("serving")][:1]
            lines += seen[seen.index(lines[0]) + 1 : seen.index(lines[0]) + wanted] if lines else []
            assert lines and len(lines) == wanted, seen
            yield Served(process, lines[0].rsplit(" ", 1)[-1], lines, log)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await stop(process)


async def _drain_stderr(process: trio.Process, log: Log, wanted: int, ready: trio.Event) -> None:
    assert process.stderr is not None
    buffer = b""
    async for chunk in process.stderr:
        buffer += chunk
        *done, buffer = buffer.split(b"\n")
        log.add([line.decode(errors="replace") for line in done])
        serving = [i for i, line in enumerate(log.lines) if line.startswith("serving")]
        if serving and len(log.lines) - serving[0] >= wanted:
            ready.set()
    ready.set()  # the process ended: the caller finds out


async def stop(process: trio.Process) -> None:
    """SIGTERM, then SIGKILL if it has not ended within the bound."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(TIMEOUT):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


async def post(url: str, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> httpx.Response:
    """One POST on a connection of its own (so each may reach another worker)."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        return await client.post(url, json=body, headers={**HEADERS, **(headers or {})})


def modern_call(name: str, arguments: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    """A 2026-07-28 ``tools/call`` (the body; see :func:`modern_headers`)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "scale-test", "version": "0"},
    }
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments or {}, "_meta": meta, **params},
    }


def modern_headers(name: str) -> dict[str, str]:
    return {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name}


async def call_modern(url: str, name: str, arguments: dict[str, Any] | None = None, **params: Any) -> Any:
    """A 2026-07-28 ``tools/call``: its JSON-RPC answer (a dict)."""
    response = await post(url, modern_call(name, arguments, **params), modern_headers(name))
    return response.json()


def text(answer: dict[str, Any]) -> str:
    return str(answer["result"]["content"][0]["text"])


async def initialize(url: str) -> httpx.Response:
    return await post(url, INIT)


class Freezer:
    """Freezes one process of a server (see ``scale_app.freeze``) and thaws it."""

    def __init__(self, tmp: Path, url: str, name: str) -> None:
        self.url = url
        self.report = tmp / f"{name}.report"
        self.release = tmp / f"{name}.release"
        os.mkfifo(self.report)
        os.mkfifo(self.release)
        self.answer: Any = None
        self.answered = trio.Event()

    async def freeze(self, nursery: trio.Nursery) -> int:
        """Start the freezing call; the id of the process it froze, once frozen."""

        async def call() -> None:
            args = {"report": str(self.report), "release": str(self.release)}
            self.answer = await call_modern(self.url, "freeze", args)
            self.answered.set()

        nursery.start_soon(call)
        return int(await trio.to_thread.run_sync(self.report.read_text, abandon_on_cancel=True))

    async def thaw(self) -> int:
        """Let the frozen process go on; the id its call answered."""

        def close_release() -> None:
            with self.release.open("w") as fifo:
                fifo.write("go")

        await trio.to_thread.run_sync(close_release, abandon_on_cancel=True)
        await self.answered.wait()
        return int(json.loads(text(self.answer)))


async def wait_gone(pids: list[int]) -> None:
    """Until every process of ``pids`` has ended (``pidfd``: no polling)."""
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            await trio.lowlevel.wait_readable(fd)
        finally:
            os.close(fd)


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
