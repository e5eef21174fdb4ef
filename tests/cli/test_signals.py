"""How a serving command takes its signals (``_gateway_cmd._until_signal``):
the first SIGTERM/SIGINT starts the graceful stops main registered, a
repeated SIGTERM changes nothing (a service manager may signal the whole
process group, and a parent its workers too), a second SIGINT cancels main
at once, SIGHUP runs its handlers. Real signals, sent to this process."""

from __future__ import annotations

import os
import signal

import trio

from trio_mcp.cli._gateway_cmd import Signals, _until_signal

TIMEOUT = 10.0


class Main:
    """A main that registers a graceful stop (it never finishes by itself) and a SIGHUP handler."""

    def __init__(self) -> None:
        self.stops = 0
        self.stopping = trio.Event()
        self.hup = trio.Event()
        self.finish = trio.Event()
        self.cancelled = False

    def stop(self) -> float:
        self.stops += 1
        self.stopping.set()
        return 60.0

    async def __call__(self, signals: Signals) -> None:
        signals.on_stop(self.stop)
        signals.on_hup(self.hup.set)
        try:
            await self.finish.wait()
        except trio.Cancelled:
            self.cancelled = True
            raise


async def _run(main: Main, statuses: list[int]) -> None:
    statuses.append(await _until_signal(main, (signal.SIGTERM, signal.SIGINT)))


async def test_a_repeated_sigterm_leaves_the_graceful_stop_alone() -> None:
    main, statuses = Main(), []
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_run, main, statuses)
            await trio.testing.wait_all_tasks_blocked()
            os.kill(os.getpid(), signal.SIGTERM)
            await main.stopping.wait()
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGHUP)  # handled after the second SIGTERM
            await main.hup.wait()
            assert main.stops == 1 and not main.cancelled
            main.finish.set()  # the graceful stop completes: main returns
    assert statuses == [0] and not main.cancelled


async def test_a_second_sigint_cancels_main_at_once() -> None:
    main, statuses = Main(), []
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_run, main, statuses)
            await trio.testing.wait_all_tasks_blocked()
            os.kill(os.getpid(), signal.SIGINT)
            await main.stopping.wait()
            os.kill(os.getpid(), signal.SIGINT)
    assert statuses == [130] and main.cancelled and main.stops == 1


async def test_without_a_graceful_stop_the_signal_cancels_main() -> None:
    cancelled = trio.Event()
    statuses: list[int] = []

    async def main(signals: Signals) -> None:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    async def run() -> None:
        statuses.append(await _until_signal(main, (signal.SIGTERM, signal.SIGINT)))

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()
            os.kill(os.getpid(), signal.SIGTERM)
    assert cancelled.is_set() and statuses == [0]
