"""The session registry of a cluster node: this process's sessions in memory,
each one also recorded in Redis (owner, lease nonce, fence, handshake state),
so that any node finds its owner, and a node can adopt it when the owner dies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import trio

from ...protocol import V2025_03_26, ClientCapabilities, Implementation
from ...transports._asgi import HttpError
from ..http import ExpiryPolicy, HttpSessionStream, MemorySessionRegistry
from ._redis import REDIS_ERRORS

if TYPE_CHECKING:
    from ._node import RedisCluster

__all__ = ["ClusterRegistry", "HandshakeState", "restore", "snapshot"]


class HandshakeState(msgspec.Struct, frozen=True):
    """What a node needs to serve a session it did not see ``initialize``."""

    version: str
    capabilities: Any = None
    info: Any = None
    log_level: str | None = None
    subscriptions: list[str] = []


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(HandshakeState).decode


def snapshot(session: HttpSessionStream) -> bytes:
    """A session's handshake state, encoded (``b""`` before its handshake)."""
    server = session.server_session
    version = getattr(server, "protocol_version", None)
    if server is None or version is None:
        return b""
    info = server.client_info
    return _encode(
        HandshakeState(
            version=version,
            capabilities=msgspec.to_builtins(server.client_capabilities),
            info=None if info is None else msgspec.to_builtins(info),
            log_level=server.log_level,
            subscriptions=sorted(server.subscriptions),
        )
    )


def restore(session: HttpSessionStream, data: bytes) -> None:
    """Make a freshly started session what a saved handshake state says
    (no ``initialize``: the client keeps its ``Mcp-Session-Id``)."""
    state = _decode(data)
    server = session.server_session
    server.assume_initialized(state.version)
    server.peer.batch_arrays = state.version == V2025_03_26
    if state.capabilities is not None:
        server.client_capabilities = msgspec.convert(state.capabilities, ClientCapabilities)
    if state.info is not None:
        server.client_info = msgspec.convert(state.info, Implementation)
    server.log_level = state.log_level
    server.subscriptions = set(state.subscriptions)
    session.protocol_version = state.version
    session.established = True


class ClusterRegistry:
    """A :class:`~trio_mcp.serving.http.SessionRegistry` recording this
    process's sessions in Redis too (see the module)."""

    def __init__(self, cluster: RedisCluster) -> None:
        self.cluster = cluster
        self.memory = MemorySessionRegistry()
        #: Sessions being adopted: recorded in Redis by the adoption itself.
        self.adopting: set[str] = set()
        #: The state last saved, by session id.
        self.saved: dict[str, tuple[bytes, float]] = {}
        self._forget_send, self.forget_recv = trio.open_memory_channel[str](cluster.app.settings.max_sessions)
        self.forgets_dropped = 0
        #: Set by :meth:`drain`: no new session here (the lease is kept until
        #: :meth:`RedisCluster.drain`, once the calls in flight had their grace).
        self.refusing = False

    def __repr__(self) -> str:
        return f"<ClusterRegistry {self.memory.count()} sessions here>"

    @property
    def ttl(self) -> float:
        """How long Redis keeps an unused session (``session_idle_timeout``, else a day)."""
        idle = self.cluster.app.settings.session_idle_timeout
        return (idle if idle is not None else 86_400.0) + self.cluster.settings.lease_ttl

    async def add(self, session: HttpSessionStream) -> None:
        cluster = self.cluster
        assert session.id is not None
        if cluster.draining or self.refusing:
            raise HttpError(503, "Service Unavailable: this node is draining")
        if not cluster.healthy:
            raise HttpError(503, "Service Unavailable: the session store cannot be reached")
        if session.id not in self.adopting:
            try:
                with trio.fail_after(cluster.settings.store_timeout):
                    await cluster.store.create(session.id, cluster.settings.node_id, cluster.nonce, self.ttl)
            except REDIS_ERRORS:
                raise HttpError(503, "Service Unavailable: the session store cannot be reached") from None
        await self.memory.add(session)

    async def drain(self) -> None:
        """The server drains: take no new session here. The sessions here
        keep being served, and the lease held, until the server's stop path
        calls :meth:`RedisCluster.drain`."""
        self.refusing = True
        await trio.lowlevel.checkpoint()

    async def get(self, session_id: str) -> HttpSessionStream | None:
        return await self.memory.get(session_id)

    def remove(self, session: HttpSessionStream) -> bool:
        removed = self.memory.remove(session)
        if removed and session.id is not None:
            self.saved.pop(session.id, None)
            if self.cluster.draining:
                return True  # ended here to be adopted elsewhere: the record stays
            if self.cluster.replicas is not None:  # (the ones on other nodes end too)
                self.cluster.announce("cluster/ended", {"s": session.id})
            try:
                self._forget_send.send_nowait(session.id)
            except trio.WouldBlock:
                self.forgets_dropped += 1  # it expires in Redis by itself
        return removed

    def count(self) -> int:
        return self.memory.count()

    def local(self) -> list[HttpSessionStream]:
        return self.memory.local()

    async def expired(self, now: float, policy: ExpiryPolicy) -> list[tuple[HttpSessionStream, str]]:
        return await self.memory.expired(now, policy)

    async def idlest(self) -> HttpSessionStream | None:
        return await self.memory.idlest()

    # --------------------------------------------------------- background

    async def forget_loop(self) -> None:
        """Delete the Redis record of every session that ended here (if this
        node still owns it: an adopted one belongs to its new owner)."""
        cluster = self.cluster
        async for session_id in self.forget_recv:
            try:
                with trio.fail_after(cluster.settings.store_timeout):
                    await cluster.store.delete(session_id, cluster.nonce)
            except REDIS_ERRORS:
                pass  # it expires by itself

    async def save_all(self) -> None:
        """Save the handshake state of every session here whose state changed
        or that was used since the last save (which also renews its expiry).
        A session another node took over ends here at once."""
        cluster = self.cluster
        for session in self.memory.local():
            sid = session.id
            if sid is None or session.closed:
                continue
            state = snapshot(session)
            last = self.saved.get(sid)
            if last is not None and last[0] == state and session.last_active <= last[1]:
                continue
            stamp = trio.current_time()
            with trio.fail_after(cluster.settings.store_timeout):
                ours = await cluster.store.save(sid, cluster.settings.node_id, cluster.nonce, state, self.ttl)
            if ours:
                self.saved[sid] = (state, stamp)
            else:
                cluster.app.end_session(session, "owned by another node now")
