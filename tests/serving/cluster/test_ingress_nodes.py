"""Serving where requests land (``--serve-on-ingress``) with the real parts:
three ``trio-mcp run -t http --json-response`` node processes on a real Redis
behind a real haproxy (round robin, no stickiness), over direct links. A
session's plain requests are served by whichever node the balancer picks,
what changes the session by its owner; a call running on a node that does
not own its session finishes there when the owner is killed, and the
session is adopted. The nodes share a ``requestState`` key: a 2026-07-28
call's rounds are answered by whichever node each retry reaches."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio

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
)
from .conftest import Cluster, needs_real_parts
from .test_cluster import text_of

pytestmark = [pytest.mark.cluster, needs_real_parts]

LINK = True
KEY = "cluster-test-request-state-key-0123456789"
EXTRA = ("--json-response", "--serve-on-ingress", "--request-state-key", KEY)
MODERN = "2026-07-28"


async def test_round_robin_serves_plain_requests_where_they_land(cluster: Cluster) -> None:
    assert cluster.lb is not None
    url = cluster.lb.url
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client, redis_client(cluster.redis.url) as redis:
            session_id, owner = await open_session(client, url)
            await handshake_saved(redis, cluster.prefix, session_id)
            served = []
            for i in range(6):
                answer = await request(client, url, session_id, call(i, "where"))
                assert answer.status_code == 200, answer.text
                node = answer.headers["x-served-by"]
                served.append(node)
                assert text_of(answer.json()["result"]) == node  # run where it landed
            read = {"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": {"uri": "memo://note"}}
            answer = await request(client, url, session_id, read)
            assert (
                answer.json()["result"]["contents"][0]["text"]
                == f"a note from {answer.headers['x-served-by']}"
            )
            level = set_level(10, "error")
            for i in range(3):  # on every node: the owner's to change
                assert (await request(client, url, session_id, level)).status_code == 200
            recorded = await redis.hget(f"{cluster.prefix}sess:{session_id}", "owner")
    assert len(set(served)) >= 2, served  # no stickiness (3 unless haproxy still counts one down)
    assert recorded == owner.encode()
    stats = [node.readiness()["cluster"] for node in cluster.nodes]
    # Every call that landed elsewhere than on the owner was served there, from a replica.
    assert sum(s["served_on_ingress"] for s in stats) >= sum(node != owner for node in served) > 0
    assert all(s["replicas"] <= 1 for s in stats)


async def test_a_call_on_a_node_outlives_its_sessions_owner_which_is_then_adopted(revive: Cluster) -> None:
    n1, n2, n3 = revive.nodes
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client, redis_client(revive.redis.url) as redis:
            session_id, owner = await open_session(client, n1.url)
            assert owner == "n1"
            await handshake_saved(redis, revive.prefix, session_id)
            answers = []
            async with trio.open_nursery() as nursery:

                async def counting() -> None:
                    answers.append(
                        await result_of(client, n2.url, session_id, call(1, "countdown", n=20, delay=0.1))
                    )

                nursery.start_soon(counting)
                while not n2.readiness()["cluster"]["replicas"]:
                    await trio.sleep(0.02)
                n1.kill()
            # The owner is gone; the call on n2 ran to its end all the same.
            assert text_of(answers[0]) == "counted 20 on n2"
            # The next request adopts the session (same id, no initialize) where it lands.
            assert text_of(await result_of(client, n3.url, session_id, call(2, "where"))) == "n3"
            recorded = await redis.hget(f"{revive.prefix}sess:{session_id}", "owner")
            assert recorded == b"n3"
            assert text_of(await result_of(client, n2.url, session_id, call(3, "where"))) == "n2"
            assert (await client.delete(n2.url, headers=headers_for(session_id))).status_code in (200, 204)


async def test_a_2026_call_whose_rounds_each_reach_another_node(cluster: Cluster) -> None:
    """``ask`` asks three questions, one per round: each retry goes to the next
    node, and is accepted there (the state was signed with the shared key)."""
    capabilities = {"sampling": {}, "elicitation": {"form": {}}, "roots": {}}
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "cluster-test", "version": "1"},
    }
    answers: dict[str, Any] = {
        "sampling/createMessage": {
            "role": "assistant",
            "content": {"type": "text", "text": "s"},
            "model": "m",
        },
        "elicitation/create": {"action": "accept", "content": {"name": "ada"}},
        "roots/list": {"roots": [{"uri": "file:///r"}]},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "ask",
    }
    params: dict[str, Any] = {"name": "ask", "arguments": {}, "_meta": meta}
    served, asked = [], []
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            for node in [*cluster.nodes, cluster.nodes[0]]:
                body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
                answer = await client.post(node.url, content=json.dumps(body), headers=headers)
                assert answer.status_code == 200, answer.text
                served.append(answer.headers["mcp-node"])
                result = answer.json()["result"]
                if result.get("resultType") != "input_required":
                    break
                ((key, question),) = result["inputRequests"].items()
                asked.append(question["method"])
                params = {**params, "inputResponses": {key: answers[question["method"]]}}
                params["requestState"] = result["requestState"]
    assert asked == ["sampling/createMessage", "elicitation/create", "roots/list"]
    assert served == ["n1", "n2", "n3", "n1"]
    assert text_of(result) == "s|ada|file:///r|n1"
