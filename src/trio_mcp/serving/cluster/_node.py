""":class:`RedisCluster`: one node of a cluster of Streamable HTTP servers
sharing their sessions through Redis.

Its plumbing runs under one one-for-all :class:`~trio_mcp.supervision.Supervisor`:
the lease (heartbeat), the inbox reader, the bus (publish and subscribe,
:mod:`._bus`), the session keeper (saves handshake state, renews expiry,
forgets ended sessions) and, with ``serve_on_ingress``, the replicas'
upkeep. When any of them dies all restart, and the lease restarts under a
new nonce: this node's sessions end (another node may adopt them), so a dead
reader never leaves a live-looking owner that answers nothing.

Routing (:meth:`RedisCluster.intercept`, called by the app for every request
on the MCP endpoint): a session hosted here is served here; one owned by a
live node is forwarded there (:mod:`._tunnel`), or with ``serve_on_ingress``
served here by a replica of it when the request allows (:mod:`._replica`);
one whose owner died is adopted here or forgotten (``404``), per
``owner_failure``; with Redis away, a session request gets ``503`` within
``store_timeout`` (a session hosted here: as soon as the lease has lapsed),
while requests without a session (``initialize`` aside) never touch Redis.
"""

from __future__ import annotations

import inspect
import logging
import math
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from ...supervision import ChildSpec, Strategy, Supervisor
from ...transports._asgi import HttpError, Receive, Scope, Send
from ..http._config import LAST_EVENT_HEADER, SESSION_HEADER
from ._bus import Bus
from ._link import Link, Links
from ._redis import REDIS_ERRORS, NotWritten, Outgoing, RedisStore, SessionRecord
from ._registry import ClusterRegistry, restore
from ._replica import Replicas
from ._settings import NODE_HEADER, ClusterSettings
from ._tunnel import FORWARDED, MISDIRECTED, Exchange, Reply, Silence, forward, read_request, serve_forwarded

if TYPE_CHECKING:
    from ..http import HttpSessionStream, StreamableHttpApp

__all__ = ["RedisCluster"]

log = logging.getLogger("trio_mcp.cluster")


def _check_resumption(session: HttpSessionStream, scope: Scope, headers: dict[str, str]) -> None:
    """A resumption (``Last-Event-ID``) of a stream of the session's previous
    owner: that stream died with it, its requests will never be answered, so
    ``410`` (a client then fails them) rather than the new standalone stream."""
    last = headers.get(LAST_EVENT_HEADER)
    if last is not None and scope.get("method") == "GET":
        stream_id = last.strip().rpartition(":")[0]
        if stream_id and not session.owns(stream_id):
            raise HttpError(410, "Gone: that stream was lost with the node that served it")


#: About how many bytes of inbox entries one Redis command carries (one
#: entry may be larger: it goes alone).
_BATCH_BYTES = 1 << 20

#: What a forwarded request must carry (see ``_tunnel.forward``).
_REQUEST_FIELDS = (b"f", b"from", b"m", b"p", b"h")


class RedisCluster:
    """One node of a cluster on Redis (see the module). ``await
    nursery.start(cluster.run, app)`` before the app serves;
    :class:`~trio_mcp.serving.http.HttpServer` does it given ``cluster=``."""

    def __init__(self, settings: ClusterSettings) -> None:
        self.settings = settings
        self.store = RedisStore(settings)
        #: The lease's current nonce (a new one each time the lease is taken afresh).
        self.nonce = secrets.token_hex(8)
        self._app: StreamableHttpApp | None = None
        self._registry: ClusterRegistry | None = None
        #: Forwarded requests waiting here for their answer, by exchange id.
        self.replies: dict[bytes, Reply] = {}
        #: Wakes the relays whose owner said nothing for renew_interval.
        self.silence = Silence(settings.renew_interval, self.replies)
        #: The owners of sessions hosted elsewhere, each with the lease nonce it
        #: holds them under: kept until the owner says it lost the session, or
        #: its lease under that nonce is found gone (a lookup less per request).
        self.routes: dict[str, SessionRecord] = {}
        #: Owner leases (node, nonce) seen alive, trusted until the time given
        #: (never beyond what the lease had left): one check per owner node
        #: every ``renew_interval``, not one per session or request.
        self.live_owners: dict[tuple[str, str], float] = {}
        #: Requests forwarded here being served, by exchange id.
        self.exchanges: dict[bytes, Exchange] = {}
        #: The direct links (``direct_link``), and this node's published address.
        self.links = Links(self) if settings.direct_link else None
        self.link_address = ""
        self.lease_until = -math.inf
        self.draining = False
        self._registered = False
        self._booted = False
        self._inbox_after = "0-0"
        self._nursery: trio.Nursery | None = None
        self._saved: dict[str, Any] = {}
        self._save_soon = trio.Event()
        self.bus = Bus(self)
        #: The replicas of sessions owned elsewhere (``serve_on_ingress``).
        self.replicas = Replicas(self) if settings.serve_on_ingress else None
        self._outbox_send, self._outbox_recv = trio.open_memory_channel[Outgoing](settings.outbox_queue)
        self.lease_losses = 0
        #: Times the lease could not be taken: another live process has this node id.
        self.refused = 0
        self.forwarded = 0
        self.adopted = 0

    def __repr__(self) -> str:
        return f"<RedisCluster node {self.settings.node_id}>"

    @property
    def app(self) -> StreamableHttpApp:
        if self._app is None:
            raise RuntimeError("the cluster is not running")
        return self._app

    @property
    def nursery(self) -> trio.Nursery | None:
        """Where the node's tasks run, while it runs."""
        return self._nursery

    @property
    def healthy(self) -> bool:
        """Whether this node holds its lease now (else its session requests get ``503``)."""
        return trio.current_time() < self.lease_until

    def statistics(self) -> dict[str, Any]:
        return {
            "node": self.settings.node_id,
            "healthy": self.healthy,
            "draining": self.draining,
            "lease_losses": self.lease_losses,
            "lease_refused": self.refused,
            "forwarded_in": self.forwarded,
            "adopted": self.adopted,
            "serving_forwarded": len(self.exchanges),
            "waiting_forwarded": len(self.replies),
            "broadcasts_dropped": self.bus.dropped,
            **(self.links.statistics() if self.links is not None else {}),
            **(self.replicas.statistics() if self.replicas is not None else {}),
        }

    # ------------------------------------------------------------ lifecycle

    async def run(
        self, app: StreamableHttpApp, *, task_status: trio.TaskStatus[RedisCluster] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Join the cluster for ``app`` (which must not serve sessions yet) until cancelled."""
        if self._app is not None:
            raise RuntimeError("a RedisCluster runs once")
        self._app = app
        self._registry = registry = ClusterRegistry(self)
        self._saved = registry.saved
        app.registry = registry
        app.cluster = self
        app.readiness = self._readiness(app.readiness)
        shared = app._shared
        if shared is not None and hasattr(shared, "broadcast_relay"):
            shared.broadcast_relay = self.announce
        # The link first: the lease publishes its address.
        links = [ChildSpec(id="link", start=self.links.run)] if self.links is not None else []
        replicas = [ChildSpec(id="replicas", start=self.replicas.run)] if self.replicas is not None else []
        supervisor = Supervisor(
            [
                *links,
                ChildSpec(id="lease", start=self._lease, shutdown_grace=self.settings.store_timeout),
                ChildSpec(id="inbox", start=self._inbox),
                ChildSpec(id="outbox", start=self._outbox),
                ChildSpec(id="bus", start=self.bus.run),
                ChildSpec(id="sessions", start=self._keeper),
                *replicas,
            ],
            strategy=Strategy.ONE_FOR_ALL,
        )
        try:
            async with self.store.client, trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self.silence.run)
                await nursery.start(supervisor.run)
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            self._nursery = None
            if shared is not None and getattr(shared, "broadcast_relay", None) == self.announce:
                shared.broadcast_relay = None

    async def drain(self) -> None:
        """Stop taking sessions and give up this node's lease at once: the
        sessions here end now, and other nodes adopt them (or answer ``404``,
        per ``owner_failure``) at their next request instead of after the
        lease time. Call it once the in-flight calls had their grace."""
        self.draining = True
        self.lease_until = -math.inf
        nonce = self.nonce
        self._end_local("this node is draining")
        with trio.move_on_after(self.settings.store_timeout):
            try:
                await self.store.release(self.settings.node_id, nonce)
            except REDIS_ERRORS:
                log.warning("draining: the lease could not be released (it expires by itself)")

    def fenced(self, nonce: str, reason: str) -> None:
        """This node lost the lease it held under ``nonce``: another node may
        own its sessions now, so they end here at once; the lease is taken
        afresh (new nonce) at the next renewal."""
        if nonce != self.nonce:
            return  # that lease was given up already
        log.warning("node %s lost its lease: %s", self.settings.node_id, reason)
        self.lease_losses += 1
        self.lease_until = -math.inf
        self.nonce = secrets.token_hex(8)
        self._registered = False
        self._end_local(reason)

    def _end_local(self, reason: str) -> None:
        app = self._app
        if app is not None:
            for session in app.registry.local():
                app.end_session(session, reason)
        if self.replicas is not None:
            self.replicas.end_all(reason)
        for exchange in list(self.exchanges.values()):
            exchange.disconnect()

    # --------------------------------------------------------------- lease

    async def _lease(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if self._registered:  # restarted with its group: whatever was here is suspect
            self.fenced(self.nonce, "the cluster plumbing restarted")
        task_status.started()
        try:
            while True:
                await self._renew_once()
                await self._check_ingress()
                await trio.sleep(self.settings.renew_interval)
        finally:
            self.lease_until = -math.inf

    async def _renew_once(self) -> None:
        settings = self.settings
        if self.draining:
            return
        began = trio.current_time()
        nonce = self.nonce
        try:
            with trio.fail_after(settings.store_timeout):
                if not self._registered:
                    held = await self.store.register(
                        settings.node_id, nonce, fresh=not self._booted, link=self.link_address
                    )
                    if not held:
                        self.refused += 1
                        log.warning("node id %s is held by another live process: waiting", settings.node_id)
                        return
                    self._registered = self._booted = True
                else:
                    held = await self.store.renew(settings.node_id, nonce)
        except REDIS_ERRORS as exc:
            log.debug("lease renewal failed: %r", exc)
            if self._registered and trio.current_time() >= self.lease_until:
                self.fenced(nonce, "the session store was unreachable for longer than the lease")
            return
        if held:
            self.lease_until = began + settings.lease_ttl
        else:
            self.fenced(nonce, "the lease expired (this node was stalled or cut off)")

    async def _check_ingress(self) -> None:
        """Stop serving forwarded requests whose ingress node died."""
        nodes = {(e.ingress, e.ingress_nonce) for e in self.exchanges.values()}
        for node, nonce in nodes:
            try:
                with trio.fail_after(self.settings.store_timeout):
                    alive = await self.store.alive(node, nonce)
            except REDIS_ERRORS:
                return
            if not alive:
                for exchange in self.exchanges.values():
                    if exchange.ingress == node:
                        exchange.disconnect()

    # --------------------------------------------------------------- inbox

    async def _inbox(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        settings = self.settings
        task_status.started()
        while True:
            try:
                with trio.fail_after(settings.renew_interval + settings.store_timeout):
                    entries = await self.store.read(
                        settings.node_id, self._inbox_after, settings.renew_interval
                    )
            except REDIS_ERRORS as exc:
                log.debug("inbox read failed: %r", exc)
                await trio.sleep(settings.renew_interval)
                continue
            for ident, fields in entries:
                self._inbox_after = ident
                self._dispatch(fields)

    async def write(self, node: str, fields: Mapping[bytes, bytes], nonce: str = "") -> bool:
        """Append an entry to a node's inbox, in one Redis command with the
        entries queued meanwhile (:meth:`_outbox`); fenced by ``nonce`` (False:
        this node no longer holds its lease under it, nothing written). Raises
        one of ``REDIS_ERRORS`` when Redis cannot be reached within ``store_timeout``."""
        entry = Outgoing(node, fields, nonce)
        with trio.fail_after(self.settings.store_timeout):
            await self._outbox_send.send(entry)
            await entry.done.wait()
        if entry.error is not None:
            raise entry.error
        return bool(entry.written)

    async def _outbox(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write the queued inbox entries, as many at once as queued up (up to
        ``outbox_batch``, about ``_BATCH_BYTES``) while the last command was on its way."""
        settings = self.settings
        task_status.started()
        async for first in self._outbox_recv:
            batch = [first]
            size = first.size()
            while len(batch) < settings.outbox_batch and size < _BATCH_BYTES:
                try:
                    entry = self._outbox_recv.receive_nowait()
                except trio.WouldBlock:
                    break
                batch.append(entry)
                size += entry.size()
            error: BaseException = NotWritten("the cluster's plumbing restarted before writing it")
            try:
                with trio.fail_after(settings.store_timeout):
                    written = await self.store.send(settings.node_id, batch)
                for entry, ok in zip(batch, written, strict=True):
                    entry.written = ok
            except REDIS_ERRORS as exc:
                log.debug("inbox entries not written: %r", exc)
                error = exc
            finally:
                for entry in batch:
                    if entry.written is None:
                        entry.error = error
                    entry.done.set()

    def _dispatch(self, fields: dict[bytes, bytes]) -> None:
        kind = fields.get(b"k")
        if kind == b"req":
            self.dispatch_request(fields)
        elif kind == b"start" or kind == b"body":
            self.dispatch_answer(fields)
        elif kind == b"dis":
            exchange = self.exchanges.get(fields.get(b"f", b""))
            if exchange is not None:
                exchange.disconnect()
        elif kind == b"push" or kind == b"touch":
            self.dispatch_note(fields)

    def dispatch_request(self, fields: dict[bytes, bytes], link: Link | None = None) -> None:
        """Serve a request forwarded here (from the inbox, or over ``link``)."""
        nursery = self._nursery
        if not all(map(fields.get, _REQUEST_FIELDS)):
            log.warning("a forwarded entry that is no request was ignored: %r", sorted(fields))
        elif nursery is not None:
            busy = len(self.exchanges) >= self.settings.max_forwarded or not self.healthy
            self.forwarded += 1
            nursery.start_soon(serve_forwarded, self, fields, busy, link)

    def dispatch_answer(self, fields: dict[bytes, bytes]) -> None:
        """A piece of the answer to a request this node forwarded, to its relay."""
        reply = self.replies.get(fields.get(b"f", b""))
        if reply is not None:
            reply.put(fields)

    # ------------------------------------------------------- bus, replicas

    def announce(self, method: str, params: Any) -> None:
        """Publish a broadcast of the app, or a ``cluster/…`` notice, to the other nodes."""
        self.bus.publish(method, params)

    def dispatch_note(self, fields: dict[bytes, bytes]) -> None:
        """A ``push`` or ``touch`` frame of another node's replica (link or inbox)."""
        if self.replicas is not None:
            self.replicas.received(fields)

    # ------------------------------------------------------------ sessions

    async def _keeper(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        registry = self._registry
        assert registry is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(registry.forget_loop)
            task_status.started()
            while True:
                with trio.move_on_after(self.settings.renew_interval):
                    await self._save_soon.wait()
                self._save_soon = trio.Event()
                if self.healthy:
                    try:
                        await registry.save_all()
                    except REDIS_ERRORS as exc:
                        log.debug("saving session state failed: %r", exc)

    # -------------------------------------------------------------- routing

    async def intercept(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> Send | None:
        """Where a request is served (see the module and
        :class:`~trio_mcp.serving.http.ClusterHook`)."""
        if FORWARDED in scope:
            session_id = headers.get(SESSION_HEADER)
            if session_id is not None:
                local = await self.app.registry.get(session_id)
                if (
                    local is None
                    and self.replicas is not None
                    and self.replicas.take_forwarded(scope, receive, session_id)
                ):
                    return send  # an answer to this node's replica's request
                if local is None:
                    raise HttpError(
                        421, "Misdirected Request: not this session's owner", headers=[MISDIRECTED]
                    )
                _check_resumption(local, scope, headers)
            return send
        if self.settings.node_header:
            send = self._with_node_header(send)
        app = self.app
        session_id = headers.get(SESSION_HEADER)
        if session_id is None or app.settings.stateless:
            return send
        local = await app.registry.get(session_id)
        if local is not None:
            if not self.healthy:
                raise HttpError(503, "Service Unavailable: the session store cannot be reached")
            if session_id not in self._saved:
                self._save_soon.set()  # its handshake state, for an adoption, as soon as it has one
            _check_resumption(local, scope, headers)
            replicas = self.replicas
            if replicas is not None and scope.get("method") == "POST" and replicas.asking(session_id):
                await replicas.owner_post(scope, receive, send, headers, session_id)
                return None
            return send
        record = await self._route(session_id)
        if record is None:
            local = await app.registry.get(session_id)
            if local is not None:  # adopted just now
                _check_resumption(local, scope, headers)
            return send  # here (adopted), or unknown (404)
        body = await read_request(self, scope, receive, headers)
        if body is None:
            return None  # the client went away: nobody to answer
        replicas = self.replicas
        if replicas is not None and await replicas.serve(
            scope, receive, send, headers, session_id, record, body
        ):
            return None
        if await forward(self, scope, receive, send, session_id, record, body):
            return None
        # The owner it went to no longer has it (ended, or moved): once more.
        self.routes.pop(session_id, None)
        record = await self._route(session_id)
        if record is not None and await forward(self, scope, receive, send, session_id, record, body):
            return None
        if await app.registry.get(session_id) is not None:
            raise HttpError(503, "Service Unavailable: the session moved here just now; retry")
        raise HttpError(404, "Session not found")

    async def _route(self, session_id: str) -> SessionRecord | None:
        """The live owner of a session hosted elsewhere, or None: adopted here,
        dropped, unknown (the app answers it)."""
        cached = self.routes.get(session_id)
        if cached is not None:
            if self.trusted(cached.owner, cached.nonce) or await self._owner_alive(cached):
                return cached
            self.routes.pop(session_id, None)
        record = await self._lookup(session_id)
        if record is None or (record.alive and record.owner == self.settings.node_id):
            return None  # unknown, or ended here: 404
        if not record.alive:
            if not self.healthy:
                raise HttpError(503, "Service Unavailable: the session store cannot be reached")
            if await self._take_over(session_id, record):
                return None
            record = await self._lookup(session_id)  # another node was quicker
            if record is None or not record.alive:
                return None
        if len(self.routes) >= self.app.settings.max_sessions:
            self.routes.clear()
        self.routes[session_id] = record
        return record

    def trusted(self, node: str, nonce: str) -> bool:
        """Whether ``node``'s lease under ``nonce`` is known alive now (no Redis)."""
        return self.live_owners.get((node, nonce), -math.inf) > trio.current_time()

    async def lease_alive(self, node: str, nonce: str) -> bool:
        """Whether ``node`` holds its lease under ``nonce``: known alive
        (:meth:`trusted`) until ``renew_interval`` after Redis said so, and never
        beyond what the lease had left then, so a dead owner is found out
        within its lease plus one check. Raises one of ``REDIS_ERRORS``."""
        if self.trusted(node, nonce):
            return True
        began = trio.current_time()
        with trio.fail_after(self.settings.store_timeout):
            left = await self.store.lease_left(node, nonce)
        owners = self.live_owners
        if left <= 0:
            owners.pop((node, nonce), None)
            return False
        if len(owners) >= self.app.settings.max_sessions:
            owners.clear()
        owners[node, nonce] = began + min(left, self.settings.renew_interval)
        return True

    def forget_owner(self, record: SessionRecord) -> None:
        """The owner of ``record`` was found dead (or without the session): look again."""
        self.live_owners.pop((record.owner, record.nonce), None)

    async def _owner_alive(self, record: SessionRecord) -> bool:
        """Whether a cached owner still holds its lease under the nonce it had."""
        try:
            return await self.lease_alive(record.owner, record.nonce)
        except REDIS_ERRORS:
            raise HttpError(503, "Service Unavailable: the session store cannot be reached") from None

    async def _lookup(self, session_id: str) -> SessionRecord | None:
        try:
            with trio.fail_after(self.settings.store_timeout):
                return await self.store.lookup(session_id)
        except REDIS_ERRORS:
            raise HttpError(503, "Service Unavailable: the session store cannot be reached") from None

    async def _take_over(self, session_id: str, record: SessionRecord) -> bool:
        """The owner is dead: adopt the session here (True), or forget it
        (``drop``, or no handshake state saved yet: True, and the app answers
        ``404``). False: another node adopted it first."""
        settings = self.settings
        registry = self._registry
        assert registry is not None
        try:
            with trio.fail_after(settings.store_timeout):
                if settings.owner_failure == "drop" or not record.state:
                    await self.store.delete(session_id, record.nonce)
                    return True
                fence = await self.store.adopt(session_id, record, settings.node_id, self.nonce, registry.ttl)
        except REDIS_ERRORS:
            raise HttpError(503, "Service Unavailable: the session store cannot be reached") from None
        if fence is None:
            return False
        log.info(
            "node %s adopts session %s from %s (fence %d)", settings.node_id, session_id, record.owner, fence
        )
        app = self.app
        if self.replicas is not None:
            stale = self.replicas.by_id.get(session_id)
            if stale is not None:
                self.replicas.retire(stale, "its session is adopted here")
        registry.adopting.add(session_id)
        try:
            await app.make_room()
            session: HttpSessionStream = await app.start_session(session_id)
        finally:
            registry.adopting.discard(session_id)
        restore(session, record.state)
        self.adopted += 1
        return True

    def _readiness(self, previous: Any) -> Any:
        """``/readyz`` adds this node's :meth:`statistics`; a draining node is not ready."""

        async def readiness() -> dict[str, Any]:
            report: dict[str, Any] = {}
            if previous is not None:
                found = previous()
                report.update(await found if inspect.isawaitable(found) else found)
            report["cluster"] = self.statistics()
            if self.draining:
                report["ready"] = False
            return report

        return readiness

    def _with_node_header(self, send: Send) -> Send:
        header = (NODE_HEADER.encode(), self.settings.node_id.encode())

        async def send_with_node(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), header]}
            await send(message)

        return send_with_node
