"""One MCP session served by three node processes on a real Redis, behind a
real haproxy (round robin, no stickiness): every request kind on any node,
server-to-client requests answered through other nodes, resumption on
another node, an owner killed or stopped (see conftest for the parts)."""

from __future__ import annotations

import json
import signal
from typing import Any

import coredis
import httpx
import pytest
import trio

from trio_mcp.actors._client import open_session as open_client_session
from trio_mcp.protocol import (
    CreateMessageResult,
    ElicitResult,
    McpError,
    Root,
    TextContent,
)
from trio_mcp.transports.http import StreamableHttpTransport

from ._helpers import (
    ACCEPT_BOTH,
    TIMEOUT,
    call,
    handshake_saved,
    headers_for,
    keys,
    messages_of,
    open_session,
    redis_client,
    request,
    result_of,
    stream,
)
from .conftest import LEASE, Cluster, needs_real_parts

pytestmark = [pytest.mark.cluster, needs_real_parts]

ASKING = {"sampling": {}, "elicitation": {"form": {}}, "roots": {}}


def text_of(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


# ------------------------------------------------------------ round robin


async def test_round_robin_serves_every_request_kind_on_several_nodes(cluster: Cluster) -> None:
    assert cluster.lb is not None
    url = cluster.lb.url
    served: list[str] = []
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            session_id, owner = await open_session(client, url)
            bodies = [
                {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                call(2, "where"),
                {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "memo://note"}},
                {"jsonrpc": "2.0", "id": 4, "method": "ping"},
                call(5, "where"),
                {"jsonrpc": "2.0", "id": 6, "method": "resources/list"},
            ]
            results = []
            for body in bodies:
                answer = await request(client, url, session_id, body)
                assert answer.status_code == 200, answer.text
                served.append(answer.headers["x-served-by"])
                assert answer.headers["mcp-node"] == answer.headers["x-served-by"]
                results.append(messages_of(answer)[-1]["result"])
        async with redis_client(cluster.redis.url) as redis:
            recorded = await redis.hget(f"{cluster.prefix}sess:{session_id}", "owner")
    assert len(set(served)) >= 2, served  # no stickiness: several nodes answered
    # Every one was served by the session's owner, the node that answered initialize.
    assert recorded == owner.encode()
    assert text_of(results[1]) == owner and text_of(results[4]) == owner
    assert {t["name"] for t in results[0]["tools"]} >= {"where", "countdown", "ask"}
    assert results[2]["contents"][0]["text"] == f"a note from {owner}"


async def test_our_client_through_the_balancer_answers_sampling_elicitation_and_roots(
    cluster: Cluster,
) -> None:
    assert cluster.lb is not None

    async def sample(params: Any) -> CreateMessageResult:
        return CreateMessageResult(role="assistant", content=TextContent(text="sampled"), model="test")

    async def elicit(params: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={"name": "ada"})

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            transport = await nursery.start(StreamableHttpTransport(cluster.lb.url).run)
            async with open_client_session(
                transport,
                sampling_handler=sample,
                elicitation_handler=elicit,
                roots=[Root(uri="file:///tmp/project")],
            ) as session:
                owner = text_of(msgspec_builtins(await session.call_tool("where", {})))
                for _ in range(3):  # each call, and each answer to the server, on whatever node
                    result = msgspec_builtins(await session.call_tool("ask", {}))
                    assert text_of(result) == f"sampled|ada|file:///tmp/project|{owner}"
                progress: list[float] = []

                async def on_progress(value: float, total: float | None, message: str | None) -> None:
                    progress.append(value)

                counted = await session.call_tool(
                    "countdown", {"n": 5, "delay": 0.01}, on_progress=on_progress
                )
                assert text_of(msgspec_builtins(counted)) == f"counted 5 on {owner}"
                assert progress == [1, 2, 3, 4, 5]
            nursery.cancel_scope.cancel()


def msgspec_builtins(value: Any) -> dict[str, Any]:
    import msgspec

    return msgspec.to_builtins(value)  # type: ignore[no-any-return]


# ------------------------------------------- server-to-client, cancellation


async def test_sampling_request_tool_call_and_answers_on_three_different_nodes(cluster: Cluster) -> None:
    n1, n2, n3 = cluster.nodes
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            session_id, owner = await open_session(client, n1.url, ASKING)
            assert owner == "n1"
            headers = headers_for(session_id)
            # The tool call is ingested by n2; every answer to the server goes to another node.
            answer_at = {"sampling/createMessage": n3, "elicitation/create": n1, "roots/list": n3}
            results = {
                "sampling/createMessage": {
                    "role": "assistant",
                    "content": {"type": "text", "text": "sampled"},
                    "model": "m",
                },
                "elicitation/create": {"action": "accept", "content": {"name": "ada"}},
                "roots/list": {"roots": [{"uri": "file:///r"}]},
            }
            async with stream(client, "POST", n2.url, headers, call(7, "ask")) as events:
                assert events.response.headers["mcp-node"] == "n2"
                asked = []
                while True:
                    message = await events.next()
                    assert message is not None, "the stream ended before the answer"
                    if message.get("id") == 7:
                        break
                    method = message["method"]
                    asked.append(method)
                    reply = {"jsonrpc": "2.0", "id": message["id"], "result": results[method]}
                    node = answer_at[method]
                    posted = await client.post(node.url, content=json.dumps(reply), headers=headers)
                    assert posted.status_code == 202 and posted.headers["mcp-node"] == node.id
            assert asked == ["sampling/createMessage", "elicitation/create", "roots/list"]
            assert text_of(message["result"]) == "sampled|ada|file:///r|n1"


async def test_a_cancellation_sent_to_a_third_node_cancels_the_handler_on_the_owner(cluster: Cluster) -> None:
    n1, n2, n3 = cluster.nodes
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            session_id, _ = await open_session(client, n2.url)
            before = (await result_of(client, n1.url, session_id, call(1, "cancelled")))["structuredContent"]
            headers = headers_for(session_id)
            slow_body = call(2, "slow")
            async with trio.open_nursery() as nursery:
                ended = trio.Event()

                async def slow_call() -> None:
                    answer = await client.post(n3.url, content=json.dumps(slow_body), headers=headers)
                    # Cancelled: never answered (202, or an SSE stream that just ends).
                    assert answer.status_code in (200, 202)
                    if answer.content:
                        assert all(m.get("id") != 2 for m in messages_of(answer))
                    ended.set()

                nursery.start_soon(slow_call)
                # The call is running on the owner n2 once it counts as running there.
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
                while True:
                    sent = await client.post(n1.url, content=json.dumps(cancel), headers=headers)
                    assert sent.status_code == 202
                    after = await result_of(client, n3.url, session_id, call(3, "cancelled"))
                    if after["structuredContent"] != before:
                        break
                    await trio.sleep(0.05)  # the slow call may not have started on n2 yet
                await ended.wait()
    assert after["structuredContent"]["result"] == before["result"] + 1


# --------------------------------------------------------- streams anywhere


async def test_the_standalone_get_stream_on_any_node(cluster: Cluster) -> None:
    n1, n2, n3 = cluster.nodes
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            session_id, _ = await open_session(client, n1.url)
            get_headers = {**headers_for(session_id), "accept": "text/event-stream"}
            async with stream(client, "GET", n2.url, get_headers) as events:
                assert events.response.status_code == 200
                assert events.response.headers["mcp-node"] == "n2"
                # One GET stream per session, whichever node is asked.
                second = await client.get(n3.url, headers=get_headers)
                assert second.status_code == 409
                # A list change made by a call that n3 ingests reaches the GET on n2.
                assert text_of(await result_of(client, n3.url, session_id, call(1, "announce"))) == "n1"
                message = await events.next()
                assert message is not None
                assert message["method"] == "notifications/tools/list_changed"


async def test_subscriptions_listen_hears_a_change_published_on_another_node(cluster: Cluster) -> None:
    n1, n2, _ = cluster.nodes
    modern = {**ACCEPT_BOTH, "mcp-protocol-version": "2026-07-28"}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    listen = {
        "jsonrpc": "2.0",
        "id": "l",
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": meta},
    }
    announce = call("a", "announce")
    announce["params"]["_meta"] = meta
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            listen_headers = {**modern, "mcp-method": "subscriptions/listen"}
            async with stream(client, "POST", n1.url, listen_headers, listen) as events:
                acknowledged = await events.next()
                assert acknowledged is not None
                assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
                call_headers = {**modern, "mcp-method": "tools/call", "mcp-name": "announce"}
                answer = await client.post(n2.url, content=json.dumps(announce), headers=call_headers)
                assert text_of(messages_of(answer)[-1]["result"]) == "n2"
                heard = await events.next()
                assert heard is not None and heard["method"] == "notifications/tools/list_changed"


# ----------------------------------------------------------------- failures


async def test_an_ingress_killed_mid_stream_is_resumed_on_another_node_exactly_once(revive: Cluster) -> None:
    n1, n2, _ = revive.nodes
    assert revive.lb is not None
    total = 40
    seen: list[int] = []
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            session_id, owner = await open_session(client, n1.url)
            headers = headers_for(session_id)
            body = call(9, "countdown", progress="c", n=total, delay=0.05)
            async with stream(client, "POST", n2.url, headers, body) as events:
                while len(seen) < 10:
                    message = await events.next()
                    assert message is not None
                    seen.append(message["params"]["progress"])
                last = events.last_event_id
                n2.kill()  # the ingress, not the owner
            assert last is not None
            result = None
            get_headers = {**headers, "accept": "text/event-stream", "last-event-id": last}
            async with stream(client, "GET", revive.lb.url, get_headers) as resumed:
                assert resumed.response.status_code == 200
                assert resumed.response.headers["x-served-by"] != "n2"
                while result is None:
                    message = await resumed.next()
                    assert message is not None, "the resumed stream ended before the answer"
                    if message.get("id") == 9:
                        result = message["result"]
                    else:
                        seen.append(message["params"]["progress"])
    assert seen == list(range(1, total + 1))  # every event exactly once, in order
    assert text_of(result) == f"counted {total} on {owner}"


async def test_an_owner_killed_fails_its_calls_then_its_session_is_adopted(revive: Cluster) -> None:
    n1, n2, n3 = revive.nodes
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client, redis_client(revive.redis.url) as redis:
            session_id, _ = await open_session(client, n1.url)
            headers = headers_for(session_id)
            await handshake_saved(redis, revive.prefix, session_id)
            body = call(2, "countdown", progress="c", n=1000, delay=0.05)
            async with stream(client, "POST", n2.url, headers, body) as events:
                assert await events.next() is not None
                lost_stream = events.last_event_id
                n1.kill()
                # Within the lease and a renewal, never a hang (the fail_after above).
                with trio.fail_after(LEASE + 2):
                    while True:
                        message = await events.next()
                        assert message is not None, "the stream ended without an answer"
                        if message.get("id") == 2:
                            break
            error = message["error"]
            assert error["code"] == McpError.code and error["data"] == {"owner_lost": "n1"}
            # The same session, no new initialize: adopted by the node that gets it next.
            where = await result_of(client, n3.url, session_id, call(3, "where"))
            assert text_of(where) == "n3"
            again = await result_of(client, n2.url, session_id, call(4, "where"))
            assert text_of(again) == "n3"
            # The stream that died with n1 cannot be resumed (its call already failed).
            assert lost_stream is not None
            resume = {**headers, "accept": "text/event-stream", "last-event-id": lost_stream}
            assert (await client.get(n2.url, headers=resume)).status_code == 410
            record = await redis.hgetall(f"{revive.prefix}sess:{session_id}")
    assert record[b"owner"] == b"n3" and int(record[b"fence"]) == 2


async def stop_the_owner_mid_stream(
    cluster: Cluster, client: httpx.AsyncClient, redis: coredis.Redis[bytes]
) -> str:
    """A session opened on n1 streams a call through n2; n1 is stopped
    (SIGSTOP) beyond its lease: the call fails (``OwnerLost``), n3 adopts
    the session. Its id (n1 is left stopped)."""
    n1, n2, n3 = cluster.nodes
    session_id, _ = await open_session(client, n1.url)
    headers = headers_for(session_id)
    await handshake_saved(redis, cluster.prefix, session_id)
    body = call(2, "countdown", progress="c", n=1000, delay=0.02)
    async with stream(client, "POST", n2.url, headers, body) as events:
        assert await events.next() is not None
        n1.signal(signal.SIGSTOP)
        while (message := await events.next()) is not None and message.get("id") != 2:
            pass
    assert message is not None and message["error"]["data"] == {"owner_lost": "n1"}
    # n3 adopts the session (a new fence) while n1 is still stopped.
    assert text_of(await result_of(client, n3.url, session_id, call(3, "where"))) == "n3"
    return session_id


async def test_an_owner_stopped_beyond_its_lease_writes_nothing_once_resumed(revive: Cluster) -> None:
    n1, _, _ = revive.nodes
    inbox = f"{revive.prefix}inbox:n2"
    with trio.fail_after(TIMEOUT * 2):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client, redis_client(revive.redis.url) as redis:
            session_id = await stop_the_owner_mid_stream(revive, client, redis)
            mark = (await redis.xrevrange(inbox, count=1))[0].identifier
            written = await redis.xrange(inbox, "-", mark)
            assert any(b"progress" in e.field_values.get(b"b", b"") for e in written)
            n1.signal(signal.SIGCONT)
            # Wait for n1 to notice (its countdown goes on writing until it does).
            while n1.readiness()["cluster"]["lease_losses"] == 0:
                await trio.sleep(0.05)
            after = await redis.xrange(inbox, f"({mark.decode()}", "+")
            assert not [e for e in after if b"progress" in e.field_values.get(b"b", b"")]
            # n1 serves it no more: asked there, it forwards to the new owner.
            assert text_of(await result_of(client, n1.url, session_id, call(4, "where"))) == "n3"


async def test_delete_on_any_node_leaves_no_session_keys(cluster: Cluster) -> None:
    n1, n2, _ = cluster.nodes
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client, redis_client(cluster.redis.url) as redis:
            session_id, _ = await open_session(client, n1.url)
            assert await keys(redis, f"{cluster.prefix}sess:{session_id}*")
            deleted = await client.delete(n2.url, headers=headers_for(session_id))
            assert deleted.status_code == 200 and deleted.headers["mcp-node"] == "n2"
            while await keys(redis, f"{cluster.prefix}sess:{session_id}*"):
                await trio.sleep(0.05)  # deleted by the owner's keeper, right after
            gone = await client.post(
                n1.url, content=json.dumps(call(1, "where")), headers=headers_for(session_id)
            )
            assert gone.status_code == 404
