"""The cluster over direct links between its nodes (``--direct-link``): the
scenarios of ``test_cluster`` again, three node processes behind haproxy on
a real Redis, with every forwarded request on a link instead of the Redis
inbox; a stopped-then-resumed owner whose link frames are fenced off; and
the link's own failures, with nodes in this process (no link: the inbox
takes the request; a link that breaks: the calls on it fail, typed)."""

from __future__ import annotations

import signal
import socket
import tempfile
from pathlib import Path

import httpx
import pytest
import trio

from trio_mcp.server import MCPServer
from trio_mcp.serving.cluster._link import _frame

from ._helpers import (
    TIMEOUT,
    call,
    open_session,
    redis_client,
    request,
    result_of,
)
from .conftest import Cluster, needs_real_parts
from .test_cluster import (
    stop_the_owner_mid_stream,
    test_a_cancellation_sent_to_a_third_node_cancels_the_handler_on_the_owner,
    test_an_ingress_killed_mid_stream_is_resumed_on_another_node_exactly_once,
    test_an_owner_killed_fails_its_calls_then_its_session_is_adopted,
    test_round_robin_serves_every_request_kind_on_several_nodes,
    test_sampling_request_tool_call_and_answers_on_three_different_nodes,
    test_the_standalone_get_stream_on_any_node,
    text_of,
)
from .test_store import nodes, real_redis

pytestmark = [pytest.mark.cluster, needs_real_parts]

#: The module's nodes forward over direct links (see conftest).
LINK = True

__all__ = [
    "test_a_cancellation_sent_to_a_third_node_cancels_the_handler_on_the_owner",
    "test_an_ingress_killed_mid_stream_is_resumed_on_another_node_exactly_once",
    "test_an_owner_killed_fails_its_calls_then_its_session_is_adopted",
    "test_round_robin_serves_every_request_kind_on_several_nodes",
    "test_sampling_request_tool_call_and_answers_on_three_different_nodes",
    "test_the_standalone_get_stream_on_any_node",
]


async def test_forwarded_requests_go_over_the_link_and_not_through_the_inbox(cluster: Cluster) -> None:
    n1, n2, _ = cluster.nodes
    inbox = f"{cluster.prefix}inbox:n1"
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client, redis_client(cluster.redis.url) as redis:
            session_id, owner = await open_session(client, n1.url)
            assert owner == "n1"
            before = n2.readiness()["cluster"]["link_frames_received"]
            entries = await redis.xlen(inbox)
            for i in range(5):
                assert text_of(await result_of(client, n2.url, session_id, call(i, "where"))) == "n1"
            assert n2.readiness()["cluster"]["link_frames_received"] >= before + 5
            assert await redis.xlen(inbox) == entries
            assert (await redis.get(f"{cluster.prefix}link:n1") or b"").startswith(b"127.0.0.1:")


async def test_a_client_that_leaves_a_forwarded_call_leaves_nothing_waiting_on_either_node(
    cluster: Cluster,
) -> None:
    # The relay on the ingress watches its client as a POST served there does
    # (from disconnect_watch_delay on): once the client is gone the relay ends
    # and tells the owner, whose POST for it ends too (the tool would run 60 s).
    n1, n2, _ = cluster.nodes
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            session_id, owner = await open_session(client, n1.url)
            assert owner == "n1"
            async with httpx.AsyncClient(timeout=2.5) as leaving:
                with pytest.raises(httpx.ReadTimeout):
                    await request(leaving, n2.url, session_id, call(2, "slow"))
            while (
                n2.readiness()["cluster"]["waiting_forwarded"]
                or n1.readiness()["cluster"]["serving_forwarded"]
            ):
                await trio.sleep(0.1)
            # The session goes on.
            assert text_of(await result_of(client, n2.url, session_id, call(3, "where"))) == "n1"


async def test_an_owner_stopped_beyond_its_lease_sends_nothing_over_its_link_once_resumed(
    revive: Cluster,
) -> None:
    n1, n2, _ = revive.nodes
    with trio.fail_after(TIMEOUT * 2):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client, redis_client(revive.redis.url) as redis:
            session_id = await stop_the_owner_mid_stream(revive, client, redis)
            mark = n2.readiness()["cluster"]["link_frames_received"]
            n1.signal(signal.SIGCONT)
            # Wait for n1 to notice (its countdown goes on until it does).
            while n1.readiness()["cluster"]["lease_losses"] == 0:
                await trio.sleep(0.05)
            # Whatever n1 still had queued reached n2 as late frames: none was relayed.
            assert n2.readiness()["cluster"]["link_frames_received"] == mark
            while not n1.readiness()["cluster"]["healthy"]:
                await trio.sleep(0.05)  # n1 takes a new lease (its sessions ended with the old one)
            answer = await request(client, n1.url, session_id, call(4, "where"))
            assert answer.status_code == 200, (answer.status_code, answer.text)
            assert text_of(answer.json()["result"]) == "n3"


# ------------------------------------------------- nodes in this process


def make_app(name: str) -> MCPServer:
    app = MCPServer("link-test")

    @app.tool
    def where() -> str:
        return name

    @app.tool
    async def slow() -> str:
        await trio.sleep(60)
        return "slept"

    return app


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again at once: nothing listens there


async def test_an_owner_whose_link_cannot_be_opened_is_reached_through_its_inbox(tmp_path: Path) -> None:
    async with real_redis(tmp_path) as redis, redis_client(redis.url) as store:
        async with (
            nodes(redis, "a", "b", link=True, app=make_app) as [(url_a, a), (url_b, b)],
            httpx.AsyncClient(timeout=TIMEOUT) as client,
        ):
            with trio.fail_after(TIMEOUT):
                session_id, _ = await open_session(client, url_a)
                # a's published address now leads nowhere (its lease renewal keeps the value).
                await store.set("store:link:a", f"127.0.0.1:{closed_port()}", px=60_000)
                for i in range(3):
                    assert text_of(await result_of(client, url_b, session_id, call(i, "where"))) == "a"
                assert b.links is not None and b.links.received == 0
                assert await store.xlen("store:inbox:a") >= 3  # the requests went through the inbox
                assert a.forwarded >= 3


async def test_nodes_given_a_link_dir_link_over_unix_sockets_there_and_remove_them(tmp_path: Path) -> None:
    # A short directory: a Unix socket's path holds at most 107 bytes, and
    # pytest's tmp_path under xdist comes close.
    with tempfile.TemporaryDirectory(prefix="links-") as short:
        await _link_over_unix_sockets(tmp_path, Path(short))


async def _link_over_unix_sockets(tmp_path: Path, links: Path) -> None:
    async with real_redis(tmp_path) as redis, redis_client(redis.url) as store:
        async with (
            nodes(redis, "a", "b", link=True, app=make_app, link_dir=str(links)) as [(url_a, a), (url_b, b)],
            httpx.AsyncClient(timeout=TIMEOUT) as client,
        ):
            assert a.links is not None and b.links is not None
            assert a.links.address.startswith(f"unix:{links}/link-")
            assert len(list(links.glob("link-*.sock"))) == 2
            with trio.fail_after(TIMEOUT):
                session_id, _ = await open_session(client, url_a)
                for i in range(3):
                    assert text_of(await result_of(client, url_b, session_id, call(i, "where"))) == "a"
                assert b.links.received >= 3 and a.forwarded >= 3
                assert b.links.to_owner["a"].stream.socket.family == socket.AF_UNIX
                assert await store.xlen("store:inbox:a") == 0  # none went through the inbox
        assert list(links.iterdir()) == []  # each node removed its socket


async def test_a_link_that_breaks_fails_its_calls_typed_and_the_next_request_opens_another(
    tmp_path: Path,
) -> None:
    async with real_redis(tmp_path) as redis, nodes(redis, "a", "b", link=True, app=make_app) as running:
        [(url_a, a), (url_b, b)] = running
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            with trio.fail_after(TIMEOUT):
                session_id, _ = await open_session(client, url_a)
                assert text_of(await result_of(client, url_b, session_id, call(1, "where"))) == "a"
                assert b.links is not None
                link = b.links.to_owner["a"]
                answer: list[httpx.Response] = []
                async with trio.open_nursery() as nursery:

                    async def slow_call() -> None:
                        answer.append(await request(client, url_b, session_id, call(2, "slow")))

                    nursery.start_soon(slow_call)
                    while not a.exchanges:
                        await trio.sleep(0.01)  # until the owner serves it
                    await link.stream.aclose()  # the connection breaks
                assert answer[0].status_code == 200
                assert answer[0].json()["error"]["data"] == {"owner_lost": "a"}
                while a.exchanges:
                    await trio.sleep(0.01)  # the owner stops serving it (its client is gone)
                assert text_of(await result_of(client, url_b, session_id, call(3, "where"))) == "a"
                assert b.links.to_owner["a"] is not link


async def test_a_peer_that_does_not_name_the_nodes_token_gets_no_link(tmp_path: Path) -> None:
    async with real_redis(tmp_path) as redis, nodes(redis, "a", link=True, app=make_app) as running:
        [(_, a)] = running
        assert a.links is not None
        host, _, port = a.links.address.rpartition(":")
        with trio.fail_after(TIMEOUT):
            for token in ("", "not-" + a.links.token):
                stream = await trio.open_tcp_stream(host, int(port))
                hello = {b"k": b"hello", b"from": b"intruder", b"fn": b"x", b"t": token.encode()}
                await stream.send_all(_frame(hello))
                assert await stream.receive_some(1024) == b""  # closed, no hello back
                await stream.aclose()
            # The published value carries the token; a peer naming it is answered.
            published = await a.store.client.get("store:link:a")
            assert published == f"{a.links.address} {a.links.token}".encode()
            stream = await trio.open_tcp_stream(host, int(port))
            hello = {b"k": b"hello", b"from": b"peer", b"fn": b"x", b"t": a.links.token.encode()}
            await stream.send_all(_frame(hello))
            assert await stream.receive_some(1024) != b""
            await stream.aclose()
