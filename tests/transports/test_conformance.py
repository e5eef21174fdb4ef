"""The transport conformance test: every transport passes the same checks.

Checks (each runs over every pair of :data:`PAIRS`): framing and ordering,
large messages, concurrent senders, cancelled sends are atomic, close
semantics, a pending ``receive`` woken by ``aclose``, end of stream fails a
Peer's pending calls with ``ConnectionClosed``, and backpressure with bounded
buffering.

A *pair* is two connected :class:`~trio_mcp.transports.MessageStream`\\ s,
``(a, b)``: what ``a`` sends ``b`` receives and the other way round. ``a``
plays the client, ``b`` the server where the transport is asymmetric.

Adding a transport (HTTP, WebSocket, ...)
-----------------------------------------

1. Write an async context manager factory yielding ``(a, b)`` and closing
   both (and stopping whatever it started: servers, processes) on exit::

       @asynccontextmanager
       async def _websocket_pair() -> AsyncIterator[tuple[MessageStream, MessageStream]]:
           async with trio.open_nursery() as nursery:
               server_side = ...  # e.g. accept one connection into a stream
               client_side = await nursery.start(WebSocketTransport(url).run)
               try:
                   yield client_side, server_side
               finally:
                   await client_side.aclose()
                   await server_side.aclose()

2. Append a :class:`TransportPair` to :data:`PAIRS` with the most bytes /
   messages the transport may buffer between a writer and a reader that
   stopped reading (the backpressure check asserts the writer blocks within
   that bound) and ``settle`` seconds when progress happens outside this
   process (sockets, subprocesses; ``wait_all_tasks_blocked`` cushion).

The checks use real time (some pairs talk to other processes), and every
wait is bounded with ``fail_after``.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import msgspec
import pytest
import trio
import trio.testing

from trio_mcp.actors import Peer
from trio_mcp.protocol import (
    ConnectionClosed,
    ErrorObject,
    ErrorResponse,
    InvalidMessage,
    Notification,
    Request,
    Response,
    encode,
    raw_or_none,
)
from trio_mcp.transports import MessageStream, TransportError, memory_pair
from trio_mcp.transports.memory import DEFAULT_MEMORY_BUFFER
from trio_mcp.transports.stdio import StdioServerParameters, StdioStream, StdioTransport

FIXTURES = Path(__file__).parent / "fixtures"
#: Bound for every wait of a check.
TIMEOUT = 15.0

Pair = tuple[MessageStream, MessageStream]


@attrs.frozen
class TransportPair:
    """One entry of the parametrization: how to open a pair, and its bounds."""

    id: str
    open: Callable[[], AbstractAsyncContextManager[Pair]]
    #: Most bytes buffered between a writer and a reader that stopped reading.
    buffered_bytes: int = 0
    #: Most messages buffered that way (for message-counted buffers).
    buffered_messages: int = 0
    #: ``wait_all_tasks_blocked`` cushion, for progress made elsewhere.
    settle: float = 0.0
    #: Directions the backpressure check runs in: "a->b" (the first stream
    #: writes, the second stops reading) and/or "b->a".
    backpressure: tuple[str, ...] = ("a->b",)

    def in_flight_bound(self, message_bytes: int) -> int:
        """Most sends that may complete while nobody reads."""
        return self.buffered_messages + self.buffered_bytes // message_bytes + 2


# ------------------------------------------------------------------ pairs


@asynccontextmanager
async def _memory_pair(mode: str) -> AsyncIterator[Pair]:
    a, b = memory_pair(mode=mode)  # type: ignore[arg-type]
    try:
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()


@asynccontextmanager
async def _stdio_pipe_pair() -> AsyncIterator[Pair]:
    """Two stdio streams over two pipes, in this process."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    a = StdioStream(r2, w1, name="pipe-a")
    b = StdioStream(r1, w2, name="pipe-b")
    try:
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()


@asynccontextmanager
async def _stdio_subprocess_pair() -> AsyncIterator[Pair]:
    """``a``: a StdioTransport client to ``fixtures/relay.py``, a real
    subprocess serving ``stdio_server_stream``; ``b``: a stdio stream over a
    unix socket to which the relay forwards every frame, both ways."""
    tmp = tempfile.mkdtemp(prefix="tmcp-")  # short: unix socket paths are limited
    path = os.path.join(tmp, "relay.sock")
    listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        await listener.bind(path)
        listener.listen(1)
        params = StdioServerParameters(
            command=sys.executable,
            args=[str(FIXTURES / "relay.py"), path],
            name="relay",
            close_grace=5.0,
            term_grace=1.0,
            kill_timeout=1.0,
        )
        transport = StdioTransport(params)
        async with trio.open_nursery() as nursery:
            a = await nursery.start(transport.run)
            try:
                with trio.fail_after(TIMEOUT):
                    conn, _ = await listener.accept()
                b = _socket_stream(conn)
                try:
                    yield a, b
                finally:
                    with trio.CancelScope(shield=True):
                        await b.aclose()
            finally:
                with trio.fail_after(TIMEOUT), trio.CancelScope(shield=True):
                    await a.aclose()
        assert transport.returncode is not None  # reaped
    finally:
        listener.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _socket_stream(conn: trio.socket.SocketType) -> StdioStream:
    fd = conn.detach()
    return StdioStream(fd, fd, name="relay-peer")


def _websocket_pair() -> AbstractAsyncContextManager[Pair]:
    from .test_websocket import capture_pair

    return capture_pair(max_message_size=8 << 20)  # type: ignore[return-value]


def _sse_pair() -> AbstractAsyncContextManager[Pair]:
    from .test_sse import capture_pair

    return capture_pair(  # type: ignore[return-value]
        max_body_size=8 << 20, inbound_queue=16, outbound_buffer=16, receive_buffer=16
    )


PAIRS = [
    TransportPair(
        "memory-zero-copy", lambda: _memory_pair("zero-copy"), buffered_messages=DEFAULT_MEMORY_BUFFER
    ),
    TransportPair("memory-bytes", lambda: _memory_pair("bytes"), buffered_messages=DEFAULT_MEMORY_BUFFER),
    # Linux pipes hold 64 KiB by default, up to /proc/sys/fs/pipe-max-size.
    TransportPair("stdio-pipes", _stdio_pipe_pair, buffered_bytes=1 << 20),
    # stdin pipe + relay buffers (one read chunk, one line) + socket buffers.
    TransportPair("stdio-subprocess", _stdio_subprocess_pair, buffered_bytes=4 << 20, settle=0.25),
    # writer queue + trio-websocket's receive queue + the loopback socket buffers
    TransportPair(
        "websocket",
        _websocket_pair,
        buffered_messages=2 * 8 + 4 + 2,
        buffered_bytes=8 << 20,
        settle=0.2,
        backpressure=("a->b", "b->a"),
    ),
    # one direction: the inbound queue and the POST in flight; the other: the
    # outbound queue, the client's receive queue, one chunk in flight and the
    # loopback socket buffers. The POST direction (one HTTP request per
    # message) has its own, shorter check in test_sse.py.
    TransportPair(
        "sse",
        _sse_pair,
        buffered_messages=16 + 16 + 4,
        buffered_bytes=8 << 20,
        settle=0.2,
        backpressure=("b->a",),
    ),
]
PAIR_BY_ID = {p.id: p for p in PAIRS}
BACKPRESSURE = [(p, direction) for p in PAIRS for direction in p.backpressure]


@pytest.fixture(params=PAIRS, ids=[p.id for p in PAIRS])
def spec(request: pytest.FixtureRequest) -> TransportPair:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
async def pair(spec: TransportPair) -> AsyncIterator[Pair]:
    async with spec.open() as streams:
        yield streams


# ---------------------------------------------------------------- helpers

TEXTS = [
    "plain",
    "line\nbreak",
    "crlf\r\nend",
    "unicode é ✓ 🚀",
    "\u2028\u2029 separators",
    'quote " backslash \\ tab \t',
    "",
    '{"json": "inside a string"}\n',
    "\x00 control \x1f",
]


def _message(i: int) -> Any:
    text = TEXTS[i % len(TEXTS)]
    kind = i % 4
    if kind == 0:
        return Request(
            id=i, method="tools/call", params={"i": i, "text": text, "nested": {"list": [1, 2.5, None]}}
        )
    if kind == 1:
        return Notification(method="notifications/message", params={"i": i, "data": [True, False, text]})
    if kind == 2:
        return Response(id=f"r{i}", result={"i": i, "content": [{"type": "text", "text": text}]})
    return ErrorResponse(id=i, error=ErrorObject(code=-32602, message=f"bad {text}", data={"i": i}))


def _plain(message: Any) -> Any:
    """A message as builtins, whatever the transport handed over."""
    return msgspec.json.decode(encode(message))


async def _run_peer(peer: Peer, *, task_status: trio.TaskStatus[Peer] = trio.TASK_STATUS_IGNORED) -> None:
    try:
        await peer.run(task_status=task_status)
    except TransportError:
        pass  # a broken transport is what some checks cause


async def _receive_n(stream: MessageStream, n: int) -> list[Any]:
    """``n`` frames, each within ``TIMEOUT`` of the one before: a transport
    that stalls fails, a busy machine does not (a thousand messages over SSE
    are a thousand HTTP requests, more than ``TIMEOUT`` of work in all when
    the process gets a small share of a CPU)."""
    out = []
    for _ in range(n):
        with trio.fail_after(TIMEOUT):
            out.append(await stream.receive())
    return out


# ----------------------------------------------------------------- checks


async def test_framing_and_order(pair: Pair) -> None:
    a, b = pair
    n = 1000
    sent = [_message(i) for i in range(n)]
    got: dict[str, list[Any]] = {}

    async def send_all(stream: MessageStream) -> None:
        for msg in sent:
            await stream.send(msg)

    async def collect(key: str, stream: MessageStream) -> None:
        got[key] = await _receive_n(stream, n)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_all, a)
        nursery.start_soon(send_all, b)
        nursery.start_soon(collect, "a->b", b)
        nursery.start_soon(collect, "b->a", a)
    expected = [_plain(m) for m in sent]
    for key in ("a->b", "b->a"):
        assert not [f for f in got[key] if isinstance(f, InvalidMessage)]
        assert [_plain(f) for f in got[key]] == expected, key


async def test_large_message(pair: Pair) -> None:
    a, b = pair
    size = 5 * 1024 * 1024
    block = "".join(TEXTS) * 64
    data = (block * (size // len(block) + 1))[:size]
    message = Request(id=7, method="big", params={"data": data})
    got: dict[str, Any] = {}

    async def one_way(key: str, src: MessageStream, dst: MessageStream) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(src.send, message)
            with trio.fail_after(TIMEOUT):
                got[key] = await dst.receive()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one_way, "a->b", a, b)
        nursery.start_soon(one_way, "b->a", b, a)
    for frame in got.values():
        assert type(frame) is Request and frame.method == "big"
        assert raw_or_none(frame.params)["data"] == data


async def test_concurrent_senders_never_interleave(pair: Pair) -> None:
    a, b = pair
    senders, per_sender = 8, 16
    sizes = [10, 1_000, 70_000, 200_000]  # some beyond a pipe's buffer

    async def sender(s: int) -> None:
        for k in range(per_sender):
            pad = "x" * sizes[(s + k) % len(sizes)]
            await a.send(Notification(method="c", params={"s": s, "k": k, "pad": pad}))

    frames: list[Any] = []

    async def receiver() -> None:
        frames.extend(await _receive_n(b, senders * per_sender))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        for s in range(senders):
            nursery.start_soon(sender, s)
    last = dict.fromkeys(range(senders), -1)
    for frame in frames:
        assert type(frame) is Notification and frame.method == "c", frame
        params = raw_or_none(frame.params)
        s, k = params["s"], params["k"]
        assert k == last[s] + 1  # each sender's messages in order
        assert len(params["pad"]) == sizes[(s + k) % len(sizes)]
        last[s] = k
    assert all(k == per_sender - 1 for k in last.values())


async def test_cancelled_sends_are_atomic(spec: TransportPair, pair: Pair) -> None:
    a, b = pair
    big = 300_000
    completed: set[int] = set()
    scope = trio.CancelScope()

    async def send_big(s: int) -> None:
        await a.send(Notification(method="big", params={"s": s, "pad": "y" * big}))
        completed.add(s)

    async def senders() -> None:
        with scope:
            async with trio.open_nursery() as nursery:
                for s in range(6):
                    nursery.start_soon(send_big, s)
        await a.send(Notification(method="end"))

    frames: list[Any] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(senders)
        with trio.fail_after(TIMEOUT):
            await trio.testing.wait_all_tasks_blocked(spec.settle)
        scope.cancel()  # mid-write for transports whose buffer is smaller than one message
        with trio.fail_after(TIMEOUT):
            while True:
                frame = await b.receive()
                if type(frame) is Notification and frame.method == "end":
                    break
                frames.append(frame)
    seen = set()
    for frame in frames:
        assert type(frame) is Notification and frame.method == "big", frame  # never a torn line
        params = raw_or_none(frame.params)
        assert len(params["pad"]) == big
        assert params["s"] not in seen
        seen.add(params["s"])
    assert completed <= seen  # a send that returned was delivered
    # and the stream is still usable
    await a.send(Notification(method="after"))
    with trio.fail_after(TIMEOUT):
        frame = await b.receive()
    assert type(frame) is Notification and frame.method == "after"


@pytest.mark.parametrize("closer", ["a", "b"])
async def test_close_semantics(pair: Pair, closer: str) -> None:
    x, y = pair if closer == "a" else pair[::-1]
    await x.aclose()
    await x.aclose()  # idempotent
    with pytest.raises(TransportError):
        await x.send(Notification(method="too/late"))
    with trio.fail_after(TIMEOUT):
        with pytest.raises((trio.EndOfChannel, TransportError)):
            await y.receive()


async def test_aclose_wakes_pending_receive(spec: TransportPair, pair: Pair) -> None:
    a, _ = pair
    woken = trio.Event()

    async def reader() -> None:
        with pytest.raises((trio.EndOfChannel, TransportError)):
            await a.receive()
        woken.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        with trio.fail_after(TIMEOUT):
            await trio.testing.wait_all_tasks_blocked(spec.settle)
            await a.aclose()
            await woken.wait()


async def test_end_of_stream_fails_pending_peer_calls(pair: Pair) -> None:
    a, b = pair
    peer = Peer(a, name="conformance")
    failed = trio.Event()

    async def call() -> None:
        with pytest.raises(ConnectionClosed):
            await peer.request("tools/call", {"name": "x"})
        failed.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(_run_peer, peer)
        nursery.start_soon(call)
        with trio.fail_after(TIMEOUT):
            request = await b.receive()
        assert type(request) is Request and request.method == "tools/call"
        await b.aclose()
        with trio.fail_after(TIMEOUT):
            await failed.wait()
        assert peer.closed
        await peer.aclose()


@pytest.mark.parametrize(
    ("spec", "direction"), BACKPRESSURE, indirect=["spec"], ids=[f"{p.id}-{d}" for p, d in BACKPRESSURE]
)
async def test_backpressure(spec: TransportPair, pair: Pair, direction: str) -> None:
    a, b = pair if direction == "a->b" else (pair[1], pair[0])
    pad = 4096
    n = 4000  # 16 MiB: far more than any transport may buffer
    sent = 0

    async def sender() -> None:
        nonlocal sent
        for i in range(n):
            await a.send(Notification(method="bp", params={"i": i, "pad": "z" * pad}))
            sent += 1

    bound = spec.in_flight_bound(pad)
    assert bound < n
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        with trio.fail_after(TIMEOUT):
            await trio.testing.wait_all_tasks_blocked(spec.settle)
            first = sent
            await trio.testing.wait_all_tasks_blocked(spec.settle)
        assert 0 < first <= sent <= bound  # the writer blocked, within the bound
        frames = await _receive_n(b, n)  # reading again releases it
    assert sent == n
    assert [raw_or_none(f.params)["i"] for f in frames] == list(range(n))
