"""Sessions owned by another node, served where their requests land
(``serve_on_ingress``).

A request forwarded to its session's owner costs the ingress about what
serving it would (the HTTP is the ingress's either way) and the owner a
quarter of that again. With ``serve_on_ingress`` a node serves itself the
requests that need nothing of a session but its handshake state
(:data:`SERVED_HERE`: ``tools/call``, the lists, reads, ``prompts/get``,
``completion/complete``, ``ping``), in a *replica* of the session: a session
of this node's app that its registry does not hold, restored from the state
the owner saved in Redis. Only a POST answered as JSON (the app's
``json_response=True``, a client that accepts JSON) is served so. Such an
answer has no stream to resume, so serving it where it landed gives up
nothing that forwarding keeps: a dead ingress loses the answer either way,
and a call on a replica even outlives its session's owner. Without saved
state yet, with authorization, or with this node unhealthy or draining, the
request is forwarded as before.

What a replica's calls send besides their answers reaches the client on the
session's standalone (GET) stream, which is the owner's:

* notifications (progress, log messages) and requests to the client
  (sampling, elicitation, roots) are *pushed* to the owner (a ``push``
  frame, on the link or through its inbox), which puts them on that stream.
  A replica sends log messages of every level; the owner keeps those the
  session's level (its ``logging/setLevel``) lets through.
* A replica's requests have string ids marked ``~<node>~<nonce>~<n>``. Any
  node a client's answer reaches reads the mark and forwards the answer to
  that node (the owner, too, looks at the POSTs of a session a replica asked
  something in).
* A ``notifications/cancelled`` goes to the owner as before, to a replica on
  the node it reached, and on the bus to the replicas elsewhere.
* Each ``renew_interval`` a node tells the owners of the sessions it served
  (a ``touch`` frame: the session is in use), and checks in Redis that each
  still exists under the same owner and lease; a replica whose session ended,
  moved or was adopted ends.
* A session ending on its owner (``DELETE``, expiry) is announced on the
  bus: its replicas end when it arrives (at the latest at the next check).

Everything else (``initialize``, ``logging/setLevel``, subscriptions, tasks,
notifications, answers to the owner's own requests, batches, GET, DELETE)
goes to the owner as before.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from ...protocol import (
    ErrorResponse,
    InternalError,
    Notification,
    Request,
    Response,
    coerce,
    decode,
    encode,
    error_response,
)
from ...transports._asgi import HttpError, Receive, Scope, Send, WholeBody, respond
from ...transports._base import TransportClosed
from ..http import HttpSessionStream
from ..http._config import ASSIGNED_SESSION, accepts, media_types
from ._redis import REDIS_ERRORS, SessionRecord
from ._registry import restore
from ._settings import OwnerLost
from ._tunnel import forward, read_request, send_frame

if TYPE_CHECKING:
    from ._node import RedisCluster

__all__ = ["SERVED_HERE", "ReplicaStream", "Replicas"]

log = logging.getLogger("trio_mcp.cluster")

#: The requests a node serves for a session owned elsewhere (``serve_on_ingress``).
SERVED_HERE: Final = frozenset(
    {
        "tools/call",
        "tools/list",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "ping",
    }
)

#: Begins (and separates the parts of) the id of a request a replica sends.
MARK: Final = "~"
#: Seconds after a replica asked the client something that the owner looks
#: at the session's POSTs for answers to route.
_ASK_HORIZON: Final = 600.0
#: A replica unused for this many ``renew_interval`` ends.
_IDLE_CHECKS: Final = 30


class _Peek(msgspec.Struct):
    """What routing needs of a POST body (its params left undecoded)."""

    method: str | None = None
    id: int | str | None = None
    params: msgspec.Raw = msgspec.Raw(b"null")


class _Cancelled(msgspec.Struct):
    requestId: int | str | None = None


class _Level(msgspec.Struct):
    level: str = ""


_peek = msgspec.json.Decoder(_Peek).decode


def peek(body: bytes) -> _Peek | None:
    """The message a POST body holds (None: a batch, or not JSON-RPC)."""
    try:
        return _peek(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def marked(ident: Any) -> tuple[str, str] | None:
    """The node and lease nonce a replica's request id names, or None."""
    if type(ident) is not str or not ident.startswith(MARK):
        return None
    parts = ident[1:].rsplit(MARK, 2)
    return (parts[0], parts[1]) if len(parts) == 3 and parts[0] and parts[1] else None


#: A frame for an owner: its record, the frame, and the replica and request
#: id it carries (a request to the client: answered here with an error if the
#: frame is lost).
_Outgoing = tuple[SessionRecord, dict[bytes, bytes], "ReplicaStream | None", "int | str | None"]


class ReplicaStream(HttpSessionStream):
    """A node's replica of a session owned elsewhere: its answers go to the
    POSTs it serves, everything else its calls send to the owner (pushed)."""

    def __init__(self, replicas: Replicas, session_id: str, record: SessionRecord) -> None:
        super().__init__(replicas.cluster.app, session_id)
        self.replicas = replicas
        #: The owner (and its lease nonce) the replica was made under.
        self.record = record
        self.store = None  # it has no stream of its own to resume
        self.ready = trio.Event()
        #: The requests its calls sent the client that are not answered yet.
        self.asked: set[int | str] = set()

    def __repr__(self) -> str:
        return f"<ReplicaStream {self.id} of {self.record.owner}>"

    async def send(self, message: Any) -> None:
        kind = type(message)
        if kind is Response or kind is ErrorResponse:
            await super().send(message)
            return
        if self.closed:
            raise TransportClosed("HTTP session ended")
        if kind is Request:
            self.asked.add(message.id)
        self.replicas.push(self, message)
        await trio.lowlevel.checkpoint()

    async def enqueue(self, frame: Any) -> int:
        kind = type(frame)
        if kind is Response or kind is ErrorResponse:
            self.asked.discard(frame.id)
        return await super().enqueue(frame)

    def fail_asked(self) -> None:
        """Answer every request sent to the client and not answered yet with
        :class:`OwnerLost` (they went through a node that cannot relay their
        answers any more)."""
        nursery = self.replicas.cluster.nursery
        if nursery is None or self.closed:
            return
        for ident in self.asked:
            nursery.start_soon(self.enqueue, error_response(ident, OwnerLost(self.record.owner)))


class Replicas:
    """This node's replicas, and the owner's side of theirs (see the module)."""

    def __init__(self, cluster: RedisCluster) -> None:
        self.cluster = cluster
        self.by_id: dict[str, ReplicaStream] = {}
        #: Replicas of sessions that moved (their owner died, or another node
        #: adopted them): they end once their calls in flight are over.
        self.retiring: set[ReplicaStream] = set()
        #: On an owner: until when a session's POSTs are looked at for answers to route.
        self.asking_until: dict[str, float] = {}
        queue = cluster.settings.outbox_queue
        self._out_send, self._out_recv = trio.open_memory_channel[_Outgoing](queue)
        self._in_send, self._in_recv = trio.open_memory_channel[dict[bytes, bytes]](queue)
        #: Sessions whose owner had saved no state yet, and when Redis was last asked.
        self._unsaved: dict[str, float] = {}
        #: When :meth:`check` last ran (a replica active since was used).
        self._checked = -math.inf
        self.served = 0
        self.pushed = 0
        self.dropped = 0
        self.routed = 0

    def statistics(self) -> dict[str, Any]:
        return {
            "replicas": len(self.by_id),
            "served_on_ingress": self.served,
            "pushed_to_owner": self.pushed,
            "pushes_dropped": self.dropped,
            "answers_routed": self.routed,
        }

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pusher)
            nursery.start_soon(self._deliverer)
            task_status.started()
            while True:
                await trio.sleep(self.cluster.settings.renew_interval)
                await self.check()

    # ------------------------------------------------------- ingress side

    async def serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        session_id: str,
        record: SessionRecord,
        body: bytes,
    ) -> bool:
        """Serve a request of a session owned elsewhere here (or route an
        answer to the replica that asked): True when done, False when the
        caller forwards it to the owner."""
        found = peek(body) if body else None  # (b"" but for a POST)
        if found is None:
            return False
        if found.method is None:
            target = marked(found.id)
            if target is None:
                return False  # an answer to the owner's own request
            return await self._answer(scope, receive, send, headers, session_id, body, target)
        if found.method == "notifications/cancelled":
            self._cancel_everywhere(session_id, found.params)
            return False  # the owner may run it
        if found.id is None or found.method not in SERVED_HERE or not self._answered_as_json(headers):
            return False
        replica = await self.replica(session_id, record)
        if replica is None:
            return False
        self.served += 1
        await self._dispatch(scope, receive, send, headers, body, replica)
        return True

    def take_forwarded(self, scope: Scope, receive: Receive, session_id: str) -> bool:
        """A request another node forwarded here for this node's replica (an
        answer to it, marked): served by it (True), else False."""
        replica = self.by_id.get(session_id)
        if replica is None or replica.closed or scope.get("method") != "POST":
            return False
        found = peek(receive.peek() or b"") if isinstance(receive, WholeBody) else None
        if found is None or found.method is not None:
            return False
        if marked(found.id) != (self.cluster.settings.node_id, self.cluster.nonce):
            return False
        scope[ASSIGNED_SESSION] = replica
        return True

    def _answered_as_json(self, headers: dict[str, str]) -> bool:
        app = self.cluster.app
        return (
            app.auth is None
            and app.settings.json_response is True
            and accepts(media_types(headers.get("accept")), "application/json")
        )

    async def _answer(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        session_id: str,
        body: bytes,
        target: tuple[str, str],
    ) -> bool:
        cluster = self.cluster
        node, nonce = target
        if node == cluster.settings.node_id:
            replica = self.by_id.get(session_id)
            if replica is None or replica.closed or nonce != cluster.nonce:
                return False  # nobody here waits for it: the owner drops it
            await self._dispatch(scope, receive, send, headers, body, replica)
            return True
        self.routed += 1
        there = SessionRecord(owner=node, nonce=nonce, fence=0, state=b"", alive=True)
        if not await forward(cluster, scope, receive, send, session_id, there, body):
            await respond(send, 202, b"")  # that replica is gone: nobody waits for the answer
        return True

    async def _dispatch(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        body: bytes,
        session: ReplicaStream | None,
    ) -> None:
        """Serve a request whose body was read already (by ``session``, if given)."""

        async def gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        if session is not None:
            scope[ASSIGNED_SESSION] = session
        await self.cluster.app.dispatch(scope, WholeBody(body, gone), send, headers)

    async def owner_post(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str], session_id: str
    ) -> None:
        """Serve a POST of a session owned here that a replica asked something
        in: an answer to the replica goes to its node, anything else is served here."""
        body = await read_request(self.cluster, scope, receive, headers)
        if body is None:
            return  # the client went away
        found = peek(body)
        target = None if found is None or found.method is not None else marked(found.id)
        if target is not None and target[0] != self.cluster.settings.node_id:
            await self._answer(scope, receive, send, headers, session_id, body, target)
        else:
            await self._dispatch(scope, receive, send, headers, body, None)

    def _cancel_everywhere(self, session_id: str, params: msgspec.Raw) -> None:
        try:
            ident = coerce(params, _Cancelled).requestId
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        if ident is None:
            return
        self.cancel(session_id, ident)
        self.cluster.announce("cluster/cancel", {"s": session_id, "r": ident})

    def notice(self, method: str, params: Any) -> None:
        """A ``cluster/…`` notice from another node: a session ended on its
        owner (its route and replica here go), a request cancelled."""
        session_id = params.get("s") if isinstance(params, dict) else None
        if type(session_id) is not str:
            return
        if method == "cluster/ended":
            self.cluster.routes.pop(session_id, None)
            self.drop(session_id, "its session ended on its owner")
        elif method == "cluster/cancel" and type(params.get("r")) in (int, str):
            self.cancel(session_id, params["r"])

    def cancel(self, session_id: str, ident: int | str) -> None:
        """The client cancelled a request of the session: if a replica here
        runs it (or a retiring one), it stops."""
        nursery = self.cluster.nursery
        if nursery is None:
            return
        replica = self.by_id.get(session_id)
        for candidate in (replica, *(r for r in self.retiring if r.id == session_id)):
            if candidate is not None and not candidate.closed:
                note = Notification(method="notifications/cancelled", params={"requestId": ident})
                nursery.start_soon(candidate.enqueue, note)

    # ------------------------------------------------------------- replicas

    async def replica(self, session_id: str, record: SessionRecord) -> ReplicaStream | None:
        """This node's replica of a session owned by ``record.owner`` (made if
        need be), or None: the request goes to the owner."""
        cluster = self.cluster
        if not cluster.healthy or cluster.draining:
            return None
        replica = self.by_id.get(session_id)
        if replica is not None:
            if not replica.closed and (replica.record.owner, replica.record.nonce) == (
                record.owner,
                record.nonce,
            ):
                if not replica.ready.is_set():
                    with trio.move_on_after(cluster.settings.store_timeout):
                        await replica.ready.wait()
                if replica.closed or replica.server_session is None:
                    return None
                return replica
            self.retire(replica, "its session moved to another node")
        state = record.state or await self._state(session_id, record)
        if not state:
            return None
        app = cluster.app
        if len(self.by_id) >= app.settings.max_sessions:
            idlest = min(self.by_id.values(), key=lambda r: r.last_active)
            self.end(idlest, "evicted for another replica")
        replica = self.by_id[session_id] = ReplicaStream(self, session_id, record)
        try:
            await app.start_session(session_id, replica)
            restore(replica, state)
        except (HttpError, msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
            log.debug("no replica of session %s: %r", session_id, exc)
            self.end(replica, "could not be started")
            return None
        except BaseException:
            self.end(replica, "could not be started")
            raise
        finally:
            replica.ready.set()
        server = replica.server_session
        server.log_level = None  # every message goes to the owner, which applies the session's level
        server.peer.id_prefix = f"{MARK}{cluster.settings.node_id}{MARK}{cluster.nonce}{MARK}"
        return replica

    async def _state(self, session_id: str, record: SessionRecord) -> bytes:
        """The handshake state of a session whose route was found before its
        owner saved it: asked of Redis at most once per ``renew_interval``."""
        cluster = self.cluster
        now = trio.current_time()
        if now - self._unsaved.get(session_id, -math.inf) < cluster.settings.renew_interval:
            return b""
        if len(self._unsaved) >= cluster.app.settings.max_sessions:
            self._unsaved.clear()
        self._unsaved[session_id] = now
        try:
            with trio.fail_after(cluster.settings.store_timeout):
                fresh = await cluster.store.lookup(session_id)
        except REDIS_ERRORS:
            return b""
        if fresh is None or (fresh.owner, fresh.nonce) != (record.owner, record.nonce) or not fresh.state:
            return b""
        self._unsaved.pop(session_id, None)
        cluster.routes[session_id] = fresh
        return fresh.state

    def end(self, replica: ReplicaStream, reason: str) -> None:
        assert replica.id is not None
        if self.by_id.get(replica.id) is replica:
            del self.by_id[replica.id]
        self.cluster.app.end_session(replica, reason)

    def drop(self, session_id: str, reason: str) -> None:
        """End the replica of a session, if there is one here."""
        replica = self.by_id.get(session_id)
        if replica is not None:
            self.end(replica, reason)

    def retire(self, replica: ReplicaStream, reason: str) -> None:
        """A replica whose session moved: no new request goes to it, and it
        ends once its calls in flight are over. What they asked the client
        fails with :class:`OwnerLost` (its answers would go to the old owner)."""
        assert replica.id is not None
        if self.by_id.get(replica.id) is replica:
            del self.by_id[replica.id]
        replica.fail_asked()
        if replica.awaiting:
            self.retiring.add(replica)
        else:
            self.cluster.app.end_session(replica, reason)

    def end_all(self, reason: str) -> None:
        for replica in [*self.by_id.values(), *self.retiring]:
            self.end(replica, reason)
        self.retiring.clear()

    async def check(self) -> None:
        """Each ``renew_interval``: end the replicas unused for long, check in
        Redis that each one used still has its session and owner, and tell the
        owners which of their sessions were used here."""
        cluster = self.cluster
        idle = _IDLE_CHECKS * cluster.settings.renew_interval
        now = trio.current_time()
        since, self._checked = self._checked, now
        used: dict[tuple[str, str], tuple[SessionRecord, list[str]]] = {}
        for replica in list(self.retiring):
            if replica.closed or not replica.awaiting:
                self.retiring.discard(replica)
                cluster.app.end_session(replica, "its session moved; its calls are over")
        for session_id, replica in list(self.by_id.items()):
            if replica.closed:
                self.end(replica, "ended")
                continue
            if replica.last_active < since and not replica.awaiting:  # unused since the last check
                if now - replica.last_active > idle:
                    self.end(replica, "unused")
                continue
            try:
                with trio.fail_after(cluster.settings.store_timeout):
                    record = await cluster.store.lookup(session_id)
            except REDIS_ERRORS:
                continue
            key = (replica.record.owner, replica.record.nonce)
            if record is None:
                cluster.routes.pop(session_id, None)
                self.end(replica, "its session ended")
                continue
            if not record.alive or (record.owner, record.nonce) != key:
                cluster.routes.pop(session_id, None)
                self.retire(replica, "its session moved, or its node died")
                continue
            used.setdefault(key, (record, []))[1].append(session_id)
        for record, sessions in used.values():
            self._queue((record, {b"k": b"touch", b"s": "\n".join(sessions).encode()}, None, None))

    # --------------------------------------------------- to and from owners

    def push(self, replica: ReplicaStream, message: Any) -> None:
        """A message of a replica's call for the session's standalone stream, to its owner."""
        assert replica.id is not None
        fields = {b"k": b"push", b"s": replica.id.encode(), b"m": encode(message)}
        self._queue((replica.record, fields, replica, message.id if type(message) is Request else None))

    def _queue(self, item: _Outgoing) -> None:
        try:
            self._out_send.send_nowait(item)
        except trio.WouldBlock:
            self._lost(item, "too many frames queued for the owner")

    def _lost(self, item: _Outgoing, reason: str) -> None:
        """A frame that did not reach the owner: a request to the client in it
        is answered here, with an error (its call never waits for an answer
        that cannot come)."""
        record, _, replica, ident = item
        log.debug("a frame for %s was lost: %s", record.owner, reason)
        self.dropped += 1
        nursery = self.cluster.nursery
        if replica is not None and ident is not None and not replica.closed and nursery is not None:
            error = InternalError(f"the request could not reach the session's node ({reason})")
            nursery.start_soon(replica.enqueue, error_response(ident, error))

    async def _pusher(self) -> None:
        """Send the queued frames to the owners, in order."""
        async for item in self._out_recv:
            record, fields = item[0], item[1]
            try:
                await send_frame(self.cluster, record, fields)
            except (*REDIS_ERRORS, trio.TooSlowError) as exc:
                self._lost(item, repr(exc))
                continue
            if fields[b"k"] == b"push":
                self.pushed += 1

    def received(self, fields: dict[bytes, bytes]) -> None:
        """A ``push`` or ``touch`` frame from a replica's node (on a link or through the inbox)."""
        try:
            self._in_send.send_nowait(fields)
        except trio.WouldBlock:
            self.dropped += 1

    async def _deliverer(self) -> None:
        """Put what replicas pushed on their sessions' standalone streams, in
        order; mark the sessions they were used in as in use."""
        app = self.cluster.app
        async for fields in self._in_recv:
            if fields.get(b"k") == b"touch":
                for session_id in fields.get(b"s", b"").decode().split("\n"):
                    session = await app.registry.get(session_id)
                    if session is not None:
                        session.touch()
                continue
            session_id = fields.get(b"s", b"").decode()
            session = await app.registry.get(session_id)
            if session is None or session.closed or session.server_session is None:
                continue
            message = decode(fields.get(b"m", b""))
            kind = type(message)
            if kind is Request:
                if len(self.asking_until) >= app.settings.max_sessions:
                    self.asking_until.clear()
                self.asking_until[session_id] = trio.current_time() + _ASK_HORIZON
            elif kind is not Notification:
                continue
            elif message.method == "notifications/message":  # type: ignore[union-attr]
                try:
                    level = coerce(message.params, _Level).level  # type: ignore[union-attr]
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
                if not session.server_session.should_log(level):
                    continue
            try:
                await session.standalone.deliver(message)
            except TransportClosed:
                pass

    def asking(self, session_id: str) -> bool:
        """Whether a POST of a session owned here may carry an answer for a replica."""
        until = self.asking_until.get(session_id)
        if until is None:
            return False
        if until < trio.current_time():
            del self.asking_until[session_id]
            return False
        return True
