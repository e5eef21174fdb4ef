"""The load generator against in-memory servers whose behaviour the tests
control, on trio's virtual clock: the reported figures are checked against
the reference (a fixed delay, a stall, a schedule), not against themselves."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
import trio.lowlevel

from trio_mcp.bench import BenchConfig, LoadPlan, Stage, format_summary, run_bench, single_tool
from trio_mcp.bench._scenario import scenario_from_spec
from trio_mcp.server import MCPServer
from trio_mcp.testing import connected

TIMEOUT = 600  # virtual seconds: every run here is bounded


# Sync handlers run inline: these tests run on the autojump clock, which would jump
# ahead while a worker thread runs.
def delay_app(delay: float, stall: tuple[float, float] | None = None) -> MCPServer:
    """``work`` answers after ``delay`` s; during ``stall`` (start, end: clock
    times) it answers nothing until the stall ends."""
    app = MCPServer("delay")
    app.calls = 0  # type: ignore[attr-defined]

    @app.tool
    async def work() -> str:
        """Fixed delay."""
        app.calls += 1  # type: ignore[attr-defined]
        if stall is not None and stall[0] <= trio.current_time() < stall[1]:
            await trio.sleep_until(stall[1])
        await trio.sleep(delay)
        return "done"

    @app.tool(inline=True)
    def wobbly(n: int) -> str:
        """isError on every third call."""
        app.calls += 1  # type: ignore[attr-defined]
        if app.calls % 3 == 0:
            raise RuntimeError("wobble")
        return "fine"

    @app.resource("mem://item/{id}", inline=True)
    def item(id: str) -> str:
        return f"item {id}"

    @app.prompt(inline=True)
    def greet(name: str) -> str:
        """A greeting."""
        return f"hello {name}"

    return app


async def bench(app: MCPServer, plan: LoadPlan, scenario: Any = None, **kw: Any) -> dict[str, Any]:
    config = BenchConfig(
        target=["memory"], plan=plan, scenario=scenario or single_tool("work", {}), live="off", **kw
    )
    with trio.fail_after(TIMEOUT):
        return await run_bench(config, opener=partial(connected, app))


async def test_closed_model_percentiles_match_a_fixed_delay(autojump_clock: trio.abc.Clock) -> None:
    report = await bench(delay_app(0.020), LoadPlan(level=4, duration=5, warmup=1))
    lat = report["total"]["latency_us"]
    # 4 callers, 20 ms each: 200 calls/s for 5 s (the last calls may end just after)
    assert 996 <= report["calls"] <= 1004 and report["ok"] == report["calls"]
    for key in ("min", "p50", "p90", "p99", "p99.9", "max"):
        assert 20_000 <= lat[key] <= 20_000 * 1.05, (key, lat)
    assert report["warmup_calls"] > 0  # the warm-up ran, and is not in the figures
    # calls finishing right on an interval's edge may land either side of it
    assert all(196 <= i["calls"] <= 204 for i in report["intervals"][:5])


async def test_open_model_keeps_its_rate_through_a_stall_and_the_corrected_figures_show_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    start = trio.current_time()
    # measuring begins 1 s after the sessions open (warm-up); the server stalls
    # for one second from 4 s after the start
    app = delay_app(0.005, stall=(start + 4.0, start + 5.0))
    plan = LoadPlan(model="open", level=100, duration=10, warmup=1, max_in_flight=4)
    report = await bench(app, plan)
    total = report["total"]
    # the schedule is kept: 100/s for 10 s, whatever the server did
    assert 999 <= report["calls"] <= 1001 and report["ok"] == report["calls"]
    # about a second's worth of calls waited for the stall
    assert sum(i["late"] for i in report["intervals"]) >= 90
    # corrected (from the intended start) shows the stall; uncorrected does not
    assert total["latency_us"]["p99"] >= 800_000
    assert total["latency_us"]["max"] >= 990_000
    assert total["uncorrected_us"]["p99"] <= 10_000
    assert total["uncorrected_us"]["p50"] >= 5_000
    summary = format_summary(report)
    assert "uncorrected (from send)" in summary and "(open model)" in summary


async def test_open_model_without_a_cap_sends_on_schedule_during_the_stall(
    autojump_clock: trio.abc.Clock,
) -> None:
    start = trio.current_time()
    app = delay_app(0.005, stall=(start + 4.0, start + 5.0))
    report = await bench(app, LoadPlan(model="open", level=100, duration=10, warmup=1))
    assert 999 <= report["calls"] <= 1001
    assert sum(i["late"] for i in report["intervals"]) == 0
    assert max(i["in_flight"] for i in report["intervals"]) >= 90  # the calls kept going out


async def test_a_rate_ramp_follows_its_stages(autojump_clock: trio.abc.Clock) -> None:
    plan = LoadPlan(model="open", level=0, stages=(Stage(10, 100, "open"), Stage(5, 100, "open")), warmup=0)
    report = await bench(delay_app(0.001), plan)
    # 0 → 100/s over 10 s (500 calls), then 100/s for 5 s (500 calls)
    assert 980 <= report["calls"] <= 1010
    per_s = [i["calls"] for i in report["intervals"]]
    assert per_s[0] < 20 and 80 <= per_s[9] <= 100 and per_s[12] == 100


async def test_a_callers_ramp_adds_callers(autojump_clock: trio.abc.Clock) -> None:
    plan = LoadPlan(level=1, stages=(Stage(4, 8, "closed"), Stage(2, 8, "closed")), warmup=0)
    report = await bench(delay_app(0.010), plan)
    in_flight = [i["in_flight"] for i in report["intervals"]]
    assert in_flight[0] <= 3 and max(in_flight) == 8
    per_s = [i["calls"] for i in report["intervals"]]
    assert per_s[5] == 800  # 8 callers × 100 calls/s each


async def test_a_weighted_scenario_mixes_every_kind_of_operation_exactly(
    autojump_clock: trio.abc.Clock,
) -> None:
    scenario = scenario_from_spec(
        {
            "operations": [
                {"tool": "work", "weight": 3},
                {"resource": "mem://item/{id}", "arguments": {"id": {"seq": [1, 2]}}},
                {"prompt": "greet", "arguments": {"name": {"choice": ["a", "b"]}}},
                {"list": "tools"},
                {"ping": True},
            ]
        },
        base=__import__("pathlib").Path("."),
        origin="test",
    )
    report = await bench(
        delay_app(0.001), LoadPlan(level=5, duration=float("inf"), calls=700, warmup=0), scenario
    )
    counts = {name: f["calls"] for name, f in report["operations"].items()}
    assert counts == {
        "call work": 300,
        "read mem://item/{id}": 100,
        "prompt greet": 100,
        "list tools": 100,
        "ping": 100,
    }
    assert report["calls"] == report["ok"] == 700


async def test_outcomes_are_told_apart(autojump_clock: trio.abc.Clock) -> None:
    app = delay_app(0.001)
    wobbly = await bench(
        app, LoadPlan(level=1, duration=float("inf"), calls=30, warmup=0), single_tool("wobbly", {"n": 1})
    )
    unknown = await bench(
        app, LoadPlan(level=2, duration=float("inf"), calls=10, warmup=0), single_tool("nope", {})
    )
    slow = await bench(
        delay_app(1.0), LoadPlan(level=3, duration=float("inf"), calls=6, warmup=0, call_timeout=0.1)
    )
    assert (wobbly["calls"], wobbly["ok"], wobbly["is_error"]) == (30, 20, 10)
    assert (unknown["calls"], unknown["ok"], unknown["failed"]) == (10, 0, {"-32602": 10})
    assert (slow["calls"], slow["failed"]) == (6, {"timeout": 6})
    assert wobbly["total"]["error_rate"] == pytest.approx(1 / 3)


async def test_each_session_is_its_own_connection_and_calls_are_spread(
    autojump_clock: trio.abc.Clock,
) -> None:
    app = delay_app(0.001)
    opened: list[int] = []
    calls_per_session: list[int] = []

    @asynccontextmanager
    async def opener() -> AsyncIterator[Any]:
        index = len(opened)
        opened.append(index)
        calls_per_session.append(0)
        async with connected(app) as client:
            original: Callable[..., Any] = client.call_tool

            async def counted(*args: Any, **kw: Any) -> Any:
                calls_per_session[index] += 1
                return await original(*args, **kw)

            client.call_tool = counted  # type: ignore[method-assign]
            yield client

    config = BenchConfig(
        target=["memory"],
        plan=LoadPlan(level=6, duration=float("inf"), calls=600, warmup=0, sessions=3),
        scenario=single_tool("work", {}),
        live="off",
    )
    with trio.fail_after(TIMEOUT):
        report = await run_bench(config, opener=opener)
    assert len(opened) == 3 and report["sessions"]["opened"] == 3
    assert calls_per_session == [200, 200, 200]
    assert report["sessions"]["mean_us"] >= 0 and not report["sessions"]["failures"]


async def test_a_server_that_drops_the_connection_is_reported_not_waited_for() -> None:
    app = MCPServer("dies")
    served = 0

    @app.tool
    async def work() -> str:
        """The session ends after 50 calls."""
        nonlocal served
        served += 1
        if served == 50:
            for session in list(app.sessions):
                await session.aclose()
        return "x"

    plan = LoadPlan(model="open", level=200, duration=60, warmup=0)
    report = await bench(app, plan)
    assert report["stopped"] is not None and "connection closed" in report["stopped"]
    assert report["seconds"] < 60
    kinds = {e["kind"] for e in report["events"]}
    assert {"session-lost", "connection-lost"} <= kinds
    lost = next(e for e in report["events"] if e["kind"] == "connection-lost")
    assert lost["not_sent"] > 1000  # most of the minute's schedule
    assert "lost at" in format_summary(report)


async def test_stopping_early_still_reports_what_was_measured(autojump_clock: trio.abc.Clock) -> None:
    stop = trio.Event()
    app = delay_app(0.010)
    config = BenchConfig(
        target=["memory"],
        plan=LoadPlan(level=2, duration=60, warmup=0),
        scenario=single_tool("work", {}),
        live="off",
    )

    async def press_ctrl_c() -> None:
        await trio.sleep(3.005)
        stop.set()

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(press_ctrl_c)
            report = await run_bench(config, opener=partial(connected, app), stop=stop)
    assert report["stopped"] == "interrupted"
    assert 3.0 <= report["seconds"] < 3.1
    assert 590 <= report["calls"] <= 602  # 2 callers × 100/s × 3 s
    assert any(e["kind"] == "interrupted" for e in report["events"])


async def test_task_required_tools_are_benched_as_tasks_to_their_results() -> None:
    app = MCPServer("tasks", tasks=True)

    @app.tool(task_support="required")
    async def research(topic: str) -> str:
        await trio.lowlevel.checkpoint()
        return f"report on {topic}"

    report = await bench(
        app,
        LoadPlan(level=2, duration=float("inf"), calls=10, warmup=0),
        single_tool("research", {"topic": "trio"}),
    )
    # Called plainly, a task-required tool is refused (-32601): every call ran as a task instead.
    assert (report["calls"], report["ok"], report["is_error"], report["failed"]) == (10, 10, 0, {})
