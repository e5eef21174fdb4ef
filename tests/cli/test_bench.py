"""``trio-mcp bench``: the load run (in memory, with a controlled server) and
the command against real server processes over stdio and Streamable HTTP."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import trio

from trio_mcp.cli._bench import format_result, run_bench
from trio_mcp.server import MCPServer
from trio_mcp.testing import connected

from .conftest import CLI, EXAMPLE, ROOT

TIMEOUT = 20


def bench_app() -> MCPServer:
    app = MCPServer("bench-test")
    app.calls = 0  # type: ignore[attr-defined]

    @app.tool
    async def echo(text: str) -> str:
        """Echo."""
        app.calls += 1  # type: ignore[attr-defined]
        await trio.lowlevel.checkpoint()
        return text

    @app.tool
    def wobbly(n: int) -> str:
        """isError on every third call."""
        app.calls += 1  # type: ignore[attr-defined]
        if app.calls % 3 == 0:
            raise RuntimeError("wobble")
        return "fine"

    @app.tool
    async def slow() -> str:
        """Slower than the call timeout."""
        await trio.sleep(1)
        return "late"

    return app


async def test_a_call_budget_is_exact_and_every_call_is_counted() -> None:
    app = bench_app()
    with trio.fail_after(TIMEOUT):
        async with connected(app) as client:
            result = await run_bench(
                client, "echo", {"text": "x"}, concurrency=7, duration=0, calls=500, warmup=0
            )
    assert (result.calls, result.ok, result.is_error, result.failed) == (500, 500, 0, {})
    assert app.calls == 500  # no call made beyond the budget
    assert 0 < result.p50_us <= result.p99_us <= result.max_us
    assert result.calls_per_s > 0 and result.stopped is None
    assert "500 ok, 0 isError, 0 failed" in format_result(result, "memory")


async def test_is_error_results_and_protocol_errors_are_told_apart() -> None:
    app = bench_app()
    with trio.fail_after(TIMEOUT):
        async with connected(app) as client:
            wobbly = await run_bench(
                client, "wobbly", {"n": 1}, concurrency=1, duration=0, calls=30, warmup=0
            )
            unknown = await run_bench(client, "nope", {}, concurrency=2, duration=0, calls=10, warmup=0)
    assert (wobbly.calls, wobbly.ok, wobbly.is_error) == (30, 20, 10)
    assert (unknown.calls, unknown.ok, unknown.failed) == (10, 0, {"-32602": 10})


async def test_calls_slower_than_the_call_timeout_fail_as_timeouts(autojump_clock: trio.abc.Clock) -> None:
    app = bench_app()
    with trio.fail_after(TIMEOUT):
        async with connected(app) as client:
            result = await run_bench(
                client, "slow", {}, concurrency=3, duration=0, calls=6, warmup=0, call_timeout=0.1
            )
    assert (result.calls, result.ok, result.failed) == (6, 0, {"timeout": 6})


async def test_a_dead_connection_ends_the_run_early_and_says_so() -> None:
    app = MCPServer("dies")
    served = 0

    @app.tool
    async def echo(text: str) -> str:
        """Echo; the session ends after 20 calls."""
        nonlocal served
        served += 1
        if served == 20:
            for session in list(app.sessions):
                await session.aclose()
        return text

    with trio.fail_after(TIMEOUT):
        async with connected(app) as client:
            result = await run_bench(client, "echo", {"text": "x"}, concurrency=4, duration=60, warmup=0)
    assert result.stopped is not None and "connection closed" in result.stopped
    assert result.calls < 40 and result.seconds < 60
    assert "stopped early" in format_result(result, "memory")


async def test_bad_settings_are_refused() -> None:
    async with connected(bench_app()) as client:
        with pytest.raises(ValueError, match="concurrency"):
            await run_bench(client, "echo", {}, concurrency=0)
        with pytest.raises(ValueError, match="duration or a number of calls"):
            await run_bench(client, "echo", {}, duration=0)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)


def test_bench_a_stdio_server_as_json() -> None:
    out = cli(
        "bench",
        "echo",
        "message=hi",
        "-c",
        "4",
        "-n",
        "300",
        "--warmup",
        "0.2",
        "--json",
        "--",
        sys.executable,
        EXAMPLE,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert (report["calls"], report["ok"], report["failed"]) == (300, 300, {})
    assert report["protocol"] == "2026-07-28"  # the auto client probes, the server speaks it


def test_a_bad_argument_stops_the_bench_before_the_load() -> None:
    out = cli("bench", "echo", "text=hi", "-n", "10", "--", sys.executable, EXAMPLE)
    assert out.returncode == 1
    assert "answered isError before the load run" in out.stderr and "message" in out.stderr
    assert out.stdout == ""


def test_bench_a_streamable_http_server_in_the_handshake_era(http_url: str) -> None:
    out = cli(
        "bench",
        http_url,
        "echo",
        "message=hi",
        "-c",
        "8",
        "-d",
        "0.5",
        "--warmup",
        "0.1",
        "--era",
        "handshake",
    )
    assert out.returncode == 0, out.stderr
    assert f"tools/call echo on {http_url}: 8 callers" in out.stdout
    assert "protocol 2025-11-25" in out.stdout and " 0 failed" in out.stdout


async def test_task_augmented_calls_are_benched_to_their_results() -> None:
    app = MCPServer("bench-tasks", tasks=True)
    app.calls = 0  # type: ignore[attr-defined]

    @app.tool(task_support="required")
    async def job(n: int) -> int:
        app.calls += 1  # type: ignore[attr-defined]
        await trio.lowlevel.checkpoint()
        return n

    with trio.fail_after(TIMEOUT):
        async with connected(app) as client:
            plain = await run_bench(client, "job", {"n": 1}, concurrency=2, duration=0, calls=10, warmup=0)
            tasks = await run_bench(
                client, "job", {"n": 1}, concurrency=4, duration=0, calls=40, warmup=0, as_task=True
            )
    assert plain.failed == {"-32601": 10}  # task-required: refused as a plain call
    assert (tasks.calls, tasks.ok, tasks.failed) == (40, 40, {})
    assert app.calls == 40  # each call ran once, as a task, and its result was fetched
