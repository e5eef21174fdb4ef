"""The gateway's forwarding path for tool calls (``gateway/_forward.py``)
in front of a real stdio server (``fixtures/probe_server.py``): plain calls
are taken there, and the rules of the handler path hold: progress is
relayed, the client's cancellation and a passed deadline reach the server
as ``notifications/cancelled`` under the server's own ids, too many calls
out are refused at once (-32001), a server lost with calls out ends each of
them with an error result, an answer nobody waits for is dropped, and what
it does not take (filtered tools, middleware) gets the handler path's
answers. Each test runs with the client over an in-memory pair and over a
pair of pipes (stdio), where plain calls and their answers take the byte
path (``gateway/_splice.py``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from tests.gateway.test_fleet import FOREVER, probe
from tests.gateway.test_gateway import STDIO, children, processes, wait_gone

from trio_mcp._util import collapse_groups
from trio_mcp.actors import PeerLimits
from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.gateway import Gateway, open_gateway
from trio_mcp.gateway._forward import ForwardingStream
from trio_mcp.protocol import InvalidParams, McpError, ServerOverloaded
from trio_mcp.testing import connected
from trio_mcp.transports import StdioStream

__all__ = ["processes"]

TIMEOUT = 30.0
STRAY = str(Path(__file__).parent / "fixtures" / "stray_server.py")
BURST = str(Path(__file__).parent / "fixtures" / "burst_server.py")
#: Calls in flight at once in the tests below (the benchmark's figure).
MANY = 64


@pytest.fixture(params=["memory", "stdio"])
def front(request: pytest.FixtureRequest) -> str:
    """How the client reaches the gateway: an in-memory pair, or pipes (the byte path)."""
    return str(request.param)


@asynccontextmanager
async def client_of(gateway: Gateway, front: str) -> AsyncIterator[ClientSession]:
    """A client of ``gateway`` over an in-memory pair (JSON on the way) or over two pipes."""
    if front == "memory":
        async with connected(gateway, mode="bytes") as client:
            yield client
        return
    to_gateway, from_client = os.pipe()
    to_client, from_gateway = os.pipe()
    ours = StdioStream(to_gateway, from_gateway, name="front")
    theirs = StdioStream(to_client, from_client, name="client")
    try:
        with collapse_groups():
            async with gateway.running(), trio.open_nursery() as nursery:
                await gateway.start_session(ours, nursery)
                async with open_session(theirs) as client:
                    yield client
                nursery.cancel_scope.cancel()
    finally:
        await ours.aclose()
        await theirs.aclose()


@asynccontextmanager
async def probe_gateway(processes: set[int], front: str) -> AsyncIterator[tuple[Gateway, ClientSession]]:
    """A gateway in front of one probe server ``p``, and a client of it."""
    async with open_gateway({"mcpServers": {"p": probe("p")}}, settings=FOREVER, stdio_options=STDIO) as gw:
        processes.update(children(os.getpid()))
        async with client_of(gw, front) as client:
            yield gw, client


def front_of(gateway: Gateway) -> ForwardingStream:
    """The forwarding stream of the gateway's one session."""
    (session,) = gateway.sessions
    stream = session.peer.stream
    assert isinstance(stream, ForwardingStream)
    return stream


async def cancellations(client: Any) -> int:
    """How many ``slow`` calls the probe saw cancelled (it waits for the first)."""
    result = await client.call_tool("p__cancellations", {})
    assert result.is_error is not True, result
    return int(result.structured_content["result"])


async def test_plain_calls_are_forwarded_with_their_progress(processes: set[int], front: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with probe_gateway(processes, front) as (gw, client):
            result = await client.call_tool("p__env", {"name": "HOME"})
            assert result.content[0].text == os.environ.get("HOME", "")
            seen: list[tuple[float, float | None]] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                seen.append((value, total))

            slept = await client.call_tool("p__slow", {"seconds": 0}, on_progress=progress)
            assert slept.content[0].text == "slept"
            assert seen == [(0, 1)]  # the server's progress, under the client's own token
            before = front_of(gw).statistics()["calls_spliced"]
            again = await client.call_tool("p__env", {"name": "HOME"})
            assert again.content[0].text == os.environ.get("HOME", "")
            stats = front_of(gw).statistics()
            assert stats["calls_forwarded"] == 3 and stats["calls_out"] == 0
            # Over stdio a plain call takes the byte path (the first one may have come in
            # the read of the handshake's end); a call with a progress token never does.
            assert stats["calls_spliced"] == before + (1 if front == "stdio" else 0)
            assert gw.server_statistics()["p"].calls == 3
    assert await wait_gone(processes) == set()


async def test_a_call_the_client_cancels_is_cancelled_at_the_server(processes: set[int], front: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with probe_gateway(processes, front) as (gw, client):
            under_way = trio.Event()

            async def progress(value: float, total: float | None, message: str | None) -> None:
                under_way.set()

            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:

                    async def call() -> None:
                        await client.call_tool("p__slow", {"seconds": 60}, on_progress=progress)

                    nursery.start_soon(call)
                    await under_way.wait()  # the server runs the call
                    scope.cancel()
            assert scope.cancelled_caught
            assert await cancellations(client) == 1
            stats = front_of(gw).statistics()
            assert stats["calls_cancelled"] == 1 and stats["calls_out"] == 0
    assert await wait_gone(processes) == set()


async def test_a_call_past_its_deadline_is_an_error_result_and_cancelled_at_the_server(
    processes: set[int],
    front: str,
) -> None:
    # The server's timeout bounds every call, the follow-up ``cancellations`` one too: 2 s
    # leaves it room on a loaded machine.
    config = {"mcpServers": {"p": probe("p", timeout=2.0)}}
    with trio.fail_after(TIMEOUT):
        async with open_gateway(config, settings=FOREVER, stdio_options=STDIO) as gw:
            processes.update(children(os.getpid()))
            async with client_of(gw, front) as client:
                result = await client.call_tool("p__slow", {"seconds": 60})
                assert result.is_error is True
                assert result.content[0].text == "server 'p' did not answer tools/call 'p__slow' within 2.0 s"
                assert await cancellations(client) == 1
                assert front_of(gw).statistics()["calls_timed_out"] == 1
                assert gw.server_statistics()["p"].errors == 1
    assert await wait_gone(processes) == set()


async def test_calls_beyond_the_bound_are_refused_at_once(processes: set[int], front: str) -> None:
    limits = PeerLimits(max_concurrent_handlers=1, max_queued_requests=1)
    with trio.fail_after(TIMEOUT):
        async with open_gateway(
            {"mcpServers": {"p": probe("p")}}, settings=FOREVER, stdio_options=STDIO, limits=limits
        ) as gw:
            processes.update(children(os.getpid()))
            async with client_of(gw, front) as client:
                started = trio.Semaphore(0)

                async def progress(value: float, total: float | None, message: str | None) -> None:
                    started.release()

                async with trio.open_nursery() as nursery:
                    for _ in range(2):  # the bound: 1 handler + 1 queued
                        nursery.start_soon(
                            lambda: client.call_tool("p__slow", {"seconds": 60}, on_progress=progress)
                        )
                    for _ in range(2):
                        await started.acquire()  # both are at the server
                    with pytest.raises(ServerOverloaded):
                        await client.call_tool("p__env", {"name": "HOME"})
                    assert front_of(gw).statistics()["calls_overloaded"] == 1
                    nursery.cancel_scope.cancel()
                # A cancelled handler-path call tells the server as its task
                # unwinds, which may come after the next (spliced) call: wait
                # for both (a lost one fails this test by its deadline).
                while await cancellations(client) < 2:
                    await trio.sleep(0.05)
                assert await cancellations(client) == 2
                result = await client.call_tool("p__env", {"name": "HOME"})  # room again
                assert result.content[0].text == os.environ.get("HOME", "")
    assert await wait_gone(processes) == set()


async def test_what_the_forwarding_path_leaves_gets_the_handler_paths_answers(
    processes: set[int], front: str
) -> None:
    config = {"mcpServers": {"p": probe("p", excludeTools=["pid"])}}
    with trio.fail_after(TIMEOUT):
        async with open_gateway(config, settings=FOREVER, stdio_options=STDIO) as gw:
            processes.update(children(os.getpid()))
            seen: list[str] = []

            @gw.add_middleware
            async def watch(ctx: Any, call_next: Any) -> Any:
                seen.append(ctx.request.method)
                return await call_next()

            async with client_of(gw, front) as client:
                with pytest.raises(InvalidParams, match="server 'p' has no tool 'pid'"):
                    await client.call_tool("p__pid", {})  # filtered: unknown
                result = await client.call_tool("p__env", {"name": "HOME"})  # through the middleware
                assert result.content[0].text == os.environ.get("HOME", "")
                (session,) = gw.sessions
                assert not isinstance(session.peer.stream, ForwardingStream)
            assert seen.count("tools/call") == 2
    assert await wait_gone(processes) == set()


async def slow_calls_under_way(client: Any, nursery: trio.Nursery, results: list[Any]) -> None:
    """Start :data:`MANY` ``slow`` calls; return once the server runs every one."""
    started = trio.Semaphore(0)

    async def progress(value: float, total: float | None, message: str | None) -> None:
        started.release()

    async def call() -> None:
        results.append(await client.call_tool("p__slow", {"seconds": 60}, on_progress=progress))

    for _ in range(MANY):
        nursery.start_soon(call)
    for _ in range(MANY):
        await started.acquire()  # each call reported progress: it runs at the server


async def test_calls_the_client_cancels_are_cancelled_at_the_server_under_its_ids(
    processes: set[int],
    front: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with probe_gateway(processes, front) as (gw, client):
            # The client's ids run ahead of the gateway's ids at the server
            # (the gateway's own requests: none of these 5 calls).
            for _ in range(5):
                await client.call_tool("p__env", {"name": "HOME"})
            results: list[Any] = []
            async with trio.open_nursery() as nursery:
                await slow_calls_under_way(client, nursery, results)
                nursery.cancel_scope.cancel()
            assert results == []
            # Each cancellation named a call the server runs: its id there, not the client's.
            while (seen := await cancellations(client)) < MANY:
                pass
            assert seen == MANY
            assert front_of(gw).statistics()["calls_cancelled"] == MANY
    assert await wait_gone(processes) == set()


async def test_a_server_lost_with_calls_out_ends_every_one_with_an_error_result(
    processes: set[int], front: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with probe_gateway(processes, front) as (gw, client):
            pid = int((await client.call_tool("p__pid", {})).structured_content["result"])
            results: list[Any] = []
            async with trio.open_nursery() as nursery:
                await slow_calls_under_way(client, nursery, results)
                assert front_of(gw).statistics()["calls_out"] == MANY
                os.kill(pid, signal.SIGKILL)
            assert len(results) == MANY
            for result in results:
                assert result.is_error is True
                assert result.content[0].text.startswith("server 'p' is unavailable: connection closed")
            assert front_of(gw).statistics()["calls_out"] == 0
            assert gw.server_statistics()["p"].errors == MANY
            await gw.host.servers["p"].wait_connected()  # it comes back
            processes.update(children(os.getpid()))
            again = await client.call_tool("p__pid", {})
            assert int(again.structured_content["result"]) != pid
    assert await wait_gone(processes) == set()


async def test_an_answer_no_call_waits_for_is_dropped_and_logged(
    processes: set[int], front: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = {"mcpServers": {"s": {"command": sys.executable, "args": [STRAY]}}}
    with trio.fail_after(TIMEOUT), caplog.at_level(logging.DEBUG, logger="trio_mcp.peer"):
        async with open_gateway(config, settings=FOREVER, stdio_options=STDIO) as gw:
            processes.update(children(os.getpid()))
            async with client_of(gw, front) as client:
                result = await client.call_tool("s__stray", {"ident": 999_999})
                assert result.is_error is not True and result.content[0].text == "answered"
                assert front_of(gw).statistics()["calls_forwarded"] == 1
                session = gw.host.servers["s"].live_session
                assert session is not None and session.peer.statistics().unmatched_responses == 1
                # The gateway goes on: the next call is answered as usual.
                again = await client.call_tool("s__stray", {"ident": 999_998})
                assert again.content[0].text == "answered"
                assert session.peer.statistics().unmatched_responses == 2
    dropped = [r.getMessage() for r in caplog.records if "no call waits for it" in r.getMessage()]
    assert len(dropped) == 2
    assert "id 999999" in dropped[0] and "id 999998" in dropped[1]
    assert await wait_gone(processes) == set()


async def test_answers_on_the_byte_path_that_are_not_plain_results_get_the_frame_paths_answers(
    processes: set[int], caplog: pytest.LogCaptureFixture
) -> None:
    config = {"mcpServers": {"s": {"command": sys.executable, "args": [STRAY]}}}
    with trio.fail_after(TIMEOUT), caplog.at_level(logging.DEBUG, logger="trio_mcp.peer"):
        async with open_gateway(config, settings=FOREVER, stdio_options=STDIO) as gw:
            processes.update(children(os.getpid()))
            async with client_of(gw, "stdio") as client:
                await client.call_tool("s__stray", {"ident": 1})  # after the handshake's last read
                before = spliced(gw)
                # An error answer is passed on as it came (its data too); the second answer is dropped.
                with pytest.raises(McpError) as raised:
                    await client.call_tool("s__odd", {"kind": "error"})
                assert (raised.value.code, raised.value.message, raised.value.data) == (-32000, "odd", [1])
                result = await client.call_tool("s__odd", {"kind": "reordered"})
                assert result.content[0].text == "reordered"
                # A notification (the peer's), an error that is not one, a result that is not
                # UTF-8: not answers (the peer logs them); the call stays out and its
                # server's next answer ends it.
                for kind in ("notice", "not an error", "not UTF-8"):
                    result = await client.call_tool("s__odd", {"kind": kind})
                    assert result.is_error is not True and result.content[0].text == "answered"
                assert spliced(gw) == before + 5 and front_of(gw).statistics()["calls_out"] == 0
                assert gw.server_statistics()["s"].errors == 1
                session = gw.host.servers["s"].live_session
                assert session is not None
                # The answers after the first to "error" and "reordered", dropped at the peer.
                assert session.peer.statistics().unmatched_responses == 1 + 2
    assert await wait_gone(processes) == set()


# ------------------------------------------------- the byte path over stdio


@asynccontextmanager
async def burst_gateway(processes: set[int]) -> AsyncIterator[tuple[Gateway, ClientSession]]:
    """A gateway in front of one burst server ``b``, and a client of it over pipes."""
    config = {"mcpServers": {"b": {"command": sys.executable, "args": [BURST]}}}
    async with open_gateway(config, settings=FOREVER, stdio_options=STDIO) as gw:
        processes.update(children(os.getpid()))
        async with client_of(gw, "stdio") as client:
            # A first call: the calls of the tests come after the handshake's last message
            # (a call read with it is not taken: the session is not initialized yet).
            await client.call_tool("b__running", {"n": 0})
            yield gw, client


def spliced(gateway: Gateway) -> int:
    return front_of(gateway).statistics()["calls_spliced"]


async def test_answers_out_of_order_reach_their_own_callers(processes: set[int]) -> None:
    with trio.fail_after(TIMEOUT):
        async with burst_gateway(processes) as (gw, client):
            answers: dict[str, str] = {}
            before = spliced(gw)

            async def call(tag: str) -> None:
                result = await client.call_tool("b__reverse", {"n": MANY, "tag": tag})
                assert result.is_error is not True, result
                answers[tag] = result.content[0].text

            async with trio.open_nursery() as nursery:
                for i in range(MANY):
                    nursery.start_soon(call, f"call {i} ✓")  # not ASCII: checked UTF-8, passed as bytes
            # The server answered the last of them first (each waits for every later one).
            assert answers == {f"call {i} ✓": f"call {i} ✓" for i in range(MANY)}
            assert spliced(gw) == before + MANY and front_of(gw).statistics()["calls_out"] == 0
            assert gw.server_statistics()["b"].calls == MANY + 1
    assert await wait_gone(processes) == set()


async def test_answers_of_two_clients_read_together_reach_each_its_own(processes: set[int]) -> None:
    """Two clients of one gateway over pipes, their calls to one server
    answered last in first: the server's reads hold answers for both, in
    turns, and each goes to its own client under its own id."""
    config = {"mcpServers": {"b": {"command": sys.executable, "args": [BURST]}}}
    streams: list[StdioStream] = []

    @asynccontextmanager
    async def stdio_client(gw: Gateway, nursery: trio.Nursery) -> AsyncIterator[ClientSession]:
        to_gateway, from_client = os.pipe()
        to_client, from_gateway = os.pipe()
        ours = StdioStream(to_gateway, from_gateway, name="front")
        theirs = StdioStream(to_client, from_client, name="client")
        streams.extend((ours, theirs))
        await gw.start_session(ours, nursery)
        async with open_session(theirs) as client:
            await client.call_tool("b__running", {"n": 0})  # past the handshake: the byte path
            yield client

    with trio.fail_after(TIMEOUT):
        try:
            async with open_gateway(config, settings=FOREVER, stdio_options=STDIO) as gw:
                processes.update(children(os.getpid()))
                with collapse_groups():
                    async with gw.running(), trio.open_nursery() as nursery:
                        async with stdio_client(gw, nursery) as one, stdio_client(gw, nursery) as two:
                            fronts = [s.peer.stream for s in gw.sessions]
                            assert all(isinstance(f, ForwardingStream) for f in fronts) and len(fronts) == 2
                            before = sum(f.statistics()["calls_spliced"] for f in fronts)  # type: ignore[attr-defined]
                            answers: dict[str, str] = {}

                            async def call(client: ClientSession, tag: str) -> None:
                                result = await client.call_tool("b__reverse", {"n": MANY, "tag": tag})
                                assert result.is_error is not True, result
                                answers[tag] = result.content[0].text

                            async with trio.open_nursery() as calls:
                                for i in range(MANY):
                                    calls.start_soon(call, one if i % 2 else two, f"{i % 2} {i}")
                            assert answers == {f"{i % 2} {i}": f"{i % 2} {i}" for i in range(MANY)}
                            after = [f.statistics() for f in fronts]  # type: ignore[attr-defined]
                            assert sum(a["calls_spliced"] for a in after) == before + MANY
                            assert [a["calls_out"] for a in after] == [0, 0]
                        nursery.cancel_scope.cancel()
        finally:
            for stream in streams:
                await stream.aclose()
    assert await wait_gone(processes) == set()


async def test_a_server_lost_mid_burst_ends_every_call_with_an_error_result(processes: set[int]) -> None:
    with trio.fail_after(TIMEOUT):
        async with burst_gateway(processes) as (gw, client):
            results: list[Any] = []
            before = spliced(gw)

            async def call() -> None:
                results.append(await client.call_tool("b__die", {"n": MANY}))

            async with trio.open_nursery() as nursery:
                for _ in range(MANY):
                    nursery.start_soon(call)  # the last one in ends the server
            assert len(results) == MANY
            for result in results:
                assert result.is_error is True
                assert result.content[0].text.startswith("server 'b' is unavailable: connection closed")
            assert spliced(gw) == before + MANY and front_of(gw).statistics()["calls_out"] == 0
            assert gw.server_statistics()["b"].errors == MANY
            await gw.host.servers["b"].wait_connected()  # it comes back, and answers
            processes.update(children(os.getpid()))
            again = await client.call_tool("b__reverse", {"n": 1, "tag": "back"})
            assert again.content[0].text == "back"
    assert await wait_gone(processes) == set()


async def test_calls_on_the_byte_path_the_client_cancels_are_cancelled_at_the_server(
    processes: set[int],
) -> None:
    blocked = MANY // 2  # the server runs these and the calls that watch them at once
    with trio.fail_after(TIMEOUT):
        async with burst_gateway(processes) as (gw, client):
            results: list[Any] = []
            before = spliced(gw)

            async def block() -> None:
                results.append(await client.call_tool("b__block", {}))

            async with trio.open_nursery() as nursery:
                for _ in range(blocked):
                    nursery.start_soon(block)
                running = await client.call_tool("b__running", {"n": blocked})
                assert running.structured_content["result"] == blocked  # every one is at the server
                assert front_of(gw).statistics()["calls_out"] == blocked
                assert spliced(gw) == before + blocked + 1  # the blocked calls and the one watching
                nursery.cancel_scope.cancel()
            cancelled = await client.call_tool("b__cancelled", {"n": blocked})
            assert cancelled.structured_content["result"] == blocked
            stats = front_of(gw).statistics()
            assert results == []
            assert stats["calls_cancelled"] == blocked and stats["calls_out"] == 0
    assert await wait_gone(processes) == set()


CALL = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"b__running","arguments":{"n":0}}}\n'


async def test_calls_read_with_blank_lines_and_other_messages_are_each_answered(processes: set[int]) -> None:
    config = {"mcpServers": {"b": {"command": sys.executable, "args": [BURST]}}}
    to_gateway, from_client = os.pipe()
    to_client, from_gateway = os.pipe()
    ours = StdioStream(to_gateway, from_gateway, name="front")
    theirs = StdioStream(to_client, from_client, name="client")  # a client writing lines as they are

    async def answers(n: int) -> dict[Any, Any]:
        got = [await theirs.receive() for _ in range(n)]
        return {m.id: msgspec.json.decode(m.result) for m in got}

    try:
        with trio.fail_after(TIMEOUT), collapse_groups():
            async with open_gateway(config, settings=FOREVER, stdio_options=STDIO) as gw:
                processes.update(children(os.getpid()))
                async with gw.running(), trio.open_nursery() as nursery:
                    await gw.start_session(ours, nursery)
                    await theirs.send_raw(
                        b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
                        b'"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}\n'
                    )
                    await answers(1)
                    await theirs.send_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
                    await theirs.send_raw(CALL % 1)
                    await answers(1)
                    before, forwarded = spliced(gw), front_of(gw).statistics()["calls_forwarded"]
                    # One read (one write under PIPE_BUF): calls around blank lines, all taken.
                    await theirs.send_raw(CALL % 2 + b"\n \t\n" + CALL % 3 + b"\n")
                    got = await answers(2)
                    assert spliced(gw) == before + 2
                    # A ping among them: the calls before it are taken, it and the rest decoded
                    # (in order: the frame path takes the calls after it).
                    await theirs.send_raw(CALL % 4 + b'{"jsonrpc":"2.0","id":5,"method":"ping"}\n' + CALL % 6)
                    got |= await answers(3)
                    assert spliced(gw) == before + 3
                    assert front_of(gw).statistics()["calls_forwarded"] == forwarded + 4
                    # A blank line first and a call whose id is out already: the first call
                    # is taken, the second decoded (the frame path answers that id is out).
                    await theirs.send_raw(b"\n" + CALL % 7 + CALL % 7)
                    dup, first = sorted(
                        [await theirs.receive() for _ in range(2)], key=lambda m: type(m).__name__
                    )
                    assert (type(dup).__name__, dup.id, type(first).__name__, first.id) == (
                        "ErrorResponse",
                        7,
                        "Response",
                        7,
                    )
                    assert dup.error.message == "Duplicate request id 7"
                    await theirs.send_raw(CALL % 8)
                    assert list(await answers(1)) == [8]  # nothing else came for 7
                    assert spliced(gw) == before + 5
                    assert got.pop(5) == {}
                    assert got == {
                        i: {"content": [{"type": "text", "text": "0"}], "structuredContent": {"result": 0}}
                        for i in (2, 3, 4, 6)
                    }
                    nursery.cancel_scope.cancel()
    finally:
        await ours.aclose()
        await theirs.aclose()
    assert await wait_gone(processes) == set()
