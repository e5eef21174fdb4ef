"""Static supervisor: ordering, strategies, restart types, intensity, backoff,
graceful stop, start failures, events. Deterministic (autojump clock)."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

from trio_mcp.supervision import (
    UNWIND_SECONDS,
    Backoff,
    ChildExited,
    ChildInfo,
    ChildSpec,
    ChildStarted,
    ChildState,
    Crashed,
    Escalated,
    GaveUp,
    Killed,
    Normal,
    OnStartFailure,
    Restart,
    RestartScheduled,
    Shutdown,
    StartFailed,
    StartFailure,
    Strategy,
    Supervisor,
    SupervisorEscalation,
    SupervisorEvent,
    current_child,
)

LIMIT = 600  # virtual seconds; every test body runs under fail_after(LIMIT)
NO_BACKOFF = Backoff(initial=0, maximum=0)


class Handle:
    """The value a test child reports started: lets the test end that incarnation."""

    def __init__(self, name: str, n: int) -> None:
        self.name, self.n = name, n
        self.finish = trio.Event()
        self.exc: BaseException | None = None

    def crash(self, exc: BaseException | None = None) -> None:
        self.exc = exc or RuntimeError(f"{self.name} crashed")
        self.finish.set()

    def exit(self) -> None:
        self.finish.set()

    def __repr__(self) -> str:
        return f"<Handle {self.name}#{self.n}>"


class Kids:
    """Makes start functions and records what they did, with virtual times."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.times: list[tuple[str, str, float]] = []
        self.starts: collections.Counter[str] = collections.Counter()
        self.handles: dict[str, Handle] = {}

    def note(self, what: str, name: str) -> None:
        self.log.append((what, name))
        self.times.append((what, name, trio.current_time()))

    def of(self, what: str) -> list[str]:
        return [name for w, name in self.log if w == what]

    def child(
        self,
        name: str,
        *,
        start_delay: float = 0.0,
        fail_starts: int = 0,
        cleanup: float = 0.0,
        hang_shielded: float = 0.0,
        never_started: bool = False,
    ) -> Callable[..., Any]:
        async def start(*, task_status: trio.TaskStatus[Handle] = trio.TASK_STATUS_IGNORED) -> None:
            self.starts[name] += 1
            n = self.starts[name]
            self.note("begin", name)
            await trio.sleep(start_delay)
            if n <= fail_starts:
                raise OSError(f"{name}: no such binary")
            if never_started:
                await trio.sleep_forever()
            handle = self.handles[name] = Handle(name, n)
            self.note("started", name)
            task_status.started(handle)
            try:
                await handle.finish.wait()
                if handle.exc is not None:
                    raise handle.exc
            finally:
                self.note("exit", name)
                if cleanup:
                    with current_child().cleanup_scope() as scope:
                        await trio.sleep(cleanup)
                    self.note("cut" if scope.cancelled_caught else "cleaned", name)
                if hang_shielded:
                    with trio.CancelScope(shield=True):
                        await trio.sleep(hang_shielded)

        return start


class Events:
    """Reads a supervisor's events channel; keeps everything it saw."""

    def __init__(self, sup: Supervisor) -> None:
        self.rx = sup.events()
        self.seen: list[SupervisorEvent] = []

    async def until(self, cls: type, **fields: Any) -> Any:
        with trio.fail_after(LIMIT):
            while True:
                event = await self.rx.receive()
                self.seen.append(event)
                if isinstance(event, cls) and all(getattr(event, k) == v for k, v in fields.items()):
                    return event

    def drain(self) -> list[SupervisorEvent]:
        while True:
            try:
                self.seen.append(self.rx.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel):
                return self.seen

    def of(self, cls: type) -> list[Any]:
        return [e for e in self.drain() if isinstance(e, cls)]


def spec(kids: Kids, name: str, **options: Any) -> ChildSpec:
    child_options = {
        k: options.pop(k)
        for k in ("start_delay", "fail_starts", "cleanup", "hang_shielded", "never_started")
        if k in options
    }
    options.setdefault("backoff", NO_BACKOFF)
    return ChildSpec(id=name, start=kids.child(name, **child_options), **options)


def values(sup: Supervisor) -> dict[Any, Any]:
    return {info.id: info.value for info in sup.which_children()}


def states(sup: Supervisor) -> dict[Any, ChildState]:
    return {info.id: info.state for info in sup.which_children()}


def fixed(*rolls: float) -> Callable[[], float]:
    it: Iterator[float] = itertools.chain(rolls, itertools.repeat(rolls[-1]))
    return lambda: next(it)


# --- ordered start, reverse stop ---------------------------------------------


async def test_children_start_one_after_another_then_supervisor_reports_started(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, n, start_delay=1.0) for n in "abc"])
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            assert await nursery.start(sup.run) is None
            # each child began only after the previous one reported started
            assert kids.times == [
                ("begin", "a", 0.0),
                ("started", "a", 1.0),
                ("begin", "b", 1.0),
                ("started", "b", 2.0),
                ("begin", "c", 2.0),
                ("started", "c", 3.0),
            ]
            assert trio.current_time() == 3.0
            assert [(i.id, i.state) for i in sup.which_children()] == [
                ("a", ChildState.RUNNING),
                ("b", ChildState.RUNNING),
                ("c", ChildState.RUNNING),
            ]
            assert all(isinstance(i.value, Handle) for i in sup.which_children())
            await sup.aclose()
    assert kids.of("exit") == ["c", "b", "a"]


async def test_aclose_stops_in_reverse_order_and_run_returns(autojump_clock: trio.abc.Clock) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, n) for n in "abcd"])
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            await sup.aclose()
            assert states(sup) == dict.fromkeys("abcd", ChildState.STOPPED)
    assert kids.of("exit") == ["d", "c", "b", "a"]
    assert [(e.id, e.reason) for e in events.of(ChildExited)] == [(n, Shutdown()) for n in "dcba"]
    with pytest.raises(RuntimeError):
        await sup.run()


async def test_parent_cancellation_stops_in_reverse_order_with_each_grace(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, n, cleanup=1.0) for n in "abc"])
    with trio.fail_after(LIMIT):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(sup.run)
                t0 = trio.current_time()
                scope.cancel()
        # one second of cleanup each, one child after the other
        assert trio.current_time() - t0 == 3.0
    assert scope.cancelled_caught
    assert kids.log[-6:] == [
        ("exit", "c"),
        ("cleaned", "c"),
        ("exit", "b"),
        ("cleaned", "b"),
        ("exit", "a"),
        ("cleaned", "a"),
    ]


async def test_cancelled_during_initial_start_stops_started_children(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, n, start_delay=2.0, cleanup=1.0) for n in "abc"])
    with trio.fail_after(LIMIT):
        with trio.move_on_after(3) as scope:  # while b is starting
            async with trio.open_nursery() as nursery:
                await nursery.start(sup.run)
        assert scope.cancelled_caught
        assert trio.current_time() == 3 + 1  # a's cleanup, nothing more
    assert kids.log == [
        ("begin", "a"),
        ("started", "a"),
        ("begin", "b"),
        ("exit", "a"),
        ("cleaned", "a"),
    ]
    assert states(sup) == dict.fromkeys("abc", ChildState.STOPPED)


async def test_events_channel_ends_when_run_returns(autojump_clock: trio.abc.Clock) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, "a")])
    got: list[SupervisorEvent] = []

    async def consume() -> None:
        async for event in sup.events():
            got.append(event)

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            await nursery.start(sup.run)
            await sup.aclose()
    assert [type(e) for e in got] == [ChildStarted, ChildExited]


# --- strategies ---------------------------------------------------------------


async def test_one_for_one_restarts_only_the_failed_child(autojump_clock: trio.abc.Clock) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, n) for n in "abc"], strategy=Strategy.ONE_FOR_ONE)
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            events.drain()  # the initial ChildStarted events
            before = values(sup)
            del kids.log[:]
            before["b"].crash()
            await events.until(ChildStarted, id="b")
            after = values(sup)
            assert after["a"] is before["a"] and after["c"] is before["c"]
            assert after["b"].n == 2
            assert kids.log == [("exit", "b"), ("begin", "b"), ("started", "b")]
            await sup.aclose()


async def test_one_for_all_stops_others_in_reverse_and_restarts_all_in_order(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, n) for n in "abc"], strategy=Strategy.ONE_FOR_ALL)
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            events.drain()  # the initial ChildStarted events
            del kids.log[:]
            b = values(sup)["b"]
            b.crash()
            await events.until(ChildStarted, id="c")
            assert kids.of("exit") == ["b", "c", "a"]
            assert kids.of("started") == ["a", "b", "c"]
            assert {k: h.n for k, h in values(sup).items()} == {"a": 2, "b": 2, "c": 2}
            assert [(e.id, e.reason) for e in events.of(ChildExited)] == [
                ("b", Crashed(b.exc)),
                ("c", Shutdown()),
                ("a", Shutdown()),
            ]
            assert [e.id for e in events.of(RestartScheduled)] == ["a", "b", "c"]
            await sup.aclose()


async def test_rest_for_one_restarts_the_failed_child_and_those_after_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, n) for n in "abcd"], strategy=Strategy.REST_FOR_ONE)
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            events.drain()  # the initial ChildStarted events
            a = values(sup)["a"]
            del kids.log[:]
            values(sup)["b"].crash()
            await events.until(ChildStarted, id="d")
            assert kids.of("exit") == ["b", "d", "c"]
            assert kids.of("started") == ["b", "c", "d"]
            assert values(sup)["a"] is a
            assert {k: h.n for k, h in values(sup).items()} == {"a": 1, "b": 2, "c": 2, "d": 2}
            await sup.aclose()


async def test_group_restart_does_not_restart_a_temporary_sibling(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    sup = Supervisor(
        [spec(kids, "a", restart=Restart.TEMPORARY), spec(kids, "b")],
        strategy=Strategy.ONE_FOR_ALL,
    )
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            events.drain()  # the initial ChildStarted events
            values(sup)["b"].crash()
            await events.until(ChildStarted, id="b")
            await trio.sleep(100)
            assert kids.starts == {"a": 1, "b": 2}
            assert states(sup) == {"a": ChildState.STOPPED, "b": ChildState.RUNNING}
            await sup.aclose()


# --- restart types -------------------------------------------------------------


@pytest.mark.parametrize(
    ("restart", "crash", "restarted"),
    [
        (Restart.PERMANENT, False, True),
        (Restart.PERMANENT, True, True),
        (Restart.TRANSIENT, False, False),
        (Restart.TRANSIENT, True, True),
        (Restart.TEMPORARY, False, False),
        (Restart.TEMPORARY, True, False),
    ],
)
async def test_restart_types(
    autojump_clock: trio.abc.Clock, restart: Restart, crash: bool, restarted: bool
) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, "x", restart=restart)])
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            handle = values(sup)["x"]
            handle.crash() if crash else handle.exit()
            exited = await events.until(ChildExited, id="x")
            assert exited.reason == (Crashed(handle.exc) if crash else Normal())
            await trio.sleep(100)  # far beyond any backoff
            assert kids.starts["x"] == (2 if restarted else 1)
            assert states(sup)["x"] is (ChildState.RUNNING if restarted else ChildState.STOPPED)
            assert sup.statistics().restarts == int(restarted)
            await sup.aclose()


# --- restart intensity -----------------------------------------------------------


async def test_too_many_restarts_escalate_after_stopping_children_in_reverse(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, n) for n in "abc"], max_restarts=2, max_seconds=10)
    events = Events(sup)
    boom = ValueError("third strike")

    async def crash_b_three_times() -> None:
        await events.until(ChildStarted, id="c")
        for n in range(3):
            await trio.sleep(1)
            values(sup)["b"].crash(boom if n == 2 else None)
            if n < 2:
                await events.until(ChildStarted, id="b")

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(crash_b_three_times)
            with pytest.raises(SupervisorEscalation) as info:
                await sup.run()  # the public edge: a bare exception, no group
    exc = info.value
    assert exc.child_id == "b"
    assert exc.reason == Crashed(boom)
    assert exc.__cause__ is boom
    assert kids.starts == {"a": 1, "b": 3, "c": 1}
    assert kids.of("exit")[-3:] == ["b", "c", "a"]
    seen = events.drain()
    escalated = [e for e in seen if isinstance(e, Escalated)]
    assert escalated == [Escalated("b", exc)]
    assert seen.index(escalated[0]) < len(seen) - 2  # c and a exit after it
    assert sup.statistics().restarts == 3
    assert states(sup) == dict.fromkeys("abc", ChildState.STOPPED)


async def test_intensity_window_slides(autojump_clock: trio.abc.Clock) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, "x")], max_restarts=1, max_seconds=10)
    events = Events(sup)

    async def drive() -> None:
        await events.until(ChildStarted, id="x")
        values(sup)["x"].crash()  # t=0: one restart in the window
        await events.until(ChildStarted, id="x")
        await trio.sleep(11)
        values(sup)["x"].crash()  # t=11: the first one left the window
        await events.until(ChildStarted, id="x")
        assert sup.statistics().recent_restarts == 1
        await trio.sleep(5)
        values(sup)["x"].crash()  # t=16: two within 10 s -> escalate

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drive)
            with pytest.raises(SupervisorEscalation):
                await sup.run()
    assert trio.current_time() == 16
    assert kids.starts["x"] == 3


# --- backoff ------------------------------------------------------------------------


async def test_backoff_grows_with_jitter_and_restarts_wait_for_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    backoff = Backoff(initial=1, multiplier=2, maximum=5, reset_after=1000)
    rolls = fixed(1.0, 0.5, 1.0, 1.0, 1.0, 0.0)
    sup = Supervisor([spec(kids, "x", backoff=backoff)], max_restarts=100, random=rolls)
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            for _ in range(6):
                crashed_at = trio.current_time()
                values(sup)["x"].crash()
                scheduled = await events.until(RestartScheduled, id="x")
                await events.until(ChildStarted, id="x")
                assert trio.current_time() - crashed_at == scheduled.delay
            await sup.aclose()
    assert [(e.attempt, e.delay) for e in events.of(RestartScheduled)] == [
        (1, 1.0),  # cap 1
        (2, 1.0),  # cap 2, rolled 0.5
        (3, 4.0),
        (4, 5.0),  # capped at maximum
        (5, 5.0),
        (6, 0.0),  # full jitter reaches zero
    ]


async def test_backoff_attempts_reset_only_after_a_healthy_period(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    backoff = Backoff(initial=1, multiplier=2, maximum=100, reset_after=10)
    sup = Supervisor([spec(kids, "x", backoff=backoff)], max_restarts=100, random=fixed(1.0))
    events = Events(sup)

    async def crash_after(uptime: float) -> RestartScheduled:
        await trio.sleep(uptime)
        values(sup)["x"].crash()
        scheduled: RestartScheduled = await events.until(RestartScheduled, id="x")
        await events.until(ChildStarted, id="x")
        return scheduled

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            assert (await crash_after(0)).attempt == 1
            assert (await crash_after(0)).attempt == 2
            assert (await crash_after(9.5)).attempt == 3  # not healthy long enough
            assert (await crash_after(10)).attempt == 1  # healthy for reset_after
            assert (await crash_after(0)).delay == 2.0
            await sup.aclose()


@pytest.mark.parametrize("how", ["aclose", "cancel"])
async def test_backoff_sleep_ends_at_once_on_shutdown(autojump_clock: trio.abc.Clock, how: str) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, "x", backoff=Backoff(initial=30, maximum=30))], random=fixed(1.0))
    events = Events(sup)
    with trio.fail_after(LIMIT):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(sup.run)
                values(sup)["x"].crash()
                assert (await events.until(RestartScheduled, id="x")).delay == 30
                assert states(sup)["x"] is ChildState.PENDING
                t0 = trio.current_time()
                if how == "aclose":
                    await sup.aclose()
                else:
                    scope.cancel()
        assert trio.current_time() == t0
    assert kids.starts["x"] == 1
    assert states(sup)["x"] is ChildState.STOPPED


# --- graceful stop ---------------------------------------------------------------------


async def test_cleanup_within_grace_is_a_shutdown(autojump_clock: trio.abc.Clock) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, "x", cleanup=2.0, shutdown_grace=5.0)])
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            t0 = trio.current_time()
            await sup.aclose()
            assert trio.current_time() - t0 == 2.0
    assert kids.log[-2:] == [("exit", "x"), ("cleaned", "x")]
    assert events.of(ChildExited) == [ChildExited("x", Shutdown())]


async def test_cleanup_beyond_grace_is_hard_cancelled(autojump_clock: trio.abc.Clock) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, "x", cleanup=10.0, shutdown_grace=3.0)])
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            t0 = trio.current_time()
            await sup.aclose()
            assert trio.current_time() - t0 == 3.0
    assert kids.log[-2:] == [("exit", "x"), ("cut", "x")]
    assert events.of(ChildExited) == [ChildExited("x", Killed())]


async def test_stop_waits_for_each_child_before_stopping_the_previous(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    sup = Supervisor(
        [
            spec(kids, "a", cleanup=1.0),
            spec(kids, "b", cleanup=50.0, shutdown_grace=2.0),
            spec(kids, "c", cleanup=1.0),
        ]
    )
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            await sup.aclose()
    assert [(w, n, t) for w, n, t in kids.times if w in ("exit", "cleaned", "cut")] == [
        ("exit", "c", 0.0),
        ("cleaned", "c", 1.0),
        ("exit", "b", 1.0),
        ("cut", "b", 3.0),
        ("exit", "a", 3.0),
        ("cleaned", "a", 4.0),
    ]


async def test_child_that_outlives_its_grace_is_reported_killed_and_skipped(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, "a"), spec(kids, "b", hang_shielded=100.0, shutdown_grace=2.0)])
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            await sup.aclose()  # returns once the nursery is empty (trio cannot abandon)
            assert trio.current_time() == 100.0
    exits = [(w, n, t) for w, n, t in kids.times if w == "exit"]
    # the supervisor moved on to "a" when b's grace (+ unwind) ran out
    assert exits == [("exit", "b", 0.0), ("exit", "a", 2.0 + UNWIND_SECONDS)]
    assert events.of(ChildExited) == [ChildExited("b", Killed()), ChildExited("a", Shutdown())]


async def test_child_context() -> None:
    seen: list[tuple[Any, bool, bool]] = []

    async def start(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        ctx = current_child()
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            seen.append((ctx.id, ctx.stopping, ctx.stop_deadline is not None))

    with pytest.raises(RuntimeError):
        current_child()
    sup = Supervisor([ChildSpec(id=("k", 1), start=start)])
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            await sup.aclose()
    assert seen == [(("k", 1), True, True)]


# --- start failures ------------------------------------------------------------------------


async def test_start_failure_retries_with_backoff_then_gives_up(autojump_clock: trio.abc.Clock) -> None:
    kids = Kids()
    sup = Supervisor(
        [
            spec(kids, "a"),
            spec(
                kids,
                "b",
                fail_starts=1000,
                start_retries=2,
                on_start_failure=OnStartFailure.GIVE_UP,
                backoff=Backoff(initial=1, multiplier=2),
            ),
            spec(kids, "c"),
        ],
        random=fixed(1.0),
    )
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            # c waited for b's attempts at t=0, 1, 3 (ordered start)
            assert [t for w, n, t in kids.times if n == "b"] == [0.0, 1.0, 3.0]
            assert [t for w, n, t in kids.times if (w, n) == ("started", "c")] == [3.0]
            await trio.sleep(300)  # no crash loop
            assert kids.starts == {"a": 1, "b": 3, "c": 1}
            assert states(sup) == {
                "a": ChildState.RUNNING,
                "b": ChildState.FAILED,
                "c": ChildState.RUNNING,
            }
            assert sup.statistics().start_failures == 3
            assert sup.statistics().restarts == 0
            await sup.aclose()
    failed = events.of(StartFailed)
    assert [(e.id, e.attempt, e.retry_delay) for e in failed] == [
        ("b", 1, 1.0),
        ("b", 2, 2.0),
        ("b", 3, None),
    ]
    assert all(isinstance(e.exc, OSError) for e in failed)
    (gave_up,) = events.of(GaveUp)
    assert gave_up.id == "b" and gave_up.exc.attempts == 3
    assert gave_up.exc.__cause__ is failed[-1].exc
    assert not any(isinstance(e, ChildExited) and e.id == "b" for e in events.seen)


async def test_start_failure_escalates_from_nursery_start(autojump_clock: trio.abc.Clock) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, "a"), spec(kids, "b", fail_starts=1000, start_retries=1), spec(kids, "c")])
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            with pytest.raises(SupervisorEscalation) as info:
                await nursery.start(sup.run)
    assert info.value.child_id == "b"
    failure = info.value.reason
    assert isinstance(failure, StartFailure) and failure.attempts == 2
    assert isinstance(failure.__cause__, OSError)
    assert info.value.__cause__ is failure
    assert kids.starts == {"a": 1, "b": 2}
    assert kids.of("exit") == ["a"]


async def test_start_timeout_is_a_start_failure(autojump_clock: trio.abc.Clock) -> None:
    kids = Kids()
    sup = Supervisor(
        [
            spec(
                kids,
                "x",
                never_started=True,
                start_timeout=5,
                start_retries=0,
                on_start_failure=OnStartFailure.GIVE_UP,
            )
        ]
    )
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            assert trio.current_time() == 5
            await sup.aclose()
    (failed,) = events.of(StartFailed)
    assert isinstance(failed.exc, trio.TooSlowError)
    assert states(sup) == {"x": ChildState.FAILED}


async def test_returning_without_started_is_a_start_failure() -> None:
    async def start(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        return None

    sup = Supervisor([ChildSpec(id="x", start=start, start_retries=0)])
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            with pytest.raises(SupervisorEscalation) as info:
                await nursery.start(sup.run)
    failure = info.value.reason
    assert isinstance(failure, StartFailure)
    assert isinstance(failure.__cause__, RuntimeError)


async def test_failed_restarts_are_bounded_and_not_counted_as_restarts(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    starts_ok_once = kids.child("x", fail_starts=0)
    calls = 0

    async def start(*, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise FileNotFoundError("binary vanished")
        await starts_ok_once(task_status=task_status)

    sup = Supervisor(
        [
            ChildSpec(
                id="x",
                start=start,
                start_retries=3,
                on_start_failure=OnStartFailure.GIVE_UP,
                backoff=Backoff(initial=1, maximum=8),
            )
        ],
        max_restarts=1,
        random=fixed(1.0),
    )
    events = Events(sup)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            values(sup)["x"].crash()
            await events.until(GaveUp, id="x")
            await trio.sleep(300)
            assert calls == 1 + 4  # the good start, then 1 + start_retries attempts
            assert states(sup) == {"x": ChildState.FAILED}
            assert sup.statistics().restarts == 1
            await sup.aclose()
    assert [e.retry_delay for e in events.of(StartFailed)] == [1.0, 2.0, 4.0, None]


# --- events and statistics -------------------------------------------------------------------


async def test_event_sequence_and_statistics(autojump_clock: trio.abc.Clock) -> None:
    kids = Kids()
    sup = Supervisor(
        [spec(kids, "a"), spec(kids, "b", backoff=Backoff(initial=4, maximum=4))],
        random=fixed(0.25),
    )
    events = Events(sup)
    assert sup.statistics().running == 0
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            first = values(sup)
            stats = sup.statistics()
            assert (stats.children, stats.running, stats.restarts) == (2, 2, 0)
            first["b"].crash()
            await events.until(RestartScheduled)
            assert sup.statistics().running == 1
            assert sup.which_children()[1] == ChildInfo("b", ChildState.PENDING, None)
            await events.until(ChildStarted, id="b")
            second = values(sup)
            stats = sup.statistics()
            assert (stats.running, stats.restarts, stats.recent_restarts) == (2, 1, 1)
            await trio.sleep(10)
            assert sup.statistics().recent_restarts == 0
            await sup.aclose()
    assert events.drain() == [
        ChildStarted("a", first["a"]),
        ChildStarted("b", first["b"]),
        ChildExited("b", Crashed(first["b"].exc)),
        RestartScheduled("b", 1.0, 1),
        ChildStarted("b", second["b"]),
        ChildExited("b", Shutdown()),
        ChildExited("a", Shutdown()),
    ]
    assert sup.statistics().events_dropped == 0


async def test_slow_event_consumer_loses_oldest_events_without_blocking(
    autojump_clock: trio.abc.Clock,
) -> None:
    kids = Kids()
    sup = Supervisor([spec(kids, n) for n in "abcde"], event_buffer=2)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)  # five events into a buffer of two
            assert sup.statistics().events_dropped == 3
            rx = sup.events()
            assert [rx.receive_nowait().id, rx.receive_nowait().id] == ["d", "e"]
            with pytest.raises(trio.WouldBlock):
                rx.receive_nowait()
            rx.close()  # a consumer that went away does not break supervision
            await sup.aclose()
    assert kids.of("exit") == list("edcba")
    assert sup.statistics().events_dropped == 3 + 5 - 2


def test_invalid_options() -> None:
    with pytest.raises(ValueError):
        Supervisor([], max_restarts=-1)
    with pytest.raises(ValueError):
        Supervisor([], max_seconds=0)
    with pytest.raises(ValueError):
        Supervisor([], event_buffer=0)
    dup = ChildSpec(id="x", start=Kids().child("x"))
    with pytest.raises(ValueError):
        Supervisor([dup, dup])
