"""The client side of stdio (:class:`StdioTransport`): spawn a server
process, serve a stream over its stdin/stdout, stop it. Exported by
:mod:`trio_mcp.transports.stdio`."""

from __future__ import annotations

import logging
import os
import signal
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

import attrs
import trio

from .._util import DEFAULT_WARNING_INTERVAL
from . import _process
from ._base import TransportError
from ._stdio_stream import (
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_WRITE_GRACE,
    MAX_STDERR_LINE,
    MAX_TAIL_LINE,
    StdioStream,
    _positive,
    log,
)

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
        self._interrupted = False

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
        else:
            self._interrupt_read()  # it waits again, in a scope with this deadline

    def _abort(self, reason: str) -> None:
        if self._failure is None:
            self._failure = reason
        self._stop_read()

    def _stop_read(self) -> None:
        """End the wait for input: its scope cancelled, or, waiting outside
        one, interrupted (see :meth:`_interrupt_read`)."""
        if self._read_scope is not None:
            self._read_scope.cancel()
        else:
            self._interrupt_read()

    def _interrupt_read(self) -> None:
        """Wake a wait for input made outside a cancel scope (no scope per
        read while the server runs: see ``StdioStream._fill``); it looks at
        ``_failure`` and ``_read_deadline`` again."""
        if self._waiting and self._rfd >= 0:
            self._interrupted = True
            trio.lowlevel.notify_closing(self._rfd)

    async def _wait_readable(self) -> None:
        try:
            await super()._wait_readable()
        except TransportError:
            if not self._interrupted or self._failure is not None:
                raise
            # Woken for a deadline: _fill reads, then waits again in its scope.
        finally:
            self._interrupted = False

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
            self._stop_read()
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
