"""What a cluster node keeps in Redis, and the commands that read and write it.

Keys (every one behind :attr:`ClusterSettings.prefix`):

``node:{nid}``
    the node's lease: a random boot nonce, ``PX lease_ttl``, renewed every
    ``renew_interval``, taken only when free (two live processes never share
    a node id; a restarted node waits for its previous life's lease to end). A node whose key is gone (or holds another nonce) is
    dead; so are its sessions' calls in flight.
``link:{nid}``
    the address of the node's direct link (``direct_link``) and the token a
    peer names to open one, with the lease's lifetime.
``inbox:{nid}``
    a stream (``MAXLEN ~ inbox_maxlen``): the requests other nodes forward to
    this one, and the pieces of the responses it gets back for the requests it
    forwarded. Expires a few leases after the node stops renewing it.
``sess:{sid}``
    a hash: ``owner`` (node id), ``nonce`` (the owner's lease nonce),
    ``fence`` (bumped at every change of owner) and ``state`` (the handshake
    state the owner saved: version, client capabilities and info, log level,
    subscriptions), expiring ``session_ttl`` after the session was last used.
channel ``events``
    the broadcasts (list changes, resource updates) every node repeats to its
    own sessions.

Every write an owner makes for a session (a piece of a forwarded response, its
saved state) checks in the same script that the owner still holds its lease
with the nonce the session was started under: a node stopped (SIGSTOP, a long
pause) beyond its lease writes nothing once it resumes, even before it notices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import attrs
import coredis
import trio

from ._settings import ClusterSettings

__all__ = ["REDIS_ERRORS", "NotWritten", "Outgoing", "RedisStore", "SessionRecord"]

#: What a Redis call raises when the server is away or slow (a 503, a retry);
#: coredis (on anyio) also lets anyio's stream errors out of a lost connection.
REDIS_ERRORS = (
    coredis.exceptions.RedisError,
    OSError,
    trio.TooSlowError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
)

_LOOKUP = """
local s = redis.call('HMGET', KEYS[1], 'owner', 'nonce', 'fence', 'state')
if not s[1] then return false end
local live = redis.call('GET', ARGV[1] .. 'node:' .. s[1])
local link = redis.call('GET', ARGV[1] .. 'link:' .. s[1])
return {s[1], s[2] or '', s[3] or '0', s[4] or '', live or '', link or ''}
"""

_ADOPT = """
local s = redis.call('HMGET', KEYS[1], 'owner', 'nonce')
if s[1] ~= ARGV[2] or s[2] ~= ARGV[3] then return -1 end
if redis.call('GET', ARGV[1] .. 'node:' .. s[1]) == s[2] then return -2 end
redis.call('HSET', KEYS[1], 'owner', ARGV[4], 'nonce', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return redis.call('HINCRBY', KEYS[1], 'fence', 1)
"""

# KEYS[1]: the writing node's lease; ARGV[1]: MAXLEN; then per entry: the
# lease nonce it is fenced by ('' for none), its inbox's index in KEYS, its
# number of field and value items, the items. One 1 (written) or 0 per entry.
_SEND = """
local live = redis.call('GET', KEYS[1])
local written = {}
local i = 2
while i <= #ARGV do
  local nonce, key, first = ARGV[i], KEYS[tonumber(ARGV[i + 1])], i + 3
  i = first + tonumber(ARGV[i + 2])
  if nonce == '' or nonce == live then
    redis.call('XADD', key, 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, first, i - 1))
    written[#written + 1] = 1
  else
    written[#written + 1] = 0
  end
end
return written
"""

_SAVE = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] or redis.call('HGET', KEYS[1], 'nonce') ~= ARGV[1] then
  return 0
end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'state', ARGV[3]) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

# KEYS: the lease, the inbox, the link address; ARGV[4]: the address ('' for none).
_REGISTER = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
if ARGV[3] == '1' then redis.call('DEL', KEYS[2]) end
if ARGV[4] ~= '' then redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[2]) else redis.call('DEL', KEYS[3]) end
return 1
"""

_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return 1
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1], KEYS[2]) return 1 end
return 0
"""

# The milliseconds left of a node's lease held under a nonce (0: not held).
_LEASE_LEFT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PTTL', KEYS[1])
"""

# One command on the client's shared connection (a MULTI pipeline takes a
# connection of its own: a burst of initializes would open one each).
_CREATE = """
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'nonce', ARGV[2], 'fence', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

_DELETE_MINE = """
if redis.call('HGET', KEYS[1], 'nonce') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class NotWritten(coredis.exceptions.ConnectionError):
    """An inbox entry that was not written (the writer stopped first)."""


class Outgoing:
    """An entry for a node's inbox, waiting to be sent with others (see
    :meth:`RedisStore.send`); ``done`` is set once it was written (``written``)
    or not (``error``)."""

    __slots__ = ("done", "error", "fields", "node", "nonce", "written")

    def __init__(
        self, node: str, fields: Mapping[bytes, bytes] | Mapping[str, str | bytes], nonce: str = ""
    ) -> None:
        self.node = node
        self.fields = fields
        self.nonce = nonce
        self.done = trio.Event()
        self.written: bool | None = None
        self.error: BaseException | None = None

    def size(self) -> int:
        return sum(len(v) for v in self.fields.values())


@attrs.frozen
class SessionRecord:
    """A session as Redis has it."""

    owner: str
    nonce: str
    fence: int
    #: The saved handshake state (JSON), ``b""`` before the owner saved it.
    state: bytes
    #: Whether the owner still holds the lease the session was started under.
    alive: bool
    #: The owner's direct link address and token (``""``: none published).
    link: str = ""


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisStore:
    """The Redis commands of one node (a coredis client, entered by :meth:`open`)."""

    def __init__(self, settings: ClusterSettings) -> None:
        self.settings = settings
        self.client: coredis.Redis[bytes] = coredis.Redis.from_url(settings.url)
        self._lookup = self.client.register_script(_LOOKUP)
        self._adopt = self.client.register_script(_ADOPT)
        self._send = self.client.register_script(_SEND)
        self._save = self.client.register_script(_SAVE)
        self._register = self.client.register_script(_REGISTER)
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)
        self._delete_mine = self.client.register_script(_DELETE_MINE)
        self._lease_left = self.client.register_script(_LEASE_LEFT)
        self._create = self.client.register_script(_CREATE)

    def key(self, *parts: str) -> str:
        return self.settings.key(*parts)

    # --------------------------------------------------------------- leases

    async def register(self, node: str, nonce: str, *, fresh: bool, link: str = "") -> bool:
        """Take the lease afresh (``fresh``: at boot, with an empty inbox),
        publishing the node's ``link`` address with it; False while another
        live process holds this node id (or this one's previous life, until
        its lease runs out)."""
        taken: Any = await self._register(
            keys=[self.key("node", node), self.key("inbox", node), self.key("link", node)],
            args=[nonce, _ms(self.settings.lease_ttl), "1" if fresh else "0", link],
        )
        return bool(taken)

    async def renew(self, node: str, nonce: str) -> bool:
        """Extend the lease; False when it was lost (expired, or taken over)."""
        settings = self.settings
        done: Any = await self._renew(
            keys=[self.key("node", node), self.key("inbox", node), self.key("link", node)],
            args=[nonce, _ms(settings.lease_ttl), _ms(settings.lease_ttl * 4)],
        )
        return bool(done)

    async def release(self, node: str, nonce: str) -> None:
        await self._release(keys=[self.key("node", node), self.key("link", node)], args=[nonce])

    async def alive(self, node: str, nonce: str) -> bool:
        return await self.client.get(self.key("node", node)) == nonce.encode()

    async def lease_left(self, node: str, nonce: str) -> float:
        """Seconds left of a node's lease held under ``nonce`` (0: not held)."""
        left: Any = await self._lease_left(keys=[self.key("node", node)], args=[nonce])
        return max(0, int(left)) / 1000

    # ------------------------------------------------------------- sessions

    async def lookup(self, session_id: str) -> SessionRecord | None:
        found: Any = await self._lookup(keys=[self.key("sess", session_id)], args=[self.settings.prefix])
        if not found:
            return None
        owner, nonce, fence, live = _text(found[0]), _text(found[1]), _text(found[2]), _text(found[4])
        state = found[3] if isinstance(found[3], bytes) else b""
        link = _text(found[5]) if len(found) > 5 else ""
        return SessionRecord(
            owner=owner, nonce=nonce, fence=int(fence), state=state, alive=live == nonce, link=link
        )

    async def create(self, session_id: str, node: str, nonce: str, ttl: float) -> None:
        await self._create(keys=[self.key("sess", session_id)], args=[node, nonce, _ms(ttl)])

    async def adopt(
        self, session_id: str, old: SessionRecord, node: str, nonce: str, ttl: float
    ) -> int | None:
        """Become the owner of a session whose owner is dead: the new fence, or
        None when another node was quicker (or the owner lives after all)."""
        fence: Any = await self._adopt(
            keys=[self.key("sess", session_id)],
            args=[self.settings.prefix, old.owner, old.nonce, node, nonce, _ms(ttl)],
        )
        return int(fence) if isinstance(fence, int) and fence > 0 else None

    async def save(self, session_id: str, node: str, nonce: str, state: bytes, ttl: float) -> bool:
        """Save a session's state (``b""``: only refresh its expiry) if this
        node still owns it under ``nonce``."""
        done: Any = await self._save(
            keys=[self.key("sess", session_id), self.key("node", node)], args=[nonce, _ms(ttl), state]
        )
        return bool(done)

    async def delete(self, session_id: str, nonce: str | None) -> None:
        """Forget a session (``nonce``: only while owned under it)."""
        key = self.key("sess", session_id)
        if nonce is None:
            await self.client.delete([key])
        else:
            await self._delete_mine(keys=[key], args=[nonce])

    # --------------------------------------------------------------- inbox

    async def send(self, me: str, entries: Sequence[Outgoing]) -> list[bool]:
        """Append entries to nodes' inboxes in one command, each one fenced by
        its nonce (written only while node ``me`` holds its lease under it;
        unfenced: ``""``). Whether each was written."""
        keys = [self.key("node", me)]
        index: dict[str, int] = {}
        args: list[str | bytes | int] = [self.settings.inbox_maxlen]
        for entry in entries:
            at = index.get(entry.node)
            if at is None:
                keys.append(self.key("inbox", entry.node))
                at = index[entry.node] = len(keys)
            args.extend((entry.nonce, at, 2 * len(entry.fields)))
            for name, value in entry.fields.items():
                args.extend((name, value))
        written: Any = await self._send(keys=keys, args=args)
        return [bool(w) for w in written]

    async def read(self, node: str, after: str, block: float) -> list[tuple[str, dict[bytes, bytes]]]:
        """The entries of a node's inbox after ``after`` (waiting up to ``block`` seconds)."""
        found = await self.client.xread({self.key("inbox", node): after}, count=256, block=_ms(block))
        if not found:
            return []
        out: list[tuple[str, dict[bytes, bytes]]] = []
        for entries in found.values():
            for entry in entries:
                fields: Any = entry.field_values
                out.append((_text(entry.identifier), dict(fields)))
        return out

    # ----------------------------------------------------------------- bus

    async def publish(self, data: bytes) -> None:
        await self.client.publish(self.key("events"), data)
