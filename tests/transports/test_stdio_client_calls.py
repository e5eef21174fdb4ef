"""The public client's calls over stdio, against a scripted server process
(``fixtures/scripted_server.py``, which writes exactly what each test needs):
the paths a call takes there (a lone call written at once in the caller's
task, calls out together written in one write by the writer, a plain answer
decoded in one pass) keep every rule: a call cancelled once written tells
the server, one cancelled before it is never sent, an answer to an unknown id
is ignored, progress reaches its callback, errors stay typed."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.protocol import CallToolResult, InternalError, InvalidParams, TextContent
from trio_mcp.transports.stdio import StdioServerParameters, StdioTransport

SERVER = Path(__file__).parent / "fixtures" / "scripted_server.py"
TIMEOUT = 20.0


@asynccontextmanager
async def scripted() -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=[str(SERVER)], close_grace=1.0, term_grace=1.0
    )
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(StdioTransport(params).run)
            async with open_session(stream) as client:
                yield client


async def seen(client: ClientSession) -> dict[str, list[Any]]:
    result = await client.call_tool("seen")
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def hold(client: ClientSession) -> None:
    await client.call_tool("hold")
    raise AssertionError("hold is never answered")  # pragma: no cover


@pytest.mark.parametrize("calls", [1, 8])
async def test_calls_cancelled_once_written_each_send_notifications_cancelled(calls: int) -> None:
    # One call alone is written in its caller's task; the next ones, made while
    # it is out, by the writer in one write: both kinds tell the server.
    async with scripted() as client:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                for _ in range(calls):
                    nursery.start_soon(hold, client)
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
        report = await seen(client)
        assert len(report["holds"]) == calls
        assert sorted(report["cancelled"]) == sorted(report["holds"])
        assert client.statistics().pending_calls == 0


async def test_a_call_cancelled_before_its_request_was_written_is_never_sent() -> None:
    async with scripted() as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold, client)  # out: the next call goes to the writer
            await trio.testing.wait_all_tasks_blocked()
            with trio.CancelScope() as scope:
                scope.cancel()
                await client.call_tool("hold")
            assert scope.cancelled_caught
            nursery.cancel_scope.cancel()
        report = await seen(client)
        assert len(report["holds"]) == 1  # the second one never reached the server
        assert report["cancelled"] == report["holds"]


@pytest.mark.parametrize("calls", [1, 16])
async def test_an_answer_to_an_unknown_id_is_ignored(calls: int) -> None:
    results: dict[int, CallToolResult] = {}

    async def echo(client: ClientSession, i: int) -> None:
        results[i] = await client.call_tool("echo", {"text": f"t{i}"})

    async with scripted() as client:
        async with trio.open_nursery() as nursery:
            for i in range(calls):
                nursery.start_soon(echo, client, i)
        assert client.statistics().unmatched_responses == calls  # one stray answer per echo
    for i, result in results.items():
        assert type(result) is CallToolResult
        assert result.content == [TextContent(text=f"t{i}")]
    assert len(results) == calls


@pytest.mark.parametrize("calls", [1, 4])
async def test_progress_reaches_each_callback_before_the_answer(calls: int) -> None:
    reports: dict[int, list[tuple[float, float | None, str | None]]] = {}
    answers: dict[int, str] = {}

    async def progress(client: ClientSession, i: int) -> None:
        seen_here = reports.setdefault(i, [])

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen_here.append((progress, total, message))

        result = await client.call_tool("progress", {"steps": 3}, on_progress=on_progress)
        assert len(seen_here) == 3  # all of them before the answer
        assert isinstance(result.content[0], TextContent)
        answers[i] = result.content[0].text

    async with scripted() as client:
        async with trio.open_nursery() as nursery:
            for i in range(calls):
                nursery.start_soon(progress, client, i)
    assert answers == dict.fromkeys(range(calls), "done")
    for i in range(calls):
        assert reports[i] == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


@pytest.mark.parametrize("alone", [True, False])
async def test_error_and_malformed_answers_stay_typed(alone: bool) -> None:
    async with scripted() as client:
        async with trio.open_nursery() as nursery:
            if not alone:
                nursery.start_soon(hold, client)  # out: these calls go to the writer
                await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(InvalidParams, match="no such thing"):
                await client.call_tool("fail")
            with pytest.raises(InternalError, match="malformed result for tools/call"):
                await client.call_tool("bad")
            nursery.cancel_scope.cancel()
