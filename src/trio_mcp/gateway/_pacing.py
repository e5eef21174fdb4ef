"""The two helpers of the forwarding path (:mod:`._forward`) that decide
when something happens: :class:`Writer` (when a stream is written: one write
per scheduling turn) and :class:`Deadlines` (when a call has waited too
long: one timer per session)."""

from __future__ import annotations

import math
import select
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import trio
from msgspec import Raw

from ..transports import TransportError

__all__ = ["Deadlines", "Timed", "Writer"]


class Writer:
    """Messages for one stream, written by one task: what is queued in one
    scheduling turn goes out in one write (``send_batch``), and a message sent
    when nothing else is queued or being written goes out at once, in the
    caller's task, where the stream can (``send_nowait``)."""

    __slots__ = ("_batch", "_busy", "_nowait", "_task", "closed", "queue", "stream")

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.queue: list[Any] = []
        self.closed = False
        self._task: trio.lowlevel.Task | None = None
        self._busy = False
        self._nowait = getattr(stream, "send_nowait", None)
        self._batch = getattr(stream, "send_batch", None)

    def send_soon(self, message: Any, *, alone: bool = False) -> None:
        nowait = self._nowait
        if alone and nowait is not None and not self.queue and not self._busy and nowait(message):
            return
        self.queue.append(message)
        task = self._task
        if task is not None:
            self._task = None
            trio.lowlevel.reschedule(task)

    def send_data(self, data: bytes) -> None:
        """Send ``data`` (messages as JSON lines, each ending in a newline), at
        once where the stream can (in pieces of at most ``PIPE_BUF`` bytes,
        each written whole or not at all), else by the writer task."""
        if self.closed or not data:
            return
        nowait = self._nowait
        view = memoryview(data)[:-1]  # the stream ends each message with a newline
        if nowait is not None and not self.queue and not self._busy:
            pos, end = 0, len(view)
            while end - pos >= _ATOMIC:
                cut = data.rfind(b"\n", pos, pos + _ATOMIC)
                if cut < pos or not nowait(Raw(view[pos:cut])):
                    break  # a line longer than an atomic write, or the pipe is full
                pos = cut + 1
            else:
                if nowait(Raw(view[pos:])):
                    return
            view = view[pos:]
        self.queue.append(Raw(view))
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    async def write(self, messages: list[Any]) -> None:
        """Write ``messages`` now (one write where the stream can)."""
        if self._batch is not None:
            await self._batch(messages)
        else:
            for message in messages:
                await self.stream.send(message)

    def _wake(self) -> None:
        task = self._task
        if task is not None:
            self._task = None
            trio.lowlevel.reschedule(task)

    async def run(self) -> None:
        """Write what is queued until closed (or the stream breaks)."""

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._task = None
            return trio.lowlevel.Abort.SUCCEEDED

        while True:
            if not self.queue:
                if self.closed:
                    return
                self._task = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(abort)
                continue
            batch, self.queue = self.queue, []
            self._busy = True
            try:
                await self.write(batch)
            except TransportError:
                # The stream is gone: its reader sees it and ends the session
                # (a server's calls then fail through its peer).
                self.closed = True
                self.queue.clear()
                return
            finally:
                self._busy = False


#: The longest line (newline included) one write puts in a pipe whole or not at all.
_ATOMIC = select.PIPE_BUF


class Timed(Protocol):
    """What :class:`Deadlines` keeps: something with a deadline that may be done."""

    deadline: float
    done: bool


class Deadlines:
    """The deadlines of a session's forwarded calls, and one timer task that
    sleeps until the earliest.

    A call's deadline is the time it was sent plus its server's timeout, so
    the calls of one timeout expire in the order they were sent: one FIFO
    queue per timeout (appending and popping cost O(1), no heap). A call
    finished before its deadline stays queued until it reaches the head
    (where the next :meth:`add` to its queue, or the timer, drops it) or the
    queue is compacted (when it holds more than twice the calls still out),
    so finishing a call costs nothing here."""

    def __init__(self, expire: Callable[[Any], None], live: Callable[[], int]) -> None:
        self._queues: dict[float, deque[Any]] = {}
        self._expire = expire
        self._live = live
        #: When the timer wakes next (it may be earlier than any deadline still out).
        self._armed = math.inf
        self._scope: trio.CancelScope | None = None

    def add(self, call: Timed, timeout: float) -> None:
        """Watch ``call``, whose deadline is now + ``timeout`` (never earlier
        than that of a call added before it with the same timeout)."""
        queue = self.queue(timeout)
        while queue and queue[0].done:
            queue.popleft()
        queue.append(call)
        if call.deadline < self._armed and self._scope is not None:
            self._scope.cancel()  # the timer sleeps past this one: wake it to re-arm
        if len(queue) > 2 * self._live() + 64:
            self._compact(queue)

    def queue(self, timeout: float) -> deque[Any]:
        """The queue of the calls of ``timeout``: a caller may append calls to
        it (deadlines in order), then :meth:`settle` once for all of them."""
        queue = self._queues.get(timeout)
        if queue is None:
            queue = self._queues[timeout] = deque()
        return queue

    def settle(self) -> None:
        """Calls were appended to queues (see :meth:`queue`): compact them
        (finished calls left at a head wait for the timer, which wakes for the
        head and drops them) and wake the timer if it sleeps past a head."""
        limit = 2 * self._live() + 64
        for queue in self._queues.values():
            if len(queue) > limit:
                self._compact(queue)
            if queue and queue[0].deadline < self._armed and self._scope is not None:
                self._scope.cancel()

    @staticmethod
    def _compact(queue: deque[Any]) -> None:
        kept = [c for c in queue if not c.done]
        queue.clear()
        queue.extend(kept)

    def queued(self) -> int:
        """Entries queued, finished calls not dropped yet included."""
        return sum(len(queue) for queue in self._queues.values())

    async def run(self) -> None:
        while True:
            now = trio.current_time()
            armed = math.inf
            for queue in self._queues.values():
                while queue and (queue[0].done or queue[0].deadline <= now):
                    call = queue.popleft()
                    if not call.done:
                        self._expire(call)
                if queue and queue[0].deadline < armed:
                    armed = queue[0].deadline
            self._armed = armed
            with trio.CancelScope(deadline=armed) as scope:
                self._scope = scope
                await trio.sleep_forever()
            self._scope = None
