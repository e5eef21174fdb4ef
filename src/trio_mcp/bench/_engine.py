"""One load generator: a trio task tree that opens the sessions, sends the
scenario's calls under the plan's load model, and emits what it measured
every interval.

* **Closed model**: ``level`` callers, each sending its next call when the
  previous one is answered (the level ramps with the stages).
* **Open model**: calls start on a schedule (``level`` calls per second),
  whatever the server does. Latency is measured from each call's intended
  start (corrected for coordinated omission) and from the moment it was
  sent (uncorrected); they differ when the in-flight cap held calls back.

Calls go round robin over the live sessions. A session whose connection
closes is reported (when, why) and left out; when none is left the run
ends, and the open model counts the calls it could not send. ``stop`` (set
on Ctrl-C) ends the run at once: what was measured is still emitted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import msgspec
import trio

from ..protocol import ConnectionClosed, McpError
from ..transports import TransportError
from ._scenario import LISTS, Operation, Scenario
from ._settings import RAMP_STEP, SESSION_OPEN_CONCURRENCY, LoadPlan
from ._stats import OpRecorder, Tick

__all__ = ["End", "SessionLost", "Setup", "run_load"]

#: Seconds every session together may take to open.
SETUP_TIMEOUT = 60.0
#: Seconds behind its schedule an open-model call may start before it counts as late.
LATE_SLACK = 0.005

Opener = Callable[[], AbstractAsyncContextManager[Any]]
Emit = Callable[[Any], None]


class Setup(msgspec.Struct, kw_only=True, tag=True):
    """A worker's sessions are open (or failed to open): the run can start."""

    worker: int = 0
    #: Seconds each opened session took (connect + initialize or discover).
    opened: list[float] = []
    failures: list[str] = []
    protocol: str | None = None
    era: str | None = None
    server: str | None = None


class SessionLost(msgspec.Struct, kw_only=True, tag=True):
    """A session's connection closed during the run."""

    worker: int = 0
    session: int
    #: Seconds since the measured phase began (negative: during the warm-up).
    seconds: float
    reason: str
    #: Sessions of this worker still alive.
    left: int


class End(msgspec.Struct, kw_only=True, tag=True):
    """A worker's run is over; nothing follows."""

    worker: int = 0
    #: Length of the measured phase, seconds.
    seconds: float
    stopped: str | None = None
    #: Open model: scheduled calls not sent because no session was left.
    not_sent: int = 0
    #: Calls in flight when the run was interrupted (not measured).
    cancelled: int = 0


@attrs.define(eq=False)
class _Slot:
    index: int
    client: Any = None
    alive: bool = False
    release: trio.Event = attrs.Factory(trio.Event)


def _first_leaf(group: BaseException) -> BaseException:
    while isinstance(group, BaseExceptionGroup) and group.exceptions:
        group = group.exceptions[0]
    return group


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def _uri(template: str, args: dict[str, Any]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: str(args.get(m[1], m[0])), template)


async def _invoke(client: Any, op: Operation, args: dict[str, Any], task_tools: frozenset[str]) -> str:
    if op.kind == "tool":
        if op.target in task_tools:  # runs only as a task: call, follow it, fetch its result
            result = await client.tasks.run_tool(op.target, args)
        else:
            result = await client.call_tool(op.target, args)
        return "is_error" if result.is_error is True else "ok"
    if op.kind == "resource":
        await client.read_resource(_uri(op.target, args))
    elif op.kind == "prompt":
        await client.get_prompt(op.target, {k: str(v) for k, v in args.items()})
    elif op.kind == "list":
        await getattr(client, LISTS[op.target])()
    else:
        await client.ping()
    return "ok"


async def _task_required_tools(client: Any) -> frozenset[str]:
    """The tools ``client``'s server runs only as tasks (none when it lists no tools)."""
    if not client.supports("tools/list"):
        return frozenset()
    with trio.fail_after(SETUP_TIMEOUT):
        tools = await client.list_all_tools()
    return frozenset(t.name for t in tools if client.tasks.required_by(t))


class _Run:
    def __init__(self, plan: LoadPlan, scenario: Scenario, emit: Emit, worker: int) -> None:
        self.plan = plan
        self.emit = emit
        self.worker = worker
        self.mix = scenario.mix(plan.seed)
        self.recorders = {op.name: OpRecorder() for op in scenario.operations}
        self.slots: list[_Slot] = []
        self.rr = 0
        self.issued = 0
        #: Tools the server runs only as tasks (learnt once, before the load).
        self.task_tools: frozenset[str] = frozenset()
        self.in_flight = 0
        self.late = 0
        self.warm_calls = 0
        self.not_sent = 0
        self.stopped: str | None = None
        self.measure_start = math.inf
        self.deadline = math.inf
        self.load_scope = trio.CancelScope()
        self.callers: set[int] = set()
        self.target_callers = 0

    # ------------------------------------------------------------ sessions

    def pick(self) -> _Slot | None:
        n = len(self.slots)
        for step in range(n):
            slot = self.slots[(self.rr + step) % n]
            if slot.alive:
                self.rr = (self.rr + step + 1) % n
                return slot
        return None

    def alive(self) -> int:
        return sum(1 for s in self.slots if s.alive)

    def lose(self, slot: _Slot, reason: str) -> None:
        if not slot.alive:
            return
        slot.alive = False
        now = trio.current_time()
        self.emit(
            SessionLost(
                worker=self.worker,
                session=slot.index,
                seconds=round(now - self.measure_start, 3),
                reason=reason,
                left=self.alive(),
            )
        )
        if not self.alive() and self.stopped is None:
            self.stopped = f"every session's connection closed ({reason})"

    # --------------------------------------------------------------- calls

    def budget_left(self, measured: bool) -> bool:
        """Take one call of the budget (measured calls only)."""
        if not measured or self.plan.calls is None:
            return True
        if self.issued >= self.plan.calls:
            return False
        self.issued += 1
        return True

    async def call(self, intended: float) -> None:
        slot = self.pick()
        if slot is None:
            self.not_sent += 1
            return
        op, args = next(self.mix)
        sent = trio.current_time()
        self.in_flight += 1
        try:
            try:
                with trio.fail_after(self.plan.call_timeout):
                    kind = await _invoke(slot.client, op, args, self.task_tools)
            except ConnectionClosed as exc:
                self.lose(slot, exc.message)
                kind = "closed"
            except McpError as exc:
                kind = str(exc.code)
            except TransportError as exc:
                self.lose(slot, str(exc))
                kind = "closed"
            except trio.TooSlowError:
                kind = "timeout"
        finally:
            self.in_flight -= 1
        done = trio.current_time()
        if sent - intended > LATE_SLACK and intended >= self.measure_start:
            self.late += 1
        if intended >= self.measure_start:
            self.recorders[op.name].record(kind, _us(done - intended), _us(done - sent))
        else:
            self.warm_calls += 1

    # --------------------------------------------------------------- models

    async def caller(self, index: int) -> None:
        try:
            while self.stopped is None and index < self.target_callers:
                now = trio.current_time()
                if now >= self.deadline or not self.budget_left(now >= self.measure_start):
                    return
                await self.call(now)
        finally:
            self.callers.discard(index)

    async def closed_model(self, nursery: trio.Nursery) -> None:
        while self.stopped is None:
            now = trio.current_time()
            if now >= self.deadline or (self.plan.calls is not None and self.issued >= self.plan.calls):
                return
            self.target_callers = round(self.plan.level_at(now - self.measure_start))
            for index in range(self.target_callers):
                if index not in self.callers:
                    self.callers.add(index)
                    nursery.start_soon(self.caller, index)
            if not self.plan.stages:
                return
            await trio.sleep(RAMP_STEP)

    async def open_model(self, nursery: trio.Nursery) -> None:
        slots = trio.Semaphore(self.plan.max_in_flight)

        async def one(intended: float) -> None:
            try:
                await self.call(intended)
            finally:
                slots.release()

        t = trio.current_time()
        rate = 0.0
        while self.stopped is None:
            rate = self.plan.level_at(t - self.measure_start)
            t += 1.0 / rate if rate > 0 else RAMP_STEP
            if t >= self.deadline:
                return
            if rate <= 0:
                await trio.sleep_until(t)
                continue
            if not self.budget_left(t >= self.measure_start):
                return
            if t > trio.current_time():
                await trio.sleep_until(t)
            await slots.acquire()
            nursery.start_soon(one, t)
        if rate > 0 and math.isfinite(self.deadline):
            left = max(0, int((self.deadline - t) * rate))
            if self.plan.calls is not None:
                left = min(left, self.plan.calls - self.issued)
            self.not_sent += left

    # --------------------------------------------------------------- ticks

    def tick(self, index: int, at: float, *, warm: bool = False) -> Tick:
        tick = Tick(
            worker=self.worker,
            index=index,
            seconds=round(at - self.measure_start, 6),
            warmup=warm,
            in_flight=self.in_flight,
            late=self.late,
            warmup_calls=self.warm_calls,
        )
        self.late = self.warm_calls = 0
        if not warm:
            tick.ops = {name: r.drain() for name, r in self.recorders.items()}
        return tick

    async def ticker(self, run_start: float) -> None:
        interval = self.plan.interval
        warm_ticks = math.floor((self.measure_start - run_start) / interval)
        for j in range(1, warm_ticks + 1):
            await trio.sleep_until(run_start + j * interval)
            self.emit(self.tick(j - warm_ticks - 1, run_start + j * interval, warm=True))
        index = 1
        while True:
            at = self.measure_start + index * interval
            await trio.sleep_until(at)
            self.emit(self.tick(index, at))
            index += 1


async def run_load(
    plan: LoadPlan,
    scenario: Scenario,
    opener: Opener,
    emit: Emit,
    *,
    worker: int = 0,
    stop: trio.Event | None = None,
    go: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Open ``plan.sessions`` sessions with ``opener``, run the load, and
    ``emit`` a :class:`Setup`, a :class:`Tick` per interval, any
    :class:`SessionLost`, and an :class:`End`."""
    run = _Run(plan, scenario, emit, worker)
    stop = trio.Event() if stop is None else stop
    setup = Setup(worker=worker)
    settled = 0
    all_settled = trio.Event()
    limiter = trio.Semaphore(SESSION_OPEN_CONCURRENCY)

    async def hold(slot: _Slot) -> None:
        nonlocal settled
        await limiter.acquire()
        held = True
        try:
            began = trio.current_time()
            async with opener() as client:
                slot.client, slot.alive = client, True
                setup.opened.append(round(trio.current_time() - began, 6))
                limiter.release()
                held = False
                settled += 1
                if settled == plan.sessions:
                    all_settled.set()
                await slot.release.wait()
        except* Exception as group:
            # (a transport's failure may arrive beside the teardown's Cancelled: except*)
            exc = _first_leaf(group)
            if slot.client is None:
                setup.failures.append(f"session {slot.index}: {exc}")
                settled += 1
                if settled == plan.sessions:
                    all_settled.set()
            else:
                run.lose(slot, str(exc) or type(exc).__name__)
        finally:
            if held:
                limiter.release()

    async with trio.open_nursery() as sessions:
        run.slots = [_Slot(i) for i in range(plan.sessions)]
        for slot in run.slots:
            sessions.start_soon(hold, slot)
        with trio.move_on_after(SETUP_TIMEOUT):
            await all_settled.wait()
        for slot in run.slots:
            if slot.client is None and not all_settled.is_set():
                setup.failures.append(f"session {slot.index}: not open after {SETUP_TIMEOUT:g} s")
        first = next((s.client for s in run.slots if s.alive), None)
        if first is not None:
            setup.protocol = getattr(first, "protocol_version", None)
            setup.era = getattr(first, "era", None)
            info = getattr(first, "server_info", None)
            setup.server = getattr(info, "name", None)
        if first is not None and any(op.kind == "tool" for op in scenario.operations):
            run.task_tools = await _task_required_tools(first)
        emit(setup)
        if first is None:
            emit(End(worker=worker, seconds=0.0, stopped="no session could be opened"))
            sessions.cancel_scope.cancel()
            return
        if go is not None:
            await go()
        run_start = trio.current_time()
        run.measure_start = run_start + plan.warmup
        run.deadline = run.measure_start + plan.measured_seconds
        cancelled = 0
        async with trio.open_nursery() as outer:
            outer.start_soon(run.ticker, run_start)

            async def watch_stop() -> None:
                nonlocal cancelled
                await stop.wait()
                if run.stopped is None:
                    run.stopped = "interrupted"
                cancelled = run.in_flight
                run.load_scope.cancel()

            outer.start_soon(watch_stop)
            with run.load_scope:
                async with trio.open_nursery() as load:
                    if plan.model == "closed":
                        await run.closed_model(load)
                    else:
                        await run.open_model(load)
            outer.cancel_scope.cancel()
        ended = trio.current_time()
        measured = max(0.0, ended - run.measure_start)
        if ended >= run.measure_start:
            emit(run.tick(math.floor(measured / plan.interval) + 1, ended))
        else:
            emit(run.tick(0, ended, warm=True))
        emit(
            End(
                worker=worker,
                seconds=round(measured, 6),
                stopped=run.stopped,
                not_sent=run.not_sent,
                cancelled=cancelled,
            )
        )
        for slot in run.slots:
            slot.release.set()
        sessions.cancel_scope.cancel()
