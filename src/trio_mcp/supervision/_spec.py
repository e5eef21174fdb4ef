"""Child specifications: what to start, when to restart it, how to back off."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import attrs

__all__ = ["Backoff", "ChildSpec", "OnStartFailure", "Restart", "StartFn"]

#: ``async def start(*, task_status=trio.TASK_STATUS_IGNORED)``: sets the child
#: up, calls ``task_status.started(value)`` when ready, then runs until done.
StartFn = Callable[..., Awaitable[Any]]


class Restart(enum.Enum):
    """When a child that exited on its own is restarted."""

    PERMANENT = "permanent"  #: always
    TRANSIENT = "transient"  #: only after an abnormal exit (an exception)
    TEMPORARY = "temporary"  #: never


class OnStartFailure(enum.Enum):
    """What a supervisor does once a child's start retries are used up."""

    ESCALATE = "escalate"  #: stop everything and raise SupervisorEscalation
    GIVE_UP = "give_up"  #: leave the child FAILED (dynamic: forget it)


def _non_negative(_inst: object, attr: attrs.Attribute[Any], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attr.name} must be >= 0, got {value!r}")


def _positive(_inst: object, attr: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attr.name} must be > 0, got {value!r}")


@attrs.frozen(kw_only=True)
class Backoff:
    """Exponential backoff with full jitter.

    Attempt ``n`` (1-based) waits a uniform random time in ``[0, cap(n)]``
    where ``cap(n) = min(maximum, initial * multiplier ** (n - 1))``. The
    supervisor resets a child's attempt counter only once that child has
    stayed up for ``reset_after`` seconds.
    """

    initial: float = attrs.field(default=0.1, validator=_non_negative)
    maximum: float = attrs.field(default=30.0, validator=_non_negative)
    multiplier: float = attrs.field(default=2.0)
    reset_after: float = attrs.field(default=60.0, validator=_non_negative)

    def __attrs_post_init__(self) -> None:
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be >= 1, got {self.multiplier!r}")
        if self.maximum < self.initial:
            raise ValueError("maximum must be >= initial")

    def cap(self, attempt: int) -> float:
        """Upper bound of the delay before attempt number ``attempt``."""
        if attempt < 1:
            raise ValueError(f"attempt must be >= 1, got {attempt!r}")
        try:
            grown = self.initial * self.multiplier ** (attempt - 1)
        except OverflowError:
            return self.maximum
        return min(self.maximum, grown)

    def delay(self, attempt: int, random: Callable[[], float]) -> float:
        """A jittered delay for ``attempt``; ``random()`` returns a float in [0, 1]."""
        cap = self.cap(attempt)
        return min(cap, max(0.0, random() * cap))


@attrs.frozen(kw_only=True)
class ChildSpec:
    """How to run one supervised child.

    ``start`` is started like ``await nursery.start(start)``; the value it
    passes to ``task_status.started(value)`` is the child's handle. Raising
    (or not reporting started within ``start_timeout``) before that is a
    *start failure*: retried ``start_retries`` times with ``backoff``, then
    handled per ``on_start_failure``. After a stop request the child has
    ``shutdown_grace`` seconds to clean up (see :func:`current_child`).
    """

    id: Hashable
    start: StartFn
    restart: Restart = Restart.PERMANENT
    shutdown_grace: float = attrs.field(default=5.0, validator=_non_negative)
    start_timeout: float = attrs.field(default=30.0, validator=_positive)
    start_retries: int = attrs.field(default=3, validator=_non_negative)
    on_start_failure: OnStartFailure = OnStartFailure.ESCALATE
    backoff: Backoff = attrs.field(factory=Backoff)
