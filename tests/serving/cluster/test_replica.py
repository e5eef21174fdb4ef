"""Serving a session's plain requests on the node they reach
(``serve_on_ingress``): nodes in this process on a real Redis, over direct
links, their apps answering JSON. A call served on a node that does not own
its session reaches the client's GET stream through the owner (progress, log
messages at the session's level, requests to the client), the client's
answers find the replica whichever node they reach, a cancellation on any
node stops it, the replica's use keeps the session alive on its owner, and a
session ended on its owner is gone on every node."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from trio_mcp.server import Context, MCPServer
from trio_mcp.serving.cluster import RedisCluster

from ._helpers import (
    TIMEOUT,
    call,
    handshake_saved,
    headers_for,
    open_session,
    redis_client,
    request,
    result_of,
    set_level,
    stream,
)
from .conftest import needs_real_parts
from .test_store import Redis, nodes, real_redis

pytestmark = [pytest.mark.cluster, needs_real_parts]

ASKING = {"sampling": {}, "roots": {}}


def app_maker(cancelled: dict[str, int]) -> Callable[[str], MCPServer]:
    def make(name: str) -> MCPServer:
        app = MCPServer("replica-test")

        @app.tool
        def where() -> str:
            return name

        @app.tool
        async def ask(ctx: Context) -> str:
            sampled = await ctx.sample("say something", max_tokens=10)
            roots = await ctx.list_roots()
            return f"{getattr(sampled.content, 'text', '?')}|{roots[0].uri}|{name}"

        @app.tool
        async def chatty(ctx: Context, n: int = 3) -> str:
            for i in range(1, n + 1):
                await ctx.report_progress(i, n)
            await ctx.log("debug", "quiet")
            await ctx.log("warning", "loud")
            return name

        @app.tool
        async def slow() -> str:
            try:
                await trio.sleep(60)
            except trio.Cancelled:
                cancelled[name] = cancelled.get(name, 0) + 1
                raise
            return "slept"

        return app

    return make


@asynccontextmanager
async def serving(
    tmp_path: Path, *names: str, cancelled: dict[str, int] | None = None, **options: Any
) -> AsyncIterator[tuple[Redis, list[tuple[str, RedisCluster]]]]:
    async with (
        real_redis(tmp_path) as redis,
        nodes(
            redis,
            *names,
            link=True,
            serve_on_ingress=True,
            app=app_maker({} if cancelled is None else cancelled),
            json_response=True,
            **options,
        ) as running,
    ):
        yield redis, running


async def saved_session(
    client: httpx.AsyncClient, redis: Redis, url: str, capabilities: dict[str, Any] | None = None
) -> str:
    """A session opened at ``url`` whose owner saved its handshake state (a replica's start)."""
    session_id, _ = await open_session(client, url, capabilities)
    async with redis_client(redis.url) as store:
        await handshake_saved(store, "store:", session_id)
    return session_id


def text_of(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def test_plain_requests_are_served_on_the_node_they_reach(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with serving(tmp_path, "a", "b") as (redis, running):
            (url_a, a), (url_b, b) = running
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                session_id = await saved_session(client, redis, url_a)
                forwarded = a.statistics()["forwarded_in"]
                assert text_of(await result_of(client, url_b, session_id, call(1, "where"))) == "b"
                tools = await result_of(
                    client, url_b, session_id, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
                )
                assert {t["name"] for t in tools["tools"]} >= {"where", "ask", "chatty", "slow"}
                assert (
                    await result_of(client, url_b, session_id, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
                    == {}
                )
                assert text_of(await result_of(client, url_a, session_id, call(4, "where"))) == "a"
                stats = b.statistics()
                assert stats["served_on_ingress"] == 3 and stats["replicas"] == 1
                assert a.statistics()["forwarded_in"] == forwarded  # none of them reached the owner
                # What changes the session goes to its owner.
                level = set_level(5, "error")
                assert (await request(client, url_b, session_id, level)).status_code == 200
                assert a.statistics()["forwarded_in"] == forwarded + 1
                assert b.statistics()["served_on_ingress"] == 3
                # A client that takes only SSE: forwarded (a stream of a replica could not be resumed elsewhere).
                sse_only = {**headers_for(session_id), "accept": "text/event-stream"}
                answer = await client.post(url_b, content=json.dumps(call(6, "where")), headers=sse_only)
                assert answer.status_code == 200 and '"text":"a"' in answer.text
                assert a.statistics()["forwarded_in"] == forwarded + 2


async def test_a_replica_reaches_the_client_through_the_owner_and_gets_answers_from_any_node(
    tmp_path: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with serving(tmp_path, "a", "b", "c") as (redis, running):
            (url_a, a), (url_b, b), (url_c, _) = running
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                session_id = await saved_session(client, redis, url_a, ASKING)
                level = set_level(1, "warning")
                assert (await request(client, url_c, session_id, level)).status_code == 200
                get_headers = {**headers_for(session_id), "accept": "text/event-stream"}
                async with (
                    stream(client, "GET", url_c, get_headers) as events,
                    trio.open_nursery() as nursery,
                ):
                    assert events.response.status_code == 200
                    answers: dict[int, Any] = {}

                    async def post(ident: int, tool: str, **params: Any) -> None:
                        body = call(ident, tool, **params)
                        if ident == 3:
                            body["params"]["_meta"] = {"progressToken": "p"}
                        answers[ident] = await result_of(client, url_b, session_id, body)

                    # Progress and log messages of a call on b, at the level set on the owner.
                    nursery.start_soon(post, 3, "chatty")
                    seen = [await events.next() for _ in range(4)]
                    assert [m["params"]["progress"] for m in seen[:3] if m] == [1, 2, 3]
                    assert seen[3] is not None and seen[3]["method"] == "notifications/message"
                    assert seen[3]["params"]["data"] == "loud"  # "quiet" (debug) was held back
                    # Requests to the client: their answers posted to c (routed to b) and to a (the owner).
                    nursery.start_soon(post, 4, "ask")
                    replies = {
                        "sampling/createMessage": (
                            url_c,
                            {
                                "role": "assistant",
                                "content": {"type": "text", "text": "sampled"},
                                "model": "m",
                            },
                        ),
                        "roots/list": (url_a, {"roots": [{"uri": "file:///r"}]}),
                    }
                    for _ in replies:
                        asked = await events.next()
                        assert asked is not None
                        assert str(asked["id"]).startswith("~b~")
                        url, result = replies[asked["method"]]
                        reply = {"jsonrpc": "2.0", "id": asked["id"], "result": result}
                        posted = await client.post(
                            url, content=json.dumps(reply), headers=headers_for(session_id)
                        )
                        assert posted.status_code == 202
            assert text_of(answers[3]) == "b"
            assert text_of(answers[4]) == "sampled|file:///r|b"
            assert b.statistics()["pushed_to_owner"] >= 6
            assert a.statistics()["answers_routed"] == 1


async def test_a_cancellation_sent_to_another_node_stops_the_call_on_the_replica(tmp_path: Path) -> None:
    cancelled: dict[str, int] = {}
    with trio.fail_after(TIMEOUT):
        async with serving(tmp_path, "a", "b", "c", cancelled=cancelled) as (redis, running):
            (url_a, _), (url_b, _), (url_c, _) = running
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                session_id = await saved_session(client, redis, url_a)
                statuses: list[int] = []
                async with trio.open_nursery() as nursery:

                    async def slow_call() -> None:
                        answer = await request(client, url_b, session_id, call(2, "slow"))
                        statuses.append(answer.status_code)

                    nursery.start_soon(slow_call)
                    cancel = {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": 2},
                    }
                    while not cancelled:
                        sent = await request(client, url_c, session_id, cancel)
                        assert sent.status_code == 202
                        await trio.sleep(0.05)  # the call may not have started on b yet
    assert cancelled == {"b": 1}
    assert statuses == [202]  # a cancelled request is never answered


async def test_a_session_used_only_on_other_nodes_stays_alive_and_its_end_reaches_them(
    tmp_path: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with serving(tmp_path, "a", "b", session_idle_timeout=2.0) as (redis, running):
            (url_a, a), (url_b, b) = running
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                session_id = await saved_session(client, redis, url_a)
                # Over two idle timeouts of calls on b only: b tells the owner the
                # session is in use (each renewal, 0.25 s here).
                for i in range(10):
                    assert text_of(await result_of(client, url_b, session_id, call(i, "where"))) == "b"
                    await trio.sleep(0.5)
                assert await a.app.registry.get(session_id) is not None
                assert b.statistics()["replicas"] == 1
                # Unused, it expires on its owner, and then on b too.
                while await a.app.registry.get(session_id) is not None:
                    await trio.sleep(0.1)
                while b.statistics()["replicas"]:
                    await trio.sleep(0.02)  # the owner's notice, on the bus
                assert (await request(client, url_b, session_id, call(99, "where"))).status_code == 404


async def test_a_deleted_session_is_gone_on_the_nodes_that_served_it(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with serving(tmp_path, "a", "b") as (redis, running):
            (url_a, _), (url_b, b) = running
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                session_id = await saved_session(client, redis, url_a)
                assert text_of(await result_of(client, url_b, session_id, call(1, "where"))) == "b"
                deleted = await client.delete(url_a, headers=headers_for(session_id))
                assert deleted.status_code in (200, 204)
                while b.statistics()["replicas"]:
                    await trio.sleep(0.02)  # the owner's notice, on the bus
                answer = await request(client, url_b, session_id, call(2, "where"))
                assert answer.status_code == 404


async def test_a_call_asking_the_client_through_an_owner_that_goes_away_gets_owner_lost(
    tmp_path: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with serving(tmp_path, "a", "b") as (redis, running):
            (url_a, a), (url_b, b) = running
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                session_id = await saved_session(client, redis, url_a, ASKING)
                async with trio.open_nursery() as nursery:
                    answers: list[httpx.Response] = []

                    async def asking() -> None:
                        answers.append(await request(client, url_b, session_id, call(1, "ask")))

                    nursery.start_soon(asking)
                    while not b.statistics()["pushed_to_owner"]:
                        await trio.sleep(0.02)  # the sampling request went to a, which keeps it for a GET
                    await a.drain()  # a gives its sessions up: nobody relays the answer any more
                # Answered within b's next checks, not left waiting on a client that cannot answer.
                # The tool's question failed with OwnerLost, which the tool let through.
                result = answers[0].json()["result"]
                assert result["isError"] is True
                assert "the server node handling this request was lost" in text_of(result)
                assert b.statistics()["replicas"] == 0
