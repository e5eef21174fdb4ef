"""What the session test suites (``tests/sessions``, ``tests/modern``) share
to record a connection: the stream wrapper that writes every message its side
sends into a wire (including what an ``"inline"`` pair serves in the
caller's task), and :class:`Inbox`, an awaitable recording callback.

A wire is the suite's own (each validates against its era's rules); it needs
``record(side, message, related)`` returning an entry, ``forget(entry)``, and,
for raw garbage frames, ``record_raw(side, data)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from trio_mcp.transports._base import RELATED_REQUEST


class RecordingStream:
    """A MessageStream that records what its side sends into a wire."""

    def __init__(self, inner: Any, side: str, wire: Any) -> None:
        self.inner = inner
        self.side = side
        self.wire = wire

    async def send(self, message: Any) -> None:
        # Recorded first: once delivered, the other side may answer (and
        # record its answer) before this task runs again. A server's message
        # relates to the request its handler serves.
        related = RELATED_REQUEST.get() if self.side == "server" else None
        entry = self.wire.record(self.side, message, related)
        try:
            await self.inner.send(message)
        except BaseException:
            self.wire.forget(entry)
            raise

    async def send_raw(self, data: bytes) -> None:
        entry = self.wire.record_raw(self.side, data)
        try:
            await self.inner.send_raw(data)
        except BaseException:
            self.wire.forget(entry)
            raise

    async def receive(self) -> Any:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()

    # An "inline" pair serves requests in the caller's task: the request, the
    # handler's notifications and the answer never cross the pair, so they
    # are recorded as they are served.

    def set_inline(self, server: Any) -> None:
        self.inner.set_inline(server)

    @property
    def inline(self) -> Any:
        return self._recording(self.inner.inline)

    @property
    def inline_in_order(self) -> Any:
        return self._recording(self.inner.inline_in_order)

    def _recording(self, serve: Any) -> Any:
        """``serve`` (an inline server of this side's requests, or None),
        recording what it serves."""
        if serve is None:
            return None
        record, side = self.wire.record, self.side
        other = "server" if side == "client" else "client"

        async def recorded(request: Any, sink: Any) -> Any:
            record(side, request, RELATED_REQUEST.get() if side == "server" else None)

            async def recording_sink(note: Any) -> None:
                record(other, note, request.id)
                await sink(note)

            reply = await serve(request, recording_sink)
            record(other, reply, request.id)
            return reply

        return recorded

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Inbox:
    """An async callback that records its calls; ``await inbox.wait_for(n)``
    returns once ``n`` calls arrived (no sleeps, no polling)."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._waiters: list[tuple[int, trio.Event]] = []

    async def __call__(self, *args: Any) -> None:
        self.put(args[0] if len(args) == 1 else (args if args else None))

    def put(self, item: Any) -> None:
        self.items.append(item)
        for n, event in list(self._waiters):
            if len(self.items) >= n:
                event.set()
                self._waiters.remove((n, event))

    def signal(self, value: Any) -> Callable[[], Any]:
        """An async no-argument callback that records ``value``."""

        async def callback() -> None:
            self.put(value)

        return callback

    async def wait_for(self, count: int) -> list[Any]:
        if len(self.items) < count:
            event = trio.Event()
            self._waiters.append((count, event))
            await event.wait()
        return self.items

    def __len__(self) -> int:
        return len(self.items)
