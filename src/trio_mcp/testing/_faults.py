"""Fault injection: in-memory servers that can be killed or made to hang."""

from __future__ import annotations

from typing import Any

import trio

from ..server._lowlevel import LowLevelServer
from ..transports.memory import MemoryStream, Mode, memory_pair


class InMemoryServer:
    """A transport factory for :class:`~trio_mcp.actors.Connection` that
    serves ``app`` in memory; each call makes a fresh server instance.

    ``fail_starts`` makes the next N instances fail before reporting started
    (like a missing binary). ``instances`` lists every instance made.
    """

    def __init__(self, app: LowLevelServer, *, mode: Mode = "bytes", fail_starts: int = 0) -> None:
        self.app = app
        self.mode: Mode = mode
        self.fail_starts = fail_starts
        self.instances: list[ServerInstance] = []

    def __call__(self) -> ServerInstance:
        fail = self.fail_starts > 0
        if fail:
            self.fail_starts -= 1
        instance = ServerInstance(self.app, self.mode, fail=fail)
        self.instances.append(instance)
        return instance

    @property
    def current(self) -> ServerInstance:
        return self.instances[-1]


class ServerInstance:
    """One life of an in-memory server: a transport actor with fault switches."""

    def __init__(self, app: LowLevelServer, mode: Mode, *, fail: bool = False) -> None:
        self.app = app
        self.mode = mode
        self.fail = fail
        self.session: Any = None
        self._server_end: MemoryStream | None = None
        self._scope: trio.CancelScope | None = None
        self.stopped = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[MemoryStream] = trio.TASK_STATUS_IGNORED) -> None:
        if self.fail:
            raise OSError("simulated start failure (no such server)")
        client_end, server_end = memory_pair(mode=self.mode)
        self._server_end = server_end
        try:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                self.session = await self.app.start_session(server_end, nursery)
                task_status.started(client_end)
                await self.session.peer.wait_stopped()
                nursery.cancel_scope.cancel()
        finally:
            self.stopped.set()

    async def kill(self) -> None:
        """Die abruptly, as a killed process: the client sees its stream end."""
        if self._server_end is not None:
            await self._server_end.aclose()
        if self._scope is not None:
            self._scope.cancel()

    def hang(self) -> None:
        """Stop answering anything while keeping the stream open."""
        if self.session is not None:
            self.session.peer._nursery.cancel_scope.cancel()  # the server's read loop and workers stop
