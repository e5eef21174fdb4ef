"""The WebSocket interop peer: the official Python SDK ``mcp[ws]==1.30.0``.

1.30.0 is the last SDK release with a WebSocket transport (client
``mcp.client.websocket.websocket_client``, server
``mcp.server.websocket.websocket_server``, an ASGI app served here by
uvicorn). ``bash scripts/setup-interop-ws`` installs it, pinned by
``requirements.txt``, into ``.cache/sdk-ws-venv``: an environment of its own
(its import name ``mcp`` shares one neither with trio-mcp nor with the newer
SDK of ``.cache/sdk-venv``); stamp ``.cache/sdk-ws-venv/.installed``.

The tests are skipped only when that setup never ran (or ran for other
pins); when the stamp says it ran but the interpreter is missing, they fail.
Every process started here runs in its own process group and is stopped
(stdin closed or a first signal, then SIGTERM, then SIGKILL to the group,
each wait bounded);
every server listens on 127.0.0.1 on a port chosen when it starts.
"""

from __future__ import annotations

import filecmp
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
WS_VENV = ROOT / ".cache" / "sdk-ws-venv"
WS_REQUIREMENTS = HERE / "requirements.txt"
WS_STAMP = WS_VENV / ".installed"
SETUP = "bash scripts/setup-interop-ws"
SDK_WS_SERVER = HERE / "sdk_ws_server.py"
SDK_WS_CLIENT = HERE / "sdk_ws_client.py"

#: Seconds the SDK server may take to print its address (an import of the
#: SDK, Starlette and uvicorn: about one second here).
SERVER_START_TIMEOUT = 30.0
#: Seconds a stopping process gets for each stage (stdin closed, SIGTERM).
STOP_GRACE = 5.0


def _sdk_ws_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


@pytest.fixture(scope="session")
def sdk_ws_env() -> dict[str, str]:
    """The environment for the SDK's interpreter (nothing of ours leaks in)."""
    return _sdk_ws_env()


@pytest.fixture(scope="session")
def sdk_ws_python() -> Path:
    """The interpreter of ``.cache/sdk-ws-venv`` (``mcp[ws]==1.30.0``)."""
    if not WS_STAMP.is_file():
        pytest.skip(f"the WebSocket SDK peer (mcp[ws]==1.30.0) is not installed: run `{SETUP}`")
    if not filecmp.cmp(WS_REQUIREMENTS, WS_STAMP, shallow=False):
        pytest.skip(
            f"{WS_VENV} was installed for other pins than {WS_REQUIREMENTS.name}: run `{SETUP}` again"
        )
    python = WS_VENV / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing although {WS_STAMP} says `{SETUP}` installed it: run it again")
    return python


def stop_process(proc: subprocess.Popen[bytes], first: signal.Signals | None = None) -> None:
    """Stop ``proc`` and its process group, each stage bounded by ``STOP_GRACE``:
    stdin closed (and signal ``first`` sent, if given), then SIGTERM, then SIGKILL."""
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except OSError:
            pass
    for stage in (first, signal.SIGTERM, signal.SIGKILL):
        if stage is not None:
            try:
                os.killpg(proc.pid, stage)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=STOP_GRACE)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # anything the process left in its group
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def read_line(proc: subprocess.Popen[bytes], timeout: float, *, stderr: bool = False) -> str:
    """The first line ``proc`` prints on stdout (or stderr), within ``timeout``
    seconds ("" if it exits first or says nothing in time)."""
    pipe = proc.stderr if stderr else proc.stdout
    assert pipe is not None
    fd = pipe.fileno()
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            return ""
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                return ""
            data += chunk
    return data.split(b"\n", 1)[0].decode(errors="replace")


class SdkWsServer:
    """A running ``sdk_ws_server.py`` and its ``url``."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, stderr: IO[bytes]) -> None:
        self.proc = proc
        self.url = url
        self._stderr = stderr  # kept for the start-up failure message, closed by stop()

    def stop(self) -> None:
        stop_process(self.proc)
        self._stderr.close()


def start_sdk_ws_server(python: Path) -> SdkWsServer:
    """Start ``sdk_ws_server.py``; return once it listens (or fail, process stopped)."""
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - the server owns it, stop() closes it
    proc = subprocess.Popen(
        [str(python), str(SDK_WS_SERVER)],
        env=_sdk_ws_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        start_new_session=True,
    )
    line = read_line(proc, SERVER_START_TIMEOUT)
    if not line.startswith("listening ws://127.0.0.1:"):
        stop_process(proc)
        stderr.seek(0)
        said = stderr.read().decode(errors="replace")[-4000:]
        stderr.close()
        pytest.fail(
            f"the SDK WebSocket server did not start within {SERVER_START_TIMEOUT} s (said {line!r}); "
            f"stderr:\n{said}"
        )
    return SdkWsServer(proc, line.split()[1], stderr)


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """``spawn(argv, first_signal=None, **popen_options)``: a process in its own
    process group, stopped after the test (``stop_process``)."""
    started: list[tuple[subprocess.Popen[bytes], signal.Signals | None]] = []

    def start(
        argv: list[str], *, first_signal: signal.Signals | None = None, **options: Any
    ) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, start_new_session=True, **options)
        started.append((proc, first_signal))
        return proc

    try:
        yield start
    finally:
        for proc, first in started:
            stop_process(proc, first)


@pytest.fixture
def sdk_ws_server_factory(sdk_ws_python: Path) -> Iterator[object]:
    """``start()``: a fresh SDK WebSocket server for one test (stopped after it)."""
    started: list[SdkWsServer] = []

    def start() -> SdkWsServer:
        server = start_sdk_ws_server(sdk_ws_python)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="module")
def sdk_ws_server(sdk_ws_python: Path) -> Iterator[SdkWsServer]:
    """One SDK WebSocket server shared by a module's tests (each opens its own connection)."""
    server = start_sdk_ws_server(sdk_ws_python)
    try:
        yield server
    finally:
        server.stop()
