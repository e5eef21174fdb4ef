"""Draining an :class:`HttpServer` (in process, a real hypercorn on
127.0.0.1:0): the registry's ``drain`` hook, new work refused, the calls in
flight finished, and the ones that outlast ``drain_timeout`` cut."""

from __future__ import annotations

from typing import Any

import httpx
import trio

from trio_mcp.server import MCPServer
from trio_mcp.serving.http import HttpServer, MemorySessionRegistry

from .test_server import ACCEPT_BOTH, TIMEOUT, init_message


class RecordingRegistry(MemorySessionRegistry):
    """The memory registry, noting when it is told to drain (as a Redis
    registry would release its lease there)."""

    def __init__(self) -> None:
        super().__init__()
        self.drains = 0
        self.sessions_when_drained = -1

    async def drain(self) -> None:
        self.drains += 1
        self.sessions_when_drained = self.count()
        await super().drain()


def held_app(release: trio.Event, started: trio.Event) -> MCPServer:
    app = MCPServer("drain-test")

    @app.tool
    async def hold() -> str:
        started.set()
        await release.wait()
        return "done"

    return app


async def _session(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    init = await client.post(url, json=init_message(), headers=ACCEPT_BOTH)
    headers = {**ACCEPT_BOTH, "mcp-session-id": init.headers["mcp-session-id"]}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await client.post(url, json=note, headers=headers)).status_code == 202
    return headers


def _call(name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {}}}


async def test_drain_tells_the_registry_refuses_new_work_and_finishes_the_call_in_flight() -> None:
    release, started = trio.Event(), trio.Event()
    registry = RecordingRegistry()
    server = HttpServer(held_app(release, started), registry=registry, drain_timeout=TIMEOUT)
    answers: list[Any] = []
    with trio.fail_after(TIMEOUT * 2):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client, trio.open_nursery() as nursery:
            info = await nursery.start(server.run)
            headers = await _session(client, info.url)

            async def call() -> None:
                answers.append((await client.post(info.url, json=_call("hold"), headers=headers)).json())

            nursery.start_soon(call)
            await started.wait()
            bound = server.drain()
            assert bound >= TIMEOUT
            assert server.asgi.draining  # from now on
            refused = await client.post(info.url, json=init_message(), headers=ACCEPT_BOTH)
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            ready = await client.get(info.url.replace("/mcp", "/readyz"))
            assert ready.status_code == 503 and ready.json()["reason"] == "draining"
            assert not answers  # still in flight: the server waits for it
            release.set()
    assert answers[0]["result"]["content"][0]["text"] == "done"
    assert registry.drains == 1 and registry.sessions_when_drained == 1  # told first, once


async def test_a_call_that_outlasts_the_drain_timeout_is_cut_and_the_server_stops() -> None:
    release, started = trio.Event(), trio.Event()
    server = HttpServer(held_app(release, started), drain_timeout=0.2, graceful_timeout=0.5)
    statuses: list[int] = []
    with trio.fail_after(TIMEOUT * 2):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client, trio.open_nursery() as nursery:
            info = await nursery.start(server.run)
            headers = await _session(client, info.url)

            async def call() -> None:
                try:
                    statuses.append(
                        (await client.post(info.url, json=_call("hold"), headers=headers)).status_code
                    )
                except httpx.HTTPError:
                    statuses.append(0)  # the connection closed with the server

            nursery.start_soon(call)
            await started.wait()
            server.drain()
    assert not release.is_set()
    assert statuses and statuses[0] != 200  # never answered: the session ended with the server


async def test_drain_ends_the_listen_streams_at_once() -> None:
    """A ``subscriptions/listen`` stream never ends by itself: the drain ends
    it (the client listens again elsewhere) instead of waiting it out."""
    from trio_mcp.protocol import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION

    server = HttpServer(held_app(trio.Event(), trio.Event()), drain_timeout=3600.0)
    listen = {
        "jsonrpc": "2.0",
        "id": "sub-1",
        "method": "subscriptions/listen",
        "params": {
            "notifications": {"toolsListChanged": True},
            "_meta": {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}},
        },
    }
    headers = {**ACCEPT_BOTH, "mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"}
    with trio.fail_after(TIMEOUT * 2):  # far below the drain_timeout
        async with httpx.AsyncClient(timeout=TIMEOUT) as client, trio.open_nursery() as nursery:
            info = await nursery.start(server.run)
            async with client.stream("POST", info.url, json=listen, headers=headers) as stream:
                lines = stream.aiter_lines()
                async for line in lines:
                    if "notifications/subscriptions/acknowledged" in line:
                        break
                assert len(server.asgi.listening) == 1
                server.drain()
                async for _ in lines:  # the stream ends
                    pass
    assert not server.asgi.listening
