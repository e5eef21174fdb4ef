"""Sync (``def``) handlers run in worker threads under the server's bounded
limiter, so they never block the event loop; ``inline=True`` opts out."""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from trio_mcp import MCPServer
from trio_mcp.protocol import PromptReference
from trio_mcp.testing import connected

WAIT = 10.0  # bound of every wait, seconds


def _texts(result: object) -> list[str]:
    return [getattr(block, "text", "") for block in getattr(result, "content", [])]


async def test_four_sync_calls_run_at_once_and_ping_is_answered_meanwhile() -> None:
    app = MCPServer("sync", max_sync_threads=4)
    # 4 tool threads and this test's own thread: passes only when all 4 are inside the tool.
    all_inside = threading.Barrier(5)
    release = threading.Event()

    @app.tool
    def hold(i: int) -> str:
        all_inside.wait(WAIT)
        if not release.wait(WAIT):
            raise TimeoutError("never released")
        return f"done {i}"

    results: dict[int, list[str]] = {}
    async with connected(app) as client:

        async def call(i: int) -> None:
            result = await client.call_tool("hold", {"i": i})
            assert result.is_error is not True, _texts(result)
            results[i] = _texts(result)

        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:
                for i in range(4):
                    nursery.start_soon(call, i)
                await trio.to_thread.run_sync(all_inside.wait, WAIT)
                # All four handlers are blocked in their threads: the loop still answers.
                await client.ping()
                assert results == {}
                release.set()
    assert results == {i: [f"done {i}"] for i in range(4)}


async def test_sync_handlers_run_in_threads_and_inline_ones_in_the_loop() -> None:
    app = MCPServer("threads")
    seen: dict[str, int] = {}

    @app.tool
    def threaded() -> str:
        seen["tool"] = threading.get_ident()
        return "t"

    @app.tool(inline=True)
    def inline() -> str:
        seen["inline tool"] = threading.get_ident()
        return "i"

    @app.resource("res://{name}")
    def res(name: str) -> str:
        seen["resource"] = threading.get_ident()
        return name

    @app.prompt
    def ask(topic: str) -> str:
        seen["prompt"] = threading.get_ident()
        return topic

    @app.completion("ask", "topic")
    def topics(value: str, context: dict[str, str]) -> list[str]:
        seen["completion"] = threading.get_ident()
        return [value + "x"]

    loop_thread = threading.get_ident()
    with trio.fail_after(WAIT):
        async with connected(app) as client:
            await client.call_tool("threaded")
            await client.call_tool("inline")
            assert (await client.read_resource("res://a")).contents[0].text == "a"  # type: ignore[union-attr]
            await client.get_prompt("ask", {"topic": "t"})
            done = await client.complete(PromptReference(name="ask"), "topic", "v")
    assert done.completion.values == ["vx"]
    assert seen["inline tool"] == loop_thread
    for kind in ("tool", "resource", "prompt", "completion"):
        assert seen[kind] != loop_thread, kind


async def test_cancelled_sync_call_is_abandoned_at_once_and_its_thread_keeps_the_token() -> None:
    app = MCPServer("cancel", max_sync_threads=1)
    entered = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    @app.tool
    def stuck() -> str:
        entered.set()
        release.wait(WAIT)
        finished.set()
        return "late"

    @app.tool
    def quick() -> str:
        return "quick"

    limiter = app.thread_limiter
    with trio.fail_after(WAIT):
        async with connected(app) as client:
            session = next(iter(app.sessions))
            async with trio.open_nursery() as nursery:
                scope = trio.CancelScope()

                async def call_stuck() -> None:
                    with scope:
                        await client.call_tool("stuck")
                    assert scope.cancelled_caught

                nursery.start_soon(call_stuck)
                await trio.to_thread.run_sync(entered.wait, WAIT)
                scope.cancel()
                # The server cancels the handler at once although its thread still runs...
                await trio.testing.wait_all_tasks_blocked()
                assert session.peer.statistics().handlers_running == 0
                assert not finished.is_set()
                # ...and the abandoned thread still holds the only token: the next call waits.
                assert limiter.borrowed_tokens == 1
                quick_result: list[str] = []

                async def call_quick() -> None:
                    quick_result.extend(_texts(await client.call_tool("quick")))

                nursery.start_soon(call_quick)
                await trio.testing.wait_all_tasks_blocked()
                assert limiter.statistics().tasks_waiting == 1
                assert quick_result == []
                release.set()  # the thread ends, returns its token, and the waiting call runs
    assert quick_result == ["quick"]
    assert finished.is_set()
    assert limiter.borrowed_tokens == 0


async def test_limiter_bounds_the_threads_at_once() -> None:
    app = MCPServer("bounded", max_sync_threads=2)
    lock = threading.Lock()
    inside = 0
    most = 0
    two_inside = threading.Barrier(3)  # 2 tool threads and this test's thread
    release = threading.Event()

    @app.tool
    def work() -> str:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
            first_two = most <= 2 and not release.is_set()
        if first_two:
            two_inside.wait(WAIT)
        release.wait(WAIT)
        with lock:
            inside -= 1
        return "ok"

    with trio.fail_after(WAIT):
        async with connected(app) as client, trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(client.call_tool, "work")
            await trio.to_thread.run_sync(two_inside.wait, WAIT)
            await trio.testing.wait_all_tasks_blocked()
            # two threads inside, the other four calls wait for a token
            assert app.thread_limiter.borrowed_tokens == 2
            assert app.thread_limiter.statistics().tasks_waiting == 4
            release.set()
    assert most == 2


def test_max_sync_threads_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_sync_threads"):
        MCPServer("x", max_sync_threads=0)
