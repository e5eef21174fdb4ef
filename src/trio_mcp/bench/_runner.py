"""One bench run end to end: the load (in this process, or in worker
processes), the live display, Ctrl-C, and the report."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import IO, Any

import attrs
import trio

from ..cli._connect import AuthSettings
from ._engine import End, Opener, SessionLost, Setup, run_load
from ._live import LiveDisplay
from ._report import build_report
from ._scenario import Scenario
from ._settings import LoadPlan
from ._stats import Aggregate, Tick

__all__ = ["BenchConfig", "run_bench"]


@attrs.define(kw_only=True)
class BenchConfig:
    """What to run against what (one typed object)."""

    target: list[str]
    plan: LoadPlan
    scenario: Scenario
    headers: dict[str, str] = attrs.Factory(dict)
    #: ``--auth`` (secrets named by environment variable, never held here).
    auth: AuthSettings | None = None
    era: str = "auto"
    workers: int = 1
    thresholds: list[str] = attrs.Factory(list)
    #: "auto" (rich on a terminal, plain lines otherwise), "rich", "plain" or "off".
    live: str = "auto"
    #: Stage texts as given (for the report).
    stage_texts: list[str] = attrs.Factory(list)

    def settings(self) -> dict[str, Any]:
        p = self.plan
        return {
            "model": p.model,
            "callers": p.level if p.model == "closed" else None,
            "rate": p.level if p.model == "open" else None,
            "stages": list(self.stage_texts),
            "duration": None if p.stages or p.duration == float("inf") else p.duration,
            "calls": p.calls,
            "warmup": p.warmup,
            "sessions": p.sessions,
            "workers": self.workers,
            "era": self.era,
            "call_timeout": p.call_timeout,
            "max_in_flight": p.max_in_flight if p.model == "open" else None,
            "interval": p.interval,
            "headers": sorted(self.headers),  # names only: values may be secrets
            "auth": self.auth.kind if self.auth else None,
            "scenario": self.scenario.source,
            "thresholds": list(self.thresholds),
        }


class _Collector:
    def __init__(self, config: BenchConfig, display: LiveDisplay) -> None:
        self.config = config
        self.display = display
        self.agg = Aggregate(workers=config.workers, interval=config.plan.interval)
        self.setups: list[Setup] = []
        self.ends: list[End] = []
        self.events: list[dict[str, Any]] = []
        self.closed_failures = 0

    def handle(self, message: Any) -> None:
        if isinstance(message, Tick):
            self.agg.add(message)
            if message.warmup:
                self.display.warming(self.agg)
            else:
                self.display.update(self.agg)
        elif isinstance(message, Setup):
            self.setups.append(message)
            for failure in message.failures:
                self._event("session-failed", 0.0, f"could not open {failure}")
        elif isinstance(message, SessionLost):
            who = f"session {message.session}" + (
                f" of worker {message.worker}" if self.config.workers > 1 else ""
            )
            self._event(
                "session-lost",
                message.seconds,
                f"{who} lost at {message.seconds:.2f} s: {message.reason} ({message.left} left)",
            )
        elif isinstance(message, End):
            self.ends.append(message)
            self.agg.worker_done(message.worker)
            self.display.update(self.agg)

    def _event(self, kind: str, seconds: float, text: str) -> None:
        self.events.append({"kind": kind, "seconds": seconds, "text": text})
        self.display.message(text)

    def report(self) -> dict[str, Any]:
        self.agg.flush()
        opened = [s for setup in self.setups for s in setup.opened]
        failures = [f for setup in self.setups for f in setup.failures]
        first = next((s for s in self.setups if s.protocol), None)
        sessions: dict[str, Any] = {"opened": len(opened), "failures": failures}
        if opened:
            sessions["mean_us"] = round(sum(opened) / len(opened) * 1e6, 1)
            sessions["max_us"] = round(max(opened) * 1e6, 1)
            sessions["min_us"] = round(min(opened) * 1e6, 1)
        seconds = max((e.seconds for e in self.ends), default=0.0)
        stops = sorted({e.stopped for e in self.ends if e.stopped})
        not_sent = sum(e.not_sent for e in self.ends)
        cancelled = sum(e.cancelled for e in self.ends)
        closed = sum(op.failed.get("closed", 0) for op in self.agg.ops.values())
        if closed or not_sent:
            lost_at = min((e["seconds"] for e in self.events if e["kind"] == "session-lost"), default=None)
            when = f" from {lost_at:.2f} s" if lost_at is not None else ""
            self.events.append(
                {
                    "kind": "connection-lost",
                    "seconds": lost_at,
                    "text": f"connection lost{when}: {closed:,} calls failed on a closed connection, "
                    f"{not_sent:,} scheduled calls not sent",
                    "failed": closed,
                    "not_sent": not_sent,
                }
            )
        if cancelled:
            self.events.append(
                {
                    "kind": "interrupted",
                    "seconds": seconds,
                    "text": f"interrupted: {cancelled:,} calls in flight were not measured",
                    "cancelled": cancelled,
                }
            )
        op_thresholds = {op.name: op.thresholds for op in self.config.scenario.operations if op.thresholds}
        report = build_report(
            self.agg,
            target=" ".join(self.config.target),
            settings=self.config.settings(),
            seconds=seconds,
            setup={
                "protocol": first.protocol if first else None,
                "era": first.era if first else None,
                "server": first.server if first else None,
                "sessions": sessions,
            },
            events=self.events,
            stopped="; ".join(stops) or None,
            thresholds=self.config.thresholds,
            op_thresholds=op_thresholds,
        )
        return report


def _default_opener(config: BenchConfig) -> Opener:
    from ._connect import open_session

    def opener() -> Any:
        return open_session(
            config.target,
            headers=config.headers,
            auth=config.auth,
            era=config.era,  # type: ignore[arg-type]
        )

    return opener


async def run_bench(
    config: BenchConfig,
    *,
    opener: Opener | None = None,
    stop: trio.Event | None = None,
    live_out: IO[str] | None = None,
    on_interrupt: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run the load and return the report (see :func:`build_report`).

    ``opener`` opens one session (default: a new connection to
    ``config.target``; with ``workers > 1`` the workers always open their own).
    Ctrl-C (SIGINT, when run in the main thread) ends the run early: what was
    measured is still reported; a second Ctrl-C interrupts at once."""
    stop = trio.Event() if stop is None else stop
    display = LiveDisplay(measured_seconds=config.plan.measured_seconds, out=live_out, mode=config.live)
    collector = _Collector(config, display)
    try:
        async with trio.open_nursery() as nursery:
            if threading.current_thread() is threading.main_thread():
                nursery.start_soon(_watch_sigint, stop, display, on_interrupt)
            if config.workers > 1:
                from ._workers import run_workers

                await run_workers(
                    config.workers,
                    target=config.target,
                    headers=config.headers,
                    auth=config.auth,
                    era=config.era,
                    plan=config.plan,
                    scenario_spec=config.scenario.source,
                    handle=collector.handle,
                    stop=stop,
                )
            else:
                await run_load(
                    config.plan,
                    config.scenario,
                    opener or _default_opener(config),
                    collector.handle,
                    stop=stop,
                )
            nursery.cancel_scope.cancel()
    finally:
        display.close()
    return collector.report()


async def _watch_sigint(
    stop: trio.Event, display: LiveDisplay, on_interrupt: Callable[[], None] | None
) -> None:
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            if stop.is_set():
                raise KeyboardInterrupt
            display.message("interrupted: stopping, the summary follows (Ctrl-C again to quit at once)")
            if on_interrupt is not None:
                on_interrupt()
            stop.set()
