"""A flood of calls from one Streamable HTTP client session: every call is
answered and the transport survives.

The server is ``tests/actors/fixtures/gated_server.py`` served over HTTP by
the CLI (``trio-mcp run … -t http``) in its own process, so this test does
not depend on where the HTTP server's code lives. Its ``hold`` tool waits
until the test writes a byte to a FIFO: until then the calls the client has
on the wire stay there and the rest must wait their turn in the client's
queue (never in a pool wait that could time out and fail the transport).
Real processes, real time; every wait bounded.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from tests.gated import GATED, make_fifo, release
from trio.testing import wait_all_tasks_blocked

from trio_mcp import McpError, ServerOverloaded, open_session
from trio_mcp.transports.http import HttpClientSettings, StreamableHttpTransport

TIMEOUT = 150.0  # a hang guard for 1,000 calls to a real server process on a loaded machine


@pytest.fixture
def release_fifo(tmp_path: Path) -> Path:
    return make_fifo(tmp_path)


@asynccontextmanager
async def http_server(fifo: Path) -> AsyncIterator[str]:
    """The gated server over HTTP on 127.0.0.1 (port chosen at run time),
    started by the CLI; yields its URL; stopped (SIGTERM, then SIGKILL) at the end."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trio_mcp.cli", "run", f"{GATED}:app", "-t", "http", "--port", "0"],
        stderr=subprocess.PIPE,
        env={**os.environ, "RELEASE_FIFO": str(fifo)},
    )
    try:
        assert process.stderr is not None
        async with trio.open_nursery() as nursery:
            seen = b""
            while (found := re.search(rb"serving gated over http at (\S+)", seen)) is None:
                chunk = await process.stderr.receive_some()
                assert chunk, f"the server exited: {seen.decode(errors='replace')}"
                seen += chunk

            async def drain() -> None:  # the server's log must not fill its stderr pipe
                assert process.stderr is not None
                async for _ in process.stderr:
                    pass

            nursery.start_soon(drain)
            yield found.group(1).decode()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            process.terminate()
            with trio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


async def test_a_flood_of_calls_from_one_session_is_answered_in_full(release_fifo: Path) -> None:
    calls = 1000
    settings = HttpClientSettings()
    outcomes: list[str] = []

    async def call(session: Any) -> None:
        try:
            await session.call_tool("hold")
            outcomes.append("ok")
        except ServerOverloaded:
            outcomes.append("overloaded")
        except McpError as exc:
            outcomes.append(f"error: {exc}")

    with trio.fail_after(TIMEOUT):
        async with http_server(release_fifo) as url, trio.open_nursery() as nursery:
            stream = await nursery.start(StreamableHttpTransport(url, settings=settings).run)
            async with open_session(stream) as session:
                async with trio.open_nursery() as callers:
                    for _ in range(calls):
                        callers.start_soon(call, session)
                    # Every call is on the wire or waiting its turn; none can finish yet.
                    await wait_all_tasks_blocked(0.2)
                    stats = stream.statistics()
                    assert stats["requests_posting"] == settings.max_request_posts
                    assert stats["requests_waiting"] == calls - settings.max_request_posts
                    assert outcomes == []
                    release(release_fifo)
                assert len(outcomes) == calls
                assert outcomes.count("ok") + outcomes.count("overloaded") == calls, sorted(set(outcomes))
                # The transport is alive and the session usable.
                echoed = await session.call_tool("echo", {"text": "still here"})
                assert echoed.content[0].text == "still here"
                assert stream.statistics()["requests_waiting"] == 0
            nursery.cancel_scope.cancel()


async def test_a_queued_call_leaves_with_its_caller_and_the_queue_is_bounded(release_fifo: Path) -> None:
    settings = HttpClientSettings(max_request_posts=1, max_queued_requests=2)
    outcomes: dict[str, str] = {}

    async def call(session: Any, name: str, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            try:
                await session.call_tool("hold")
                outcomes[name] = "ok"
            except ServerOverloaded as exc:
                outcomes[name] = f"overloaded: {exc}"
            return
        outcomes[name] = "cancelled"

    with trio.fail_after(TIMEOUT):
        async with http_server(release_fifo) as url, trio.open_nursery() as nursery:
            stream = await nursery.start(StreamableHttpTransport(url, settings=settings).run)
            async with open_session(stream) as session, trio.open_nursery() as callers:
                await callers.start(call, session, "on the wire")
                await callers.start(call, session, "first in line")
                impatient = await callers.start(call, session, "impatient")
                await wait_all_tasks_blocked(0.2)
                stats = stream.statistics()
                assert (stats["requests_posting"], stats["requests_waiting"]) == (1, 2)
                # One more than the queue holds is refused at once, locally.
                await callers.start(call, session, "one too many")
                await wait_all_tasks_blocked(0.2)
                assert outcomes == {
                    "one too many": "overloaded: [-32001] the client already has 2 requests waiting to be sent"
                }
                # The caller's scope bounds its wait in the queue.
                impatient.cancel()
                await wait_all_tasks_blocked(0.2)
                assert outcomes["impatient"] == "cancelled"
                assert stream.statistics()["requests_waiting"] == 1
                release(release_fifo)
            assert outcomes["on the wire"] == outcomes["first in line"] == "ok"
            nursery.cancel_scope.cancel()
