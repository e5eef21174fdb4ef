"""DynamicSupervisor: children added and removed at run time."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_mcp.supervision import (
    UNWIND_SECONDS,
    Backoff,
    ChildExited,
    ChildSpec,
    ChildStarted,
    ChildState,
    DynamicSupervisor,
    GaveUp,
    Killed,
    OnStartFailure,
    Restart,
    Shutdown,
    StartFailed,
    StartFailure,
    SupervisorEscalation,
    TooManyChildren,
    current_child,
)

LIMIT = 600


def drain(sup: DynamicSupervisor) -> list[Any]:
    """The events left in the channel (run has returned: it ends there)."""
    rx, seen = sup.events(), []
    while True:
        try:
            seen.append(rx.receive_nowait())
        except trio.EndOfChannel:
            return seen


class Worker:
    """A controllable child: ``crash()`` / ``exit()`` end the current incarnation."""

    def __init__(
        self,
        name: str,
        log: list[tuple[str, str, float]],
        *,
        cleanup: float = 0.0,
        hang: float = 0.0,
        fail_starts: int = 0,
        never_started: bool = False,
    ) -> None:
        self.name, self.log = name, log
        self.cleanup, self.hang, self.fail_starts, self.never_started = (
            cleanup,
            hang,
            fail_starts,
            never_started,
        )
        self.starts = 0
        self.finish = trio.Event()

    def crash(self) -> None:
        self.finish.set()

    async def start(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        self.starts += 1
        if self.starts <= self.fail_starts:
            raise FileNotFoundError(self.name)
        if self.never_started:
            await trio.sleep_forever()
        self.finish = trio.Event()
        task_status.started(f"{self.name}#{self.starts}")
        try:
            await self.finish.wait()
            raise RuntimeError(f"{self.name} crashed")
        finally:
            self.log.append(("exit", self.name, trio.current_time()))
            if self.cleanup:
                with current_child().cleanup_scope():
                    await trio.sleep(self.cleanup)
            if self.hang:
                with trio.CancelScope(shield=True):
                    await trio.sleep(self.hang)

    def spec(self, **options: Any) -> ChildSpec:
        options.setdefault("backoff", Backoff(initial=1, maximum=1))
        return ChildSpec(id=self.name, start=self.start, **options)


async def test_start_and_terminate_children(autojump_clock: trio.abc.Clock) -> None:
    log: list[tuple[str, str, float]] = []
    sup = DynamicSupervisor()
    workers = {n: Worker(n, log, cleanup=1.0) for n in "abc"}
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            assert sup.which_children() == []
            for w in workers.values():
                assert await sup.start_child(w.spec()) == f"{w.name}#1"
            assert [(i.id, i.state, i.value) for i in sup.which_children()] == [
                (n, ChildState.RUNNING, f"{n}#1") for n in "abc"
            ]
            t0 = trio.current_time()
            await sup.terminate_child("b")
            assert trio.current_time() - t0 == 1.0  # its cleanup ran within the grace
            assert [i.id for i in sup.which_children()] == ["a", "c"]
            with pytest.raises(KeyError):
                await sup.terminate_child("b")
            # the id is free again
            assert await sup.start_child(workers["b"].spec()) == "b#2"
            await sup.aclose()
    # stop order is the reverse of the order children were added
    assert [n for _, n, _ in log] == ["b", "b", "c", "a"]
    exited = [(e.id, e.reason) for e in drain(sup) if isinstance(e, ChildExited)]
    assert exited == [("b", Shutdown()), ("b", Shutdown()), ("c", Shutdown()), ("a", Shutdown())]


async def test_crashed_child_is_restarted_and_temporary_is_forgotten(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[tuple[str, str, float]] = []
    sup = DynamicSupervisor(random=lambda: 1.0)
    perm, temp = Worker("perm", log), Worker("temp", log)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            await sup.start_child(perm.spec())
            await sup.start_child(temp.spec(restart=Restart.TEMPORARY))
            perm.crash()
            temp.crash()
            await trio.sleep(5)
            assert [(i.id, i.value) for i in sup.which_children()] == [("perm", "perm#2")]
            assert (perm.starts, temp.starts) == (2, 1)
            assert sup.statistics().restarts == 1
            await sup.aclose()


async def test_start_child_failure_raises_after_one_attempt(autojump_clock: trio.abc.Clock) -> None:
    sup = DynamicSupervisor()
    broken = Worker("broken", [], fail_starts=100)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            with pytest.raises(StartFailure) as info:
                await sup.start_child(broken.spec(start_retries=5))
            assert isinstance(info.value.__cause__, FileNotFoundError)
            assert broken.starts == 1
            assert sup.which_children() == []
            assert sup.statistics().start_failures == 1
            await sup.aclose()
    (failed,) = drain(sup)
    assert isinstance(failed, StartFailed) and failed.attempt == 1 and failed.retry_delay is None


async def test_restart_that_cannot_start_is_given_up_and_forgotten(
    autojump_clock: trio.abc.Clock,
) -> None:
    sup = DynamicSupervisor(random=lambda: 1.0)
    w = Worker("w", [])
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            await sup.start_child(w.spec(start_retries=2, on_start_failure=OnStartFailure.GIVE_UP))
            w.fail_starts = 100  # from now on the binary is gone
            w.crash()
            await trio.sleep(300)
            assert w.starts == 1 + 3
            assert sup.which_children() == []
            await sup.aclose()
    kinds = [type(e).__name__ for e in drain(sup)]
    assert kinds[-4:] == ["StartFailed", "StartFailed", "StartFailed", GaveUp.__name__]


async def test_restart_intensity_escalates(autojump_clock: trio.abc.Clock) -> None:
    sup = DynamicSupervisor(max_restarts=1, max_seconds=60)
    w = Worker("w", [])
    raised: list[SupervisorEscalation] = []

    async def supervise(*, task_status: trio.TaskStatus[None]) -> None:
        with pytest.raises(SupervisorEscalation) as info:
            await sup.run(task_status=task_status)
        raised.append(info.value)

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervise)
            await sup.start_child(w.spec(backoff=Backoff(initial=0, maximum=0)))
            w.crash()
            await trio.sleep(1)
            assert w.starts == 2
            w.crash()
    assert [e.child_id for e in raised] == ["w"]
    assert w.starts == 2


async def test_limits_and_misuse(autojump_clock: trio.abc.Clock) -> None:
    sup = DynamicSupervisor(max_children=2)
    with pytest.raises(RuntimeError):
        await sup.start_child(Worker("early", []).spec())
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            await sup.start_child(Worker("a", []).spec())
            with pytest.raises(ValueError):
                await sup.start_child(Worker("a", []).spec())
            await sup.start_child(Worker("b", []).spec())
            with pytest.raises(TooManyChildren):
                await sup.start_child(Worker("c", []).spec())
            await sup.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await sup.start_child(Worker("late", []).spec())
    with pytest.raises(ValueError):
        DynamicSupervisor(max_children=0)


async def test_caller_timeout_cancels_a_hanging_start(autojump_clock: trio.abc.Clock) -> None:
    sup = DynamicSupervisor()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            with pytest.raises(trio.TooSlowError):
                with trio.fail_after(2):
                    await sup.start_child(Worker("slow", [], never_started=True).spec())
            assert sup.which_children() == []
            assert sup.statistics().start_failures == 0
            await sup.aclose()


async def test_aclose_aborts_a_start_in_progress(autojump_clock: trio.abc.Clock) -> None:
    sup = DynamicSupervisor()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)

            async def starter() -> None:
                with pytest.raises(trio.ClosedResourceError):
                    await sup.start_child(Worker("slow", [], never_started=True).spec())

            nursery.start_soon(starter)
            await trio.sleep(1)
            assert [i.state for i in sup.which_children()] == [ChildState.STARTING]
            t0 = trio.current_time()
            await sup.aclose()
            assert trio.current_time() == t0
    assert sup.which_children() == []


async def test_terminate_child_is_bounded_even_for_a_stubborn_child(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[tuple[str, str, float]] = []
    sup = DynamicSupervisor()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            await sup.start_child(Worker("stubborn", log, hang=100).spec(shutdown_grace=2))
            await sup.terminate_child("stubborn")
            assert trio.current_time() == 2 + UNWIND_SECONDS
            await sup.aclose()
    assert drain(sup) == [ChildStarted("stubborn", "stubborn#1"), ChildExited("stubborn", Killed())]
