"""Exit reasons, supervisor events, errors and introspection records."""

from __future__ import annotations

import enum
from collections.abc import Hashable
from typing import Any, NamedTuple, TypeAlias

import attrs

__all__ = [
    "ChildExited",
    "ChildInfo",
    "ChildStarted",
    "ChildState",
    "Crashed",
    "Escalated",
    "ExitReason",
    "GaveUp",
    "Killed",
    "Normal",
    "RestartScheduled",
    "Shutdown",
    "StartFailed",
    "StartFailure",
    "SupervisorError",
    "SupervisorEscalation",
    "SupervisorEvent",
    "SupervisorStatistics",
    "TooManyChildren",
]


# --- exit reasons ---------------------------------------------------------


@attrs.frozen
class Normal:
    """The child returned on its own."""


@attrs.frozen
class Crashed:
    """The child raised (single-exception groups are collapsed)."""

    exc: BaseException


@attrs.frozen
class Shutdown:
    """The supervisor stopped the child and it finished within its grace."""


@attrs.frozen
class Killed:
    """The supervisor stopped the child and its grace ran out."""


ExitReason: TypeAlias = Normal | Crashed | Shutdown | Killed


# --- errors ---------------------------------------------------------------


class SupervisorError(Exception):
    """Base class of supervision errors."""


class StartFailure(SupervisorError):
    """A child failed before it reported started; ``__cause__`` says why."""

    def __init__(self, child_id: Hashable, attempts: int) -> None:
        super().__init__(f"child {child_id!r} failed to start ({attempts} attempt(s))")
        self.child_id = child_id
        self.attempts = attempts


class SupervisorEscalation(SupervisorError):
    """Raised out of ``run`` after all children were stopped.

    ``reason`` is the exit reason that exceeded the restart intensity, or the
    :class:`StartFailure` of a child whose policy is to escalate.
    """

    def __init__(self, child_id: Hashable, reason: ExitReason | StartFailure) -> None:
        super().__init__(f"supervisor escalated on child {child_id!r}: {reason!r}")
        self.child_id = child_id
        self.reason = reason


class TooManyChildren(SupervisorError):
    """A dynamic supervisor already holds ``max_children`` children."""


# --- events ---------------------------------------------------------------


@attrs.frozen
class ChildStarted:
    """The child reported ``started``; ``value`` is its handle."""

    id: Hashable
    value: Any


@attrs.frozen
class ChildExited:
    """The child's task ended, for ``reason``."""

    id: Hashable
    reason: ExitReason


@attrs.frozen
class RestartScheduled:
    """The child will be started again in ``delay`` seconds."""

    id: Hashable
    delay: float
    attempt: int


@attrs.frozen
class StartFailed:
    """Start attempt ``attempt`` failed; ``retry_delay`` is None when not retried."""

    id: Hashable
    exc: BaseException
    attempt: int
    retry_delay: float | None


@attrs.frozen
class GaveUp:
    """Start retries were used up and the policy is GIVE_UP."""

    id: Hashable
    exc: StartFailure


@attrs.frozen
class Escalated:
    """Restart intensity was exceeded; the supervisor stops and raises ``exc``."""

    id: Hashable
    exc: SupervisorEscalation


SupervisorEvent: TypeAlias = ChildStarted | ChildExited | RestartScheduled | StartFailed | GaveUp | Escalated


# --- introspection --------------------------------------------------------


class ChildState(enum.Enum):
    """Where a child is in its life cycle."""

    PENDING = "pending"  #: waiting for its (re)start, possibly in backoff
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"  #: exited and not restarted
    FAILED = "failed"  #: start retries used up, given up


class ChildInfo(NamedTuple):
    id: Hashable
    state: ChildState
    value: Any


@attrs.frozen(kw_only=True)
class SupervisorStatistics:
    """Counters of a supervisor (see ``statistics()``)."""

    children: int  #: children known to the supervisor
    running: int  #: children in state RUNNING
    restarts: int  #: restart decisions since start (group restarts count once)
    recent_restarts: int  #: restarts inside the current intensity window
    start_failures: int  #: failed start attempts since start
    events_dropped: int  #: oldest events discarded because the buffer was full
