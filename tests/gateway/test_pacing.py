"""The forwarding path's deadlines (``gateway/_pacing.py``): calls expire at
their deadline, in deadline order across timeouts, never once finished; a
finished call costs nothing until it reaches the head of its queue, and the
queues stay bounded by the calls still out; and the writer of the byte
path (``Writer.send_data``): lines written at once in atomic pieces, the
rest in order by its task."""

from __future__ import annotations

import os
import select

import msgspec
import trio
import trio.testing

from trio_mcp.gateway._pacing import Deadlines, Writer
from trio_mcp.transports import StdioStream


class Call:
    def __init__(self, name: str, deadline: float) -> None:
        self.name = name
        self.deadline = deadline
        self.done = False


async def test_calls_expire_at_their_deadlines_in_order_and_finished_ones_never(
    autojump_clock: trio.testing.MockClock,
) -> None:
    expired: list[tuple[str, float]] = []
    live: set[str] = set()

    def expire(call: Call) -> None:
        expired.append((call.name, trio.current_time()))
        live.discard(call.name)

    deadlines = Deadlines(expire, live.__len__)
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(deadlines.run)
            start = trio.current_time()
            calls = {}
            for name, timeout in (("a", 10.0), ("b", 10.0), ("c", 3.0), ("d", 10.0), ("e", 3.0)):
                calls[name] = call = Call(name, trio.current_time() + timeout)
                live.add(name)
                deadlines.add(call, timeout)  # the 3 s calls arm the timer earlier: it re-arms
                await trio.sleep(1)
            calls["b"].done = True  # answered: never expires
            live.discard("b")
            await trio.sleep(20)
            nursery.cancel_scope.cancel()
    assert [name for name, _ in expired] == ["c", "e", "a", "d"]
    assert [round(when - start) for _, when in expired] == [5, 7, 10, 13]
    assert deadlines.queued() == 0


async def test_finished_calls_are_dropped_so_the_queue_stays_near_the_calls_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    out: list[Call] = []
    deadlines = Deadlines(lambda call: None, out.__len__)
    first = Call("stuck", trio.current_time() + 60)
    deadlines.add(first, 60.0)  # never answered: it stays at the head
    out.append(first)
    for i in range(10_000):
        call = Call(str(i), trio.current_time() + 60)
        deadlines.add(call, 60.0)
        call.done = True  # answered at once
    assert deadlines.queued() <= 2 * len(out) + 64 + 1
    # Answered in order behind a head that is answered too: dropped as the next ones come.
    first.done = True
    out.clear()
    for i in range(3):
        deadlines.add(Call(f"n{i}", trio.current_time() + 60), 60.0)
    assert deadlines.queued() == 3


async def test_calls_appended_to_a_queue_expire_once_settled(autojump_clock: trio.testing.MockClock) -> None:
    expired: list[tuple[str, float]] = []
    out: list[Call] = []
    deadlines = Deadlines(lambda call: expired.append((call.name, trio.current_time())), out.__len__)
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(deadlines.run)
            await trio.sleep(1)  # the timer sleeps: nothing is due
            queue = deadlines.queue(5.0)
            for name in ("a", "b", "c"):  # one read's calls, settled once
                call = Call(name, trio.current_time() + 5)
                queue.append(call)
                out.append(call)
            out[1].done = True
            deadlines.settle()  # wakes the timer, which sleeps past them
            await trio.sleep(10)
            nursery.cancel_scope.cancel()
    assert expired == [("a", 6.0), ("c", 6.0)]
    # Finished calls beyond twice the calls out (and some) are compacted away at settle.
    queue = deadlines.queue(60.0)
    for i in range(1000):
        call = Call(str(i), 100.0 + i)
        call.done = i > 0
        queue.append(call)
    out[:] = [queue[0]]
    deadlines.settle()
    assert len(queue) == 1 and queue[0].name == "0"


async def test_lines_sent_at_once_in_atomic_pieces_and_the_rest_by_the_writer() -> None:
    read_end, write_end = os.pipe()
    reader = StdioStream(read_end, os.open(os.devnull, os.O_WRONLY), name="reader")
    stream = StdioStream(os.open(os.devnull, os.O_RDONLY), write_end, name="writer")
    writer = Writer(stream)
    # Lines of a read as a tap gathers them: more than one atomic write, one line longer than one.
    lines = [
        b'{"jsonrpc":"2.0","method":"n","params":{"i":%d,"pad":"%s"}}' % (i, b"x" * 900) for i in range(8)
    ]
    lines.insert(5, b'{"jsonrpc":"2.0","method":"long","params":{"pad":"%s"}}' % (b"y" * 2 * select.PIPE_BUF))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            writer.send_data(b"".join(line + b"\n" for line in lines[:3]))  # under PIPE_BUF: written now
            assert writer.queue == []
            writer.send_data(b"".join(line + b"\n" for line in lines[3:]))  # the long line and the rest wait
            assert len(writer.queue) == 1
            got = [await reader.receive() for _ in lines]
            writer.close()
    order = [msgspec.json.decode(m.params)["i"] if m.method == "n" else "long" for m in got]
    assert order == [0, 1, 2, 3, 4, "long", 5, 6, 7]
    await reader.aclose()
    await stream.aclose()
