"""A soak of the Streamable HTTP server (issue 18): a real server process
on 127.0.0.1 under a steady mixed load for ``TRIO_MCP_SOAK_SECONDS``
(default 30, what the suite runs; ``TRIO_MCP_SOAK_SECONDS=600`` for a long
soak): tools, resources and prompts; calls cancelled mid-call, as
JSON (``202``) and as SSE (the stream ends); clients going away in the
middle of an SSE stream; sessions opened and deleted all along.

Asserted: every call is answered; after the load and once every session
has ended, the server's RSS is within 10 % of its level after warm-up and
no socket of the server stays in CLOSE_WAIT. Reported: the RSS slope after
warm-up, the peak of open descriptors and CLOSE_WAIT sockets."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import httpx
import trio

from trio_mcp.transports.http._sse import SseDecoder

from .realserver import CLOSE_WAIT, open_fds, real_server, rss_kib, socket_states
from .test_hardening import report, until
from .test_server import TIMEOUT, Session, initialize

SOAK_SECONDS = float(os.environ.get("TRIO_MCP_SOAK_SECONDS", "30"))
#: Share of the soak before the RSS reference is taken. The server's RSS
#: climbs into its working set for the first 15-30 s of load (measured:
#: 47 -> 57.7 MB over the first 15 s of a 30 s soak, 61.0 MB at its end;
#: in a 120 s soak 61.4 MB at 30 s and 63.0 MB at the end), so a reference
#: taken earlier measures that climb, not a leak.
WARM_UP = 0.5
CLIENTS = 6
SAMPLE_EVERY = 1.0


class Tally:
    def __init__(self) -> None:
        self.calls = 0
        self.answered = 0
        self.cancelled_json = 0
        self.cancelled_sse = 0
        self.went_away = 0
        self.sessions = 0


def _call(session: Session, name: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return session.request("tools/call", params)


async def _ordinary(session: Session, rng: random.Random, tally: Tally) -> None:
    kind = rng.randrange(4)
    if kind == 0:
        message = _call(session, "echo", {"text": "x" * rng.randrange(1, 2000)})
    elif kind == 1:
        message = session.request("resources/read", {"uri": "memo://one"})
    elif kind == 2:
        message = session.request("prompts/get", {"name": "greet", "arguments": {"name": "soak"}})
    else:
        message = _call(session, "chatty", {"steps": 3}, progressToken=f"p{session.next_id}")
    tally.calls += 1
    response = await session.post(message)
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        answers = [json.loads(e.data) for e in SseDecoder().feed(response.content) if e.data]
        answer = next(a for a in answers if a.get("id") == message["id"])
    else:
        answer = response.json()
    assert "result" in answer, answer
    tally.answered += 1


async def _cancel_json(session: Session, key: str, tally: Tally) -> None:
    """A call answered as JSON, cancelled mid-call: its POST gets 202."""
    message = _call(session, "slow", {"seconds": 600, "key": key})
    statuses: list[int] = []

    async def post() -> None:
        statuses.append((await session.post(message, accept="application/json")).status_code)

    async def is_running() -> bool:
        answer = await session.post(_call(session, "running", {"key": key}))
        return int(answer.json()["result"]["content"][0]["text"]) > 0

    async with trio.open_nursery() as nursery:
        nursery.start_soon(post)
        await until(is_running, 0.05)
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": message["id"]},
        }
        assert (await session.post(cancel)).status_code == 202
    assert statuses == [202]
    tally.cancelled_json += 1


async def _cancel_sse(client: httpx.AsyncClient, session: Session, tally: Tally) -> None:
    """A call whose progress made its answer an SSE stream, cancelled after
    that first event: the stream ends without an answer."""
    message = _call(session, "progress_then_wait", {"seconds": 600}, progressToken=f"c{session.next_id}")
    async with client.stream(
        "POST", session.url, content=json.dumps(message), headers=session.headers()
    ) as r:
        assert r.status_code == 200
        decoder = SseDecoder()
        seen: list[dict[str, Any]] = []
        chunks = r.aiter_bytes()
        async for chunk in chunks:
            seen.extend(json.loads(e.data) for e in decoder.feed(chunk) if e.data)
            if seen:
                break
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": message["id"]},
        }
        assert (await session.post(cancel)).status_code == 202
        async for chunk in chunks:  # to the end of the stream
            seen.extend(json.loads(e.data) for e in decoder.feed(chunk) if e.data)
    assert not [m for m in seen if m.get("id") == message["id"]]
    tally.cancelled_sse += 1


async def _go_away(session: Session, tally: Tally) -> None:
    """Read the first event of a streaming call, then drop the connection."""
    message = _call(session, "chatty", {"steps": 20}, progressToken=f"g{session.next_id}")
    async with (
        httpx.AsyncClient(timeout=TIMEOUT) as own,
        own.stream("POST", session.url, content=json.dumps(message), headers=session.headers()) as r,
    ):
        async for chunk in r.aiter_bytes():
            if b"data:" in chunk:
                break
    tally.went_away += 1


async def _client(url: str, seed: int, stop_at: float, tally: Tally) -> None:
    rng = random.Random(seed)
    async with httpx.AsyncClient(timeout=TIMEOUT * 3) as client:
        while trio.current_time() < stop_at:
            session = await initialize(client, url)
            tally.sessions += 1
            for _ in range(rng.randrange(10, 40)):
                pick = rng.random()
                if pick < 0.08:
                    await _cancel_json(session, f"{seed}-{session.next_id}", tally)
                elif pick < 0.14:
                    await _cancel_sse(client, session, tally)
                elif pick < 0.20:
                    await _go_away(session, tally)
                else:
                    await _ordinary(session, rng, tally)
            assert (await client.delete(url, headers=session.headers())).status_code == 200


async def test_soak_mixed_load_keeps_nothing(tmp_path: Any, record_property: Any) -> None:
    tally = Tally()
    samples: list[tuple[float, int]] = []
    peaks = {"fds": 0, "close_wait": 0}
    async with real_server(tmp_path, completed_stream_retention=2.0) as server:
        with trio.fail_after(SOAK_SECONDS + 120):
            start = trio.current_time()
            stop_at = start + SOAK_SECONDS

            async def sample() -> None:
                while True:
                    samples.append((trio.current_time() - start, rss_kib(server.pid)))
                    peaks["fds"] = max(peaks["fds"], open_fds(server.pid))
                    waiting = socket_states(server.pid).get(CLOSE_WAIT, 0)
                    peaks["close_wait"] = max(peaks["close_wait"], waiting)
                    await trio.sleep(SAMPLE_EVERY)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(sample)
                async with trio.open_nursery() as clients:
                    for seed in range(CLIENTS):
                        clients.start_soon(_client, server.url, seed, stop_at, tally)
                nursery.cancel_scope.cancel()

            async def no_close_wait() -> bool:
                return socket_states(server.pid).get(CLOSE_WAIT, 0) == 0

            await until(no_close_wait)  # hypercorn ends an idle keep-alive within 5 s
            await trio.sleep(3.0)  # measurement only: completed streams' retention (2 s) passes
            final_rss = rss_kib(server.pid)
            final_fds = open_fds(server.pid)
    warm = [(t, r) for t, r in samples if t >= SOAK_SECONDS * WARM_UP]
    warm_rss = warm[0][1]
    slope = _slope(warm) * 60 / 1024  # MiB per minute
    report(record_property, "soak_seconds", SOAK_SECONDS)
    report(record_property, "sessions", tally.sessions)
    report(record_property, "calls_answered", f"{tally.answered}/{tally.calls}")
    report(record_property, "cancelled_json_202", tally.cancelled_json)
    report(record_property, "cancelled_sse_ended", tally.cancelled_sse)
    report(record_property, "clients_gone_mid_stream", tally.went_away)
    report(record_property, "rss_kib_after_warm_up", warm_rss)
    report(record_property, "rss_kib_peak", max(r for _, r in samples))
    report(record_property, "rss_samples", [(round(t), r) for t, r in samples])
    report(record_property, "rss_kib_final", final_rss)
    report(record_property, "rss_slope_mib_per_min", round(slope, 2))
    report(record_property, "peak_fds", peaks["fds"])
    report(record_property, "peak_close_wait", peaks["close_wait"])
    report(record_property, "final_fds", final_fds)
    report(record_property, "loadavg", Path("/proc/loadavg").read_text().split()[:3])
    assert tally.answered == tally.calls
    assert tally.cancelled_json and tally.cancelled_sse and tally.went_away
    assert final_rss <= warm_rss * 1.10, (warm_rss, final_rss)


def _slope(points: list[tuple[float, int]]) -> float:
    """Least-squares slope of (time, value): KiB per second."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    num = sum((t - mean_t) * (v - mean_v) for t, v in points)
    den = sum((t - mean_t) ** 2 for t, _ in points)
    return num / den if den else 0.0
