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
import logging
import math
import os
import signal
import socket
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final, NoReturn

import attrs
import trio

from .._util import DEFAULT_WARNING_INTERVAL, RepeatedWarnings
from ..protocol import PARSE_ERROR, Frame, InvalidMessage, ParseError, decode, decode_utf8, encode_line
from . import _process
from ._base import TransportClosed, TransportError

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

log = logging.getLogger("trio_mcp.stdio")

#: Longest accepted line (one message), in bytes.
DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024
#: Bytes asked of the kernel per read.
DEFAULT_READ_CHUNK: Final = 64 * 1024
#: Seconds a send cancelled mid-line may go on writing the rest of its line.
DEFAULT_WRITE_GRACE: Final = 5.0
#: Longest stderr line relayed to logging; longer lines are cut.
MAX_STDERR_LINE: Final = 64 * 1024
#: Characters of one stderr line kept in the tail used in error messages.
MAX_TAIL_LINE: Final = 1000

SAFE_ENV_VARS: Final = _process.SAFE_ENV_VARS

_SEND_FLAGS: Final = socket.MSG_DONTWAIT | getattr(socket, "MSG_NOSIGNAL", 0)


def _positive(instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be positive, not {value!r}")


class StdioStream:
    """A message stream over a read fd and a write fd (which may be equal,
    e.g. a socket). Takes ownership of the fds and closes them in
    :meth:`aclose`. Pipes and ttys are set non-blocking (the original mode
    is restored before closing, for fds sharing an open file description
    with someone else); sockets are used with ``MSG_DONTWAIT`` and keep
    their mode.
    """

    #: A wait for input runs in a cancel scope (``_read_scope``) that a
    #: deadline or ``_abort`` can end (the client's process stream); else
    #: only closing the stream ends it (one scope less per read).
    _stoppable_reads: bool = False

    def __init__(
        self,
        read_fd: int,
        write_fd: int,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        read_chunk: int = DEFAULT_READ_CHUNK,
        write_grace: float = DEFAULT_WRITE_GRACE,
        answer_parse_errors: bool = True,
        name: str = "stdio",
        warning_interval: float = DEFAULT_WARNING_INTERVAL,
    ) -> None:
        if max_line_bytes < 1 or read_chunk < 1 or not write_grace > 0:
            raise ValueError("max_line_bytes, read_chunk and write_grace must be positive")
        self.name = name
        self._warnings = RepeatedWarnings(log, interval=warning_interval)
        self.max_line_bytes = max_line_bytes
        self._read_chunk = read_chunk
        self._write_grace = write_grace
        self._answer_parse_errors = answer_parse_errors
        self._rfd = read_fd
        self._wfd = write_fd
        # Sockets (libuv-based clients hand their servers socketpairs) are
        # used with MSG_DONTWAIT: their O_NONBLOCK flag, shared with every
        # duplicate of the fd, is left alone. Other fds are made non-blocking
        # (restored on close).
        self._socks: dict[int, socket.socket] = {}
        self._blocking: dict[int, bool] = {}
        for fd in {read_fd, write_fd}:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                self._socks[fd] = socket.socket(fileno=fd)
            else:
                self._blocking[fd] = os.get_blocking(fd)
                os.set_blocking(fd, False)
        self._rsock = self._socks.get(read_fd)
        self._wsock = self._socks.get(write_fd)
        # reading
        self._rbuf = bytearray()
        self._frames: deque[Frame] = deque()  # decoded, not received yet
        self._scan = 0  # no newline in _rbuf before this offset
        self._skipping = False  # inside an overlong line
        self._eof = False
        self._read_scope: trio.CancelScope | None = None
        self._read_deadline = math.inf
        self._failure: str | None = None  # receive raises TransportError(_failure)
        # writing
        self._send_lock = trio.Lock()
        self._wbuf = bytearray()
        self._write_error: str | None = None  # framing lost: every send fails
        # lifecycle
        self._closed = False  # closed locally
        # statistics
        self._frames_in = 0
        self._frames_out = 0
        self._bytes_in = 0
        self._bytes_out = 0
        self._invalid = 0
        self._overlong = 0
        self._dropped_fragments = 0

    # ------------------------------------------------------------ receive

    def receive_nowait(self) -> Frame:
        """The next frame already in the buffer, or :class:`trio.WouldBlock`."""
        if self._closed:
            raise trio.EndOfChannel
        if self._failure is not None:
            raise TransportError(self._failure)
        frame = self._next_frame()
        if frame is None:
            raise trio.WouldBlock
        return frame

    async def receive(self) -> Frame:
        # No schedule point of our own: waiting for input is one, and the
        # reader yields after each burst it drains (see Peer._read_loop).
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            if self._closed:
                raise trio.EndOfChannel
            if self._failure is not None:
                raise TransportError(self._failure)
            frame = self._next_frame()
            if frame is not None:
                return frame
            if self._eof:
                await self._end_of_input(stalled=False)
            await self._fill()

    def _next_frame(self) -> Frame | None:
        """The next complete frame in the buffer, if any (never blocks)."""
        frames = self._frames
        if frames:
            return frames.popleft()
        buf = self._rbuf
        if not self._skipping:
            # Every complete line at once (none of them can be overlong):
            # one copy and one split instead of a search and a cut per line.
            end = buf.rfind(b"\n", self._scan)
            if 0 < end <= self.max_line_bytes:
                with memoryview(buf) as view:
                    chunk = view[:end].tobytes()
                del buf[: end + 1]
                self._scan = 0
                decode_line = self._decode
                decoder = decode_utf8 if chunk.isascii() else decode  # ASCII: checked once for all
                for line in chunk.split(b"\n"):
                    if len(line) < 8 and (not line or line.isspace()):
                        continue  # a blank line
                    frames.append(decode_line(line, decoder))
                if frames:
                    return frames.popleft()
        while True:
            idx = buf.find(b"\n", self._scan)
            if idx < 0:
                if self._skipping:
                    buf.clear()
                elif len(buf) > self.max_line_bytes:
                    self._skipping = True
                    buf.clear()
                self._scan = len(buf)
                if self._eof:
                    if self._skipping:
                        self._skipping = False
                        return self._overlong_frame()
                    if buf and not buf.isspace():
                        self._dropped_fragments += 1
                        log.debug("%s: dropped %d bytes of an unterminated last line", self.name, len(buf))
                    buf.clear()
                    self._scan = 0
                return None
            self._scan = 0
            if self._skipping or idx > self.max_line_bytes:
                del buf[: idx + 1]
                self._skipping = False
                return self._overlong_frame()
            if idx < 8 and (idx == 0 or buf[:idx].isspace()):
                del buf[: idx + 1]
                continue
            with memoryview(buf) as view:
                line = bytes(view[:idx])
            del buf[: idx + 1]  # O(1): CPython moves the start of a bytearray
            return self._decode(line)

    def _decode(self, line: bytes, decoder: Callable[[bytes], Frame] = decode) -> Frame:
        frame = decoder(line)
        self._frames_in += 1
        if type(frame) is InvalidMessage:
            self._invalid += 1
            if frame.error.code == PARSE_ERROR:
                self._warnings.warning(
                    "not JSON",
                    "%s: received a line that is not JSON (%d bytes): %r",
                    self.name,
                    len(line),
                    line[:200],
                )
            else:
                self._warnings.warning(
                    "not JSON-RPC",
                    "%s: received a line that is not JSON-RPC (%d bytes): %r",
                    self.name,
                    len(line),
                    line[:200],
                )
            if not self._answer_parse_errors and frame.id is None:
                # A server's stray output is logged, never answered.
                frame = InvalidMessage(frame.id, frame.error, answer=False)
        return frame

    def _overlong_frame(self) -> InvalidMessage:
        self._frames_in += 1
        self._invalid += 1
        self._overlong += 1
        self._warnings.warning(
            "overlong", "%s: skipped a message longer than %d bytes", self.name, self.max_line_bytes
        )
        return InvalidMessage(
            None,
            ParseError(f"Parse error: message longer than {self.max_line_bytes} bytes"),
            answer=self._answer_parse_errors,
        )

    async def _fill(self) -> None:
        """Read more bytes into the buffer, or set ``_eof``."""
        while True:
            if self._closed:
                raise trio.EndOfChannel
            if self._failure is not None:
                raise TransportError(self._failure)
            try:
                if self._rsock is not None:
                    data = self._rsock.recv(self._read_chunk, socket.MSG_DONTWAIT)
                else:
                    data = os.read(self._rfd, self._read_chunk)
            except BlockingIOError:
                pass
            except OSError as exc:
                self._failure = f"{self.name}: read failed: {exc}"
                raise TransportError(self._failure) from None
            else:
                if data:
                    self._rbuf += data
                    self._bytes_in += len(data)
                else:
                    self._eof = True
                return
            if not self._stoppable_reads:
                # Closing the fd (notify_closing) is what ends this wait.
                await self._wait_readable()
                continue
            with trio.CancelScope(deadline=self._read_deadline) as scope:
                self._read_scope = scope
                try:
                    await self._wait_readable()
                finally:
                    self._read_scope = None
            if scope.cancelled_caught and not self._closed:
                await self._end_of_input(stalled=True)

    async def _wait_readable(self) -> None:
        try:
            await trio.lowlevel.wait_readable(self._rfd)
        except trio.ClosedResourceError:
            if self._closed:
                raise trio.EndOfChannel from None
            raise TransportError(self._failure or f"{self.name}: input closed under the reader") from None

    async def _end_of_input(self, *, stalled: bool) -> NoReturn:
        """The input ended (or, ``stalled``, the read deadline passed)."""
        raise trio.EndOfChannel

    # --------------------------------------------------------------- send

    async def send(self, message: Any) -> None:
        await self._send(message, None)

    async def send_raw(self, data: bytes) -> None:
        """Write ``data`` as it is (no newline added): for fault injection."""
        await self._send(None, data)

    async def send_batch(self, messages: list[Any]) -> None:
        """Send several messages, one line each, with one write (the peer
        gathers the answers ready in one scheduling turn). An error encoding
        any of them is raised before anything is written."""
        await self._send(messages, None, batch=True)

    async def _send(self, message: Any, raw: bytes | None, *, batch: bool = False) -> None:
        if self._closed:
            raise TransportClosed(f"{self.name}: stream closed")
        async with self._send_lock:
            if self._closed or self._wfd < 0:
                raise TransportClosed(self._write_closed_reason())
            if self._write_error is not None:
                raise TransportError(self._write_error)
            buf = self._wbuf
            buf.clear()
            if batch:
                for item in message:
                    encode_line(item, buf)
            elif raw is None:
                encode_line(message, buf)
            else:
                buf += raw
            await self._write_all(buf, len(message) if batch else 1)

    async def _write_all(self, buf: bytearray, frames: int = 1) -> None:
        with memoryview(buf) as view:
            total = len(view)
            pos = self._write_some(view, 0)
            while pos < total:
                try:
                    await self._wait_writable()
                except trio.Cancelled:
                    if pos > 0:
                        await self._finish_cancelled_write(view, pos)
                    raise
                pos = self._write_some(view, pos)
        self._frames_out += frames

    def _write_some(self, view: memoryview, pos: int) -> int:
        if self._wfd < 0:
            raise TransportClosed(self._write_closed_reason())
        try:
            if self._wsock is not None:
                n = self._wsock.send(view[pos:], _SEND_FLAGS)
            else:
                n = os.write(self._wfd, view[pos:])
        except BlockingIOError:
            return pos
        except OSError as exc:  # EPIPE: the reader went away
            raise TransportClosed(self._write_closed_reason(exc)) from None
        self._bytes_out += n
        return pos + n

    async def _wait_writable(self) -> None:
        try:
            await trio.lowlevel.wait_writable(self._wfd)
        except trio.ClosedResourceError:
            raise TransportClosed(self._write_closed_reason()) from None

    async def _finish_cancelled_write(self, view: memoryview, pos: int) -> None:
        """Finish a line whose sender was cancelled (shielded, bounded)."""
        total = len(view)
        with trio.move_on_after(self._write_grace, shield=True):
            try:
                while True:
                    pos = self._write_some(view, pos)
                    if pos >= total:
                        self._frames_out += 1
                        return
                    await self._wait_writable()
            except TransportError:
                return  # the stream is gone anyway
        self._write_error = (
            f"{self.name}: a message was cut off: its sender was cancelled and the reader did not take "
            f"the rest within {self._write_grace}s"
        )
        log.warning("%s", self._write_error)

    def _write_closed_reason(self, exc: OSError | None = None) -> str:
        if self._closed:
            return f"{self.name}: stream closed"
        return f"{self.name}: the other side stopped reading" + (f" ({exc.strerror})" if exc else "")

    # ---------------------------------------------------------- lifecycle

    async def aclose(self) -> None:
        """Close both directions (idempotent, never blocks)."""
        self._close_now()
        await trio.lowlevel.checkpoint()

    def _close_now(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._read_scope is not None:
            self._read_scope.cancel()
        self._close_write()
        self._close_read()

    def _close_read(self) -> None:
        self._warnings.flush()
        fd, self._rfd = self._rfd, -1
        if fd >= 0 and fd != self._wfd:
            self._close_fd(fd)

    def _close_write(self) -> None:
        fd, self._wfd = self._wfd, -1
        if fd >= 0 and fd != self._rfd:
            self._close_fd(fd)

    def _close_fd(self, fd: int) -> None:
        trio.lowlevel.notify_closing(fd)
        sock = self._socks.pop(fd, None)
        if sock is not None:
            sock.close()
            return
        try:
            os.set_blocking(fd, self._blocking[fd])
        except (OSError, KeyError):
            pass
        os.close(fd)

    def statistics(self) -> dict[str, int]:
        return {
            "frames_in": self._frames_in,
            "frames_out": self._frames_out,
            "bytes_in": self._bytes_in,
            "bytes_out": self._bytes_out,
            "invalid_frames": self._invalid,
            "overlong_lines": self._overlong,
            "dropped_fragments": self._dropped_fragments,
            "buffered": len(self._rbuf),
            "frames_buffered": len(self._frames),
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {'closed' if self._closed else 'open'}>"


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


# ---------------------------------------------------------------- client side


class StdioStartError(TransportError):
    """The server process could not be started (missing program, bad
    ``cwd``, not executable). Raised by :meth:`StdioTransport.run` before
    it reports started: a start failure."""

    def __init__(self, reason: str, *, command: str, errno: int | None = None) -> None:
        super().__init__(reason)
        self.command = command
        self.errno = errno


@attrs.frozen
class StdioExit:
    """What :meth:`StdioTransport.run` returns: ``kind`` is ``"closed"``
    (stopped by :meth:`aclose <StdioStream.aclose>`) or ``"exited"`` (the
    server exited by itself); ``detail`` says how."""

    kind: str
    returncode: int | None
    detail: str = ""


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _str_dict(value: Mapping[str, str]) -> dict[str, str]:
    return dict(value)


@attrs.frozen(kw_only=True)
class StdioServerParameters:
    """How to start and stop a stdio MCP server (one typed config object;
    field names follow the ``mcpServers`` convention where they overlap).

    Environment: the child gets ``env`` merged onto :data:`SAFE_ENV_VARS`
    taken from our environment (HOME, PATH, locale...), so secrets in the
    owner's environment do not leak into every server; ``inherit_env=True``
    merges ``env`` onto our whole environment instead. A bare ``command`` is
    looked up on the *child's* PATH.

    Shutdown (closing the stream, or cancelling ``run``): close the server's
    stdin; wait ``close_grace``; SIGTERM its process group; wait
    ``term_grace``; SIGKILL the group; wait ``kill_timeout`` to reap it.
    """

    command: str
    args: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    env: Mapping[str, str] = attrs.field(factory=dict, converter=_str_dict, hash=False)
    cwd: str | None = attrs.field(default=None, converter=attrs.converters.optional(os.fspath))
    inherit_env: bool = False
    #: Name used in logs and errors (default: the command's basename).
    name: str | None = None
    #: stderr lines kept for error messages.
    stderr_tail_lines: int = attrs.field(default=20, validator=_positive)
    #: Level at which the server's stderr lines are logged on ``trio_mcp.stdio``.
    stderr_log_level: int = logging.INFO
    #: Longest accepted message from the server, in bytes.
    max_line_bytes: int = attrs.field(default=DEFAULT_MAX_LINE_BYTES, validator=_positive)
    #: Seconds the server may take to exit after its stdin closed.
    close_grace: float = attrs.field(default=2.0, validator=_positive)
    #: Seconds the group may take to exit after SIGTERM.
    term_grace: float = attrs.field(default=2.0, validator=_positive)
    #: Seconds to wait for the reaping after SIGKILL (a process stuck in the
    #: kernel may not die at once; we log and give up).
    kill_timeout: float = attrs.field(default=2.0, validator=_positive)
    #: Seconds, after the server's stdout ended or it exited, to wait for its
    #: exit status and last stderr lines (or for its stdout to end) before
    #: failing the reader with a :class:`TransportError`.
    eof_grace: float = attrs.field(default=1.0, validator=_positive)
    #: Seconds a send cancelled mid-line may go on writing it (see module doc).
    write_grace: float = attrs.field(default=DEFAULT_WRITE_GRACE, validator=_positive)
    #: Seconds between two log lines about the same repeated problem (lines
    #: that are not JSON-RPC, overlong lines); the ones between are counted.
    warning_interval: float = attrs.field(default=DEFAULT_WARNING_INTERVAL, validator=_positive)
    #: Linux: the server gets SIGKILL if the thread running ``trio.run`` (or
    #: the whole owner process) dies, even by SIGKILL.
    parent_death_signal: bool = True

    @property
    def display_name(self) -> str:
        return self.name or os.path.basename(self.command) or self.command


class _ProcessStream(StdioStream):
    """The client's stream over a server process's stdout/stdin."""

    _stoppable_reads = True

    def __init__(self, transport: StdioTransport, read_fd: int, write_fd: int) -> None:
        p = transport.params
        super().__init__(
            read_fd,
            write_fd,
            max_line_bytes=p.max_line_bytes,
            write_grace=p.write_grace,
            answer_parse_errors=False,
            name=p.display_name,
            warning_interval=p.warning_interval,
        )
        self._transport = transport

    async def _end_of_input(self, *, stalled: bool) -> NoReturn:
        if self._closed:
            raise trio.EndOfChannel
        if self._failure is None:
            reason = await self._transport._describe_end(stalled=stalled)
            if self._failure is None:
                self._failure = reason
            if self._transport._stopped.is_set():
                self._close_read()
        raise TransportError(self._failure)

    def _process_exited(self, deadline: float) -> None:
        self._read_deadline = deadline
        if self._read_scope is not None:
            self._read_scope.deadline = deadline

    def _abort(self, reason: str) -> None:
        if self._failure is None:
            self._failure = reason
        if self._read_scope is not None:
            self._read_scope.cancel()

    def _write_closed_reason(self, exc: OSError | None = None) -> str:
        if self._closed:
            return f"{self.name}: stream closed"
        return self._transport._exit_description(running_hint="stopped reading its stdin")

    async def aclose(self) -> None:
        """Stop the server (close stdin, then escalate; see
        :class:`StdioServerParameters`) and wait until it is reaped. If this
        wait is cancelled, the transport's ``run`` finishes the shutdown."""
        if not self._closed:
            self._closed = True
            if self._read_scope is not None:
                self._read_scope.cancel()
            self._close_write()
            self._transport._stop("closed")
        try:
            await self._transport._stopped.wait()
        finally:
            if self._transport._stopped.is_set():
                self._close_read()


class StdioTransport:
    """Client side of stdio: spawns a server and serves a stream over it.

    ``stream = await nursery.start(transport.run)``. ``run`` raises
    :class:`StdioStartError` (before reporting started) if the process cannot
    be started. It returns a :class:`StdioExit` after the stream was closed
    and the process group is gone, or after the server exited by itself (the
    reader then gets a :class:`TransportError` naming exit status and stderr
    tail). Cancelling ``run`` performs the same bounded, shielded shutdown.
    The server runs in its own session / process group; on Linux it also
    gets a parent-death SIGKILL (see :mod:`._process` for why it is not
    spawned with ``trio.lowlevel.open_process``). Its stderr is relayed line
    by line to the ``trio_mcp.stdio`` logger.
    """

    def __init__(self, params: StdioServerParameters) -> None:
        self.params = params
        self.name = params.display_name
        self._child: _process.ChildProcess | None = None
        self._stream: _ProcessStream | None = None
        self._tail: deque[str] = deque(maxlen=params.stderr_tail_lines)
        self._stderr_buf = bytearray()
        self._stderr_done = trio.Event()
        self._exited = trio.Event()
        self._wake = trio.Event()  # closed locally, or the server exited
        self._stop_cause = ""  # whichever of "closed" / "exited" came first
        self._stopped = trio.Event()  # shutdown finished
        self._started = False
        self._stderr_lines = 0

    # ---------------------------------------------------------------- info

    @property
    def pid(self) -> int | None:
        return None if self._child is None else self._child.pid

    @property
    def returncode(self) -> int | None:
        """The server's exit status once reaped (``-N``: killed by signal N)."""
        return None if self._child is None else self._child.returncode

    @property
    def stderr_tail(self) -> tuple[str, ...]:
        return tuple(self._tail)

    @property
    def stream(self) -> StdioStream | None:
        return self._stream

    def statistics(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pid": self.pid,
            "returncode": self.returncode,
            "stderr_lines": self._stderr_lines,
            **(self._stream.statistics() if self._stream is not None else {}),
        }

    def __repr__(self) -> str:
        return f"<StdioTransport {self.name} pid={self.pid}>"

    # ----------------------------------------------------------------- run

    async def run(self, *, task_status: trio.TaskStatus[StdioStream] = trio.TASK_STATUS_IGNORED) -> StdioExit:
        if self._started:
            raise RuntimeError("a StdioTransport runs once")
        self._started = True
        p = self.params
        argv = [p.command, *p.args]
        env = _process.build_env(p.env, inherit=p.inherit_env)
        try:
            child = _process.spawn(argv, env=env, cwd=p.cwd, parent_death_signal=p.parent_death_signal)
        except OSError as exc:
            self._stopped.set()
            raise self._start_error(exc, env) from exc
        self._child = child
        stream = self._stream = _ProcessStream(self, child.stdout_fd, child.stdin_fd)
        log.debug("%s: started pid %d: %s", self.name, child.pid, argv)
        normal = False
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_exit)
                nursery.start_soon(self._relay_stderr)
                task_status.started(stream)
                await self._wake.wait()
                nursery.cancel_scope.cancel()
            normal = True
        finally:
            if not normal:
                stream._abort(f"{self.name}: the stdio transport was stopped")
            await self._shutdown()
        return StdioExit(self._stop_cause, child.returncode, self._exit_description())

    def _stop(self, cause: str) -> None:
        if not self._wake.is_set():
            self._stop_cause = cause
            self._wake.set()

    def _start_error(self, exc: OSError, env: Mapping[str, str]) -> StdioStartError:
        p = self.params
        if isinstance(exc, FileNotFoundError) and p.cwd is not None and exc.filename == p.cwd:
            what = f"working directory not found: {p.cwd!r}"
        elif isinstance(exc, FileNotFoundError):
            where = "" if os.sep in p.command else f" (searched PATH={env.get('PATH', os.defpath)!r})"
            what = f"command not found: {p.command!r}{where}"
        elif isinstance(exc, PermissionError):
            what = f"permission denied: {p.command!r}"
        else:
            what = f"{exc.strerror or exc}"
        return StdioStartError(
            f"cannot start MCP server {self.name!r}: {what}", command=p.command, errno=exc.errno
        )

    async def _watch_exit(self) -> None:
        assert self._child is not None
        code = await self._child.wait()
        if self._exited.is_set():
            return
        now = trio.current_time()
        self._exited.set()
        self._stop("exited")
        assert self._stream is not None
        self._stream._process_exited(now + self.params.eof_grace)
        level = logging.DEBUG if self._stream._closed else logging.WARNING
        log.log(level, "%s: pid %d %s", self.name, self._child.pid, _status_text(code))

    async def _relay_stderr(self) -> None:
        assert self._child is not None
        fd = self._child.stderr_fd
        buf = self._stderr_buf
        while fd >= 0:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
                continue
            except OSError:
                data = b""
            if not data:
                if buf:
                    self._stderr_line(bytes(buf))
                    buf.clear()
                self._stderr_done.set()
                return
            start = len(buf)
            buf += data
            while (idx := buf.find(b"\n", start)) >= 0:
                self._stderr_line(bytes(buf[:idx]))
                del buf[: idx + 1]
                start = 0
            if len(buf) > MAX_STDERR_LINE:
                self._stderr_line(bytes(buf[:MAX_STDERR_LINE]) + b" [cut]")
                buf.clear()

    def _stderr_line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        self._stderr_lines += 1
        self._tail.append(text if len(text) <= MAX_TAIL_LINE else text[:MAX_TAIL_LINE] + "...")
        log.log(
            self.params.stderr_log_level,
            "%s: %s",
            self.name,
            text,
            extra={"mcp_server": self.name, "pid": self.pid},
        )

    async def _drain_stdout(self) -> None:
        """After a local close: discard what the server still writes, so a
        server flushing output while it shuts down is not killed by EPIPE."""
        assert self._stream is not None
        stream = self._stream
        while stream._rfd >= 0:
            try:
                if not os.read(stream._rfd, 65536):
                    return
            except BlockingIOError:
                await trio.lowlevel.wait_readable(stream._rfd)
            except OSError:
                return

    # ------------------------------------------------------------ shutdown

    async def _shutdown(self) -> None:
        """close stdin -> wait -> SIGTERM group -> wait -> SIGKILL group ->
        reap. Shielded; every wait bounded."""
        child = self._child
        stream = self._stream
        assert child is not None and stream is not None
        p = self.params
        with trio.CancelScope(shield=True):
            try:
                async with trio.open_nursery() as nursery:
                    if not self._exited.is_set():
                        nursery.start_soon(self._watch_exit)
                    if not self._stderr_done.is_set():
                        nursery.start_soon(self._relay_stderr)
                    if stream._closed:
                        nursery.start_soon(self._drain_stdout)
                    stream._close_write()
                    with trio.move_on_after(p.close_grace):
                        await self._exited.wait()
                    if child.group_alive():
                        why = (
                            "did not exit after its stdin closed"
                            if not self._exited.is_set()
                            else "left processes"
                        )
                        log.info("%s: %s; sending SIGTERM to process group %d", self.name, why, child.pid)
                        child.signal_group(signal.SIGTERM)
                        await self._wait_group_gone(p.term_grace)
                        if child.group_alive():
                            log.warning("%s: still running after SIGTERM; sending SIGKILL", self.name)
                            child.signal_group(signal.SIGKILL)
                            with trio.move_on_after(p.kill_timeout):
                                await self._exited.wait()
                    with trio.move_on_after(p.eof_grace):
                        await self._stderr_done.wait()
                    nursery.cancel_scope.cancel()
            finally:
                if child.returncode is None:
                    log.error("%s: pid %d could not be reaped (stuck in the kernel?)", self.name, child.pid)
                stderr_fd, child.stderr_fd = child.stderr_fd, -1
                if stderr_fd >= 0:
                    trio.lowlevel.notify_closing(stderr_fd)
                    os.close(stderr_fd)
                child.close_fds()
                if stream._closed or stream._failure is not None:
                    stream._close_read()
                self._stopped.set()

    async def _wait_group_gone(self, timeout: float) -> None:
        assert self._child is not None
        with trio.move_on_after(timeout):
            await self._exited.wait()
            # Other members are not our children: nothing to wait on but
            # their absence. Bounded by ``timeout``.
            while self._child.group_alive():
                await trio.sleep(_process.GROUP_POLL_INTERVAL)

    # -------------------------------------------------------------- errors

    async def _describe_end(self, *, stalled: bool) -> str:
        if not stalled:
            with trio.move_on_after(self.params.eof_grace):
                await self._exited.wait()
                await self._stderr_done.wait()
        return self._exit_description(stalled=stalled)

    def _exit_description(self, *, stalled: bool = False, running_hint: str = "closed its stdout") -> str:
        code = self.returncode
        if code is None:
            head = f"server {self.name} {running_hint} (pid {self.pid} still running)"
        else:
            head = f"server {self.name} {_status_text(code)}"
        if stalled:
            head += "; its stdout is still held open, probably by a process it started"
        tail = list(self._tail)
        if tail:
            return head + "; stderr tail:\n" + "\n".join(tail)
        return head + "; no stderr output"


def _status_text(code: int) -> str:
    if code >= 0:
        return f"exited with status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"was killed by {name}"
