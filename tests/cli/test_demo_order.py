"""``trio-mcp demo``: the in-memory part shows the server's log messages and
progress in the order the server sent them, before the result they belong to."""

from __future__ import annotations

import trio

from trio_mcp.cli._demo import run_demo


async def _lines() -> list[str]:
    lines: list[str] = []
    with trio.fail_after(30):
        await run_demo(calls=5, out=lines.append)
    return [line for line in lines if "calls/s" not in line]


async def test_logs_and_progress_come_in_server_order_before_the_result() -> None:
    lines = await _lines()
    start = lines.index("  progress 1.0/3.0 step 1")
    assert lines[start : start + 7] == [
        "  progress 1.0/3.0 step 1",
        "  [server log info] tick 3",
        "  progress 2.0/3.0 step 2",
        "  [server log info] tick 2",
        "  progress 3.0/3.0 step 3",
        "  [server log info] tick 1",
        "countdown -> liftoff",
    ]


async def test_the_in_memory_part_prints_the_same_every_run() -> None:
    first = await _lines()
    for _ in range(4):
        assert await _lines() == first
