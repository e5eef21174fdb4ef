"""What a supervisor keeps of each child: its spec and state, the current
incarnation (one run of its ``start``), the batch of (re)starts it waits in,
and whether an exit calls for a restart."""

from __future__ import annotations

from typing import Any

import attrs
import trio

from ._context import ChildContext
from ._events import ChildState, Crashed, ExitReason
from ._spec import ChildSpec, Restart

__all__ = ["Batch", "Child", "Incarnation", "StartAborted", "should_restart"]


class StartAborted(Exception):
    """A start was cut short by a stop request."""


@attrs.define(eq=False)
class Incarnation:
    context: ChildContext
    scope: trio.CancelScope
    started: bool = False
    started_at: float = 0.0
    exited_at: float | None = None
    #: None after exit means: cancelled by the supervisor.
    reason: ExitReason | None = None
    done: trio.Event = attrs.Factory(trio.Event)
    reported: bool = False


@attrs.define(eq=False)
class Batch:
    """Children to start in order once ``at`` (trio clock) is reached."""

    at: float
    children: list[Child]


@attrs.define(eq=False)
class Child:
    spec: ChildSpec
    state: ChildState = ChildState.PENDING
    value: Any = None
    inc: Incarnation | None = None
    batch: Batch | None = None
    restart_attempt: int = 0
    start_failures: int = 0
    removed: bool = False


def should_restart(restart: Restart, reason: ExitReason) -> bool:
    if restart is Restart.PERMANENT:
        return True
    if restart is Restart.TRANSIENT:
        return isinstance(reason, Crashed)
    return False
