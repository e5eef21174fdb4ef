"""One cancel scope per POST, and a task watching for its client going away
only once the POST has taken a while.

A :class:`Guard` is a POST's one cancel scope. A body that is not all there
when the POST starts is bounded by its deadline (``body_timeout``), lifted
once it is in; the answer's last write is bounded by ``write_timeout``; a
watcher cancels the scope when the client goes away. The common, fast POST
changes no deadline at all: the write's bound is set by the
:class:`DisconnectWatch` when it finds the write still going on (a write
that never blocks is over long before). Most POSTs are answered within milliseconds, and a task per POST
only to notice a client that left costs more than the answer, so the
:class:`DisconnectWatch` (one task per app) starts a watcher only for the
POSTs still running ``disconnect_watch_delay`` seconds after they asked for
one (in batches, at most every quarter of that delay).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ...transports._asgi import Receive

__all__ = ["DisconnectWatch", "Guard"]

log = logging.getLogger("trio_mcp.http.server")


class Guard:
    """One POST's cancel scope (see the module documentation). The POST's task
    runs inside ``with guard.scope:``; afterwards :attr:`body_timed_out` tells
    a stalled body (``408``) from the rest (the client went away, a write that
    timed out, the server stopping: the response is abandoned)."""

    __slots__ = (
        "done",
        "due",
        "gone",
        "now",
        "on_cancel",
        "on_gone",
        "on_watch",
        "over",
        "ping",
        "ping_interval",
        "queued",
        "reading",
        "receive",
        "scope",
        "serving",
        "watch",
        "watcher",
        "write_deadline",
    )

    def __init__(self, watch: DisconnectWatch, receive: Receive) -> None:
        self.watch = watch
        self.receive = receive
        self.now = watch.now
        self.scope = trio.CancelScope()
        self.reading = False
        #: No watcher wanted any more (answered, or the POST is over).
        self.done = False
        #: The POST is over: nothing left to watch or bound.
        self.over = False
        #: In the watch's queue (see :meth:`DisconnectWatch.add`).
        self.queued = False
        #: When the last write, once begun, is given up (applied by the watch).
        self.write_deadline = math.inf
        self.due = math.inf
        self.watcher: trio.CancelScope | None = None
        #: The watcher found the client gone (and cancelled the scope).
        self.gone = False
        #: While a request is served in the scope (see
        #: :meth:`~trio_mcp.serving.http.HttpSessionStream.serve_here`): the
        #: headers of the ``202`` that answers the POST if its peer cancels it
        #: (the client's ``notifications/cancelled``); None otherwise.
        self.serving: list[tuple[bytes, bytes]] | None = None
        #: Written every ``ping_interval`` seconds by the watcher, once it
        #: runs (an SSE answer's keep-alive comments; see :meth:`keep_alive`).
        self.ping: Callable[[], Awaitable[None]] | None = None
        self.ping_interval = math.inf
        #: Asked when the watcher finds the client gone: True when the POST
        #: goes on without it (a resumable SSE answer), else the scope is cancelled.
        self.on_gone: Callable[[], bool] | None = None
        #: Called once when the watcher starts (the POST has run for the delay).
        self.on_watch: Callable[[], Awaitable[None]] | None = None
        #: Writes the answer of a POST whose request was cancelled while served
        #: in its scope (see :attr:`cancelled_by_peer`), instead of a ``202``.
        self.on_cancel: Callable[[], Awaitable[None]] | None = None

    def keep_alive(self, ping: Callable[[], Awaitable[None]], interval: float) -> None:
        """Have the watcher also call ``ping`` whenever the client has heard
        nothing for ``interval`` seconds (the first time ``interval`` after it
        starts, ``disconnect_watch_delay`` on)."""
        self.ping = ping
        self.ping_interval = interval

    @property
    def body_timed_out(self) -> bool:
        return self.reading and self.scope.cancelled_caught

    @property
    def cancelled_by_peer(self) -> bool:
        """Whether the scope ended because the peer cancelled the request
        served in it (not a watcher, a deadline, or the body's)."""
        return self.serving is not None and self.scope.cancelled_caught and not self.gone

    def read_slowly(self, body_timeout: float) -> None:
        """The body is not all there yet: wait for it at most ``body_timeout``
        (in the scope)."""
        self.reading = True
        self.scope.deadline = self.now() + body_timeout

    def body_read(self) -> None:
        """The body is in: no deadline while the request is served."""
        self.reading = False
        self.scope.deadline = math.inf

    def watch_after_delay(self) -> None:
        """Cancel the scope if the client goes away, watched from
        ``disconnect_watch_delay`` seconds on (unless answered by then)."""
        if not self.queued:
            self.watch.add(self)

    def writing(self, timeout: float) -> None:
        """The last write begins: no watcher may cancel it (hypercorn reports
        a disconnect while it recycles the connection inside that very send),
        and ``timeout`` bounds it: at once when a watcher ran, otherwise set
        by the watch if it finds the write still going on (``timeout`` or
        ``disconnect_watch_delay``, whichever is longer)."""
        self.done = True
        watcher = self.watcher
        if watcher is not None:
            self.watcher = None
            watcher.cancel()
            self.scope.deadline = self.now() + timeout
            return
        self.write_deadline = self.now() + timeout
        if not self.queued:
            self.watch.add(self)

    def stop_watching(self) -> None:
        self.done = True
        watcher = self.watcher
        if watcher is not None:
            self.watcher = None
            watcher.cancel()

    def end(self) -> None:
        """The POST is over. The guard may wait in the watch's queue for up to
        ``disconnect_watch_delay`` more, so it lets go of what it was handed
        (the POST's ``receive``, the callbacks of its answer's writer): a
        fast server would otherwise keep every POST of the last second alive,
        and their cycles for the collector's full passes. ``on_cancel`` and
        ``serving`` stay for ``handle_post``'s last word, which clears them."""
        self.over = True
        self.stop_watching()
        self.receive = _over
        self.ping = self.on_gone = self.on_watch = None


async def _over() -> dict[str, Any]:
    """A finished POST's ``receive`` (see :meth:`Guard.end`)."""
    return {"type": "http.disconnect"}


class DisconnectWatch:
    """Starts the watchers of the :class:`Guard` s that ask for one, once
    their delay has passed (see the module documentation); :meth:`run` hosts them."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        #: Watchers start at most this often, each batch for every guard due by then.
        self.tick = delay / 4
        #: ``trio.current_time``, the run's clock read directly once :meth:`run` has started.
        self.now: Callable[[], float] = trio.current_time
        self._queue: deque[Guard] = deque()
        self._parked: trio.lowlevel.Task | None = None

    def guard(self, receive: Receive) -> Guard:
        return Guard(self, receive)

    def add(self, guard: Guard) -> None:
        guard.queued = True
        guard.due = self.now() + self.delay
        self._queue.append(guard)
        task = self._parked
        if task is not None:
            self._parked = None
            trio.lowlevel.reschedule(task)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start watchers as their guards come due, until cancelled."""
        self.now = trio.lowlevel.current_clock().current_time
        queue = self._queue

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._parked = None
            return trio.lowlevel.Abort.SUCCEEDED

        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                if not queue:
                    self._parked = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(abort)
                    continue
                await trio.sleep_until(queue[0].due + self.tick)
                now = self.now()
                while queue and queue[0].due <= now:
                    guard = queue.popleft()
                    guard.queued = False
                    if guard.over:
                        continue
                    if not guard.done:
                        if guard.watcher is None:  # (one watcher per guard, however often it was queued)
                            nursery.start_soon(_watch_one, guard)
                    elif guard.write_deadline < math.inf:
                        guard.scope.deadline = guard.write_deadline  # a write still going on

    def close(self) -> None:
        """The app stops: forget every guard (their POSTs are ending)."""
        self._queue.clear()


async def _watch_one(guard: Guard) -> None:
    with trio.CancelScope() as scope:
        if guard.done:
            return
        guard.watcher = scope
        try:
            if guard.on_watch is not None:
                await guard.on_watch()
            while True:
                message = None
                with trio.move_on_after(guard.ping_interval):
                    message = await guard.receive()
                if message is None:
                    if guard.ping is not None:
                        await guard.ping()
                elif message["type"] == "http.disconnect":
                    break
        except Exception as exc:  # the server's receive (or a ping) failed: nothing to watch
            log.debug("disconnect watcher: %r", exc)
            return
        if not guard.done:
            guard.gone = True
            on_gone = guard.on_gone
            if on_gone is not None and on_gone():
                guard.done = True  # the POST goes on without its client
                return
            guard.scope.cancel()
