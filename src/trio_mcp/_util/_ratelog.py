"""Repeated warnings, rate-limited: a misbehaving peer cannot fill the disk.

A flood of garbage lines or dropped notifications is one problem, not
100,000: :class:`RepeatedWarnings` logs the first of a kind, counts the rest,
and logs one summary line per kind at most every ``interval`` seconds (and on
:meth:`~RepeatedWarnings.flush`, when its owner closes). Each line carries
``extra={"repeated": n}``: how many occurrences it stands for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Final

__all__ = ["DEFAULT_WARNING_INTERVAL", "RepeatedWarnings"]

#: Seconds between two lines about the same kind of problem.
DEFAULT_WARNING_INTERVAL: Final = 10.0


class _Kind:
    __slots__ = ("last", "message", "suppressed")

    def __init__(self) -> None:
        self.last = -float("inf")
        self.suppressed = 0
        self.message = ""


class RepeatedWarnings:
    """Rate-limited WARNING lines on ``logger``, one budget per ``kind``.

    ``warning(kind, msg, *args)`` logs at once if the last line of ``kind``
    is at least ``interval`` seconds old (saying how many were not logged
    since), else only counts it. The set of kinds is fixed by the callers
    (a few string constants), so the memory held is bounded.
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval: float = DEFAULT_WARNING_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not interval > 0:
            raise ValueError("interval must be positive")
        self.logger = logger
        self.interval = interval
        self._clock = clock
        self._kinds: dict[str, _Kind] = {}

    def warning(self, kind: str, msg: str, *args: Any) -> None:
        state = self._kinds.get(kind)
        if state is None:
            state = self._kinds[kind] = _Kind()
        now = self._clock()
        if now - state.last < self.interval:
            state.suppressed += 1
            if state.suppressed == 1:
                state.message = msg % args if args else msg  # the first one not logged, as an example
            return
        if not self.logger.isEnabledFor(logging.WARNING):
            return
        repeated, state.suppressed, state.last = state.suppressed, 0, now
        if repeated:
            self.logger.warning(
                msg + " (and %d more like it in the last %.0f s)",
                *args,
                repeated,
                self.interval,
                extra={"repeated": repeated + 1},
            )
        else:
            self.logger.warning(msg, *args, extra={"repeated": 1})

    def flush(self) -> None:
        """Log a summary of every kind counted and not logged yet."""
        for kind, state in self._kinds.items():
            if state.suppressed:
                repeated, state.suppressed = state.suppressed, 0
                self.logger.warning(
                    "%d more like this were not logged (%s), e.g.: %s",
                    repeated,
                    kind,
                    state.message,
                    extra={"repeated": repeated},
                )
