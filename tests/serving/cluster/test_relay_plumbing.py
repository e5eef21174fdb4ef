"""The forwarding path's own plumbing, without processes: the silence timer
that wakes a relay whose owner said nothing for ``renew_interval`` (one timer
per node instead of a deadline per wait), and a link's frames over a real
socket pair, read and written on the descriptor itself."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from trio_mcp.serving.cluster._link import Link, _frame
from trio_mcp.serving.cluster._tunnel import Reply, Silence


@asynccontextmanager
async def timer(interval: float) -> AsyncIterator[tuple[dict[bytes, Reply], Silence]]:
    """A node's table of replies and its silence timer, running until the block ends."""
    replies: dict[bytes, Reply] = {}
    silence = Silence(interval, replies)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(silence.run)
        yield replies, silence
        nursery.cancel_scope.cancel()


async def test_a_silent_wait_ends_with_none_exactly_after_the_interval(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with timer(1.0) as (replies, silence):
        reply = replies[b"r"] = Reply(8, b"r")
        began = trio.current_time()
        assert await reply.get(silence) is None
        assert trio.current_time() - began == pytest.approx(1.0)


async def test_a_wait_answered_in_time_is_not_cut_short_by_its_old_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with timer(1.0) as (replies, silence), trio.open_nursery() as nursery:
        reply = replies[b"r"] = Reply(8, b"r")

        async def answer(after: float) -> None:
            await trio.sleep(after)
            reply.put({b"k": b"body", b"more": b"1"})

        nursery.start_soon(answer, 0.9)
        assert await reply.get(silence) == {b"k": b"body", b"more": b"1"}
        # The first wait's deadline (1.0) passes during this wait, which began
        # at 0.9: only its own deadline (1.9) ends it.
        began = trio.current_time()
        assert await reply.get(silence) is None
        assert trio.current_time() - began == pytest.approx(1.0)
        nursery.cancel_scope.cancel()


async def test_many_waits_each_woken_at_its_own_deadline_and_the_timer_parks_when_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    woken: list[tuple[int, float]] = []

    async def wait(i: int) -> None:
        await trio.sleep(i * 0.25)
        reply = replies[b"%d" % i] = Reply(8, b"%d" % i)
        began = trio.current_time()
        assert await reply.get(silence) is None
        woken.append((i, trio.current_time() - began))

    async with timer(2.0) as (replies, silence):
        async with trio.open_nursery() as waits:
            for i in range(6):
                waits.start_soon(wait, i)
        assert [i for i, _ in sorted(woken)] == list(range(6))
        assert [took for _, took in sorted(woken)] == pytest.approx([2.0] * 6)
        assert silence.queued() == 0
        # Idle now: a later wait still ends on time (the parked timer is woken).
        await trio.sleep(10)
        began = trio.current_time()
        replies[b"late"] = Reply(8, b"late")
        assert await replies[b"late"].get(silence) is None
        assert trio.current_time() - began == pytest.approx(2.0)


async def test_a_closed_reply_ends_its_reader_and_takes_no_more() -> None:
    async with timer(60.0) as (replies, silence), trio.open_nursery() as nursery:
        reply = replies[b"r"] = Reply(2, b"r")
        reply.put({b"n": b"1"})
        assert await reply.get(silence) == {b"n": b"1"}
        nursery.start_soon(_close_soon, reply)
        with pytest.raises(trio.EndOfChannel):
            await reply.get(silence)  # closed and empty
        reply.put({b"n": b"2"})  # dropped: closed
        with pytest.raises(trio.EndOfChannel):
            await reply.get(silence)


async def _close_soon(reply: Reply) -> None:
    await trio.sleep(0.01)
    reply.close()


async def test_frames_cross_a_socket_link_whole_and_in_order_even_past_its_buffers() -> None:
    a, b = trio.socket.socketpair()
    left = Link(trio.SocketStream(a), "b", "n", max_frame=1 << 24, queue=1024)
    right = Link(trio.SocketStream(b), "a", "n", max_frame=1 << 24, queue=1024)
    # Frames of every size, one far larger than a socket's buffers (partial writes).
    frames = [
        {b"i": b"%d" % i, b"b": b"x" * size} for i, size in enumerate([0, 1, 100, 70_000, 3_000_000, 5])
    ]
    frames += [{b"i": b"%d" % i, b"b": b"y"} for i in range(len(frames), 2_000)]
    received: list[dict[bytes, bytes]] = []
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(left.write_frames)

            async def read() -> None:
                while len(received) < len(frames):
                    frame = await right.receive()
                    assert frame is not None
                    received.append(frame)

            nursery.start_soon(read)
            for frame in frames:
                await left.send(frame)
            while len(received) < len(frames):
                await trio.sleep(0.01)
            await left.close()
            assert await right.receive() is None  # the other side closed: the end of the stream
            nursery.cancel_scope.cancel()
    await right.close()
    assert received == frames


class _Steps(trio.abc.Instrument):
    """Counts the steps of one task (each begins after it yielded to the scheduler)."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


async def test_a_link_that_always_has_data_lets_other_tasks_run() -> None:
    # 120 frames of 1 KB each already in the socket: the reader never has to
    # wait for data, and reads 64 KiB at a time (two reads).
    ours, theirs = socket.socketpair()
    frames = [{b"i": b"%d" % i, b"b": b"z" * 1000} for i in range(120)]
    theirs.settimeout(5)
    theirs.sendall(b"".join(_frame(f) for f in frames))
    link = Link(trio.SocketStream(trio.socket.from_stdlib_socket(ours)), "a", "n", max_frame=1 << 20, queue=8)
    counter = _Steps(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(counter)
    try:
        for frame in frames:
            assert await link.receive() == frame
    finally:
        trio.lowlevel.remove_instrument(counter)
        await link.close()
        theirs.close()
    # The reader yielded to the scheduler between its two reads (a read that
    # did not wait is followed by a checkpoint before the next one), and only there.
    assert counter.steps == 1
