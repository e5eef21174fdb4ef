""":class:`Metrics` around a server session over an in-memory pair: request
counts by method and outcome, latency by tool with bounded labels, requests
in flight, queue depth and overload refusals (-32001) read from the peer at
scrape time, and kept once the session is gone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from prometheus_client.parser import text_string_to_metric_families

from trio_mcp.actors import PeerLimits
from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.actors._server import ServerSession
from trio_mcp.observability import OTHER, Metrics, MetricsSettings
from trio_mcp.protocol import McpError, ServerOverloaded
from trio_mcp.server import MCPServer
from trio_mcp.transports.memory import memory_pair

TIMEOUT = 10.0


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


@asynccontextmanager
async def session(app: MCPServer, metrics: Metrics) -> AsyncIterator[tuple[ClientSession, ServerSession]]:
    """A client session with ``app`` (instrumented, its session tracked)."""
    metrics.instrument(app)
    client_end, server_end = memory_pair()
    async with app.running(), trio.open_nursery() as nursery:
        server = await app.start_session(server_end, nursery)
        metrics.track(server)
        async with open_session(client_end) as client:
            yield client, server
        nursery.cancel_scope.cancel()


def blocking_app(release: trio.Event, **options: Any) -> MCPServer:
    app = MCPServer("metrics-test", **options)

    @app.tool
    async def wait() -> str:
        await release.wait()
        return "done"

    @app.tool
    def one() -> str:
        return "1"

    @app.tool
    def two() -> str:
        return "2"

    @app.tool
    def fails() -> str:
        raise RuntimeError("no")

    return app


async def test_counts_by_method_and_outcome_and_bounded_tool_labels() -> None:
    metrics = Metrics(max_tool_labels=2)
    with trio.fail_after(TIMEOUT):
        async with session(blocking_app(trio.Event()), metrics) as (client, _):
            await client.call_tool("one", {})
            await client.call_tool("fails", {})  # a tool error: its name is the second label
            await client.call_tool("two", {})  # a third name: over the bound
            with pytest.raises(McpError):
                await client.call_tool("missing", {})
            with pytest.raises(McpError):
                await client.peer.request("made/up", {})
            await client.list_tools()
    requests = "trio_mcp_requests_total"
    assert value(metrics, requests, method="tools/call", outcome="ok") == 2
    assert value(metrics, requests, method="tools/call", outcome="tool_error") == 1
    assert value(metrics, requests, method="tools/call", outcome="error") == 1
    assert value(metrics, requests, method=OTHER, outcome="error") == 1  # made/up: not an MCP method
    assert value(metrics, requests, method="tools/list", outcome="ok") == 1
    count = "trio_mcp_request_duration_seconds_count"
    assert value(metrics, count, method="tools/call", tool="one") == 1
    assert value(metrics, count, method="tools/call", tool="fails") == 1
    assert value(metrics, count, method="tools/call", tool="two") is None
    assert value(metrics, count, method="tools/call", tool=OTHER) == 2  # two, and the missing tool
    families = {f.name for f in text_string_to_metric_families(metrics.render()[0].decode())}
    assert "trio_mcp_request_duration_seconds" in families


async def test_in_flight_queue_depth_and_overload_refusals() -> None:
    release = trio.Event()
    app = blocking_app(release, limits=PeerLimits(max_concurrent_handlers=1, max_queued_requests=1))
    metrics = Metrics()
    refused: list[McpError] = []

    async def call(client: ClientSession) -> None:
        try:
            await client.call_tool("wait", {})
        except McpError as exc:
            refused.append(exc)

    with trio.fail_after(TIMEOUT):
        async with session(app, metrics) as (client, server):
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(call, client)
                    await trio.testing.wait_all_tasks_blocked()
                # One runs, one waits for the worker, the third was refused at once.
                assert [e.code for e in refused] == [ServerOverloaded.code]
                assert value(metrics, "trio_mcp_requests_in_flight") == 1
                assert value(metrics, "trio_mcp_queue_depth", queue="requests") == 1
                assert value(metrics, "trio_mcp_overload_rejections_total", reason="handler_queue") == 1
                release.set()
            assert value(metrics, "trio_mcp_requests_in_flight") == 0
            assert value(metrics, "trio_mcp_queue_depth", queue="requests") == 0
        metrics.untrack(server)
    # The session is gone: its refusal stays counted.
    assert value(metrics, "trio_mcp_overload_rejections_total", reason="handler_queue") == 1
    assert value(metrics, "trio_mcp_requests_total", method="tools/call", outcome="ok") == 2


async def test_each_metrics_has_its_own_registry_and_a_cancelled_request_is_counted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    release = trio.Event()
    first, second = Metrics(), Metrics()
    with trio.fail_after(TIMEOUT):
        async with session(blocking_app(release), first) as (client, _):
            with trio.move_on_after(1.0):
                await client.call_tool("wait", {})
            await trio.testing.wait_all_tasks_blocked()  # the server saw notifications/cancelled
            assert value(first, "trio_mcp_requests_in_flight") == 0
    assert value(first, "trio_mcp_requests_total", method="tools/call", outcome="cancelled") == 1
    assert value(second, "trio_mcp_requests_total", method="tools/call", outcome="cancelled") is None


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="increasing"):
        MetricsSettings(buckets=(1.0, 0.5))
    with pytest.raises(ValueError, match="prefix"):
        MetricsSettings(namespace="9x")
    assert Metrics(namespace="app").name("requests") == "app_requests"
