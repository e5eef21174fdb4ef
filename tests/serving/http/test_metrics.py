"""``GET /metrics`` of :class:`HttpServer` (real HTTP on 127.0.0.1, port 0):
off by default, per-server registries (two servers in one process, one of
them stateless, count apart), ``initialize`` refused at ``max_sessions``
counted, OpenMetrics on request, GET only, and the path reserved."""

from __future__ import annotations

import json

import httpx
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from trio_mcp.observability import Metrics
from trio_mcp.server import MCPServer
from trio_mcp.serving.http import HttpServer

from .test_server import ACCEPT_BOTH, TIMEOUT, http, init_message, initialize, make_app, serving


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def calls_ok(scraped: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> float:
    return scraped.get(("trio_mcp_requests_total", (("method", "tools/call"), ("outcome", "ok"))), 0.0)


async def test_off_by_default() -> None:
    async with serving() as (server, url), http() as client:
        assert server.asgi.metrics is None
        assert (await client.get(url.replace("/mcp", "/metrics"))).status_code == 404


async def test_two_servers_count_apart_one_of_them_stateless() -> None:
    mine = Metrics()
    async with (
        serving(make_app(), metrics=mine) as (_, url_a),
        serving(make_app(), metrics=True, stateless=True) as (stateless, url_b),
        http() as client,
    ):
        session = await initialize(client, url_a)
        for _ in range(3):
            response = await session.post(
                session.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
            )
            assert response.status_code == 200
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "y"}},
        }
        response = await client.post(
            url_b, content=json.dumps(call), headers={**ACCEPT_BOTH, "mcp-protocol-version": "2025-11-25"}
        )
        assert response.status_code == 200, response.text
        a = samples((await client.get(url_a.replace("/mcp", "/metrics"))).text)
        b = samples((await client.get(url_b.replace("/mcp", "/metrics"))).text)
    assert calls_ok(a) == 3
    assert calls_ok(b) == 1
    assert a[("trio_mcp_sessions_open", ())] == 1
    assert b[("trio_mcp_sessions_open", ())] == 0
    assert stateless.asgi.metrics is not None and stateless.asgi.metrics is not mine


async def test_initialize_refused_at_max_sessions_is_counted() -> None:
    started, release = trio.Event(), trio.Event()
    app = MCPServer("busy")

    @app.tool
    async def hold() -> str:
        started.set()
        await release.wait()
        return "released"

    async with serving(app, metrics=True, max_sessions=1) as (_, url), http() as client:
        session = await initialize(client, url)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.post, session.request("tools/call", {"name": "hold", "arguments": {}}))
            await started.wait()  # the one session is busy: it cannot be evicted
            refused = await client.post(url, content=json.dumps(init_message()), headers=ACCEPT_BOTH)
            assert refused.status_code == 503
            scraped = samples((await client.get(url.replace("/mcp", "/metrics"))).text)
            release.set()
    rejections = "trio_mcp_overload_rejections_total"
    assert scraped[(rejections, (("reason", "max_sessions"),))] == 1
    assert scraped[(rejections, (("reason", "session_queue"),))] == 0
    assert scraped[("trio_mcp_requests_in_flight", ())] == 1


async def test_openmetrics_get_only_and_the_path_is_taken() -> None:
    async with serving(metrics=True) as (_, url), http() as client:
        metrics_url = url.replace("/mcp", "/metrics")
        open_metrics = await client.get(metrics_url, headers={"accept": "application/openmetrics-text"})
        assert open_metrics.headers["content-type"].startswith("application/openmetrics-text")
        assert open_metrics.text.endswith("# EOF\n")
        assert (await client.post(metrics_url)).status_code == 405
    with pytest.raises(ValueError, match="taken"):
        HttpServer(make_app(), metrics=True, routes={"/metrics": lambda *_: None})  # type: ignore[arg-type,return-value]
    custom = HttpServer(make_app(), metrics=True, metrics_path="/internal/metrics")
    assert custom.asgi.settings.metrics_path == "/internal/metrics"
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            info = await nursery.start(custom.run)
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                assert (await client.get(info.url.replace("/mcp", "/internal/metrics"))).status_code == 200
            custom.stop()


async def test_an_app_made_per_session_is_counted_in_every_session() -> None:
    made: list[MCPServer] = []

    def factory() -> MCPServer:
        made.append(make_app())
        return made[-1]

    async with serving(factory, metrics=True) as (server, url), http() as client:
        for _ in range(2):
            session = await initialize(client, url)
            response = await session.post(
                session.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
            )
            assert response.status_code == 200
        scraped = samples((await client.get(url.replace("/mcp", "/metrics"))).text)
    assert len(made) == 2
    assert calls_ok(scraped) == 2
    assert scraped[("trio_mcp_sessions_open", ())] == 2
    metrics = server.asgi.metrics
    assert metrics is not None and all(app.middleware == (metrics.middleware,) for app in made)
