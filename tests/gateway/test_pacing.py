"""The forwarding path's deadlines (``gateway/_pacing.py``): calls expire at
their deadline, in deadline order across timeouts, never once finished; a
finished call costs nothing until it reaches the head of its queue, and the
queues stay bounded by the calls still out."""

from __future__ import annotations

import trio
import trio.testing

from trio_mcp.gateway._pacing import Deadlines


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
