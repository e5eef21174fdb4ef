"""``GET /metrics`` of a real ``trio-mcp run FILE -t http`` process, scraped
over real HTTP (127.0.0.1, port 0) around a small concurrent load from our
client, parsed with prometheus_client's own text parser: every counter moved
by exactly the calls made; ``--no-metrics`` turns the route off."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import trio
from prometheus_client.parser import text_string_to_metric_families

from trio_mcp.actors._client import open_session
from trio_mcp.protocol import McpError
from trio_mcp.transports.http import StreamableHttpTransport

from ._procs import EXAMPLE, ROOT

CLI = [sys.executable, "-m", "trio_mcp.cli"]
TIMEOUT = 60.0

#: A sample: its name and its labels, sorted.
Key = tuple[str, tuple[tuple[str, str], ...]]


def key(name: str, **labels: str) -> Key:
    return name, tuple(sorted(labels.items()))


def parse(text: str) -> dict[Key, float]:
    """Every sample of a scrape, by name and labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def scrape(client: httpx.AsyncClient, url: str) -> dict[Key, float]:
    response = await client.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


async def _lines(stderr: trio.abc.ReceiveStream, count: int) -> list[str]:
    """The server's first ``count`` lines from its "serving … at URL" line on."""
    buffered = b""
    while True:
        lines = buffered.split(b"\n")[:-1]
        for i, line in enumerate(lines):
            if line.startswith(b"serving") and len(lines) - i >= count:
                return [x.decode() for x in lines[i : i + count]]
        chunk = await stderr.receive_some()
        assert chunk, f"the server ended before serving: {buffered.decode()!r}"
        buffered += chunk


@asynccontextmanager
async def run_http(*args: str) -> AsyncIterator[tuple[str, list[str]]]:
    """``trio-mcp run EXAMPLE -t http --port 0 ARGS``: its URL and start-up
    lines; its process group is killed afterwards."""
    server = await trio.lowlevel.open_process(
        [*CLI, "run", EXAMPLE, "-t", "http", "--port", "0", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        assert server.stderr is not None
        lines = await _lines(server.stderr, 3)
        yield lines[0].rsplit(" ", 1)[-1], lines
    finally:
        if server.returncode is None:
            os.killpg(server.pid, signal.SIGKILL)
            with trio.move_on_after(10):
                await server.wait()
        if server.stderr is not None:
            await server.stderr.aclose()


async def test_run_http_metrics_move_by_exactly_the_calls_made() -> None:
    echoes, lists = 8, 3
    with trio.fail_after(TIMEOUT):
        async with run_http() as (url, lines), httpx.AsyncClient(timeout=TIMEOUT) as http:
            assert lines[2].endswith(", metrics: GET /metrics")
            metrics_url = url.replace("/mcp", "/metrics")
            before = await scrape(http, metrics_url)
            async with trio.open_nursery() as nursery:
                stream = await nursery.start(StreamableHttpTransport(url).run)
                async with open_session(stream) as client:
                    during = await scrape(http, metrics_url)
                    async with trio.open_nursery() as load:
                        for i in range(echoes):
                            load.start_soon(client.call_tool, "echo", {"message": f"m{i}"})
                        for _ in range(lists):
                            load.start_soon(client.list_tools)
                    failed = await client.call_tool("add", {"a": "not a number", "b": 1})
                    assert failed.is_error is True
                    try:
                        await client.call_tool("no_such_tool", {})
                    except McpError as exc:
                        assert exc.code == -32602
                    else:
                        raise AssertionError("an unknown tool was answered")
                    after = await scrape(http, metrics_url)
                nursery.cancel_scope.cancel()

    def moved(sample: Key) -> float:
        return after.get(sample, 0.0) - during.get(sample, 0.0)

    requests = "trio_mcp_requests_total"
    assert during[key(requests, method="initialize", outcome="ok")] == 1
    assert before.get(key(requests, method="initialize", outcome="ok"), 0) == 0
    moves = {
        (labels["method"], labels["outcome"]): moved((name, tuple(sorted(labels.items()))))
        for name, raw in after
        if name == requests
        for labels in [dict(raw)]
    }
    assert {k: v for k, v in moves.items() if v} == {
        ("tools/call", "ok"): echoes,
        ("tools/call", "tool_error"): 1,
        ("tools/call", "error"): 1,
        ("tools/list", "ok"): lists,
    }
    count = "trio_mcp_request_duration_seconds_count"
    assert moved(key(count, method="tools/call", tool="echo")) == echoes
    assert moved(key(count, method="tools/call", tool="add")) == 1
    assert moved(key(count, method="tools/call", tool="other")) == 1  # the unknown tool
    assert moved(key(count, method="tools/list", tool="")) == lists
    inf = key("trio_mcp_request_duration_seconds_bucket", method="tools/call", tool="echo", le="+Inf")
    assert moved(inf) == echoes
    assert after[key("trio_mcp_requests_in_flight")] == 0
    assert during[key("trio_mcp_sessions_open")] == after[key("trio_mcp_sessions_open")] == 1
    assert after[key("trio_mcp_sessions_created_total")] - before[key("trio_mcp_sessions_created_total")] == 1
    for reason in ("handler_queue", "max_sessions", "session_queue"):
        assert after[key("trio_mcp_overload_rejections_total", reason=reason)] == 0
    for queue in ("requests", "notifications", "http_inbound"):
        assert after[key("trio_mcp_queue_depth", queue=queue)] == 0


async def test_no_metrics_turns_the_route_off() -> None:
    with trio.fail_after(TIMEOUT):
        async with run_http("--no-metrics") as (url, lines), httpx.AsyncClient(timeout=TIMEOUT) as http:
            assert lines[2] == "health: GET /healthz, readiness: GET /readyz"
            assert (await http.get(url.replace("/mcp", "/metrics"))).status_code == 404
            assert (await http.get(url.replace("/mcp", "/healthz"))).status_code == 200
