"""Floods against a real stdio server process: every request is answered.

The server is ``fixtures/gated_server.py``: its ``hold`` tool waits until the
test writes a byte to a FIFO, so before the release no call can finish and
the number the server admits is exact (its handler pool plus its admission
queue); every other request must be answered at once with ``-32001``. After
the release every admitted call is answered too. Nothing may be lost: a
request never answered would leave its caller waiting for good.

Real processes need real time; every wait is bounded by ``fail_after``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from tests.gated import GATED, make_fifo, release

from trio_mcp import McpError, Peer, PeerLimits, ServerOverloaded, open_session
from trio_mcp.transports.stdio import StdioServerParameters, StdioStream, StdioTransport

TIMEOUT = 60.0  # a hang guard for floods of real processes on a loaded machine
LIMITS = PeerLimits()
#: Calls the server admits (the rest are refused with -32001 while none can finish).
CAPACITY = LIMITS.max_concurrent_handlers + LIMITS.max_queued_requests
OVERLOADED = -32001


@pytest.fixture
def release_fifo(tmp_path: Path) -> Path:
    return make_fifo(tmp_path)


def _line(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def _call(ident: int, tool: str = "hold") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": tool, "arguments": {}}}


class RawClient:
    """Raw JSON lines to a server process's stdin, and every line it answers
    (read all the time, as a client that reads its answers does)."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.answers: dict[Any, dict[str, Any]] = {}
        self.duplicates = 0
        self._changed = trio.Event()

    async def read(self) -> None:
        assert self.process.stdout is not None
        buf = b""
        async for chunk in self.process.stdout:
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                message = json.loads(line)
                for item in message if isinstance(message, list) else [message]:
                    if "id" in item:
                        self.duplicates += item["id"] in self.answers
                        self.answers[item["id"]] = item
            self._changed.set()
            self._changed = trio.Event()

    async def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data)

    async def wait_for(self, count: int) -> None:
        """Wait until ``count`` distinct ids were answered."""
        while len(self.answers) < count:
            await self._changed.wait()

    def tally(self) -> tuple[int, int, int]:
        """(ok, -32001, other errors) among the answers to tools/call ids (ints)."""
        ok = overloaded = other = 0
        for ident, item in self.answers.items():
            if not isinstance(ident, int):
                continue
            if "result" in item:
                ok += 1
            elif item["error"]["code"] == OVERLOADED:
                overloaded += 1
            else:
                other += 1
        return ok, overloaded, other


@asynccontextmanager
async def raw_server(fifo: Path, version: str = "2025-06-18") -> AsyncIterator[RawClient]:
    """A gated server process, initialized, with a reader running; stopped
    (stdin closed, then killed if it lingers) when the block ends."""
    process = await trio.lowlevel.open_process(
        [sys.executable, GATED],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "RELEASE_FIFO": str(fifo)},
    )
    try:
        async with trio.open_nursery() as nursery:
            client = RawClient(process)
            nursery.start_soon(client.read)
            init = {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
            await client.write(_line(init))
            await client.wait_for(1)
            assert "result" in client.answers["init"], client.answers["init"]
            await client.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            yield client
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            assert process.stdin is not None
            await process.stdin.aclose()
            with trio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


@pytest.mark.parametrize("calls", [600, 2000])
async def test_a_burst_of_raw_calls_is_answered_in_full(release_fifo: Path, calls: int) -> None:
    with trio.fail_after(TIMEOUT):
        async with raw_server(release_fifo) as client:
            # Written at once: one write of every line.
            await client.write(b"".join(_line(_call(i)) for i in range(calls)))
            refused = calls - CAPACITY
            # Nothing can finish before the release: exactly the admitted calls wait.
            await client.wait_for(1 + refused)
            assert client.tally() == (0, refused, 0)
            release(release_fifo)
            await client.wait_for(1 + calls)
            assert client.tally() == (CAPACITY, refused, 0)
            assert client.duplicates == 0
            # The session is still in order.
            await client.write(_line(_call(calls, "echo")))
            await client.wait_for(2 + calls)


@pytest.mark.parametrize("queued_replies", [4, LIMITS.max_queued_replies])
async def test_the_public_client_gets_an_answer_to_every_call(
    release_fifo: Path, queued_replies: int
) -> None:
    calls = 2000
    refused = calls - CAPACITY
    outcomes: list[str] = []
    all_refused = trio.Event()

    async def call(session: Any) -> None:
        try:
            await session.call_tool("hold")
            outcomes.append("ok")
        except ServerOverloaded:
            outcomes.append("overloaded")
            if outcomes.count("overloaded") == refused:
                all_refused.set()
        except McpError as exc:
            outcomes.append(f"error {exc}")

    params = StdioServerParameters(
        command=sys.executable,
        args=[GATED],
        env={"RELEASE_FIFO": str(release_fifo), "QUEUED_REPLIES": str(queued_replies)},
    )
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(StdioTransport(params).run)
            async with open_session(stream) as session:
                async with trio.open_nursery() as callers:
                    for _ in range(calls):
                        callers.start_soon(call, session)
                    await all_refused.wait()
                    assert outcomes.count("ok") == 0
                    release(release_fifo)
                assert (outcomes.count("ok"), outcomes.count("overloaded")) == (CAPACITY, refused)
                assert len(outcomes) == calls
                echoed = await session.call_tool("echo", {"text": "still here"})
                assert echoed.content[0].text == "still here"
            nursery.cancel_scope.cancel()


# ---------------------------------------------------------------- batches (2025-03-26)


def _ping(ident: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "ping"}


async def test_an_accepted_batch_is_answered_in_full_and_the_next_request_too(release_fifo: Path) -> None:
    size = 1000
    assert size <= LIMITS.max_batch_items
    with trio.fail_after(TIMEOUT):
        async with raw_server(release_fifo, "2025-03-26") as client:
            await client.write(_line([_ping(i) for i in range(size)]) + _line(_ping(size)))
            await client.wait_for(1 + size + 1)
            ok, overloaded, other = client.tally()
            # Within the usual limits: each ping answered, with a result or -32001.
            assert (ok + overloaded, other) == (size + 1, 0) and ok >= 1
            assert client.duplicates == 0


async def test_a_batch_over_the_limit_is_refused_at_once_with_one_error(release_fifo: Path) -> None:
    size = 10_000
    assert size > LIMITS.max_batch_items
    with trio.fail_after(TIMEOUT):
        async with raw_server(release_fifo, "2025-03-26") as client:
            await client.write(_line([_ping(i) for i in range(size)]))
            await client.wait_for(2)  # init, and the refusal (id null)
            refusal = client.answers[None]
            assert refusal["error"]["code"] == -32600
            assert f"at most {LIMITS.max_batch_items}" in refusal["error"]["message"]
            # None of the batch was served, and the session goes on.
            await client.write(_line(_ping(size)))
            await client.wait_for(3)
            assert client.answers[size] == {"jsonrpc": "2.0", "id": size, "result": {}}
            assert client.tally() == (1, 0, 0)


# ---------------------------------------------------------------- logs under a flood

FLOOD = str(Path(__file__).parent / "fixtures" / "flood_server.py")


class _Stuck:
    """A dispatcher whose notification handler never returns: its queue fills."""

    async def handle_request(self, request: Any) -> Any:
        raise McpError("no requests here")

    async def handle_notification(self, method: str, params: Any) -> None:
        await trio.sleep_forever()

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        return False


async def test_a_flood_of_dropped_notifications_and_garbage_logs_a_few_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    notes, garbage = 100_000, 10_000
    caplog.set_level(logging.WARNING, logger="trio_mcp")
    params = StdioServerParameters(command=sys.executable, args=[FLOOD])
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(StdioTransport(params).run)
            peer = Peer(stream, _Stuck(), name="flooded")
            await nursery.start(peer.run)
            # The answer comes after the whole flood (in order on the pipe).
            await peer.request("flood", {"notifications": notes, "garbage": garbage})
            stats = peer.statistics()
            await peer.aclose()
            nursery.cancel_scope.cancel()
    # The handler took one, the queue holds its limit, the rest were dropped.
    queued = LIMITS.max_queued_notifications
    assert stats.notifications_dropped in (notes - queued - 1, notes - queued)
    assert stats.invalid_frames == garbage
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    dropped = [
        r
        for r in records
        if "notification queue full" in r.getMessage() or "(dropped notifications)" in r.getMessage()
    ]
    not_json = [r for r in records if "not JSON" in r.getMessage()]
    # A few lines (the first, a summary every warning_interval, one at close),
    # which together count every occurrence.
    assert len(records) <= 12, [r.getMessage() for r in records]
    assert sum(r.repeated for r in dropped) == stats.notifications_dropped  # type: ignore[attr-defined]
    assert sum(r.repeated for r in not_json) == garbage  # type: ignore[attr-defined]


# ---------------------------------------------------------------- fairness between sessions


async def test_a_burst_on_one_stdio_session_does_not_starve_another() -> None:
    """Two sessions served in one process over pipes: while one is flooded
    with pings, the other's single ping is answered long before the flood is."""
    burst = 20_000

    def session() -> tuple[StdioStream, trio.lowlevel.FdStream, trio.lowlevel.FdStream]:
        to_server_r, to_server_w = os.pipe()
        from_server_r, from_server_w = os.pipe()
        stream = StdioStream(to_server_r, from_server_w, name="served")
        return stream, trio.lowlevel.FdStream(to_server_w), trio.lowlevel.FdStream(from_server_r)

    async def count_answers(out: trio.lowlevel.FdStream, seen: list[int], first: trio.Event) -> None:
        async for chunk in out:
            seen[0] += chunk.count(b"\n")
            first.set()
            if seen[0] >= burst:
                return

    flooded, flood_in, flood_out = session()
    quiet, quiet_in, quiet_out = session()
    answered = [0]
    started = trio.Event()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            for stream in (flooded, quiet):
                await nursery.start(Peer(stream, name="served").run)
            nursery.start_soon(count_answers, flood_out, answered, started)
            nursery.start_soon(flood_in.send_all, b"".join(_line(_ping(i)) for i in range(burst)))
            await started.wait()  # the flood is being served
            await quiet_in.send_all(_line(_ping(1)))
            reply = await quiet_out.receive_some()
            assert json.loads(reply) == {"jsonrpc": "2.0", "id": 1, "result": {}}
            assert answered[0] < burst / 2, "the quiet session waited for most of the flood"
            nursery.cancel_scope.cancel()
    for closable in (flooded, quiet, flood_in, flood_out, quiet_in, quiet_out):
        await closable.aclose()
