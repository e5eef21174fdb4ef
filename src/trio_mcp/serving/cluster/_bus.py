"""The bus of a cluster: one Redis pub/sub channel (``events``) that every node
publishes to and reads. It carries the app's broadcasts (list changes,
resource updates) to the sessions of the other nodes, and the notices the
nodes give each other about sessions served where their requests land (a
session ended on its owner, a request cancelled; see :mod:`._replica`).
Delivery is at most once: a notice queued beyond ``bus_queue``, or published
while Redis is away, is dropped and counted."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import msgspec
import trio
from msgspec import UNSET

from ._redis import REDIS_ERRORS

if TYPE_CHECKING:
    from ._node import RedisCluster

__all__ = ["Bus"]

log = logging.getLogger("trio_mcp.cluster")


class _Broadcast(msgspec.Struct, frozen=True):
    node: str
    method: str
    params: Any = None


class Bus:
    """Publishes this node's broadcasts and notices, and delivers the other nodes'."""

    def __init__(self, cluster: RedisCluster) -> None:
        self.cluster = cluster
        self._send, self._recv = trio.open_memory_channel[bytes](cluster.settings.bus_queue)
        self.dropped = 0

    def publish(self, method: str, params: Any) -> None:
        """Queue a broadcast (or a ``cluster/…`` notice) for the other nodes (never blocks)."""
        data = msgspec.json.encode(
            _Broadcast(self.cluster.settings.node_id, method, None if params is UNSET else params)
        )
        try:
            self._send.send_nowait(data)
        except trio.WouldBlock:
            self.dropped += 1

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._publish)
            task_status.started()
            while True:
                try:
                    await self._subscribe()
                except* REDIS_ERRORS as group:  # coredis raises them from its own tasks too
                    log.debug("bus subscription failed: %r", group.exceptions[0])
                await trio.sleep(self.cluster.settings.renew_interval)

    async def _subscribe(self) -> None:
        store = self.cluster.store
        async with store.client.pubsub(
            channels=[store.key("events")], ignore_subscribe_messages=True, retry_policy=None
        ) as pubsub:
            async for message in pubsub:
                if message["type"] == "message":
                    self._deliver(message["data"])

    def _deliver(self, data: Any) -> None:
        cluster = self.cluster
        try:
            event = msgspec.json.decode(data, type=_Broadcast)
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError):
            return
        if event.node == cluster.settings.node_id:
            return
        if event.method.startswith("cluster/"):
            if cluster.replicas is not None:
                cluster.replicas.notice(event.method, event.params)
            return
        app = cluster._app
        shared = None if app is None else app._shared
        if shared is not None:
            shared.deliver_broadcast(event.method, UNSET if event.params is None else event.params)

    async def _publish(self) -> None:
        store = self.cluster.store
        async for data in self._recv:
            try:
                with trio.fail_after(self.cluster.settings.store_timeout):
                    await store.publish(data)
            except REDIS_ERRORS:
                self.dropped += 1
