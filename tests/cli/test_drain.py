"""SIGTERM drains ``trio-mcp run … -t http`` (a real process on 127.0.0.1):
the call in flight is answered, the GET stream's connection ends, new work is
refused with ``503`` and ``Retry-After``, requests of the sessions there are
still served, and the process exits, with status 0."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from typing import Any

import httpx
import trio

from ._procs import HEADERS, INIT
from ._served import TIMEOUT, call_modern, served, wait_gone

VERSION = "2025-11-25"


def _call(ident: int, name: str, token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


async def _messages(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body."""
    async for line in lines:
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:])


async def test_sigterm_finishes_the_call_in_flight_and_exits_0() -> None:
    with trio.fail_after(TIMEOUT * 2):
        async with served("--drain-timeout", "30") as server, httpx.AsyncClient(timeout=TIMEOUT) as client:
            url = server.url
            init = await client.post(url, json=INIT, headers=HEADERS)
            session = {
                **HEADERS,
                "mcp-session-id": init.headers["mcp-session-id"],
                "mcp-protocol-version": VERSION,
            }
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await client.post(url, json=note, headers=session)).status_code == 202
            get_headers = {**session, "accept": "text/event-stream"}
            async with (
                client.stream("GET", url, headers=get_headers) as get,
                client.stream("POST", url, json=_call(2, "hold", "t1"), headers=session) as held,
            ):
                assert get.status_code == 200 and held.status_code == 200
                held_messages = _messages(held.aiter_lines())
                first = await anext(held_messages)
                assert first["method"] == "notifications/progress"  # the call is in flight

                server.process.send_signal(signal.SIGTERM)
                async for _ in get.aiter_lines():  # the GET stream's connection ends
                    pass

                refused = await client.post(url, json=INIT, headers=HEADERS)
                assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 1
                assert "shutting down" in refused.text
                stateless = await call_modern(url, "pid")
                assert stateless["error"]["message"].startswith("Service Unavailable")
                ready = await client.get(url.replace("/mcp", "/readyz"))
                assert ready.status_code == 503 and ready.json()["reason"] == "draining"
                again = await client.get(url, headers=get_headers)
                assert again.status_code == 503  # no new GET stream either

                # The session's own requests are still served: this one ends the held call.
                released = await client.post(url, json=_call(3, "release"), headers=session)
                assert released.json()["result"]["content"][0]["text"] == "released"
                answers = [m async for m in held_messages if "id" in m]
            assert [a["id"] for a in answers] == [2]
            assert answers[0]["result"]["content"][0]["text"] == "held and released"
            assert await server.process.wait() == 0
            await wait_gone([server.process.pid])
