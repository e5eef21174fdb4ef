"""Raw HTTP helpers for the cluster tests (every request names its node)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import coredis
import httpx
import trio

from trio_mcp.transports.http._sse import SseDecoder

VERSION = "2025-11-25"
ACCEPT_BOTH = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
#: Bound of every test's waits (a loaded machine is slow; nothing here takes long).
TIMEOUT = 30


def init_message(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": VERSION,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "cluster-test", "version": "1"},
        },
    }


def call(ident: int | str, name: str, progress: str | None = None, **arguments: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if progress is not None:
        params["_meta"] = {"progressToken": progress}
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


def set_level(ident: int | str, level: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "logging/setLevel", "params": {"level": level}}


def headers_for(session_id: str) -> dict[str, str]:
    return {**ACCEPT_BOTH, "mcp-session-id": session_id, "mcp-protocol-version": VERSION}


async def open_session(
    client: httpx.AsyncClient, url: str, capabilities: dict[str, Any] | None = None
) -> tuple[str, str]:
    """``initialize`` + ``notifications/initialized`` at ``url``: (session id, node that answered)."""
    init = await client.post(url, content=json.dumps(init_message(capabilities)), headers=ACCEPT_BOTH)
    assert init.status_code == 200, init.text
    session_id = init.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    done = await client.post(url, content=json.dumps(note), headers=headers_for(session_id))
    assert done.status_code == 202, done.text
    return session_id, init.headers["mcp-node"]


def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    """Every JSON-RPC message of a JSON or SSE answer."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [json.loads(e.data) for e in SseDecoder().feed(response.content) if e.data]
    return [response.json()]


async def request(client: httpx.AsyncClient, url: str, session_id: str, body: Any) -> httpx.Response:
    return await client.post(url, content=json.dumps(body), headers=headers_for(session_id))


async def result_of(client: httpx.AsyncClient, url: str, session_id: str, body: Any) -> Any:
    answer = await request(client, url, session_id, body)
    assert answer.status_code == 200, answer.text
    last = messages_of(answer)[-1]
    assert "result" in last, last
    return last["result"]


class EventReader:
    """The SSE events of one streaming response, one at a time."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.decoder = SseDecoder()
        self._chunks = response.aiter_bytes()
        self._ready: list[Any] = []

    @property
    def last_event_id(self) -> str | None:
        return self.decoder.last_event_id

    async def next(self) -> dict[str, Any] | None:
        """The next message (priming events skipped); None at the end of the stream."""
        while True:
            while self._ready:
                event = self._ready.pop(0)
                if event.data:
                    return json.loads(event.data)  # type: ignore[no-any-return]
            try:
                chunk = await self._chunks.__anext__()
            except (StopAsyncIteration, httpx.TransportError):
                return None
            self._ready.extend(self.decoder.feed(chunk))


@contextlib.asynccontextmanager
async def stream(
    client: httpx.AsyncClient, method: str, url: str, headers: dict[str, str], body: Any = None
) -> AsyncIterator[EventReader]:
    content = None if body is None else json.dumps(body)
    async with client.stream(method, url, content=content, headers=headers) as response:
        yield EventReader(response)


@contextlib.asynccontextmanager
async def redis_client(url: str) -> AsyncIterator[coredis.Redis[bytes]]:
    client: coredis.Redis[bytes] = coredis.Redis.from_url(url)
    async with client:
        yield client


async def keys(client: coredis.Redis[bytes], pattern: str) -> set[bytes]:
    """Every key matching ``pattern``, by SCAN."""
    found: set[bytes] = set()
    cursor = None
    while cursor != 0:
        cursor, batch = await client.scan(cursor=cursor or 0, match=pattern, count=1000)
        found.update(batch)
    return found


async def handshake_saved(client: coredis.Redis[bytes], prefix: str, session_id: str) -> None:
    """Until the owner saved the session's handshake state (what an adoption needs)."""
    while not await client.hget(f"{prefix}sess:{session_id}", "state"):
        await trio.sleep(0.02)  # written by the owner's keeper, in the background
