"""Nodes in this process on a real redis-server of their own: Redis going
away and coming back, keys that end with their sessions, draining, and the
settings' checks."""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from trio_mcp.server import MCPServer
from trio_mcp.serving.cluster import ClusterSettings, RedisCluster
from trio_mcp.serving.cluster._redis import Outgoing, RedisStore
from trio_mcp.serving.http import HttpServer

from ._helpers import (
    ACCEPT_BOTH,
    TIMEOUT,
    call,
    handshake_saved,
    headers_for,
    init_message,
    keys,
    open_session,
    redis_client,
    request,
    result_of,
)
from .conftest import REDIS_SERVER, needs_real_parts

pytestmark = [pytest.mark.cluster, needs_real_parts]


def make_app(name: str) -> MCPServer:
    app = MCPServer("store-test")

    @app.tool
    def where() -> str:
        return name

    return app


class Redis:
    """A redis-server on a Unix socket, stopped and started again by the test."""

    def __init__(self, directory: Path) -> None:
        self.socket = directory / "redis.sock"
        self.url = f"unix://{self.socket}"
        self.dir = directory
        self.proc: trio.Process | None = None

    async def start(self) -> None:
        assert REDIS_SERVER is not None
        self.socket.unlink(missing_ok=True)
        command = [
            REDIS_SERVER, "--port", "0", "--unixsocket", str(self.socket), "--save", "",
            "--appendonly", "no", "--dir", str(self.dir),
        ]  # fmt: skip
        self.proc = await trio.lowlevel.open_process(command, stdout=-3, stderr=-3)
        with trio.fail_after(TIMEOUT):
            while not self.socket.exists():
                await trio.sleep(0.02)  # nothing to wait on but the socket file

    async def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            with trio.move_on_after(5):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


@contextlib.asynccontextmanager
async def real_redis(tmp_path: Path) -> AsyncIterator[Redis]:
    redis = Redis(tmp_path)
    await redis.start()
    try:
        yield redis
    finally:
        with trio.CancelScope(shield=True):
            await redis.stop()


async def healthy(*clusters: RedisCluster) -> None:
    while not all(c.healthy for c in clusters):
        await trio.sleep(0.02)  # the first lease is taken in the background


@contextlib.asynccontextmanager
async def nodes(
    redis: Redis,
    *names: str,
    link: bool = False,
    app: Callable[[str], MCPServer] | None = None,
    link_dir: str | None = None,
    serve_on_ingress: bool = False,
    **options: Any,
) -> AsyncIterator[list[tuple[str, RedisCluster]]]:
    """HTTP servers in this process, each one a node (lease 1 s; ``link``:
    with direct links, over Unix sockets in ``link_dir`` if given; each
    serving a session's plain requests itself with ``serve_on_ingress``),
    serving ``app(name)``."""
    async with trio.open_nursery() as nursery:
        running = []
        for name in names:
            cluster = RedisCluster(
                ClusterSettings(
                    url=redis.url,
                    prefix="store:",
                    node_id=name,
                    lease_ttl=1.0,
                    renew_interval=0.25,
                    store_timeout=0.5,
                    node_header=True,
                    direct_link=link,
                    link_dir=link_dir,
                    serve_on_ingress=serve_on_ingress,
                )
            )
            server = HttpServer((app or make_app)(name), cluster=cluster, **options)
            info = await nursery.start(server.run)
            running.append((info.url, cluster))
        with trio.fail_after(TIMEOUT):
            await healthy(*(c for _, c in running))
        yield running
        nursery.cancel_scope.cancel()


async def test_redis_away_gives_503_for_sessions_only_and_service_resumes_by_itself(tmp_path: Path) -> None:
    modern = {
        **ACCEPT_BOTH,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "where",
    }
    stateless = call("s", "where")
    stateless["params"]["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    async with real_redis(tmp_path) as redis, nodes(redis, "a", "b") as running:
        (url_a, cluster_a), (url_b, _) = running
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            with trio.fail_after(TIMEOUT):
                session_id, _ = await open_session(client, url_a)
                assert (await result_of(client, url_b, session_id, call(1, "where")))["content"][0][
                    "text"
                ] == "a"
                await redis.stop()
                # Asked elsewhere: 503 within the store timeout.
                assert (await request(client, url_b, session_id, call(2, "where"))).status_code == 503
                # Asked on its owner: 503 once the lease has lapsed (it cannot know it still owns it).
                while (await request(client, url_a, session_id, call(3, "where"))).status_code != 503:
                    await trio.sleep(0.05)
                assert not cluster_a.healthy
                init = await client.post(url_a, content=_init(), headers=ACCEPT_BOTH)
                assert init.status_code == 503
                # A stateless request needs no Redis.
                answer = await client.post(url_b, content=json.dumps(stateless), headers=modern)
                assert answer.status_code == 200 and answer.json()["result"]["content"][0]["text"] == "b"
                await redis.start()  # empty: the old sessions are gone
                await healthy(cluster_a)
                session_id, owner = await open_session(client, url_a)
                assert owner == "a"
                assert (await result_of(client, url_b, session_id, call(4, "where")))["content"][0][
                    "text"
                ] == "a"


def _init() -> str:
    return json.dumps(init_message())


async def test_sessions_that_end_leave_no_keys(tmp_path: Path) -> None:
    async with real_redis(tmp_path) as redis, redis_client(redis.url) as store:
        async with nodes(redis, "a", "b", session_idle_timeout=0.5) as running:
            (url_a, _), (url_b, _) = running
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                with trio.fail_after(TIMEOUT):
                    kept, _ = await open_session(client, url_a)
                    deleted, _ = await open_session(client, url_b)
                    await open_session(client, url_a)  # left idle: it expires
                    assert len(await keys(store, "store:sess:*")) == 3
                    assert (await client.delete(url_a, headers=headers_for(deleted))).status_code == 200
                    while True:
                        # ``kept`` stays in use; ``idle`` expires, ``deleted`` is gone.
                        await result_of(client, url_b, kept, call(1, "where"))
                        left = await keys(store, "store:sess:*")
                        if left == {f"store:sess:{kept}".encode()}:
                            break
                        await trio.sleep(0.1)
        # Every node stopped: nothing but what expires by itself within a few leases.
        assert await keys(store, "store:sess:*") <= {f"store:sess:{kept}".encode()}
        ttls = [await store.pttl(key) for key in await keys(store, "store:*")]
        assert ttls and all(ttl > 0 for ttl in ttls)


async def test_drain_releases_the_lease_at_once_and_stops_taking_sessions(tmp_path: Path) -> None:
    async with real_redis(tmp_path) as redis, redis_client(redis.url) as store:
        async with nodes(redis, "a", "b") as running:
            (url_a, cluster_a), (url_b, _) = running
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                with trio.fail_after(TIMEOUT):
                    session_id, _ = await open_session(client, url_a)
                    await result_of(client, url_a, session_id, call(1, "where"))
                    while not (await store.hget(f"store:sess:{session_id}", "state")):
                        await trio.sleep(0.05)  # the handshake state is saved every renewal
                    assert await store.exists(["store:node:a"]) == 1
                    await cluster_a.drain()
                    assert await store.exists(["store:node:a"]) == 0  # at once, not after the lease
                    assert (await client.post(url_a, content=_init(), headers=ACCEPT_BOTH)).status_code == 503
                    ready = await client.get(url_a.removesuffix("/mcp") + "/readyz")
                    assert ready.status_code == 503 and ready.json()["cluster"]["draining"] is True
                    # The session lives on: the next node asked adopts it.
                    where = await result_of(client, url_b, session_id, call(2, "where"))
                    assert where["content"][0]["text"] == "b"


def test_cluster_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="renew_interval"):
        ClusterSettings(url="redis://x", lease_ttl=1, renew_interval=1)
    with pytest.raises(ValueError, match="owner_failure"):
        ClusterSettings(url="redis://x", owner_failure="keep")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="node_id"):
        ClusterSettings(url="redis://x", node_id="a:b")
    with pytest.raises(ValueError, match="store_timeout"):
        ClusterSettings(url="redis://x", store_timeout=0)
    with pytest.raises(ValueError, match="link_advertise"):
        ClusterSettings(url="redis://x", link_dir="/run/links", link_advertise="10.0.0.1:9000")
    with pytest.raises(ValueError, match="too long"):
        ClusterSettings(url="redis://x", link_dir="/" + "d" * 80)
    assert ClusterSettings(url="redis://x", link_dir="/" + "d" * 79).link_dir is not None
    assert ClusterSettings(url="redis://x").node_id != ClusterSettings(url="redis://x").node_id


async def test_a_dead_reader_stops_the_lease_with_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with real_redis(tmp_path) as redis, redis_client(redis.url) as store:
        async with nodes(redis, "a") as running:
            ((url_a, cluster_a),) = running
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                with trio.fail_after(TIMEOUT):
                    session_id, _ = await open_session(client, url_a)
                    nonce = cluster_a.nonce
                    assert await store.get("store:node:a") == nonce.encode()
                    # A malformed entry is ignored, not fatal.
                    await store.xadd("store:inbox:a", {"k": "req", "f": "x"})
                    assert (await result_of(client, url_a, session_id, call(1, "where")))["content"]
                    await handshake_saved(store, "store:", session_id)
                    reading = cluster_a.store.read
                    crashed = trio.Event()

                    async def crash_once(*args: Any) -> Any:
                        if not crashed.is_set():
                            crashed.set()
                            raise RuntimeError("the inbox reader fails")
                        return await reading(*args)

                    monkeypatch.setattr(cluster_a.store, "read", crash_once)
                    await crashed.wait()
                    # One for all: the lease restarted with the reader, under a new nonce,
                    # and the sessions of the old one ended here.
                    while cluster_a.lease_losses == 0 or not cluster_a.healthy:
                        await trio.sleep(0.02)
                    assert cluster_a.nonce != nonce
                    assert await store.get("store:node:a") == cluster_a.nonce.encode()
                    assert cluster_a.app.registry.count() == 0
                    # Its saved state lets the node take it back at the next request.
                    assert (await result_of(client, url_a, session_id, call(2, "where")))["content"]
                    assert cluster_a.adopted == 1


async def test_two_live_processes_never_share_a_node_id(tmp_path: Path) -> None:
    async with real_redis(tmp_path) as redis, redis_client(redis.url) as store:
        async with nodes(redis, "a") as running, trio.open_nursery() as nursery:
            ((_, first),) = running
            twin = RedisCluster(
                ClusterSettings(
                    url=redis.url, prefix="store:", node_id="a", lease_ttl=1.0, renew_interval=0.25
                )
            )
            await nursery.start(HttpServer(make_app("twin"), cluster=twin).run)
            with trio.fail_after(TIMEOUT):
                while twin.refused < 2:
                    await trio.sleep(0.02)  # its renewals, in the background
            assert not twin.healthy and first.healthy
            assert await store.get("store:node:a") == first.nonce.encode()
            nursery.cancel_scope.cancel()


async def test_inbox_entries_go_in_one_command_each_fenced_by_its_own_nonce(tmp_path: Path) -> None:
    """The batched write: every entry lands in its own node's inbox, in order,
    except one fenced by a lease nonce the writer no longer holds."""
    async with real_redis(tmp_path) as redis, redis_client(redis.url) as client:
        store = RedisStore(ClusterSettings(url=redis.url, prefix="batch:"))
        async with store.client:
            with trio.fail_after(TIMEOUT):
                assert await store.register("me", "n1", fresh=True)
                entries = [
                    Outgoing("b", {"k": "req", "f": "1"}),
                    Outgoing("c", {"k": "start", "f": "2", "b": b"\x00bytes\xff"}, "n1"),
                    Outgoing("b", {"k": "body", "f": "3"}, "stale"),
                    Outgoing("b", {"k": "dis", "f": "4"}),
                ]
                assert await store.send("me", entries) == [True, True, False, True]
                inbox_b = await store.read("b", "0-0", 0.01)
                inbox_c = await store.read("c", "0-0", 0.01)
                assert [fields[b"f"] for _, fields in inbox_b] == [b"1", b"4"]
                assert [fields for _, fields in inbox_c] == [
                    {b"k": b"start", b"f": b"2", b"b": b"\x00bytes\xff"}
                ]
                # Once the lease is gone, no fenced entry is written, whatever its nonce.
                await client.delete(["batch:node:me"])
                assert await store.send("me", [Outgoing("c", {"k": "body", "f": "5"}, "n1")]) == [False]
                assert len(await store.read("c", "0-0", 0.01)) == 1
