"""Generic OTP-style supervision of trio tasks (knows nothing of MCP).

A child is a :class:`ChildSpec` whose ``start`` is run like
``await nursery.start(start)``. A :class:`Supervisor` starts its children in
order, restarts them per strategy, restart type, restart intensity and
backoff, and stops them in reverse order with a per-child grace.
:class:`DynamicSupervisor` adds and removes children at run time.
"""

from ._base import DEFAULT_EVENT_BUFFER, UNWIND_SECONDS, Strategy
from ._context import ChildContext, current_child
from ._events import (
    ChildExited,
    ChildInfo,
    ChildStarted,
    ChildState,
    Crashed,
    Escalated,
    ExitReason,
    GaveUp,
    Killed,
    Normal,
    RestartScheduled,
    Shutdown,
    StartFailed,
    StartFailure,
    SupervisorError,
    SupervisorEscalation,
    SupervisorEvent,
    SupervisorStatistics,
    TooManyChildren,
)
from ._spec import Backoff, ChildSpec, OnStartFailure, Restart, StartFn
from ._supervisor import DEFAULT_MAX_CHILDREN, DynamicSupervisor, Supervisor

__all__ = [
    "DEFAULT_EVENT_BUFFER",
    "DEFAULT_MAX_CHILDREN",
    "UNWIND_SECONDS",
    "Backoff",
    "ChildContext",
    "ChildExited",
    "ChildInfo",
    "ChildSpec",
    "ChildStarted",
    "ChildState",
    "Crashed",
    "DynamicSupervisor",
    "Escalated",
    "ExitReason",
    "GaveUp",
    "Killed",
    "Normal",
    "OnStartFailure",
    "Restart",
    "RestartScheduled",
    "Shutdown",
    "StartFailed",
    "StartFailure",
    "StartFn",
    "Strategy",
    "Supervisor",
    "SupervisorError",
    "SupervisorEscalation",
    "SupervisorEvent",
    "SupervisorStatistics",
    "TooManyChildren",
    "current_child",
]
