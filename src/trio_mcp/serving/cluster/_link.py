"""Direct links between the nodes of a cluster (``direct_link``): a request
forwarded to its session's owner goes as one frame over a persistent
connection, and the owner answers on the same connection, instead of two
Redis stream writes and reads per request.

Each node listens on a private address (``link_host``, a port chosen at run
time; ``link_advertise`` is what the others dial; or a Unix socket in
``link_dir``, for nodes on one machine), published in Redis next to
its lease (``link:{nid}``, same lifetime) with a random token of the
node's: a peer must name it in its hello, so only a party that can read
Redis (as on the inbox path) opens a link. An ingress keeps one connection
per owner node, opened on first use with a hello that names both sides' lease
nonces: an owner answering under another nonce than the session record's is
not used. Frames are the same entries as the Redis inbox's (``req``, ``dis``,
``start``, ``body``), length-prefixed msgpack maps of bytes to bytes (encoded
and decoded as they are, no conversion per field), so the owner serves them
with the same code (:func:`._tunnel.serve_forwarded`).

Redis stays the registry, the lease and fence authority, and the fallback:
when no link can be opened (none published, refused, another nonce) the
request goes through the owner's inbox as before. Fencing holds without the
Lua check of the inbox path: the owner writes a frame only while it holds
its lease under the nonce the link was opened with (its own clock's view,
which expires no later than Redis's), and the ingress relays a frame only
while it knows that lease alive (checked in Redis at most once per
``renew_interval``, trusted no longer than the lease's remaining time); once
the ingress answered :class:`~._settings.OwnerLost` the exchange is gone and a
late frame is dropped. A link that breaks ends the exchanges on it: the
owner's as if their client went away, the ingress's with ``OwnerLost`` (the
request may or may not have been served: never a hang, never a replay).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import math
import os
import secrets
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from ._redis import REDIS_ERRORS, SessionRecord

if TYPE_CHECKING:
    from ._node import RedisCluster
    from ._settings import ClusterSettings

__all__ = ["LOST", "Link", "Links", "Wakeup"]

log = logging.getLogger("trio_mcp.cluster")

_LENGTH = struct.Struct(">I")
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(dict[bytes, bytes]).decode
#: The most a link reads at once.
_READ_SIZE = 1 << 16
#: What a relay receives when the link its request went over broke.
LOST: dict[bytes, bytes] = {b"k": b"lost"}


class LinkError(Exception):
    """A peer that does not speak the link protocol (or breaks its bounds)."""


#: How a link ends (the peer went away, or spoke nonsense): the link closes, nothing else.
_ENDED = (LinkError, trio.BrokenResourceError, trio.ClosedResourceError, OSError)


def _frame(fields: Mapping[bytes, bytes]) -> bytes:
    data = _encode(fields)
    return _LENGTH.pack(len(data)) + data


class Wakeup:
    """One task waiting until another wakes it: the cheapest hand-over trio
    has (no channel, no event; nothing happens when nobody waits)."""

    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: trio.lowlevel.Task | None = None

    @property
    def waiting(self) -> bool:
        return self._task is not None

    def wake(self) -> None:
        task = self._task
        if task is not None:
            self._task = None
            trio.lowlevel.reschedule(task)

    async def wait(self) -> None:
        self._task = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED


class Link:
    """One connection between two nodes: frames in (:meth:`receive`), frames
    out (:meth:`send` queues, :meth:`write_frames` writes as many at once as
    were queued since its last write).

    Over a socket (as links are) it reads and writes the descriptor itself:
    a read or write that the socket can take at once costs no task switch
    (trio's socket stream adds one to each), and a task waits only when it
    must. A read that did not wait is followed by a checkpoint before the
    next one, so a link that always has data still lets other tasks run."""

    def __init__(self, stream: trio.abc.Stream, peer: str, nonce: str, max_frame: int, queue: int) -> None:
        self.stream = stream
        #: The node at the other end, and the lease nonce it spoke under.
        self.peer = peer
        self.nonce = nonce
        self.max_frame = max_frame
        #: The exchanges (forwarded requests) in flight on this link.
        self.idents: set[bytes] = set()
        #: This node's lease nonce when it opened the link (an ingress's).
        self.own_nonce = ""
        self.closed = False
        #: Writes (each of one frame or more) and frames queued, for the statistics.
        self.writes = 0
        self.frames = 0
        self._buffer = bytearray()
        #: Frames queued for the next write, and how many may wait.
        self._pending: list[bytes] = []
        self._queue = queue
        #: The writer, while it waits for frames (woken directly by :meth:`send`).
        self._writer = Wakeup()
        self._room = trio.lowlevel.ParkingLot()
        #: The socket's descriptor (-1: not a socket, the stream's own calls are used).
        self._fd = stream.socket.fileno() if isinstance(stream, trio.SocketStream) else -1
        #: The last read returned without waiting (the next one checkpoints first).
        self._eager = False

    async def send(self, fields: Mapping[bytes, bytes]) -> None:
        """Queue a frame for the writer (waiting only while ``queue`` frames
        wait already: no task switch otherwise). Raises
        :class:`trio.BrokenResourceError` once the link is closed."""
        while len(self._pending) >= self._queue and not self.closed:
            await self._room.park()
        if self.closed:
            raise trio.BrokenResourceError("the link is closed")
        self._pending.append(_frame(fields))
        self.frames += 1
        self._writer.wake()

    async def write_frames(self) -> None:
        """Write the queued frames until the link closes."""
        while not self.closed:
            if not self._pending:
                await self._writer.wait()
                continue
            pending = self._pending
            self._pending = []
            self._room.unpark_all()
            self.writes += 1
            data = b"".join(pending) if len(pending) > 1 else pending[0]
            if self._fd < 0:
                await self.stream.send_all(data)
            else:
                await self._write(data)

    async def _write(self, data: bytes) -> None:
        fd = self._fd
        view = memoryview(data)
        while view:
            if self.closed:
                raise trio.ClosedResourceError("the link is closed")
            try:
                sent = os.write(fd, view)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)
                continue
            view = view[sent:]

    async def _read(self) -> bytes | bytearray:
        fd = self._fd
        if fd < 0:
            return await self.stream.receive_some(_READ_SIZE)
        if self._eager:
            await trio.lowlevel.checkpoint()
        waited = False
        while True:
            if self.closed:
                raise trio.ClosedResourceError("the link is closed")
            try:
                chunk = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
                waited = True
                continue
            self._eager = not waited
            return chunk

    async def receive(self) -> dict[bytes, bytes] | None:
        """The next frame, or None at the end of the stream."""
        buffer = self._buffer
        while True:
            if len(buffer) >= _LENGTH.size:
                (size,) = _LENGTH.unpack_from(buffer)
                if size > self.max_frame:
                    raise LinkError(f"a frame of {size} bytes (link_max_frame is {self.max_frame})")
                end = _LENGTH.size + size
                if len(buffer) >= end:
                    data = bytes(buffer[_LENGTH.size : end])
                    del buffer[:end]
                    try:
                        return _decode(data)
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        raise LinkError(f"a frame that is no entry: {exc}") from None
            chunk = await self._read()
            if not chunk:
                return None
            buffer += chunk

    async def close(self) -> None:
        self.closed = True
        self._room.unpark_all()
        self._writer.wake()
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await self.stream.aclose()


async def _hello(link: Link, timeout: float) -> dict[bytes, bytes]:
    with trio.move_on_after(timeout):
        hello = await link.receive()
        if hello is None or hello.get(b"k") != b"hello":
            raise LinkError("no hello")
        return hello
    raise LinkError("no hello in time")


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


#: How a published link address names a Unix socket (``link_dir``).
_UNIX = "unix:"


async def _listen(settings: ClusterSettings) -> tuple[trio.SocketListener, str]:
    """The link listener and the address the other nodes dial: TCP on
    ``link_host``, or a Unix socket of a random name in ``link_dir``."""
    if settings.link_dir is None:
        listeners = await trio.open_tcp_listeners(settings.link_port, host=settings.link_host)
        for extra in listeners[1:]:
            await extra.aclose()
        host, port = listeners[0].socket.getsockname()[:2]
        return listeners[0], settings.link_advertise or (f"[{host}]" if ":" in host else host) + f":{port}"
    path = os.path.join(settings.link_dir, f"link-{secrets.token_hex(8)}.sock")
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    try:
        await sock.bind(path)
        sock.listen()
    except BaseException:
        sock.close()
        raise
    return trio.SocketListener(sock), _UNIX + path


async def _dial(address: str) -> trio.SocketStream:
    if address.startswith(_UNIX):
        return await trio.open_unix_socket(address[len(_UNIX) :])
    return await trio.open_tcp_stream(*_address(address))


class Links:
    """A node's direct links: its listener (the owner side) and its
    connections to owners (the ingress side), under one supervised child."""

    def __init__(self, cluster: RedisCluster) -> None:
        self.cluster = cluster
        #: Links to owner nodes, by node id.
        self.to_owner: dict[str, Link] = {}
        #: Owners whose link could not be opened, not tried again before the time given.
        self.down_until: dict[str, float] = {}
        self._connecting: dict[str, trio.Lock] = {}
        self._nursery: trio.Nursery | None = None
        #: What peers dial, and the token they must name (published together).
        self.address = ""
        self.token = secrets.token_urlsafe(16)
        #: Frames relayed from owners, and the ones dropped (their owner's lease not known alive).
        self.received = 0
        self.dropped = 0

    # --------------------------------------------------------------- running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen, publish the address (through the lease), serve links until cancelled."""
        listener, self.address = await _listen(self.cluster.settings)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self.cluster.link_address = f"{self.address} {self.token}"
                nursery.start_soon(trio.serve_listeners, self._serve, [listener])
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self.cluster.link_address = ""
            for link in list(self.to_owner.values()):
                self._lost(link)
            self.to_owner.clear()
            if self.address.startswith(_UNIX):
                with contextlib.suppress(OSError):
                    os.unlink(self.address[len(_UNIX) :])

    # ------------------------------------------------------------ owner side

    async def _serve(self, stream: trio.SocketStream) -> None:
        cluster = self.cluster
        settings = cluster.settings
        link = Link(stream, "", "", settings.link_max_frame, settings.outbox_queue)
        try:
            hello = await _hello(link, settings.store_timeout)
            if not hmac.compare_digest(hello.get(b"t", b""), self.token.encode()):
                raise LinkError("a hello without this node's token")
            link.peer = hello.get(b"from", b"").decode()
            link.nonce = hello.get(b"fn", b"").decode()
            await link.send({b"k": b"hello", b"n": cluster.nonce.encode()})
            async with trio.open_nursery() as nursery:
                nursery.start_soon(link.write_frames)
                peer = (link.peer.encode(), link.nonce.encode())
                while (fields := await link.receive()) is not None:
                    self._owner_frame(link, peer, fields)
                nursery.cancel_scope.cancel()
        except* _ENDED as group:
            log.debug("a link from %s ended: %r", link.peer or "?", group.exceptions[0])
        finally:
            await link.close()
            for ident in link.idents:
                exchange = cluster.exchanges.get(ident)
                if exchange is not None:
                    exchange.disconnect()

    def _owner_frame(self, link: Link, peer: tuple[bytes, bytes], fields: dict[bytes, bytes]) -> None:
        kind = fields.get(b"k")
        if kind == b"req":
            fields[b"from"], fields[b"fn"] = peer
            link.idents.add(fields.get(b"f", b""))
            self.cluster.dispatch_request(fields, link)
        elif kind == b"dis":
            exchange = self.cluster.exchanges.get(fields.get(b"f", b""))
            if exchange is not None:
                exchange.disconnect()
        elif kind == b"push" or kind == b"touch":
            self.cluster.dispatch_note(fields)  # from a replica on the peer (see _replica)

    # ---------------------------------------------------------- ingress side

    def open_to(self, owner: SessionRecord) -> Link | None:
        """The open link to a session's owner, if there is one (no wait)."""
        link = self.to_owner.get(owner.owner)
        return link if link is not None and self._usable(link, owner) else None

    async def to(self, owner: SessionRecord) -> Link | None:
        """The link to a session's owner (opened if need be), or None: use the inbox."""
        if not owner.link or self._nursery is None:
            return None
        link = self.to_owner.get(owner.owner)
        if link is not None and self._usable(link, owner):
            return link
        if self.down_until.get(owner.owner, -math.inf) > trio.current_time():
            return None
        lock = self._connecting.setdefault(owner.owner, trio.Lock())
        async with lock:
            link = self.to_owner.get(owner.owner)
            if link is not None and self._usable(link, owner):
                return link
            if link is not None:
                self._lost(link)
                await link.close()
            link = await self._open(owner)
            if link is None:
                self.down_until[owner.owner] = trio.current_time() + self.cluster.settings.renew_interval
            return link

    def _usable(self, link: Link, owner: SessionRecord) -> bool:
        # Opened under both sides' current leases (the owner's that the
        # session record names, and this node's: the owner stops serving a
        # link whose ingress lease is gone).
        return not link.closed and link.nonce == owner.nonce and link.own_nonce == self.cluster.nonce

    async def _open(self, owner: SessionRecord) -> Link | None:
        cluster = self.cluster
        settings = cluster.settings
        nursery = self._nursery
        stream: trio.SocketStream | None = None
        try:
            with trio.fail_after(settings.store_timeout):
                address, _, token = owner.link.rpartition(" ")
                stream = await _dial(address)
                link = Link(stream, owner.owner, owner.nonce, settings.link_max_frame, settings.outbox_queue)
                link.own_nonce = cluster.nonce
                greeting = {
                    b"k": b"hello",
                    b"from": settings.node_id.encode(),
                    b"fn": link.own_nonce.encode(),
                    b"t": token.encode(),
                }
                await stream.send_all(_frame(greeting))
                hello = await _hello(link, settings.store_timeout)
        except (*_ENDED, ValueError, trio.TooSlowError) as exc:
            log.debug("no link to %s at %s: %r", owner.owner, owner.link.rpartition(" ")[0], exc)
            if stream is not None:
                with trio.CancelScope(shield=True):
                    await stream.aclose()
            return None
        if hello.get(b"n", b"").decode() != owner.nonce or nursery is None:
            # Not the owner the session record names (restarted, fenced): the inbox decides.
            await link.close()
            return None
        self.to_owner[owner.owner] = link
        nursery.start_soon(self._run_to_owner, link)
        return link

    async def _run_to_owner(self, link: Link) -> None:
        cluster = self.cluster
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(link.write_frames)
                while (fields := await link.receive()) is not None:
                    if not cluster.trusted(link.peer, link.nonce) and not await self._trusted(link):
                        # Its lease ran out: whatever it says now is fenced off.
                        self.dropped += 1
                        break
                    self.received += 1
                    cluster.dispatch_answer(fields)
                nursery.cancel_scope.cancel()
        except* _ENDED as group:
            log.debug("the link to %s ended: %r", link.peer, group.exceptions[0])
        finally:
            self._lost(link)
            await link.close()

    async def _trusted(self, link: Link) -> bool:
        """Whether the owner at the other end still holds its lease under the
        link's nonce (see :meth:`RedisCluster.lease_alive`)."""
        try:
            return await self.cluster.lease_alive(link.peer, link.nonce)
        except REDIS_ERRORS:
            return False

    def _lost(self, link: Link) -> None:
        """A link to an owner is gone: the requests in flight on it fail (``OwnerLost``)."""
        link.closed = True
        if self.to_owner.get(link.peer) is link:
            del self.to_owner[link.peer]
        for ident in list(link.idents):
            reply = self.cluster.replies.get(ident)
            if reply is not None:
                reply.put(LOST)
        link.idents.clear()

    def statistics(self) -> dict[str, Any]:
        return {
            "link_address": self.address,
            "links_to_owners": len(self.to_owner),
            "link_frames_received": self.received,
            "link_frames_dropped": self.dropped,
            "link_writes": sum(link.writes for link in self.to_owner.values()),
            "link_frames_sent": sum(link.frames for link in self.to_owner.values()),
        }
