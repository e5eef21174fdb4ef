"""The actor base: a task with a bounded mailbox, started with ``nursery.start``."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import trio

__all__ = ["Actor", "ExitReason"]

M = TypeVar("M")


class ExitReason:
    """Why an actor's ``run`` returned (a normal exit; crashes raise)."""

    __slots__ = ("kind", "detail")

    def __init__(self, kind: str, detail: str = "") -> None:
        self.kind = kind  # "eof", "closed", "cancelled", ...
        self.detail = detail

    def __repr__(self) -> str:
        return f"ExitReason({self.kind!r}{', ' + repr(self.detail) if self.detail else ''})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExitReason) and (self.kind, self.detail) == (other.kind, other.detail)

    def __hash__(self) -> int:
        return hash((self.kind, self.detail))


class Actor(Generic[M]):
    """Base for actors with a mailbox.

    Subclasses implement :meth:`run` (``async def run(self, *,
    task_status=trio.TASK_STATUS_IGNORED)``), call ``task_status.started(...)``
    when ready, and consume :attr:`_inbox`. Other tasks post with
    :meth:`send` (waits while the mailbox is full: backpressure) or
    :meth:`send_nowait` (raises :class:`trio.WouldBlock`).
    """

    #: Default mailbox bound; subclasses or callers choose their own.
    mailbox_size: int = 64

    def __init__(self, *, name: str | None = None, mailbox_size: int | None = None) -> None:
        self.name = name or type(self).__name__
        size = self.mailbox_size if mailbox_size is None else mailbox_size
        if size < 1:
            raise ValueError("mailbox_size must be at least 1")
        self._outbox, self._inbox = trio.open_memory_channel[M](size)

    async def send(self, message: M) -> None:
        await self._outbox.send(message)

    def send_nowait(self, message: M) -> None:
        self._outbox.send_nowait(message)

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> Any:
        raise NotImplementedError

    def statistics(self) -> dict[str, Any]:
        s = self._outbox.statistics()
        return {"name": self.name, "mailbox_used": s.current_buffer_used, "mailbox_size": s.max_buffer_size}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
