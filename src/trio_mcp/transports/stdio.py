"""stdio transport: newline-delimited JSON over pipes.

One message per line: compact JSON (never containing a raw newline) followed
by ``\\n``. Three pieces:

* :class:`StdioStream` — a :class:`~trio_mcp.transports.MessageStream` over
  a pair of file descriptors (pipes, sockets, ttys). It owns the fds.
* :func:`stdio_server_stream` — the server side, over this process's
  stdin/stdout.
* :class:`StdioTransport` — the client side: an actor that spawns a server
  process (:class:`StdioServerParameters`) and hands out a stream over its
  stdin/stdout.

The stream is in ``_stdio_stream.py``, the client side in ``_stdio_client.py``;
this module exports them and holds the server side.

Framing decisions
-----------------

* **Line limit.** A line longer than ``max_line_bytes`` (default
  :data:`DEFAULT_MAX_LINE_BYTES`, 16 MiB) is *skipped* without being
  buffered: ``receive`` returns one :class:`~trio_mcp.protocol.InvalidMessage`
  (-32700, id ``null``) once the line ends, and the stream stays usable.
  Memory held per stream is bounded by ``max_line_bytes + read_chunk``.
* **Bad lines.** A line that is not JSON-RPC becomes an ``InvalidMessage``
  (logged at WARNING on ``trio_mcp.stdio``, rate-limited: one line, then at
  most one summary with the count every ``warning_interval`` seconds) and
  the stream goes on. The
  server side answers parse errors (JSON-RPC requires it); the client side
  marks them ``answer=False``: a server's stray stdout output asked nothing,
  and answering it with ``id: null`` errors could only confuse the server.
  Blank lines are skipped; ``\\r\\n`` endings are accepted.
* **End of input.** An unterminated fragment at end of input is dropped (it
  is a half-written message from a peer that died). The server side then
  raises :class:`trio.EndOfChannel`; the client side raises
  :class:`TransportError` naming the server's exit status and stderr tail —
  a server never ends a session by itself.
* **Writes** are serialized by a fair lock and written with one encode into a
  reusable buffer. A send cancelled before its first byte was written has
  no effect. A send cancelled *after* its first byte finishes its line under
  a shield for at most ``write_grace`` seconds (so the message is delivered
  even though the caller sees ``Cancelled``); if the reader does not take it
  in time the stream is marked broken, since the framing is lost.
  Backpressure is the pipe's: ``send`` blocks while the kernel buffer (64 KiB
  on Linux) is full.
"""

from __future__ import annotations

import gc
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from ._stdio_stream import (
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_READ_CHUNK,
    DEFAULT_WRITE_GRACE,
    SAFE_ENV_VARS,
    StdioStream,
)

if TYPE_CHECKING:  # the client side, imported on first use (a server process never needs it)
    from ._stdio_client import StdioExit, StdioServerParameters, StdioStartError, StdioTransport

#: The client side's names, served from ``_stdio_client`` on first use: a
#: server process imports this module for :func:`stdio_server_stream` only.
_CLIENT_NAMES = frozenset({"StdioExit", "StdioServerParameters", "StdioStartError", "StdioTransport"})


def __getattr__(name: str) -> object:
    if name not in _CLIENT_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import _stdio_client

    value = getattr(_stdio_client, name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_READ_CHUNK",
    "DEFAULT_WRITE_GRACE",
    "SAFE_ENV_VARS",
    "StdioExit",
    "StdioServerParameters",
    "StdioStartError",
    "StdioStream",
    "StdioTransport",
    "stdio_server_stream",
]

# ---------------------------------------------------------------- server side


def _private_fd(fd: int, flags: int) -> int:
    """A new fd for the file behind ``fd`` that we may make non-blocking.

    Pipes and ttys are reopened through ``/proc/self/fd`` (Linux): that
    gives a new open file description, so O_NONBLOCK does not leak to fd 0/1
    — nor to fd 2 when it shares stdout's description (``2>&1``, a
    terminal) — nor to other processes sharing the pipe or terminal.
    Sockets (what libuv-based clients such as Node hand their servers) are
    duplicated: :class:`StdioStream` uses them with ``MSG_DONTWAIT`` and
    never changes their mode. Otherwise (regular files, other systems) the
    fd is duplicated, which shares the description; :class:`StdioStream`
    restores the blocking mode when it closes.
    """
    if sys.platform.startswith("linux"):
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            try:
                return os.open(f"/proc/self/fd/{fd}", flags | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
            except OSError:
                pass  # e.g. no reader left on a pipe (ENXIO)
    return os.dup(fd)


@asynccontextmanager
async def stdio_server_stream(
    *,
    stdin: int = 0,
    stdout: int = 1,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    read_chunk: int = DEFAULT_READ_CHUNK,
    write_grace: float = DEFAULT_WRITE_GRACE,
    protect_stdout: bool = True,
    freeze_heap: bool = True,
) -> AsyncIterator[StdioStream]:
    """The server side of stdio: a :class:`StdioStream` over this process's
    stdin and stdout, for the duration of the ``async with`` block.

    With ``freeze_heap`` (default), every object allocated so far (the
    imports, the app's set-up) is moved out of the garbage collector's
    reach (``gc.freeze()``): a server process then does not walk them again
    in each full collection, about a tenth of its CPU time per call when
    calls overlap.

    The stream works on private fds (see :func:`_private_fd`); fds 0 and 1
    are never closed. With ``protect_stdout`` (default), fd ``stdout`` is
    pointed at stderr while the block runs, so a stray ``print()`` or a
    library writing to stdout cannot corrupt the protocol; it is restored
    on exit. Python's ``sys.stdout`` is flushed before and after. End of
    stdin makes ``receive`` raise :class:`trio.EndOfChannel`.
    """
    _flush_stdout()
    if freeze_heap:
        gc.freeze()
    read_fd = _private_fd(stdin, os.O_RDONLY)
    try:
        write_fd = _private_fd(stdout, os.O_WRONLY)
    except BaseException:
        os.close(read_fd)
        raise
    saved: int | None = None
    try:
        stream = StdioStream(
            read_fd,
            write_fd,
            max_line_bytes=max_line_bytes,
            read_chunk=read_chunk,
            write_grace=write_grace,
            name="stdio-server",
        )
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    try:
        if protect_stdout and stdout != 2:
            saved = os.dup(stdout)
            try:
                os.dup2(2, stdout)
            except OSError:  # no stderr (a daemon): stray output goes nowhere
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stdout)
                os.close(devnull)
        yield stream
    finally:
        stream._close_now()
        if saved is not None:
            _flush_stdout()
            os.dup2(saved, stdout)
            os.close(saved)


def _flush_stdout() -> None:
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):
        pass
