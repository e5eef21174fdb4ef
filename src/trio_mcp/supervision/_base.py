"""The machinery both supervisors share (:class:`SupervisorBase`).

Structure: ``run`` owns a nursery for the children. All bookkeeping happens in
one control loop (the ``run`` task): it handles child exits, runs due
(re)starts in order and stops children. Each child runs in a wrapper task that
reports its exit to the loop through a deque whose length is bounded by the
number of children (one entry per incarnation at most).

The core is shielded from the parent's cancellation: a watcher task turns that
cancellation into an ordered stop, so children always stop in reverse order
with their grace, and ``run`` re-raises ``Cancelled`` afterwards.

Graceful stop of one child: record ``deadline = now + shutdown_grace`` in its
:class:`ChildContext`, cancel the child's own cancel scope, and wait for it to
exit until ``deadline + UNWIND_SECONDS``. Cleanup the child runs under
``current_child().cleanup_scope()`` is shielded and cancelled at ``deadline``
(the hard cancel). Exit before ``deadline`` is reported :class:`Shutdown`,
later (or never) :class:`Killed`; a child that is still running after
``deadline + UNWIND_SECONDS`` (it shielded itself without a bound) is reported
Killed and left to finish in the nursery, which trio cannot abandon.
"""

from __future__ import annotations

import contextlib
import enum
import math
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NoReturn

import trio

from ._child import Batch, Child, Incarnation, StartAborted, should_restart
from ._context import _CURRENT, ChildContext
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
    SupervisorEscalation,
    SupervisorEvent,
    SupervisorStatistics,
)
from ._groups import collapse, collapsed_groups
from ._spec import ChildSpec, OnStartFailure, Restart

__all__ = ["DEFAULT_EVENT_BUFFER", "UNWIND_SECONDS", "Strategy", "SupervisorBase"]

#: Default bound of the events channel. When it is full the oldest event is
#: dropped (and counted in ``statistics().events_dropped``): a slow consumer
#: never blocks supervision.
DEFAULT_EVENT_BUFFER = 256
#: How long after a child's grace ran out the supervisor still waits for it.
UNWIND_SECONDS = 1.0


class Strategy(enum.Enum):
    """Which children restart when one child has to restart."""

    ONE_FOR_ONE = "one_for_one"  #: only that child
    ONE_FOR_ALL = "one_for_all"  #: all children
    REST_FOR_ONE = "rest_for_one"  #: that child and those started after it


class StartProbe:
    """Stands in for ``task_status`` to learn when the child reports started."""

    __slots__ = ("_child", "_inc", "_status", "_sup")

    def __init__(
        self,
        sup: SupervisorBase,
        child: Child,
        inc: Incarnation,
        status: trio.TaskStatus[Any],
    ) -> None:
        self._sup, self._child, self._inc, self._status = sup, child, inc, status

    def started(self, value: Any = None) -> None:
        self._status.started(value)
        self._sup._on_started(self._child, self._inc, value)


class SupervisorBase:
    def __init__(
        self,
        *,
        strategy: Strategy,
        max_restarts: int,
        max_seconds: float,
        event_buffer: int,
        random: Callable[[], float],
    ) -> None:
        if max_restarts < 0:
            raise ValueError("max_restarts must be >= 0")
        if not max_seconds > 0:
            raise ValueError("max_seconds must be > 0")
        if event_buffer < 1:
            raise ValueError("event_buffer must be >= 1")
        self._strategy = strategy
        self._max_restarts = max_restarts
        self._max_seconds = max_seconds
        self._random = random
        self._children: list[Child] = []
        self._by_id: dict[Hashable, Child] = {}
        self._unstarted: set[Child] = set()  # initial children not started yet
        self._batches: list[Batch] = []
        self._exits: deque[tuple[Child, Incarnation]] = deque()
        self._wakeup = trio.Event()
        self._restart_times: deque[float] = deque()
        self._restarts = 0
        self._start_failures = 0
        self._events_dropped = 0
        self._events_out, self._events_in = trio.open_memory_channel[SupervisorEvent](event_buffer)
        self._events_tail = self._events_in.clone()  # to drop the oldest event
        self._nursery: trio.Nursery | None = None
        self._run_called = False
        self._stopping = False
        self._finished = trio.Event()

    # --- public API --------------------------------------------------------

    def events(self) -> trio.MemoryReceiveChannel[SupervisorEvent]:
        """The receive end of the bounded events channel (the same on every call).

        Holds at most ``event_buffer`` events; when full, the oldest is dropped
        and counted. The channel ends (``EndOfChannel``) once ``run`` returned.
        """
        return self._events_in

    def statistics(self) -> SupervisorStatistics:
        """Counters and gauges of this supervisor."""
        try:
            horizon = trio.current_time() - self._max_seconds
        except RuntimeError:  # outside trio.run
            horizon = -math.inf
        return SupervisorStatistics(
            children=len(self._children),
            running=sum(c.state is ChildState.RUNNING for c in self._children),
            restarts=self._restarts,
            recent_restarts=sum(t > horizon for t in self._restart_times),
            start_failures=self._start_failures,
            events_dropped=self._events_dropped,
        )

    def which_children(self) -> list[ChildInfo]:
        """``(id, state, value)`` of every child, in child order (stop order reversed)."""
        return [ChildInfo(c.spec.id, c.state, c.value) for c in self._children]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the children in order, report started, then supervise them.

        Returns after :meth:`aclose`; re-raises ``Cancelled`` after an ordered
        stop when cancelled; raises :class:`SupervisorEscalation` when the
        restart intensity is exceeded or a start failure escalates.
        """
        if self._run_called:
            raise RuntimeError("a supervisor can run only once")
        if self._stopping:
            raise trio.ClosedResourceError("supervisor was closed before it ran")
        self._run_called = True
        try:
            with collapsed_groups():
                async with trio.open_nursery() as watch:
                    watch.start_soon(self._watch_for_cancel)
                    try:
                        with trio.CancelScope(shield=True):
                            await self._core(task_status)
                    finally:
                        watch.cancel_scope.cancel()
        finally:
            self._stopping = True
            self._events_out.close()
            self._finished.set()
        await trio.lowlevel.checkpoint_if_cancelled()

    async def aclose(self) -> None:
        """Stop all children in reverse start order, then wait until ``run`` ends.

        Interrupts any backoff sleep at once. The wait is bounded by the sum of
        the running children's grace (plus ``UNWIND_SECONDS`` each).
        """
        self._request_stop()
        if self._run_called:
            await self._finished.wait()
        else:
            await trio.lowlevel.checkpoint()

    # --- hooks ---------------------------------------------------------------

    def _forget(self, child: Child) -> None:
        """A child is not restarted (static supervisors keep it for inspection)."""

    # --- bookkeeping ---------------------------------------------------------

    def _add(self, spec: ChildSpec) -> Child:
        if spec.id in self._by_id:
            raise ValueError(f"duplicate child id {spec.id!r}")
        child = Child(spec)
        self._children.append(child)
        self._by_id[spec.id] = child
        return child

    def _remove(self, child: Child) -> None:
        if not child.removed:
            child.removed = True
            self._unschedule(child)
            self._children.remove(child)
            del self._by_id[child.spec.id]

    def _emit(self, event: SupervisorEvent) -> None:
        try:
            self._events_out.send_nowait(event)
        except trio.ClosedResourceError:  # run has returned
            pass
        except trio.WouldBlock:
            with contextlib.suppress(trio.WouldBlock):
                self._events_tail.receive_nowait()
            self._events_dropped += 1
            with contextlib.suppress(trio.WouldBlock):
                self._events_out.send_nowait(event)

    def _wake(self) -> None:
        self._wakeup.set()

    def _schedule(self, children: Sequence[Child], at: float) -> None:
        for child in children:
            self._unschedule(child)
        batch = Batch(at, list(children))
        for child in children:
            child.batch = batch
            child.state = ChildState.PENDING
        if batch.children:
            self._batches.append(batch)
            self._wake()

    def _unschedule(self, child: Child) -> None:
        batch, child.batch = child.batch, None
        if batch is not None:
            batch.children.remove(child)
            if not batch.children:
                self._batches.remove(batch)

    def _request_stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        now = trio.current_time()
        for child in self._children:  # abort starts in progress
            inc = child.inc
            if inc is not None and not inc.started:
                inc.context._request_stop(now + child.spec.shutdown_grace)
                inc.scope.cancel()
        self._wake()

    def _escalate(self, child: Child, reason: ExitReason | StartFailure) -> NoReturn:
        exc = SupervisorEscalation(child.spec.id, reason)
        if isinstance(reason, Crashed):
            exc.__cause__ = reason.exc
        elif isinstance(reason, StartFailure):
            exc.__cause__ = reason
        self._emit(Escalated(child.spec.id, exc))
        raise exc

    # --- tasks -----------------------------------------------------------------

    async def _watch_for_cancel(self) -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            # The parent cancelled us (or run is ending): turn it into an ordered
            # stop. Swallowing is fine: this task ends here, and run re-raises
            # Cancelled once the children are stopped.
            self._request_stop()

    async def _core(self, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                if self._children:
                    self._schedule(list(self._children), trio.current_time())
                await self._loop(task_status)
            finally:
                self._stopping = True
                await self._stop_all()

    async def _loop(self, task_status: trio.TaskStatus[None]) -> None:
        announced = False
        while not self._stopping:
            if self._exits:
                await self._handle_exit(*self._exits.popleft())
                continue
            now = trio.current_time()
            batch = min(self._batches, key=lambda b: b.at, default=None)
            if batch is not None and batch.at <= now:
                await self._run_batch(batch)
                continue
            if not announced and not self._unstarted:
                announced = True
                task_status.started()
            self._wakeup = trio.Event()
            with trio.move_on_at(math.inf if batch is None else batch.at):
                await self._wakeup.wait()

    async def _child_task(self, child: Child, inc: Incarnation, *, task_status: trio.TaskStatus[Any]) -> None:
        _CURRENT.set(inc.context)
        spec = child.spec
        reason: ExitReason | None = None
        try:
            with inc.scope:
                try:
                    await spec.start(task_status=StartProbe(self, child, inc, task_status))
                except Exception as exc:
                    if inc.started:
                        reason = Crashed(collapse(exc))
                    elif inc.context.stopping:
                        raise StartAborted from exc
                    else:
                        raise
                else:
                    reason = Normal()
            if not inc.started:
                if reason is not None:
                    raise RuntimeError(f"child {spec.id!r} returned without calling task_status.started()")
                if inc.context.stopping:
                    raise StartAborted
                raise trio.TooSlowError(
                    f"child {spec.id!r} did not report started within {spec.start_timeout}s"
                )
        finally:
            inc.exited_at = trio.current_time()
            inc.reason = reason
            inc.done.set()
        if not (inc.context.stopping or self._stopping):
            self._exits.append((child, inc))
            self._wake()

    def _on_started(self, child: Child, inc: Incarnation, value: Any) -> None:
        inc.started = True
        inc.started_at = trio.current_time()
        inc.scope.deadline = math.inf  # the start timeout no longer applies
        if child.inc is inc:
            child.value = value
            child.state = ChildState.RUNNING
        child.start_failures = 0
        self._unstarted.discard(child)
        self._emit(ChildStarted(child.spec.id, value))

    # --- starting ----------------------------------------------------------------

    async def _start_once(self, child: Child) -> Any:
        """One start attempt; raises the start failure, or StartAborted."""
        assert self._nursery is not None
        spec = child.spec
        inc = Incarnation(
            context=ChildContext(spec.id, spec.shutdown_grace),
            scope=trio.CancelScope(deadline=trio.current_time() + spec.start_timeout),
        )
        child.inc = inc
        child.state = ChildState.STARTING
        try:
            return await self._nursery.start(
                self._child_task, child, inc, name=f"supervised child {spec.id!r}"
            )
        except BaseException as exc:
            if child.inc is inc:
                child.inc = None
                child.state = ChildState.STOPPED
            if isinstance(exc, Exception) and not isinstance(exc, StartAborted):
                self._start_failures += 1
            if inc.started and not inc.reported:  # started, then cancelled with its caller
                inc.reported = True
                self._emit(ChildExited(spec.id, Shutdown()))
            raise

    async def _start_supervised(self, child: Child) -> float | None:
        """Start ``child`` under its start-failure policy; return a retry time or None."""
        spec = child.spec
        try:
            await self._start_once(child)
        except StartAborted:
            return None
        except Exception as exc:
            child.start_failures += 1
            attempt = child.start_failures
            if attempt <= spec.start_retries:
                delay = spec.backoff.delay(attempt, self._random)
                self._emit(StartFailed(spec.id, exc, attempt, delay))
                return trio.current_time() + delay
            self._emit(StartFailed(spec.id, exc, attempt, None))
            child.start_failures = 0
            child.state = ChildState.FAILED
            self._unstarted.discard(child)
            failure = StartFailure(spec.id, attempt)
            failure.__cause__ = exc
            if spec.on_start_failure is OnStartFailure.ESCALATE:
                self._escalate(child, failure)
            self._emit(GaveUp(spec.id, failure))
            self._forget(child)
        return None

    async def _run_batch(self, batch: Batch) -> None:
        self._batches.remove(batch)
        queue = batch.children
        for child in queue:
            child.batch = None
        while queue and not self._stopping:
            child = queue.pop(0)
            if child.removed:
                continue
            retry_at = await self._start_supervised(child)
            if retry_at is not None:  # the rest keeps waiting behind it
                self._schedule([child, *(c for c in queue if not c.removed)], retry_at)
                return

    # --- exits, restarts and stops -------------------------------------------------

    async def _handle_exit(self, child: Child, inc: Incarnation) -> None:
        if inc.reported or child.inc is not inc:
            return
        inc.reported = True
        reason = inc.reason
        assert reason is not None
        spec = child.spec
        child.inc, child.value, child.state = None, None, ChildState.STOPPED
        self._emit(ChildExited(spec.id, reason))
        if not should_restart(spec.restart, reason):
            self._forget(child)
            return
        now = trio.current_time()
        self._restarts += 1
        self._restart_times.append(now)
        while self._restart_times[0] <= now - self._max_seconds:
            self._restart_times.popleft()
        if len(self._restart_times) > self._max_restarts:
            self._escalate(child, reason)
        if now - inc.started_at >= spec.backoff.reset_after:
            child.restart_attempt = 0  # it was healthy long enough
        child.restart_attempt += 1
        attempt = child.restart_attempt
        delay = spec.backoff.delay(attempt, self._random)
        group = self._restart_group(child)
        restart = [
            c
            for c in group
            if c is child or c.state is ChildState.PENDING or c.spec.restart is not Restart.TEMPORARY
        ]
        for sibling in reversed(group):
            if sibling is not child and sibling.inc is not None:
                await self._stop_child(sibling)
                if sibling not in restart:
                    self._forget(sibling)
        if self._stopping:
            return
        self._schedule(restart, trio.current_time() + delay)
        for c in restart:
            self._emit(RestartScheduled(c.spec.id, delay, attempt))

    def _restart_group(self, child: Child) -> list[Child]:
        if self._strategy is Strategy.ONE_FOR_ONE:
            return [child]
        candidates = self._children
        if self._strategy is Strategy.REST_FOR_ONE:
            candidates = candidates[candidates.index(child) :]
        live = (ChildState.PENDING, ChildState.STARTING, ChildState.RUNNING, ChildState.STOPPING)
        return [c for c in candidates if c is child or c.state in live]

    async def _stop_child(self, child: Child) -> None:
        """Stop ``child``'s incarnation gracefully (see the module docstring)."""
        self._unschedule(child)
        inc = child.inc
        if inc is None:
            if child.state is ChildState.PENDING:
                child.state = ChildState.STOPPED
            return
        ctx = inc.context
        if not ctx.stopping:
            ctx._request_stop(trio.current_time() + child.spec.shutdown_grace)
            inc.scope.cancel()
        deadline = ctx.stop_deadline
        assert deadline is not None
        if inc.started:
            child.state = ChildState.STOPPING
        with trio.CancelScope(shield=True, deadline=deadline + UNWIND_SECONDS):
            await inc.done.wait()
        if child.inc is inc:
            child.inc, child.value, child.state = None, None, ChildState.STOPPED
        if inc.started and not inc.reported:
            inc.reported = True
            reason: ExitReason
            if inc.exited_at is not None and inc.reason is not None:
                reason = inc.reason  # it returned or raised on its own
            elif inc.exited_at is not None and inc.exited_at < deadline:
                reason = Shutdown()
            else:
                reason = Killed()
            self._emit(ChildExited(child.spec.id, reason))

    async def _stop_all(self) -> None:
        for child in reversed(list(self._children)):
            await self._stop_child(child)
        self._batches.clear()
        self._exits.clear()
