"""The stdio message stream (:class:`StdioStream`): newline-delimited JSON
over a pair of file descriptors. Its framing decisions are described in
:mod:`trio_mcp.transports.stdio`, which exports it."""

from __future__ import annotations

import logging
import math
import os
import select
import socket
from collections import deque
from typing import Any, Final, NoReturn, Protocol

import attrs
import trio

from .._util import DEFAULT_WARNING_INTERVAL, RepeatedWarnings
from ..protocol import (
    PARSE_ERROR,
    Frame,
    InvalidMessage,
    ParseError,
    decode,
    decode_utf8,
    encode_line,
    encode_lines,
)
from . import _process
from ._base import TransportClosed, TransportError
from ._fds import SEND_FLAGS, StreamFds

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

_wait_readable: Final = trio.lowlevel.wait_readable


class LineTap(Protocol):
    """What :meth:`StdioStream.set_tap` takes: a reader of whole lines before
    they are decoded (a proxy passing messages on as bytes)."""

    def take(self, chunk: bytes, ascii: bool) -> tuple[int, list[bytes]]:
        """The complete lines of one read (``chunk``: messages, each but the
        last followed by a newline, blank lines included; ``ascii``: all of it
        is ASCII): act on the messages taken here (no frames) and return how
        many they are and the other lines, in their order, which the stream
        decodes. A tap that must not let a line overtake an earlier one
        returns every line from the first it does not take."""


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
        fds = self._fds = StreamFds(read_fd, write_fd)
        self._rsock = fds.rsock
        self._wsock = fds.wsock
        #: Writes of up to PIPE_BUF bytes are whole or nothing: see send_nowait.
        self._atomic = fds.atomic
        # reading
        self._rbuf = bytearray()
        self._frames: deque[Frame] = deque()  # decoded, not received yet
        self._scan = 0  # no newline in _rbuf before this offset
        self._skipping = False  # inside an overlong line
        self._eof = False
        self._drained = False  # the last read did not fill a chunk: wait before the next (see _fill)
        self._out_at_read = 0  # _bytes_out at the last read (see _fill)
        self._read_scope: trio.CancelScope | None = None
        self._waiting = False  # waiting for input outside _read_scope
        self._read_deadline = math.inf
        self._failure: str | None = None  # receive raises TransportError(_failure)
        self._tap: LineTap | None = None
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

    @property
    def tap(self) -> LineTap | None:
        return self._tap

    def set_tap(self, tap: LineTap | None) -> None:
        """Offer the complete lines of each read to ``tap.take`` before they
        are decoded (the messages it takes are no frames; the lines it returns
        are decoded, in that order); None: no tap. Lines read one at a time (past
        ``max_line_bytes`` in one read) are not offered."""
        self._tap = tap

    def receive_nowait(self) -> Frame:
        """The next frame already in the buffer, or :class:`trio.WouldBlock`."""
        frames = self._frames
        if frames and not self._closed and self._failure is None:
            return frames.popleft()  # decoded with the rest of its read
        if self._closed:
            raise trio.EndOfChannel
        if self._failure is not None:
            raise TransportError(self._failure)
        frame = self._next_frame()
        if frame is None:
            raise trio.WouldBlock
        return frame

    def take_nowait(self) -> Frame | None:
        """:meth:`receive_nowait` without the exception: the next frame already
        in the buffer, or None (none there, or the stream is closed or broken:
        :meth:`receive` says which). For a read loop draining the rest of a read."""
        if self._closed or self._failure is not None:
            return None
        frames = self._frames
        if frames:
            return frames.popleft()  # decoded with the rest of its read
        if not self._rbuf and not self._skipping:
            return None  # all taken (the usual end of a read: no call)
        return self._next_frame()

    async def receive(self) -> Frame:
        # No schedule point of our own: waiting for input is one, and the
        # reader yields after each burst it drains (see Peer._read_loop).
        if (
            self._frames
            or self._rbuf
            or not self._drained
            or self._eof
            or self._skipping
            or self._closed
            or self._failure is not None
        ):
            # It may return (or raise) without waiting for input: a cancel
            # point first. Otherwise it waits, and that wait is one.
            await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            if self._closed:
                raise trio.EndOfChannel
            if self._failure is not None:
                raise TransportError(self._failure)
            if self._frames or self._rbuf or self._skipping:
                frame = self._next_frame()
                if frame is not None:
                    return frame
            if self._eof:
                await self._end_of_input(stalled=False)
            if self._tap is not None and not self._drained:
                # Its tap took every line of a full read: others run before the next.
                await trio.lowlevel.checkpoint()
            await self._fill()

    def _next_frame(self) -> Frame | None:
        """The next complete frame in the buffer, if any (never blocks)."""
        frames = self._frames
        if frames:
            return frames.popleft()
        buf = self._rbuf
        if not buf and not self._skipping:
            self._scan = 0
            return None  # all taken (at the end of input too: nothing left to drop)
        if not self._skipping:
            # Every complete line at once (none of them can be overlong):
            # one copy and one split instead of a search and a cut per line.
            end = buf.rfind(b"\n", self._scan)
            if 0 < end <= self.max_line_bytes:
                with memoryview(buf) as view:
                    chunk = view[:end].tobytes()
                del buf[: end + 1]
                self._scan = 0
                ascii = chunk.isascii()
                decoder = decode_utf8 if ascii else decode  # ASCII: checked once for all
                append = frames.append
                if self._tap is None:
                    lines = chunk.split(b"\n")
                else:
                    taken, lines = self._tap.take(chunk, ascii)
                    self._frames_in += taken
                    if not lines and not buf:
                        return None  # all taken, nothing more read
                for line in lines:
                    if len(line) < 8 and (not line or line.isspace()):
                        continue  # a blank line
                    frame = decoder(line)
                    if type(frame) is InvalidMessage:
                        frame = self._invalid_frame(frame, line)
                    append(frame)
                if frames:
                    self._frames_in += len(frames)
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

    def _decode(self, line: bytes) -> Frame:
        frame = decode(line)
        self._frames_in += 1
        if type(frame) is InvalidMessage:
            frame = self._invalid_frame(frame, line)
        return frame

    def _invalid_frame(self, frame: InvalidMessage, line: bytes) -> InvalidMessage:
        """Count and log a line that is not a JSON-RPC message (``frame`` says why)."""
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
        """Read more bytes into the buffer, or set ``_eof``. After a read that
        did not fill a whole chunk the input was drained: the next fill waits
        for input, after one pass of the run loop and one more read if the
        stream has written since that read."""
        drained, self._drained = self._drained, False
        while True:
            if self._closed:
                raise trio.EndOfChannel
            if self._failure is not None:
                raise TransportError(self._failure)
            if not drained:
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
                        self._drained = len(data) < self._read_chunk
                        self._out_at_read = self._bytes_out
                    else:
                        self._eof = True
                    return
            if drained and self._bytes_out != self._out_at_read:
                # The last read drained the input and this stream has written
                # since (answers to what it read): one pass of the run loop,
                # then one more read before waiting. A peer that answers
                # within that pass (a client sending its next call as soon as
                # it has an answer) is read without this process sleeping in
                # epoll and being woken, which costs more than the pass and
                # the read (one call at a time, about 10 % more calls/s, the
                # same CPU per call). A stream that wrote nothing (a gateway's,
                # which passed what it read on to another process) has
                # nothing to hear back yet: it waits at once.
                drained = False
                await trio.lowlevel.checkpoint()
                continue
            drained = False
            if not self._stoppable_reads:
                # Closing the fd (notify_closing) is what ends this wait
                # (trio's own wait: one coroutine less per wait than _wait_readable).
                try:
                    await _wait_readable(self._rfd)
                except trio.ClosedResourceError:
                    self._closed_under_reader()
                continue
            if self._read_deadline == math.inf:
                # No scope while there is no deadline: notify_closing ends
                # this wait too (see _ProcessStream._interrupt_read).
                self._waiting = True
                try:
                    await self._wait_readable()
                finally:
                    self._waiting = False
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
            await _wait_readable(self._rfd)
        except trio.ClosedResourceError:
            self._closed_under_reader()

    def _closed_under_reader(self) -> NoReturn:
        """The wait for input ended because the fd was closed: say how."""
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
        any of them is raised before anything is written.

        Unlike :meth:`send`, no schedule point of its own when nobody else is
        sending and the whole write goes out at once: its callers (the peer's
        answer writer and handler workers) yield on their own schedule, and a
        yield here would cost a scheduling round per answer. When nobody else
        is sending, not even the lock: the first write is tried at once, and
        the lock is taken only for what that write did not take."""
        await trio.lowlevel.checkpoint_if_cancelled()
        await self.send_lines(messages)

    async def send_lines(self, messages: list[Any]) -> None:
        """:meth:`send_batch` without its cancel point when nobody else is
        sending: for a caller that is at a cancel point anyway before its next
        write (the peer's read loop, whose wait for input is one)."""
        lock = self._send_lock
        if lock.locked() or self._closed or self._wfd < 0 or self._write_error is not None:
            await self._send(messages, None, batch=True)  # waits its turn, or says what is wrong
            return
        data = encode_lines(messages)  # an encoding error: raised before anything is written
        n = self._write_some(memoryview(data), 0)
        if n == len(data):
            self._frames_out += len(messages)
            return
        # The pipe is full: the rest as any sender writes (no schedule point
        # since the lock was seen free, so it is still free).
        lock.acquire_nowait()
        try:
            buf = self._wbuf
            buf.clear()
            buf += memoryview(data)[n:]
            await self._write_all(buf, len(messages), begun=n > 0)
        finally:
            lock.release()

    def send_nowait(self, message: Any) -> bool:
        """Write ``message`` now, without a schedule point, when that can be
        done whole: nobody is sending and its line fits in one atomic pipe
        write (``PIPE_BUF``). False, with nothing written, otherwise (then
        :meth:`send` it). An encoding error is raised before anything is written."""
        if self._closed or self._wfd < 0 or not self._atomic or self._send_lock.locked():
            return False
        if self._write_error is not None:
            return False
        buf = self._wbuf
        buf.clear()
        encode_line(message, buf)
        if len(buf) > select.PIPE_BUF:
            return False
        try:
            n = os.write(self._wfd, buf) if self._wsock is None else self._wsock.send(buf, SEND_FLAGS)
        except OSError:
            return False  # full (EAGAIN: nothing written) or broken: send() says which
        self._bytes_out += n
        if n < len(buf):  # not on the streams _atomic admits: said, never silently cut
            self._write_error = f"{self.name}: a write of {len(buf)} bytes that should be whole took {n}"
            log.error("%s", self._write_error)
        self._frames_out += 1
        return True

    async def _send(self, message: Any, raw: bytes | None, *, batch: bool = False) -> None:
        if self._closed:
            raise TransportClosed(f"{self.name}: stream closed")
        lock = self._send_lock
        if batch:
            await trio.lowlevel.checkpoint_if_cancelled()
            try:
                lock.acquire_nowait()
            except trio.WouldBlock:
                await lock.acquire()
        else:
            await lock.acquire()
        try:
            if self._closed or self._wfd < 0:
                raise TransportClosed(self._write_closed_reason())
            if self._write_error is not None:
                raise TransportError(self._write_error)
            buf = self._wbuf
            buf.clear()
            if batch:
                buf += encode_lines(message)
            elif raw is None:
                encode_line(message, buf)
            else:
                buf += raw
            await self._write_all(buf, len(message) if batch else 1)
        finally:
            lock.release()

    async def _write_all(self, buf: bytearray, frames: int = 1, *, begun: bool = False) -> None:
        """Write ``buf`` whole (``begun``: it is the rest of a write cut short)."""
        with memoryview(buf) as view:
            total = len(view)
            pos = self._write_some(view, 0)
            while pos < total:
                try:
                    await self._wait_writable()
                except trio.Cancelled:
                    if pos > 0 or begun:
                        await self._finish_cancelled_write(view, pos)
                    raise
                pos = self._write_some(view, pos)
        self._frames_out += frames

    def _write_some(self, view: memoryview, pos: int) -> int:
        if self._wfd < 0:
            raise TransportClosed(self._write_closed_reason())
        try:
            if self._wsock is not None:
                n = self._wsock.send(view[pos:], SEND_FLAGS)
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
            self._fds.close(fd)

    def _close_write(self) -> None:
        fd, self._wfd = self._wfd, -1
        if fd >= 0 and fd != self._rfd:
            self._fds.close(fd)

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
