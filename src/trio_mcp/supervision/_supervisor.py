"""OTP-style supervisors for trio tasks: :class:`Supervisor` (a fixed list
of children) and :class:`DynamicSupervisor` (children added and removed at
run time). How they start, restart and stop children: :mod:`._base`."""

from __future__ import annotations

import random as _random_module
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import trio

from ._base import DEFAULT_EVENT_BUFFER, Strategy, SupervisorBase
from ._child import Child, StartAborted
from ._events import StartFailed, StartFailure, TooManyChildren
from ._spec import ChildSpec

__all__ = ["DEFAULT_MAX_CHILDREN", "DynamicSupervisor", "Supervisor"]

#: Default bound on the number of children of a :class:`DynamicSupervisor`.
DEFAULT_MAX_CHILDREN = 1024


class Supervisor(SupervisorBase):
    """A supervisor of a fixed list of children, started in list order.

    Restart intensity: more than ``max_restarts`` restarts within
    ``max_seconds`` stops all children and raises :class:`SupervisorEscalation`
    out of :meth:`run`. ``random`` returns floats in [0, 1] for backoff jitter.
    """

    def __init__(
        self,
        children: Sequence[ChildSpec],
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        event_buffer: int = DEFAULT_EVENT_BUFFER,
        random: Callable[[], float] = _random_module.random,
    ) -> None:
        super().__init__(
            strategy=strategy,
            max_restarts=max_restarts,
            max_seconds=max_seconds,
            event_buffer=event_buffer,
            random=random,
        )
        for spec in children:
            self._add(spec)
        self._unstarted = set(self._children)


class DynamicSupervisor(SupervisorBase):
    """A one-for-one supervisor whose children are added and removed at run time.

    Children that are not restarted (or given up on) are forgotten.
    """

    def __init__(
        self,
        *,
        max_children: int = DEFAULT_MAX_CHILDREN,
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        event_buffer: int = DEFAULT_EVENT_BUFFER,
        random: Callable[[], float] = _random_module.random,
    ) -> None:
        if max_children < 1:
            raise ValueError("max_children must be >= 1")
        super().__init__(
            strategy=Strategy.ONE_FOR_ONE,
            max_restarts=max_restarts,
            max_seconds=max_seconds,
            event_buffer=event_buffer,
            random=random,
        )
        self._max_children = max_children

    async def start_child(self, spec: ChildSpec) -> Any:
        """Start a child (one attempt, in the caller's task) and return its value.

        Raises :class:`StartFailure` (the cause attached) if it fails before
        reporting started, ``ValueError`` for a duplicate id,
        :class:`TooManyChildren`, and ``trio.ClosedResourceError`` once the
        supervisor is stopping. Later restarts follow the spec's policy.
        """
        if self._stopping:
            raise trio.ClosedResourceError("supervisor is stopping")
        if self._nursery is None:
            raise RuntimeError("supervisor is not running")
        if len(self._children) >= self._max_children:
            raise TooManyChildren(f"already {self._max_children} children")
        child = self._add(spec)
        try:
            return await self._start_once(child)
        except StartAborted:
            self._remove(child)
            raise trio.ClosedResourceError(f"child {spec.id!r} was stopped while starting") from None
        except Exception as exc:
            self._remove(child)
            self._emit(StartFailed(spec.id, exc, 1, None))
            raise StartFailure(spec.id, 1) from exc
        except BaseException:
            self._remove(child)
            raise

    async def terminate_child(self, id: Hashable) -> None:
        """Stop a child gracefully (bounded by its grace) and forget it.

        Raises ``KeyError`` for an unknown id.
        """
        child = self._by_id[id]
        self._remove(child)
        await self._stop_child(child)

    def _forget(self, child: Child) -> None:
        self._remove(child)
