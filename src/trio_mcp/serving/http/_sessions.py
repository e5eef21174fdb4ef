"""The session registry: where a :class:`StreamableHttpApp` finds the
session an ``Mcp-Session-Id`` names.

:class:`SessionRegistry` is the interface; :class:`MemorySessionRegistry`
(the default) keeps the sessions of one process in a dict. A registry
shared by several processes (say on Redis) implements the same methods:
the lookups that may cross the network are async, the ones called while a
session is torn down are not (they must never block; a network registry
queues the work and does it in the background).

A session itself (its server-session actor and its streams) always lives
in the process that created it; a registry records where it is.

Drain: when the server is asked to stop gracefully (SIGTERM), it calls
:meth:`SessionRegistry.drain` first, then stops taking sessions and ends
its SSE connections; a registry shared with other nodes releases there at
once what it holds for them (a liveness lease, say), so that they take
over now rather than when it expires. The memory registry has nothing to
release.

Expiry: nobody tells a server that a client has gone, so the registry is
also where sessions are found to end (:class:`ExpiryPolicy`): one whose
client never followed its ``initialize`` up within ``handshake_timeout``,
one idle for ``idle_timeout``, and, when ``max_sessions`` is reached, the
idlest one (:meth:`SessionRegistry.idlest`), so that abandoned sessions can
never lock a new client out. A session still starting, or busy with an open
stream or a request in flight, is never expired nor evicted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs
import trio

if TYPE_CHECKING:
    from ._session import HttpSessionStream

__all__ = ["ClusterHook", "ExpiryPolicy", "MemorySessionRegistry", "SessionRegistry"]


@attrs.frozen
class ExpiryPolicy:
    """When a session nobody uses is ended (times in seconds, ``None``: never).

    ``handshake_timeout`` counts from the session's creation until the
    client's first message after ``initialize`` (normally
    ``notifications/initialized``); ``idle_timeout`` from its last activity.
    """

    idle_timeout: float | None
    handshake_timeout: float | None

    @property
    def period(self) -> float | None:
        """How often to look for expired sessions (None: never)."""
        bounds = [t for t in (self.idle_timeout, self.handshake_timeout) if t is not None]
        return max(min(bounds) / 4, 0.01) if bounds else None

    def expired(self, session: HttpSessionStream, now: float) -> str | None:
        """Why ``session`` has expired at ``now``, or None (busy, or in time)."""
        if not evictable(session):
            return None
        handshake = self.handshake_timeout
        if handshake is not None and not session.established and now - session.created > handshake:
            return "handshake timeout"
        idle = self.idle_timeout
        if idle is not None and now - session.last_active > idle:
            return "idle timeout"
        return None


def evictable(session: HttpSessionStream) -> bool:
    """Started, no open stream and no request in flight: ending it loses
    nothing under way. (A session is registered before its task has started;
    until then its initialize is not yet in flight, and ending it would fail
    that initialize.)"""
    return session.server_session is not None and session.connections == 0 and not session.awaiting


def idleness(session: HttpSessionStream) -> tuple[bool, float]:
    """Sort key, idlest first: sessions never followed up, then the least recently active."""
    return (session.established, session.last_active)


@runtime_checkable
class SessionRegistry(Protocol):
    """The sessions of a Streamable HTTP app, by id."""

    async def add(self, session: HttpSessionStream) -> None:
        """Register a new session (``session.id`` is set)."""

    async def get(self, session_id: str) -> HttpSessionStream | None:
        """The live session with this id hosted here, or None (``404``)."""

    def remove(self, session: HttpSessionStream) -> bool:
        """Forget a session; False when it was not registered (idempotent,
        never blocks)."""

    def count(self) -> int:
        """Sessions hosted by this process (``max_sessions`` bounds it)."""

    def local(self) -> list[HttpSessionStream]:
        """A snapshot of the sessions hosted by this process."""

    async def expired(self, now: float, policy: ExpiryPolicy) -> list[tuple[HttpSessionStream, str]]:
        """The expiry hook, called every ``policy.period``: the sessions hosted
        here that ``policy`` says have expired at ``now`` (times on
        :func:`trio.current_time`'s clock), with the reason. The app ends
        them. A network registry also refreshes the expiry of the others."""

    async def idlest(self) -> HttpSessionStream | None:
        """At ``max_sessions``: the session hosted here to end for a new one
        (evictable, idlest first: see :func:`idleness`), or None (all busy:
        the new one is refused)."""

    async def drain(self) -> None:
        """The server is draining (it takes no new session and will stop):
        release at once what other nodes wait for. Bounded by the server
        (``store_timeout``); an error is logged, and the drain goes on."""


@runtime_checkable
class ClusterHook(Protocol):
    """A backend that shares sessions between processes (see
    :mod:`trio_mcp.serving.cluster`), set as :attr:`StreamableHttpApp.cluster`.

    It sees every request on the MCP endpoint before the app does (after the
    ``Host``/``Origin`` checks); without one (the default) nothing is called."""

    async def intercept(self, scope: Any, receive: Any, send: Any, headers: dict[str, str]) -> Any:
        """Serve the request elsewhere (say, forward it to the node that runs
        its session) and return None, or return the ASGI ``send`` the app
        answers it through here (``send`` itself, or one adding headers). It
        may raise :class:`~trio_mcp.transports._asgi.HttpError` (``503`` with
        the backend down)."""
        ...


class MemorySessionRegistry:
    """The sessions of one process, in a dict (the default registry)."""

    def __init__(self) -> None:
        self._sessions: dict[str, HttpSessionStream] = {}

    def __repr__(self) -> str:
        return f"<MemorySessionRegistry {len(self._sessions)} sessions>"

    async def add(self, session: HttpSessionStream) -> None:
        assert session.id is not None
        self._sessions[session.id] = session
        await trio.lowlevel.checkpoint()

    async def get(self, session_id: str) -> HttpSessionStream | None:
        # No checkpoint: a dict lookup cannot block, and this runs on every request.
        return self._sessions.get(session_id)

    def remove(self, session: HttpSessionStream) -> bool:
        if session.id is not None and self._sessions.get(session.id) is session:
            del self._sessions[session.id]
            return True
        return False

    def count(self) -> int:
        return len(self._sessions)

    def local(self) -> list[HttpSessionStream]:
        return list(self._sessions.values())

    async def expired(self, now: float, policy: ExpiryPolicy) -> list[tuple[HttpSessionStream, str]]:
        await trio.lowlevel.checkpoint()
        out = []
        for session in self._sessions.values():
            reason = policy.expired(session, now)
            if reason is not None:
                out.append((session, reason))
        return out

    async def idlest(self) -> HttpSessionStream | None:
        await trio.lowlevel.checkpoint()
        candidates = [session for session in self._sessions.values() if evictable(session)]
        return min(candidates, key=idleness, default=None)

    async def drain(self) -> None:
        await trio.lowlevel.checkpoint()  # nothing shared to release
