"""A supervised child's view of its own supervision."""

from __future__ import annotations

from collections.abc import Hashable
from contextvars import ContextVar

import trio

__all__ = ["ChildContext", "current_child"]


class ChildContext:
    """Per-incarnation context of a supervised child (see :func:`current_child`).

    Stopping a child cancels its cancel scope. Cleanup that must still await
    (close a pipe, terminate a process) runs inside :meth:`cleanup_scope`: a
    shielded scope that is cancelled at the child's stop deadline, i.e.
    ``shutdown_grace`` seconds after the stop request. That is the hard cancel.
    """

    __slots__ = ("_stop_deadline", "id", "shutdown_grace")

    def __init__(self, id: Hashable, shutdown_grace: float) -> None:
        self.id = id
        self.shutdown_grace = shutdown_grace
        self._stop_deadline: float | None = None

    @property
    def stopping(self) -> bool:
        """True once the supervisor asked this child to stop."""
        return self._stop_deadline is not None

    @property
    def stop_deadline(self) -> float | None:
        """When the grace of a requested stop runs out (trio clock), else None."""
        return self._stop_deadline

    def cleanup_scope(self) -> trio.CancelScope:
        """A shielded scope ending at the stop deadline (or ``shutdown_grace``
        from now when no stop was requested, e.g. cleanup after a crash)."""
        deadline = self._stop_deadline
        if deadline is None:
            deadline = trio.current_time() + self.shutdown_grace
        return trio.CancelScope(shield=True, deadline=deadline)

    def _request_stop(self, deadline: float) -> None:
        if self._stop_deadline is None:
            self._stop_deadline = deadline

    def __repr__(self) -> str:
        return f"<ChildContext id={self.id!r} stopping={self.stopping}>"


_CURRENT: ContextVar[ChildContext] = ContextVar("trio_mcp_supervision_child")


def current_child() -> ChildContext:
    """The context of the supervised child running this task (or its subtasks).

    Raises RuntimeError outside a supervised child.
    """
    try:
        return _CURRENT.get()
    except LookupError:
        raise RuntimeError("not running inside a supervised child") from None
