"""``GET /metrics`` of a real ``trio-mcp gateway FILE -t http`` process with
real stdio backing servers (``fixtures/probe_server.py``): each backing
server's up gauge, the calls forwarded to each (exactly the calls made), and
a restart counted after its process was killed, its calls during the outage
counted as errors."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import httpx
import trio
from tests.cli.test_metrics import key, scrape
from tests.gateway.test_cli_gateway import gateway_process
from tests.gateway.test_fleet import pid_of, probe
from tests.gateway.test_gateway import children, processes, wait_gone

from trio_mcp.actors._client import open_session
from trio_mcp.transports.http import StreamableHttpTransport

__all__ = ["processes"]

TIMEOUT = 60.0


async def test_gateway_metrics_per_backing_server_and_a_restart(tmp_path: Path, processes: set[int]) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": probe("a"), "b": probe("b")}}))
    env_calls = 5
    with trio.fail_after(TIMEOUT):
        async with (
            gateway_process(path, processes, "--no-watch") as (gateway, url),
            httpx.AsyncClient(timeout=TIMEOUT) as http,
        ):
            processes.update(children(gateway.pid))
            metrics_url = url.replace("/mcp", "/metrics")
            async with trio.open_nursery() as nursery:
                stream = await nursery.start(StreamableHttpTransport(url).run)
                async with open_session(stream) as client:
                    first = await pid_of(client, "a")
                    async with trio.open_nursery() as load:
                        for _ in range(env_calls):
                            load.start_soon(client.call_tool, "b__env", {"name": "HOME"})
                    up = await scrape(http, metrics_url)

                    os.kill(first, signal.SIGKILL)
                    # Call a until its new process answers: each call either
                    # fails (isError: the server is gone) or waits for the restart.
                    calls = failed = 0
                    while True:
                        result = await client.call_tool("a__pid", {})
                        calls += 1
                        if result.is_error:
                            failed += 1
                        elif int(result.structured_content["result"]) != first:
                            break
                    processes.update(children(gateway.pid))
                    back = await scrape(http, metrics_url)
                nursery.cancel_scope.cancel()
            gateway.send_signal(signal.SIGTERM)  # a graceful stop: every backing server too
            assert await gateway.wait() == 0
        assert await wait_gone(processes) == set()

    def server(
        name: str, sample: str, scraped: dict[tuple[str, tuple[tuple[str, str], ...]], float]
    ) -> float:
        return scraped[key(f"trio_mcp_gateway_server_{sample}", server=name)]

    for name in ("a", "b"):
        assert server(name, "up", up) == 1
        assert server(name, "restarts_total", up) == 0
        assert server(name, "reconnect_delay_seconds", up) == 0
        assert server(name, "call_errors_total", up) == 0
    assert server("a", "calls_total", up) == 1
    assert server("b", "calls_total", up) == env_calls
    # The gateway's own requests: the same counters as any server's.
    call = key("trio_mcp_requests_total", method="tools/call", outcome="ok")
    assert up[call] == 1 + env_calls

    assert server("a", "up", back) == 1
    assert server("a", "restarts_total", back) == 1
    assert server("a", "calls_total", back) == 1 + calls
    assert server("a", "call_errors_total", back) == failed
    assert server("b", "restarts_total", back) == 0
    assert server("b", "calls_total", back) == env_calls
