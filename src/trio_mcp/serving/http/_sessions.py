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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import trio

if TYPE_CHECKING:
    from ._session import HttpSessionStream

__all__ = ["MemorySessionRegistry", "SessionRegistry"]


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

    async def idle(self, now: float, timeout: float) -> list[HttpSessionStream]:
        """The idle-expiry hook: sessions hosted here with no open stream, no
        request in flight, and no activity (``session.last_active``, on
        :func:`trio.current_time`'s clock) for more than ``timeout`` seconds
        at ``now``. The app ends them. A network registry also refreshes the
        expiry of the others here."""


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

    async def idle(self, now: float, timeout: float) -> list[HttpSessionStream]:
        await trio.lowlevel.checkpoint()
        return [
            session
            for session in self._sessions.values()
            if session.connections == 0 and not session.awaiting and now - session.last_active > timeout
        ]
