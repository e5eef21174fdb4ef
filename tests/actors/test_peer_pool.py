"""A peer over a real stdio stream (pipes). Its handler pool: handlers that
finish without waiting are served by the read loop itself, no worker task at
all, and a handler that waits never holds up the requests behind it (reading
goes on in a relief reader); such handlers still count against the cap of
concurrent handlers, can be cancelled by the other side, and are drained at
the end of input. Its own requests, gathered into the writes of its answer writer while
other calls are out: a call cancelled before its request was written sends
nothing, and calls whose requests cannot be written fail at once.

Every wait is bounded by ``fail_after``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp import ConnectionClosed, Peer, PeerLimits
from trio_mcp.actors import InboundRequest
from trio_mcp.transports.stdio import StdioStream

TIMEOUT = 30.0


def _call(ident: int, method: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": method}).encode() + b"\n"


class Handlers:
    """``quick`` answers at once; ``gather`` waits until ``size`` of them run at
    once (``None``: until the test sets ``all_in``)."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size
        self.waiting = 0
        self.all_in = trio.Event()

    async def handle_request(self, request: InboundRequest) -> Any:
        if request.method == "quick":
            return {"id": request.id}
        self.waiting += 1
        if self.waiting == self.size:
            self.all_in.set()
        await self.all_in.wait()
        return {"id": request.id}

    async def handle_notification(self, method: str, params: Any) -> None:
        return None

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        return False


@asynccontextmanager
async def peer_on_pipes(
    handlers: Handlers | None = None, limits: PeerLimits | None = None
) -> AsyncIterator[tuple[Peer, trio.lowlevel.FdStream, trio.lowlevel.FdStream]]:
    """A peer (serving ``handlers``, if any) over a pair of pipes, and the
    test's ends of them: what the test writes to it, and what it writes."""
    to_peer_r, to_peer_w = os.pipe()
    from_peer_r, from_peer_w = os.pipe()
    stream = StdioStream(to_peer_r, from_peer_w, name="peer")
    to_peer = trio.lowlevel.FdStream(to_peer_w)
    from_peer = trio.lowlevel.FdStream(from_peer_r)
    try:
        async with trio.open_nursery() as nursery:
            peer = await nursery.start(Peer(stream, handlers, limits=limits, name="peer").run)
            yield peer, to_peer, from_peer
            nursery.cancel_scope.cancel()
    finally:
        for closable in (stream, to_peer, from_peer):
            await closable.aclose()


async def _answers(from_server: trio.lowlevel.FdStream, count: int) -> list[Any]:
    """The ids of the next ``count`` answers, in the order they were written."""
    buf = b""
    ids: list[Any] = []
    while len(ids) < count:
        buf += await from_server.receive_some()
        *lines, buf = buf.split(b"\n")
        ids += [json.loads(line)["result"]["id"] for line in lines]
    return ids


async def test_a_burst_of_handlers_that_never_wait_is_served_by_the_read_loop() -> None:
    burst = 64
    with trio.fail_after(TIMEOUT):
        async with peer_on_pipes(Handlers()) as (peer, to_server, from_server):
            await to_server.send_all(b"".join(_call(i, "quick") for i in range(burst)))
            assert sorted(await _answers(from_server, burst)) == list(range(burst))
            stats = peer.statistics()
            assert stats.requests_served == burst
            # Served in the read loop's own task: no worker was ever started.
            assert stats.workers == 0, stats


async def test_a_handler_that_waits_does_not_hold_up_the_rest_of_its_burst() -> None:
    with trio.fail_after(TIMEOUT):
        handlers = Handlers()  # the first request waits until the test lets it go
        async with peer_on_pipes(handlers) as (_, to_server, from_server):
            burst = [_call(0, "gather")] + [_call(i, "quick") for i in range(1, 40)]
            await to_server.send_all(b"".join(burst))
            # Every quick request behind the waiting one is answered meanwhile.
            assert sorted(await _answers(from_server, 39)) == list(range(1, 40))
            handlers.all_in.set()
            assert await _answers(from_server, 1) == [0]


async def test_handlers_that_wait_in_one_burst_all_run_at_once() -> None:
    size = 24  # each waits until all of them are running: passes only if they run concurrently
    with trio.fail_after(TIMEOUT):
        async with peer_on_pipes(Handlers(size=size)) as (peer, to_server, from_server):
            await to_server.send_all(b"".join(_call(i, "gather") for i in range(size)))
            assert sorted(await _answers(from_server, size)) == list(range(size))
            assert peer.statistics().requests_served == size


async def test_handlers_that_wait_in_the_read_loop_count_against_the_handler_cap() -> None:
    cap = 4
    with trio.fail_after(TIMEOUT):
        handlers = Handlers()  # every request waits until the test lets them go
        async with peer_on_pipes(handlers, PeerLimits(max_concurrent_handlers=cap)) as (
            peer,
            to_server,
            from_server,
        ):
            await to_server.send_all(b"".join(_call(i, "gather") for i in range(10)))
            while handlers.waiting < cap:
                await trio.testing.wait_all_tasks_blocked()
            await trio.testing.wait_all_tasks_blocked()
            # The cap holds: the other six wait for a handler to finish.
            assert handlers.waiting == cap
            assert peer.statistics().requests_queued == 10 - cap
            handlers.all_in.set()
            assert sorted(await _answers(from_server, 10)) == list(range(10))


async def test_a_handler_waiting_in_the_read_loop_is_cancelled_by_the_other_side() -> None:
    with trio.fail_after(TIMEOUT):
        handlers = Handlers()
        async with peer_on_pipes(handlers) as (peer, to_server, from_server):
            await to_server.send_all(_call(0, "gather"))
            while handlers.waiting < 1:
                await trio.testing.wait_all_tasks_blocked()
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}
            await to_server.send_all(json.dumps(cancel).encode() + b"\n" + _call(1, "quick"))
            # Only the second is answered: a cancelled request never is.
            assert await _answers(from_server, 1) == [1]
            while peer.statistics().handlers_running:
                await trio.testing.wait_all_tasks_blocked()
            stats = peer.statistics()
            assert stats.requests_cancelled_by_peer == 1 and stats.requests_served == 1, stats


async def test_the_end_of_input_lets_a_handler_waiting_in_the_read_loop_finish() -> None:
    to_peer_r, to_peer_w = os.pipe()
    from_peer_r, from_peer_w = os.pipe()
    stream = StdioStream(to_peer_r, from_peer_w, name="peer")
    to_peer = trio.lowlevel.FdStream(to_peer_w)
    from_peer = trio.lowlevel.FdStream(from_peer_r)
    handlers = Handlers()
    peer = Peer(stream, handlers, name="peer")
    reasons = []

    async def run() -> None:
        reasons.append(await peer.run())

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await to_peer.send_all(_call(0, "gather"))
            while handlers.waiting < 1:
                await trio.testing.wait_all_tasks_blocked()
            await to_peer.aclose()  # the end of input, while the handler waits
            await trio.testing.wait_all_tasks_blocked()
            handlers.all_in.set()
            assert await _answers(from_peer, 1) == [0]
    assert [r.kind for r in reasons] == ["eof"]
    await stream.aclose()
    await from_peer.aclose()


# ---------------------------------------------------------------- our requests, gathered


async def _lines(requests: trio.lowlevel.FdStream, until: str) -> list[dict[str, Any]]:
    """The messages written to the test, up to the request for ``until``."""
    buf = b""
    seen: list[dict[str, Any]] = []
    while not any(m.get("method") == until for m in seen):
        buf += await requests.receive_some()
        *lines, buf = buf.split(b"\n")
        seen += [json.loads(line) for line in lines]
    return seen


async def test_a_call_cancelled_before_its_request_was_written_sends_nothing() -> None:
    big = "x" * (1 << 20)  # more than a pipe holds: its write waits for the reader
    with trio.fail_after(TIMEOUT):
        async with peer_on_pipes() as (peer, _, requests):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(peer.request, "first")  # alone: written by its caller
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(peer.request, "big", {"data": big})  # the writer is stuck on it
                await trio.testing.wait_all_tasks_blocked()
                with trio.CancelScope() as scope:
                    nursery.start_soon(_cancel_when_blocked, scope)
                    await peer.request("cancelled")  # handed over, never taken by the busy writer
                nursery.start_soon(peer.request, "last")
                seen = await _lines(requests, "last")
                assert [m.get("method") for m in seen] == ["first", "big", "last"]
                nursery.cancel_scope.cancel()


async def _cancel_when_blocked(scope: trio.CancelScope) -> None:
    await trio.testing.wait_all_tasks_blocked()
    scope.cancel()


async def test_calls_gathered_for_a_broken_pipe_fail_at_once() -> None:
    with trio.fail_after(TIMEOUT):
        async with peer_on_pipes() as (peer, _, requests):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(peer.request, "first")
                await _lines(requests, "first")
                await requests.aclose()  # the other side stops reading: writes fail (EPIPE)
                with pytest.raises(ConnectionClosed):
                    await peer.request("gathered")  # handed to the writer, which cannot write
                with pytest.raises(ConnectionClosed):
                    await peer.request("next")
                nursery.cancel_scope.cancel()
