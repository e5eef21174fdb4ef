"""A request of a session that another node owns: forwarded whole, answered whole.

The *ingress* (the node holding the client's HTTP connection) reads the
request, appends it to the owner's inbox and relays what comes back on its
own inbox to the client. The *owner* serves it exactly as a request that
reached it directly (the same POST, GET and DELETE code, on a scope of its
own), its ``send`` appending every piece of the response to the ingress's
inbox (fenced: see :mod:`._redis`). So a POST's SSE stream, a standalone GET,
a resumption with ``Last-Event-ID``, a sampling answer or a cancellation work
the same whichever node the load balancer picks; the owner's event store
gives every event its id, and a resumption on any node replays from it.

Never a hang: the ingress checks the owner's lease whenever the relay is
silent for ``renew_interval`` (:class:`Silence`: one timer per node, not a
deadline per wait); once the owner is dead, the requests of the relay get a
JSON-RPC error (:class:`OwnerLost`), within ``lease_ttl`` plus one
``renew_interval``. The relay runs in one cancel scope, a
:class:`~trio_mcp.serving.http._watch.Guard` as a POST served here has: its
client going away (watched from ``disconnect_watch_delay`` on) ends it, and
its last write is bounded by ``write_timeout``. The owner stops a forwarded
request when its client goes away (the ingress says so) or the ingress node
dies.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import trio

from ...protocol import Request, decode, encode, error_response
from ...transports._asgi import (
    Disconnected,
    HttpError,
    Receive,
    Scope,
    Send,
    WholeBody,
    body_nowait,
    error_body,
    read_body,
    respond,
)
from ...transports.http._sse import format_event
from ..http._watch import Guard
from ._link import Link, Wakeup
from ._redis import REDIS_ERRORS, SessionRecord
from ._settings import OwnerLost

if TYPE_CHECKING:
    from ._node import RedisCluster

__all__ = [
    "FORWARDED",
    "MISDIRECTED",
    "Exchange",
    "Reply",
    "Silence",
    "forward",
    "read_request",
    "serve_forwarded",
    "send_frame",
]

log = logging.getLogger("trio_mcp.cluster")

#: The scope key marking a request forwarded here by another node (its id).
FORWARDED: Final = "trio_mcp.forwarded"
#: The header of an owner's answer that it does not have the session (the
#: ingress looks its owner up again; never sent to a client).
MISDIRECTED: Final = (b"mcp-cluster-misdirected", b"1")


def _pack_headers(headers: Any) -> bytes:
    # Names and values as they are, each ended by NUL (HTTP allows no NUL in either).
    return b"\0".join(itertools.chain.from_iterable(headers)) + b"\0" if headers else b""


def _is_sse(headers: Any) -> bool:
    for name, value in headers:
        if name == b"content-type":
            return bool(value.startswith(b"text/event-stream"))
    return False


def _unpack_headers(data: bytes) -> list[tuple[bytes, bytes]]:
    items = data.split(b"\0")
    return list(zip(items[0:-1:2], items[1:-1:2], strict=True))


#: Exchange ids: this process's random prefix and a count (unique across the
#: nodes an owner serves, without a random draw per request).
_IDENT_PREFIX = secrets.token_hex(6).encode()
_ident_count = itertools.count()


class Reply:
    """The pieces of a forwarded request's answer on their way to its relay:
    a bounded queue with one reader, which the task that receives a piece (the
    link's reader, the inbox's) wakes directly. Beyond ``limit`` pieces (a
    client reading too slowly) it closes: the relay ends, the client resumes."""

    __slots__ = ("_items", "_limit", "_reader", "closed", "ident", "waits")

    def __init__(self, limit: int, ident: bytes) -> None:
        #: Its exchange's id (its key in the node's ``replies``).
        self.ident = ident
        self._items: deque[dict[bytes, bytes]] = deque()
        self._limit = limit
        self._reader = Wakeup()
        self.closed = False
        #: The waits begun so far (:class:`Silence` wakes the current one only).
        self.waits = 0

    def put(self, entry: dict[bytes, bytes]) -> None:
        """Queue a piece (dropped once closed: answered already, or overflowed)."""
        if self.closed:
            return
        if len(self._items) >= self._limit:
            self.close()
            return
        self._items.append(entry)
        self._reader.wake()

    def close(self) -> None:
        self.closed = True
        self._reader.wake()

    def waiting(self, wait: int) -> bool:
        """Whether its reader is in wait number ``wait`` still."""
        return self.waits == wait and self._reader.waiting

    def wake(self) -> None:
        """End the reader's wait with nothing (:meth:`get` returns None)."""
        self._reader.wake()

    async def get(self, silence: Silence) -> dict[bytes, bytes] | None:
        """The next piece, or None when none came for ``silence.interval``
        seconds (:class:`trio.EndOfChannel` once closed and empty)."""
        if self._items:
            await trio.lowlevel.checkpoint_if_cancelled()
            return self._items.popleft()
        if self.closed:
            raise trio.EndOfChannel
        self.waits += 1
        silence.watch(self, self.waits)
        await self._reader.wait()
        if self._items:
            return self._items.popleft()
        if self.closed:
            raise trio.EndOfChannel
        return None


class Silence:
    """Wakes the relays that heard nothing for ``interval`` seconds: one
    timer task per node (:meth:`run`) for every wait of every relay, instead
    of a cancel scope with a deadline per wait. A wait's deadline is when it
    began plus ``interval``, so the deadlines come in the order the waits
    began: one FIFO queue, no heap. A wait that ended stays queued until the
    timer reaches it and drops it; the timer sleeps until the first wait
    still going on is due, so under a steady load it wakes about once per
    ``interval``. An entry names its reply by its id in ``replies`` (the
    node's table of the replies still awaited), so a finished exchange is not
    kept alive by its entry: the entry holds only a number, bytes and a
    number, which the garbage collector stops tracking."""

    __slots__ = ("_parked", "_queue", "_replies", "interval", "now")

    def __init__(self, interval: float, replies: dict[bytes, Reply]) -> None:
        self.interval = interval
        self.now: Callable[[], float] = trio.current_time
        self._replies = replies
        self._queue: deque[tuple[float, bytes, int]] = deque()
        self._parked: trio.lowlevel.Task | None = None

    def watch(self, reply: Reply, wait: int) -> None:
        """``reply``'s reader begins wait number ``wait``."""
        self._queue.append((self.now() + self.interval, reply.ident, wait))
        task = self._parked
        if task is not None:
            self._parked = None
            trio.lowlevel.reschedule(task)

    def queued(self) -> int:
        """Waits queued, ended ones not dropped yet included."""
        return len(self._queue)

    async def run(self) -> None:
        """Wake the waits as they come due, until cancelled."""
        self.now = trio.lowlevel.current_clock().current_time
        queue = self._queue
        replies = self._replies

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._parked = None
            return trio.lowlevel.Abort.SUCCEEDED

        while True:
            now = self.now()
            while queue:
                due, ident, wait = queue[0]
                reply = replies.get(ident)
                if reply is not None and reply.waiting(wait):
                    if due > now:
                        break
                    reply.wake()
                queue.popleft()
            if queue:
                await trio.sleep_until(queue[0][0])
            else:
                self._parked = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(abort)


class Exchange:
    """A forwarded request being served on its owner: whether its client
    went away (:meth:`disconnect`; an event to wait on is made only for a
    request that waits for it, which most never do)."""

    __slots__ = ("_event", "disconnected", "ingress", "ingress_nonce")

    def __init__(self, ingress: str, ingress_nonce: str) -> None:
        self.ingress = ingress
        self.ingress_nonce = ingress_nonce
        self.disconnected = False
        self._event: trio.Event | None = None

    def disconnect(self) -> None:
        self.disconnected = True
        if self._event is not None:
            self._event.set()

    async def wait_disconnected(self) -> None:
        if self.disconnected:
            await trio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = trio.Event()
        await self._event.wait()


# ------------------------------------------------------------------ ingress


async def read_request(
    cluster: RedisCluster, scope: Scope, receive: Receive, headers: dict[str, str]
) -> bytes | None:
    """A request's body to forward (``b""`` but for a POST), whole within
    ``body_timeout`` (``408``); None when the client went away meanwhile.
    Usually the server has it queued already: then it is taken without a
    wait (and without a deadline), as a POST served here takes it."""
    if scope.get("method") != "POST":
        return b""
    http = cluster.app.settings
    try:
        body, whole = body_nowait(receive, headers, http.max_body_size)
        if whole:
            return body
        with trio.move_on_after(http.body_timeout):
            return await read_body(receive, headers, http.max_body_size, start=body)
    except Disconnected:
        return None
    raise HttpError(408, "Request Timeout", headers=[(b"connection", b"close")])


async def forward(
    cluster: RedisCluster,
    scope: Scope,
    receive: Receive,
    send: Send,
    session_id: str,
    owner: SessionRecord,
    body: bytes,
) -> bool:
    """Serve a request by its session's owner (another node); see the
    module. False: that node does not have the session (any more), nothing
    was answered."""
    settings = cluster.settings
    ident = b"%s%x" % (_IDENT_PREFIX, next(_ident_count))
    # Bytes to bytes, as the link and the inbox carry them (no conversion on the way).
    fields = {
        b"k": b"req",
        b"f": ident,
        b"from": settings.node_id.encode(),
        b"fn": cluster.nonce.encode(),
        b"sid": session_id.encode(),
        b"m": scope.get("method", "GET").encode(),
        b"p": scope.get("path", "/").encode(),
        b"q": scope.get("query_string", b""),
        b"h": _pack_headers(scope.get("headers", ())),
        b"b": body,
    }
    # The relay's one cancel scope, as a POST served here has (see the module).
    guard = Guard(cluster.app.watch, receive)
    relay = _Relay(cluster, send, owner, body, guard)
    links = cluster.links
    link = None if links is None else links.open_to(owner) or await links.to(owner)
    replies = cluster.replies[ident] = Reply(settings.forward_buffer, ident)
    try:
        with guard.scope:
            guard.watch_after_delay()
            if link is not None:
                link.idents.add(ident)
                try:
                    await link.send(fields)
                except trio.BrokenResourceError:
                    link.idents.discard(ident)  # closed before it was written: the inbox takes it
                    link = None
            if link is None:
                try:
                    await cluster.write(owner.owner, fields)
                except REDIS_ERRORS:
                    raise HttpError(503, "Service Unavailable: the session store cannot be reached") from None
            await relay.run(replies)
        return not relay.misdirected
    finally:
        guard.end()
        replies.close()
        del cluster.replies[ident]
        if link is not None:
            link.idents.discard(ident)
        if relay.lost:
            cluster.routes.pop(session_id, None)
            cluster.forget_owner(owner)
        if not relay.ended and not relay.lost:
            # The client went away (or the relay could not keep up): the owner stops.
            with trio.CancelScope(shield=True), trio.move_on_after(settings.store_timeout):
                try:
                    if link is not None:
                        await link.send({b"k": b"dis", b"f": ident})
                    else:
                        await cluster.write(owner.owner, {b"k": b"dis", b"f": ident})
                except Exception as exc:  # best effort (the store may be closing with the server)
                    log.debug("could not tell %s that a client went away: %r", owner.owner, exc)


async def send_frame(cluster: RedisCluster, record: SessionRecord, fields: dict[bytes, bytes]) -> None:
    """Send a frame that needs no answer to ``record``'s node: on the link to
    it, else through its inbox (raises one of ``REDIS_ERRORS`` when that
    cannot be written)."""
    links = cluster.links
    link = None if links is None else links.open_to(record) or await links.to(record)
    if link is not None:
        try:
            await link.send(fields)
            return
        except trio.BrokenResourceError:
            pass
    await cluster.write(record.owner, fields)


class _Relay:
    """Writes the pieces of a forwarded response to the client."""

    def __init__(
        self, cluster: RedisCluster, send: Send, owner: SessionRecord, body: bytes, guard: Guard
    ) -> None:
        self.cluster = cluster
        self.send = send
        self.owner = owner
        self.body = body
        self.guard = guard
        self.started = False
        self.sse = False
        self.ended = False
        self.lost = False
        self.misdirected = False

    async def run(self, replies: Reply) -> None:
        """Relay the pieces, to the end (the owner's lease checked whenever
        none came for ``renew_interval``)."""
        silence = self.cluster.silence
        while True:
            try:
                entry = await replies.get(silence)
            except trio.EndOfChannel:
                return  # overflowed: the client resumes (or retries)
            if entry is None:
                if not await self._owner_alive():
                    self.lost = True
                    await self._fail(self.body)
                    return
                continue
            if await self._relay(entry):
                return

    async def _relay(self, entry: dict[bytes, bytes]) -> bool:
        """Relay one entry; True once the response is complete."""
        kind = entry.get(b"k")
        if kind == b"lost":  # the direct link it went over broke
            await self._owner_gone()
            self.lost = True
            await self._fail(self.body)
            return True
        if kind == b"start":
            response_headers = _unpack_headers(entry.get(b"h", b""))
            if MISDIRECTED in response_headers:
                self.misdirected = self.ended = True
                return True
            self.started = True
            self.sse = _is_sse(response_headers)
            await self.send(
                {"type": "http.response.start", "status": int(entry[b"s"]), "headers": response_headers}
            )
        if b"more" not in entry:
            return False
        # A piece of the body (with the start, for a whole answer).
        message = {"type": "http.response.body", "body": entry.get(b"b", b""), "more_body": True}
        if entry[b"more"] == b"1":
            await self.send(message)
            return False
        self.ended = True
        message["more_body"] = False
        await self._last_write(message)
        return True

    async def _last_write(self, message: dict[str, Any]) -> None:
        # No disconnect watcher may cancel it (once the response is complete
        # the server reports a disconnect while still inside this very send,
        # hypercorn's, and cancelling it there would strand the connection),
        # and write_timeout bounds it (see Guard.writing).
        self.guard.writing(self.cluster.app.settings.write_timeout)
        await self.send(message)

    async def _owner_gone(self) -> None:
        """Until the owner's lease is gone, within ``lease_ttl`` plus one
        ``renew_interval`` (a broken link mostly means a dead owner: its
        session is adopted, or dropped, at the next request, as on the inbox
        path; a live one lost this request with the link all the same)."""
        settings = self.cluster.settings
        with trio.move_on_after(settings.lease_ttl + settings.renew_interval):
            while await self._owner_alive():
                await trio.sleep(settings.renew_interval)

    async def _owner_alive(self) -> bool:
        # Lease-bounded and shared by every relay to that owner: one Redis
        # command per owner node per renew_interval, whatever the number of
        # slow answers in flight.
        owner = self.owner
        try:
            return await self.cluster.lease_alive(owner.owner, owner.nonce)
        except REDIS_ERRORS:
            return False  # the store is gone: so is any answer through it

    async def _fail(self, body: bytes) -> None:
        """The owner died: every request of the relay gets an error (never a hang)."""
        owner = self.owner.owner
        log.warning("node %s died while serving a forwarded request", owner)
        frame = decode(body) if body else None
        items = frame if type(frame) is list else [frame]
        errors = [error_response(m.id, OwnerLost(owner)) for m in items if type(m) is Request]
        if not self.started:
            if not errors:
                raise HttpError(503, f"Service Unavailable: node {owner} of this session was lost")
            self.guard.writing(self.cluster.app.settings.write_timeout)
            await respond(self.send, 200, encode(errors if type(frame) is list else errors[0]))
            return
        data = b"".join(format_event(None, encode(e)) for e in errors) if self.sse else b""
        await self._last_write({"type": "http.response.body", "body": data, "more_body": False})


# -------------------------------------------------------------------- owner


async def serve_forwarded(
    cluster: RedisCluster, fields: dict[bytes, bytes], busy: bool = False, link: Link | None = None
) -> None:
    """Serve a request another node forwarded here, as if it had come directly
    (``busy``: answer ``503`` instead), answering through the ingress's inbox
    or on the ``link`` it came by."""
    ident = fields[b"f"]
    ingress = fields[b"from"].decode()
    exchange = Exchange(ingress, fields.get(b"fn", b"").decode())
    cluster.exchanges[ident] = exchange
    nonce = cluster.nonce
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": fields[b"m"].decode(),
        "scheme": "http",
        "path": fields[b"p"].decode(),
        "raw_path": fields[b"p"],
        "query_string": fields.get(b"q", b""),
        "root_path": "",
        "headers": _unpack_headers(fields[b"h"]),
        "client": None,
        "server": None,
        FORWARDED: ident,
    }
    receive = WholeBody(fields.get(b"b", b""), exchange.wait_disconnected)

    held: list[dict[bytes, bytes]] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            response_headers = message.get("headers", ())
            entry = {
                b"k": b"start",
                b"f": ident,
                b"s": b"%d" % message["status"],
                b"h": _pack_headers(response_headers),
            }
            if not _is_sse(response_headers):
                held.append(entry)  # a whole answer follows at once: one write for both
                return
        else:
            more = b"1" if message.get("more_body", False) else b"0"
            if held:
                entry = held.pop()
                entry[b"b"], entry[b"more"] = message.get("body", b""), more
            else:
                entry = {b"k": b"body", b"f": ident, b"b": message.get("body", b""), b"more": more}
        if link is not None:
            # Fenced by this node's own view of its lease (see ``_link``).
            if nonce != cluster.nonce or not cluster.healthy:
                raise trio.BrokenResourceError("fenced: this node lost its lease")
            await link.send(entry)
        elif not await cluster.write(ingress, entry, nonce):
            cluster.fenced(nonce, "a forwarded response could not be written: the lease is lost")
            raise trio.BrokenResourceError("fenced: this node lost its lease")
        if entry[b"k"] == b"start":
            started.append(True)
        if entry.get(b"more") == b"0":
            completed.append(True)

    started: list[bool] = []
    completed: list[bool] = []
    try:
        try:
            if busy:
                await respond(send, 503, error_body(-32000, "Service Unavailable: the owner node is busy"))
            else:
                await cluster.app(scope, receive, send)
        except (trio.BrokenResourceError, *REDIS_ERRORS) as exc:
            log.debug("forwarded request %s from %s ended: %r", ident, ingress, exc)
        except Exception:
            log.exception("forwarded request %s from %s failed", ident, ingress)
        if not completed and not exchange.disconnected:
            # Never leave the ingress waiting on a live owner: end the response.
            with trio.CancelScope(shield=True), trio.move_on_after(cluster.settings.store_timeout):
                try:
                    if started or held:
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
                    else:
                        await respond(send, 500, error_body(-32603, "the owner node failed to answer"))
                except (trio.BrokenResourceError, *REDIS_ERRORS):
                    pass
    finally:
        cluster.exchanges.pop(ident, None)
        if link is not None:
            link.idents.discard(ident)
