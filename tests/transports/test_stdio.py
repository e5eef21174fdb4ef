"""The stdio transport: framing details, the server side, and the client
actor's process management (exit reporting, stderr, shutdown escalation,
process groups, parent death, start failures).

Real processes need real time: graces are kept small through the config and
every wait is bounded. Processes that are not our children (grandchildren,
the owner's child) count as gone when they are zombies: the init of some
containers never reaps orphans.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp.actors import Peer
from trio_mcp.protocol import PARSE_ERROR, ConnectionClosed, InvalidMessage, Notification, Request, Response
from trio_mcp.transports import TransportClosed, TransportError, _process, _stdio_stream
from trio_mcp.transports.stdio import (
    StdioExit,
    StdioServerParameters,
    StdioStartError,
    StdioStream,
    StdioTransport,
    stdio_server_stream,
)

FIXTURES = Path(__file__).parent / "fixtures"
SERVER = str(FIXTURES / "server.py")
TIMEOUT = 10.0


def _params(*args: str, **kw: Any) -> StdioServerParameters:
    kw.setdefault("close_grace", 2.0)
    kw.setdefault("term_grace", 0.5)
    kw.setdefault("kill_timeout", 2.0)
    kw.setdefault("eof_grace", 1.0)
    return StdioServerParameters(command=sys.executable, args=[SERVER, *args], name="fixture", **kw)


def _gone(pid: int) -> bool:
    """Not running: absent, or a zombie nobody reaps (not our child)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return True
    return data[data.rfind(b")") + 2 :].split()[0] in (b"Z", b"X")


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _wait_gone(pid: int, timeout: float = 5.0) -> bool:
    # Observes a process that is not our child: polling is all there is.
    with trio.move_on_after(timeout):
        while not _gone(pid):
            await trio.sleep(0.02)
        return True
    return False


async def _run_peer(peer: Peer, *, task_status: trio.TaskStatus[Peer] = trio.TASK_STATUS_IGNORED) -> None:
    try:
        await peer.run(task_status=task_status)
    except TransportError:
        pass


class Session:
    def __init__(self, transport: StdioTransport, stream: StdioStream, peer: Peer) -> None:
        self.transport = transport
        self.stream = stream
        self.peer = peer
        self.exit: StdioExit | None = None

    async def call(self, method: str, params: Any = None) -> Any:
        with trio.fail_after(TIMEOUT):
            result = await self.peer.request(method, params if params is not None else {})
        from trio_mcp.protocol import raw_or_none

        return raw_or_none(result)


@asynccontextmanager
async def session(params: StdioServerParameters) -> AsyncIterator[Session]:
    transport = StdioTransport(params)
    holder: list[Session] = []

    async def run_transport(*, task_status: trio.TaskStatus[StdioStream]) -> None:
        result = await transport.run(task_status=task_status)
        if holder:
            holder[0].exit = result

    async with trio.open_nursery() as nursery:
        stream = await nursery.start(run_transport)
        peer = Peer(stream, name="client")
        await nursery.start(_run_peer, peer)
        s = Session(transport, stream, peer)
        holder.append(s)
        try:
            yield s
        finally:
            with trio.CancelScope(shield=True), trio.fail_after(TIMEOUT):
                await peer.aclose()
                await stream.aclose()
    assert transport.returncode is not None  # reaped: no zombie


# ------------------------------------------------------- framing (in process)


def _stream_pair(**kw: Any) -> tuple[StdioStream, int, int]:
    """A stream reading from a pipe we write raw bytes into, writing to a
    pipe we read; returns (stream, raw_write_fd, raw_read_fd)."""
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    return StdioStream(r_in, w_out, **kw), w_in, r_out


async def test_overlong_line_is_skipped_and_stream_survives() -> None:
    stream, w, r = _stream_pair(max_line_bytes=1000, read_chunk=256)
    try:
        os.write(w, b'{"jsonrpc":"2.0","method":"a"}\n' + b"x" * 5000 + b'\n{"jsonrpc":"2.0","method":"b"}\n')
        with trio.fail_after(TIMEOUT):
            first = await stream.receive()
            bad = await stream.receive()
            assert stream.statistics()["buffered"] <= 1000 + 256
            last = await stream.receive()
        assert type(first) is Notification and first.method == "a"
        assert type(bad) is InvalidMessage and bad.error.code == PARSE_ERROR and bad.id is None
        assert "longer than 1000 bytes" in bad.error.message
        assert type(last) is Notification and last.method == "b"
        assert stream.statistics()["overlong_lines"] == 1
    finally:
        await stream.aclose()
        os.close(w)
        os.close(r)


async def test_blank_lines_crlf_and_unterminated_tail() -> None:
    stream, w, r = _stream_pair()
    try:
        os.write(w, b'\n\r\n  \n{"jsonrpc":"2.0","id":1,"result":{}}\r\nnot json\n{"jsonrpc":"2.0","met')
        os.close(w)
        with trio.fail_after(TIMEOUT):
            response = await stream.receive()
            garbage = await stream.receive()
            with pytest.raises(trio.EndOfChannel):  # the half line is dropped
                await stream.receive()
            with pytest.raises(trio.EndOfChannel):
                await stream.receive()
        assert type(response) is Response and response.id == 1
        assert type(garbage) is InvalidMessage and garbage.error.code == PARSE_ERROR
        assert garbage.answer  # the server side answers parse errors
        assert stream.statistics()["dropped_fragments"] == 1
    finally:
        await stream.aclose()
        os.close(r)


async def test_send_writes_one_compact_line() -> None:
    stream, w, r = _stream_pair()
    try:
        await stream.send(Request(id=1, method="m", params={"text": "a\nb"}))
        assert os.read(r, 1000) == b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"text":"a\\nb"}}\n'
        await stream.aclose()
        with pytest.raises(TransportClosed):
            await stream.send(Notification(method="late"))
    finally:
        await stream.aclose()
        os.close(w)
        os.close(r)


async def test_take_nowait_hands_over_the_rest_of_a_read_then_none() -> None:
    stream, w, r = _stream_pair()
    try:
        assert stream.take_nowait() is None  # nothing read yet: no frame, no read, no wait
        os.write(
            w, b'{"jsonrpc":"2.0","id":1,"method":"a"}\n{"jsonrpc":"2.0","id":2,"method":"b"}\n{"jsonrpc"'
        )
        with trio.fail_after(TIMEOUT):
            first = await stream.receive()
        second = stream.take_nowait()
        assert type(first) is Request and first.id == 1
        assert type(second) is Request and second.id == 2
        assert stream.take_nowait() is None  # a partial line is no frame
        os.write(w, b':"2.0","id":3,"method":"c"}\n')
        with trio.fail_after(TIMEOUT):
            third = await stream.receive()
        assert type(third) is Request and third.id == 3
        await stream.aclose()
        assert stream.take_nowait() is None  # closed: receive says so
        with pytest.raises(trio.EndOfChannel):
            await stream.receive()
    finally:
        await stream.aclose()
        os.close(w)
        os.close(r)


async def test_receive_is_a_cancel_point_with_or_without_input_and_loses_no_frame() -> None:
    stream, w, r = _stream_pair()
    try:
        with trio.CancelScope() as scope:
            scope.cancel()
            await stream.receive()  # nothing buffered: its wait for input is the cancel point
        assert scope.cancelled_caught
        os.write(w, b'{"jsonrpc":"2.0","id":1,"method":"a"}\n{"jsonrpc":"2.0","id":2,"method":"b"}\n')
        with trio.fail_after(TIMEOUT):
            first = await stream.receive()
        with trio.CancelScope() as scope:
            scope.cancel()
            await stream.receive()  # a frame buffered: cancelled before it is taken
        assert scope.cancelled_caught
        with trio.fail_after(TIMEOUT):
            second = await stream.receive()
        assert (first.id, second.id) == (1, 2)  # type: ignore[union-attr]
    finally:
        await stream.aclose()
        os.close(w)
        os.close(r)


async def test_a_drained_read_answered_reads_again_after_one_pass_before_it_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a read that drained the input and answers written since, ``receive``
    lets the run loop pass once and reads again before it waits for input: a
    line written within that pass (a peer sending its next call as soon as it
    has an answer) is read without a wait; one written later is waited for,
    and so is any line after a read that was not answered (a gateway's stream
    passes what it reads to another process: nothing comes back at once).
    (Whether the writer runs before or after the reader within the pass is
    trio's choice, made at random: over 20 tries, some lines must be read
    without a wait; before this change every one of them was waited for.)"""
    waits = 0
    wait_readable = _stdio_stream._wait_readable

    async def counted(fd: int) -> None:
        nonlocal waits
        waits += 1
        await wait_readable(fd)

    monkeypatch.setattr(_stdio_stream, "_wait_readable", counted)
    stream, w, r = _stream_pair()

    async def write(ident: int, delay: float = 0.0) -> None:
        if delay:
            await trio.sleep(delay)
        os.write(w, b'{"jsonrpc":"2.0","id":%d,"method":"a"}\n' % ident)

    async def receive_after(ident: int, answer: bool, delay: float = 0.0) -> Any:
        if answer:
            await stream.send_lines([Response(id=ident - 1, result={})])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write, ident, delay)  # at once: runs in the reader's pass
            return await stream.receive()

    try:
        with trio.fail_after(TIMEOUT):
            await write(0)
            received = [await stream.receive()]  # this read drains the input
            assert stream.take_nowait() is None and waits == 0
            for ident in range(1, 21):
                received.append(await receive_after(ident, answer=True))
            assert waits < 20
            before = waits
            received.append(await receive_after(21, answer=True, delay=0.05))
            assert waits == before + 1
            for ident in range(22, 27):  # not answered: straight to the wait
                received.append(await receive_after(ident, answer=False))
            assert waits == before + 6
        assert [m.id for m in received] == list(range(27))  # type: ignore[union-attr]
    finally:
        await stream.aclose()
        os.close(w)
        os.close(r)


async def test_send_lines_writes_a_batch_in_one_write_and_send_batch_is_a_cancel_point() -> None:
    stream, w, r = _stream_pair()
    try:
        await stream.send_lines([Response(id=1, result={}), Response(id=2, result={"a": 1})])
        assert os.read(r, 1000) == (
            b'{"jsonrpc":"2.0","id":1,"result":{}}\n{"jsonrpc":"2.0","id":2,"result":{"a":1}}\n'
        )
        assert stream.statistics()["frames_out"] == 2
        with trio.CancelScope() as scope:
            scope.cancel()
            await stream.send_batch([Response(id=3, result={})])
        assert scope.cancelled_caught
        await stream.send_lines([Response(id=4, result={})])
        assert os.read(r, 1000) == b'{"jsonrpc":"2.0","id":4,"result":{}}\n'  # nothing of id 3
    finally:
        await stream.aclose()
        os.close(w)
        os.close(r)


class _Tap:
    """Takes the lines that mention ``"take"``, wherever they are in a read
    (``in_order``: only up to the first other line); records what it saw."""

    def __init__(self, *, in_order: bool) -> None:
        self.in_order = in_order
        self.taken: list[bytes] = []
        self.reads: list[tuple[int, bool]] = []  # per read: lines offered, all ASCII

    def take(self, chunk: bytes, ascii: bool) -> tuple[int, list[bytes]]:
        lines = chunk.split(b"\n")
        self.reads.append((len(lines), ascii))
        left = []
        for n, line in enumerate(lines):
            if b'"take"' in line:
                self.taken.append(line)
            elif self.in_order:
                return n, lines[n:]
            else:
                left.append(line)
        return len(lines) - len(left), left


@pytest.mark.parametrize("in_order", [True, False])
async def test_a_tap_takes_lines_of_a_read_and_the_stream_decodes_the_rest_in_order(in_order: bool) -> None:
    stream, w, r = _stream_pair()
    tap = _Tap(in_order=in_order)
    stream.set_tap(tap)
    try:
        take = b'{"jsonrpc":"2.0","method":"take","params":{"n":%d}}\n'
        other = b'{"jsonrpc":"2.0","method":"other","params":{"n":%d}}\n'
        # One read: taken, taken, left, then a line the in-order tap leaves too; a blank line.
        os.write(w, take % 1 + take % 2 + other % 3 + b"\n" + take % 4)
        with trio.fail_after(TIMEOUT):
            frames = [await stream.receive()]
            if in_order:
                frames.append(await stream.receive())
            assert tap.reads == [(5, True)]  # once for the read, every line of it
            os.write(w, take % 5 + '{"jsonrpc":"2.0","method":"other","params":{"n":"é"}}\n'.encode())
            frames.append(await stream.receive())  # the next read: the tap again
        assert tap.reads == [(5, True), (2, False)]
        assert [type(f) for f in frames] == [Notification] * len(frames)
        decoded = [(f.method, bytes(f.params)) for f in frames]
        assert decoded == [("other", b'{"n":3}')] + ([("take", b'{"n":4}')] if in_order else []) + [
            ("other", '{"n":"é"}'.encode())
        ]
        kept = (1, 2, 5) if in_order else (1, 2, 4, 5)
        assert tap.taken == [(take % n).rstrip(b"\n") for n in kept]
        assert stream.statistics()["frames_in"] == 6  # the blank line is no frame
        stream.set_tap(None)
        os.write(w, take % 7)
        with trio.fail_after(TIMEOUT):
            assert (await stream.receive()).method == "take"  # no tap: decoded
        assert len(tap.reads) == 2
    finally:
        await stream.aclose()
        os.close(w)
        os.close(r)


@pytest.mark.parametrize("kind", ["pipes", "socketpair"])
async def test_server_stream_leaves_the_original_fds_alone(kind: str) -> None:
    if kind == "pipes":
        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()
        fds = (r_in, w_in, r_out, w_out)
    else:  # what libuv-based clients (Node) give their servers
        ours, theirs = socket.socketpair()
        theirs.setblocking(True)
        r_in = w_out = theirs.fileno()
        w_in = r_out = ours.fileno()
        fds = ()
    try:
        async with stdio_server_stream(stdin=r_in, stdout=w_out, protect_stdout=False) as stream:
            # Private fds: the originals stay blocking, for us and our children.
            assert os.get_blocking(r_in) and os.get_blocking(w_out)
            os.write(w_in, b'{"jsonrpc":"2.0","id":3,"method":"ping"}\n')
            with trio.fail_after(TIMEOUT):
                request = await stream.receive()
            assert type(request) is Request and request.id == 3
            await stream.send(Response(id=3, result={}))
            assert os.get_blocking(r_in) and os.get_blocking(w_out)
        assert os.read(r_out, 100) == b'{"jsonrpc":"2.0","id":3,"result":{}}\n'
        os.fstat(r_in), os.fstat(w_out)  # still open
        assert os.get_blocking(r_in) and os.get_blocking(w_out)
    finally:
        for fd in fds:
            os.close(fd)
        if kind == "socketpair":
            ours.close()
            theirs.close()


def test_environment_defaults_to_a_safe_subset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIO_MCP_TEST_SECRET", "s3cret")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    env = _process.build_env({"EXTRA": "1", "PATH": "/opt/bin"}, inherit=False)
    assert "TRIO_MCP_TEST_SECRET" not in env and env["EXTRA"] == "1" and env["PATH"] == "/opt/bin"
    env = _process.build_env({"EXTRA": "1"}, inherit=True)
    assert env["TRIO_MCP_TEST_SECRET"] == "s3cret" and env["PATH"] == "/usr/bin:/bin"


# ------------------------------------------------------------ client actor


async def test_echo_session_env_and_clean_shutdown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIO_MCP_TEST_SECRET", "s3cret")
    async with session(_params(env={"FIXTURE_FLAG": "on"})) as s:
        assert await s.call("echo", {"x": [1, "two"]}) == {"x": [1, "two"]}
        env = await s.call("env", {"names": ["TRIO_MCP_TEST_SECRET", "FIXTURE_FLAG", "PATH"]})
        assert env["TRIO_MCP_TEST_SECRET"] is None and env["FIXTURE_FLAG"] == "on" and env["PATH"]
        pid = s.transport.pid
        assert pid is not None
    # closing stdin was enough: a clean exit, no escalation
    assert s.exit == StdioExit("closed", 0, s.exit.detail if s.exit else "")
    assert s.transport.returncode == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_server_exit_fails_pending_calls_with_status_and_stderr() -> None:
    async with session(_params()) as s:
        errors: list[ConnectionClosed] = []

        async def call(method: str, params: Any) -> None:
            with pytest.raises(ConnectionClosed) as info:
                await s.call(method, params)
            errors.append(info.value)

        with trio.fail_after(3.0):  # at once: well within one eof_grace after the exit
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, "sleep", {"seconds": 60})
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(call, "exit", {"code": 3, "lines": ["something broke", "last words"]})
        assert len(errors) == 2
        for err in errors:
            assert "exited with status 3" in err.message
            assert "stderr tail" in err.message and "last words" in err.message
        with pytest.raises(ConnectionClosed):
            await s.call("echo")
        with pytest.raises(TransportError, match="status 3"):
            await s.stream.send(Notification(method="late"))
    assert s.exit is not None and s.exit.kind == "exited" and s.exit.returncode == 3


async def test_server_exiting_at_start() -> None:
    async with session(_params("--exit-at-start", "5")) as s:
        with pytest.raises(ConnectionClosed, match="exited with status 5") as info:
            await s.call("echo")
        assert "fatal: cannot start (fixture)" in info.value.message
    assert s.transport.returncode == 5


async def test_garbage_on_stdout_yields_invalid_frames_and_session_survives() -> None:
    async with session(_params("--garbage-first")) as s:
        assert await s.call("echo", {"n": 1}) == {"n": 1}
        assert await s.call("garbage", {"text": "<<not json>>"}) == {}
        assert await s.call("echo", {"n": 2}) == {"n": 2}
        assert s.peer.statistics().invalid_frames == 2
        # the client did not answer the garbage with id-null errors
        assert await s.call("stats") == {"invalid_frames": 0, "unmatched_responses": 0}


async def test_client_stream_marks_parse_errors_unanswered() -> None:
    transport = StdioTransport(_params("--garbage-first"))
    async with trio.open_nursery() as nursery:
        stream = await nursery.start(transport.run)
        with trio.fail_after(TIMEOUT):
            frame = await stream.receive()
        assert type(frame) is InvalidMessage and frame.error.code == PARSE_ERROR and not frame.answer
        await stream.aclose()


async def test_stray_print_and_stderr_are_relayed_to_logging(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="trio_mcp.stdio")
    async with session(_params()) as s:
        assert await s.call("print", {"text": "a stray print"}) == {}
        assert await s.call("stderr", {"lines": ["log line one", "log line two"]}) == {}
        assert await s.call("echo", {"still": "fine"}) == {"still": "fine"}
        assert s.peer.statistics().invalid_frames == 0  # protect_stdout kept stdout clean
    # shutdown waits (bounded) for the end of stderr: every line is relayed
    messages = [r.getMessage() for r in caplog.records if r.name == "trio_mcp.stdio"]
    for text in ("fixture server ready", "a stray print", "log line one", "log line two"):
        assert f"fixture: {text}" in messages
    assert s.transport.stderr_tail[-2:] == ("log line one", "log line two")
    record = next(r for r in caplog.records if r.getMessage() == "fixture: log line one")
    assert record.levelno == logging.INFO and record.pid == s.transport.pid  # type: ignore[attr-defined]


async def test_shutdown_escalates_to_sigkill(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="trio_mcp.stdio")
    params = _params("--ignore-sigterm", close_grace=0.2, term_grace=0.2)
    async with session(params) as s:
        assert await s.call("echo", {}) == {}
        pid = s.transport.pid
        assert pid is not None
        start = trio.current_time()
    elapsed = trio.current_time() - start
    assert elapsed < 0.2 + 0.2 + 1.5  # close_grace + term_grace + a little
    assert s.transport.returncode == -signal.SIGKILL  # reaped: no zombie
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    text = caplog.text
    assert "SIGTERM" in text and "SIGKILL" in text


async def test_cancelling_run_stops_the_server() -> None:
    transport = StdioTransport(_params("--ignore-sigterm", close_grace=0.2, term_grace=0.2))
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(transport.run)
            await stream.send(Request(id=1, method="echo", params={}))
            assert type(await stream.receive()) is Response
            nursery.cancel_scope.cancel()
    assert transport.returncode == -signal.SIGKILL
    with pytest.raises(TransportError, match="stopped"):
        await stream.receive()


async def test_grandchild_dies_with_the_group() -> None:
    async with session(_params(close_grace=2.0, term_grace=1.0)) as s:
        grandchild = (await s.call("grandchild", {}))["pid"]
    try:
        assert s.transport.returncode == 0  # the server itself left on stdin EOF
        assert _gone(grandchild)  # ...and its child got SIGTERM with the group
    finally:
        _kill_quietly(grandchild)


async def test_exit_is_reported_even_if_stdout_is_held_open() -> None:
    # A grandchild in its own session escapes the group and holds stdout:
    # the reader must still fail, one eof_grace after the exit.
    async with session(_params(eof_grace=0.3)) as s:
        grandchild = (await s.call("grandchild", {"hold_stdout": True, "new_session": True}))["pid"]
        try:
            with trio.fail_after(3.0):
                with pytest.raises(ConnectionClosed) as info:
                    await s.call("exit", {"code": 4, "lines": ["bye"]})
            assert "exited with status 4" in info.value.message
            assert "still held open" in info.value.message and "bye" in info.value.message
        finally:
            _kill_quietly(grandchild)


@pytest.mark.parametrize(
    ("command", "cwd", "expected"),
    [
        ("trio-mcp-no-such-server", None, "command not found: 'trio-mcp-no-such-server' (searched PATH="),
        ("/nonexistent/bin/server", None, "command not found: '/nonexistent/bin/server'"),
        (sys.executable, "/nonexistent/dir", "working directory not found: '/nonexistent/dir'"),
    ],
)
async def test_start_failure_is_typed_and_raised_before_started(
    command: str, cwd: str | None, expected: str
) -> None:
    transport = StdioTransport(StdioServerParameters(command=command, cwd=cwd))
    async with trio.open_nursery() as nursery:
        with pytest.raises(StdioStartError) as info:
            await nursery.start(transport.run)
    assert expected in info.value.reason
    assert info.value.command == command
    assert transport.pid is None


async def test_server_dies_with_its_owner() -> None:
    owner = await trio.lowlevel.open_process(
        # --ignore-sigterm: the server also outlives the end of its stdin
        [sys.executable, str(FIXTURES / "owner.py"), SERVER, "--ignore-sigterm"],
        stdout=subprocess.PIPE,
    )
    child = None
    try:
        assert owner.stdout is not None
        line = b""
        with trio.fail_after(TIMEOUT):
            while not line.endswith(b"\n"):
                chunk = await owner.stdout.receive_some(100)
                assert chunk, "owner exited early"
                line += chunk
        child = int(line)
        assert not _gone(child)
        owner.send_signal(signal.SIGKILL)
        with trio.fail_after(TIMEOUT):
            await owner.wait()
        assert await _wait_gone(child), "the server outlived its SIGKILLed owner"
    finally:
        if owner.returncode is None:
            owner.kill()
            with trio.move_on_after(TIMEOUT, shield=True):
                await owner.wait()
        if child is not None:
            _kill_quietly(child)
        if owner.stdout is not None:
            await owner.stdout.aclose()
