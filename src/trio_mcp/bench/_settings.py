"""The load plan: which model (closed callers or open arrival rate), at what
level over time (ramp stages), for how long, over how many sessions.

A level is a number of callers (closed model) or calls per second (open
model). With stages the level ramps linearly from the previous stage's
target (the first stage from the starting level) to each stage's target over
that stage's duration, as k6's ramping executors do.
"""

from __future__ import annotations

import math
import re
from typing import Literal

import attrs

__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_MAX_IN_FLIGHT",
    "LoadPlan",
    "PlanError",
    "Stage",
    "parse_duration",
    "parse_rate",
    "parse_stage",
]

#: Seconds between two live figures (and two points of the over-time charts).
DEFAULT_INTERVAL = 1.0
#: Calls in flight at once in the open model (per worker); a schedule that
#: would need more starts late, and the corrected latency includes the wait.
DEFAULT_MAX_IN_FLIGHT = 10_000
#: Sessions opened at once while setting up.
SESSION_OPEN_CONCURRENCY = 32
#: Seconds between two adjustments of the number of callers during a ramp.
RAMP_STEP = 0.1

Model = Literal["closed", "open"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "": 1.0}


class PlanError(ValueError):
    """A load setting that cannot be used; the message says why."""


def parse_duration(text: str) -> float:
    """``500ms``, ``30s``, ``2m``, ``1h`` or a bare number of seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|)\s*", text)
    if m is None:
        raise PlanError(f"not a duration: {text!r} (e.g. 30s, 2m, 500ms)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_rate(text: str) -> float:
    """``100/s``, ``100``, ``6000/m``: calls per second."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:/\s*(s|m|h))?\s*", text)
    if m is None:
        raise PlanError(f"not a rate: {text!r} (e.g. 100/s)")
    return float(m.group(1)) / _UNITS[m.group(2) or "s"]


@attrs.frozen
class Stage:
    """One ramp: to ``target`` over ``seconds``."""

    seconds: float
    #: Callers (closed model) or calls per second (open model) at the stage's end.
    target: float
    model: Model


def parse_stage(text: str) -> Stage:
    """``30s:100/s`` (open model: ramp to 100 calls/s over 30 s) or ``1m:50``
    (closed model: ramp to 50 callers over a minute)."""
    duration, sep, level = text.partition(":")
    if not sep:
        raise PlanError(f"a stage is DURATION:RATE/s or DURATION:CALLERS, not {text!r}")
    seconds = parse_duration(duration)
    if "/" in level:
        return Stage(seconds, parse_rate(level), "open")
    try:
        callers = int(level)
    except ValueError:
        raise PlanError(f"a stage's level is RATE/s or a whole number of callers, not {level!r}") from None
    return Stage(seconds, float(callers), "closed")


@attrs.frozen(kw_only=True)
class LoadPlan:
    """Everything that shapes one load run (one typed object)."""

    model: Model = "closed"
    #: Callers (closed) or calls per second (open) before and without stages.
    level: float = 16.0
    stages: tuple[Stage, ...] = ()
    #: Seconds measured (``inf``: until the call budget is spent).
    duration: float = 10.0
    #: Calls measured at most.
    calls: int | None = None
    #: Seconds of load before measuring, at the starting level (not counted).
    warmup: float = 1.0
    sessions: int = 1
    call_timeout: float = 30.0
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    interval: float = DEFAULT_INTERVAL
    #: Seed of the random argument choices.
    seed: int = 0

    def __attrs_post_init__(self) -> None:
        if any(s.model != self.model for s in self.stages):
            raise PlanError("stages mix callers and rates: use one model throughout")
        if self.model == "closed" and self.level < 1 and not self.stages:
            raise PlanError("concurrency must be at least 1")
        if self.level < 0:
            raise PlanError("the level must not be negative")
        if self.duration <= 0:
            raise PlanError("give a positive duration or a number of calls")
        if math.isinf(self.duration) and self.calls is None:
            raise PlanError("give a positive duration or a number of calls")
        if self.calls is not None and self.calls < 1:
            raise PlanError("calls must be at least 1")
        if self.sessions < 1:
            raise PlanError("sessions must be at least 1")
        if self.warmup < 0 or self.call_timeout <= 0 or self.interval <= 0 or self.max_in_flight < 1:
            raise PlanError("warm-up, call timeout, interval and in-flight cap must be positive")

    @property
    def measured_seconds(self) -> float:
        """The measured phase's length: the stages', else the duration."""
        return sum(s.seconds for s in self.stages) if self.stages else self.duration

    @property
    def start_level(self) -> float:
        return self.level

    def level_at(self, t: float) -> float:
        """The level ``t`` seconds into the measured phase (before it: the
        warm-up level, the starting level)."""
        if not self.stages or t < 0:
            return self.level
        before = self.level
        for stage in self.stages:
            if t < stage.seconds:
                return before + (stage.target - before) * (t / stage.seconds)
            t -= stage.seconds
            before = stage.target
        return before

    def peak_level(self) -> float:
        return max([self.level, *(s.target for s in self.stages)])

    def share(self, index: int, workers: int) -> LoadPlan:
        """This plan's part for worker ``index`` of ``workers``: its sessions,
        callers or rate, and calls (remainders go to the first workers)."""

        def part(total: int) -> int:
            return total // workers + (1 if index < total % workers else 0)

        def level(value: float) -> float:
            return float(part(round(value))) if self.model == "closed" else value / workers

        return attrs.evolve(
            self,
            level=level(self.level),
            stages=tuple(attrs.evolve(s, target=level(s.target)) for s in self.stages),
            sessions=max(1, part(self.sessions)),
            calls=None if self.calls is None else part(self.calls),
            seed=self.seed + index,
        )
