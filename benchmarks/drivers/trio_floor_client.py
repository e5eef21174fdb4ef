"""The trio floor of a stdio MCP *client*: what any trio client can do over
stdio, with no MCP stack (used by ``benchmarks/bench_stdio_clients.py``).

It spawns a server with ``trio.lowlevel.open_process`` (stdin and stdout
pipes), answers nothing, validates nothing but the shape of the answer, and:

* a caller encodes its request with msgspec into one shared buffer, files
  its task under the request's id and parks
  (``wait_task_rescheduled``);
* one writer task writes everything the callers of one scheduling turn
  buffered with one write;
* one reader task reads, decodes every complete line of a read with
  msgspec (the envelope and the result, a ``CallToolResult``-shaped Struct,
  in one pass) and reschedules the waiting caller with its result.

If the server's stdout ends, every waiting caller fails (``ConnectionError``).
A cancelled caller stops waiting (its request may already be written: no
``notifications/cancelled``); the benchmark never cancels one. Whatever an
MCP client on trio adds (sessions, typed errors, cancellation on the wire,
bounded queues) comes on top of this.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import outcome
import trio

HANDSHAKE_VERSION = "2025-11-25"
STOP_GRACE = 5.0


class Text(msgspec.Struct, tag_field="type", tag="text"):
    text: str


class CallResult(msgspec.Struct, rename="camel"):
    content: list[Text] = []
    is_error: bool = False


class Answer(msgspec.Struct):
    id: int | str | None = None
    result: Any = None
    error: Any = None


class ToolAnswer(msgspec.Struct):
    id: int | str | None = None
    result: CallResult | None = None
    error: Any = None


class Request(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    id: int
    method: str
    params: Any = None


class FloorClient:
    """JSON-RPC lines over a process's pipes (see the module doc)."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._pending: dict[int | str, trio.lowlevel.Task] = {}
        self._out = bytearray()
        self._writer: trio.lowlevel.Task | None = None
        self._next_id = 1
        self._encode_into = msgspec.json.Encoder().encode_into
        self._decode: Any = msgspec.json.Decoder(Answer).decode
        self._closed: str | None = None

    def expect_tool_results(self) -> None:
        """From now on, decode every answer as a ``tools/call`` result."""
        self._decode = msgspec.json.Decoder(ToolAnswer).decode

    async def call(self, method: str, params: Any) -> Any:
        if self._closed is not None:
            raise ConnectionError(self._closed)
        ident = self._next_id
        self._next_id = ident + 1
        out = self._out
        self._encode_into(Request("2.0", ident, method, params), out, -1)
        out += b"\n"
        writer = self._writer
        if writer is not None:
            self._writer = None
            trio.lowlevel.reschedule(writer)
        task = trio.lowlevel.current_task()
        self._pending[ident] = task

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._pending.pop(ident, None)
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)

    def notify(self, method: str) -> None:
        self._encode_into({"jsonrpc": "2.0", "method": method}, self._out, -1)
        self._out += b"\n"

    async def write_loop(self) -> None:
        def abort(_: Any) -> trio.lowlevel.Abort:
            self._writer = None
            return trio.lowlevel.Abort.SUCCEEDED

        while True:
            if not self._out:
                self._writer = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(abort)
            data = bytes(self._out)
            self._out.clear()
            await self._stdin.send_all(data)

    async def read_loop(self) -> None:
        carry = b""
        pending = self._pending
        reschedule = trio.lowlevel.reschedule
        value = outcome.Value
        try:
            while data := await self._stdout.receive_some(1 << 16):
                lines = (carry + data).split(b"\n")
                carry = lines.pop()
                decode = self._decode
                for line in lines:
                    msg = decode(line)
                    task = pending.pop(msg.id, None)
                    if task is None:
                        continue
                    if msg.error is not None:
                        reschedule(task, outcome.Error(RuntimeError(f"error answer: {msg.error!r}")))
                    else:
                        reschedule(task, value(msg.result))
        finally:
            self._closed = "the server closed its stdout"
            error = ConnectionError(self._closed)
            for task in pending.values():
                reschedule(task, outcome.Error(error))
            pending.clear()


@asynccontextmanager
async def open_floor_client(
    command: list[str], env: dict[str, str] | None = None
) -> AsyncIterator[tuple[FloorClient, int]]:
    """A floor client over a freshly spawned server, initialized (handshake
    era): ``(client, server pid)``. On exit: stdin closed, the server waited
    for (killed after :data:`STOP_GRACE`)."""
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        client = FloorClient(process)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.read_loop)
            nursery.start_soon(client.write_loop)
            await client.call(
                "initialize",
                {
                    "protocolVersion": HANDSHAKE_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "trio-floor-client", "version": "1.0"},
                },
            )
            client.notify("notifications/initialized")
            client.expect_tool_results()
            yield client, process.pid
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            assert process.stdin is not None
            await process.stdin.aclose()
            with trio.move_on_after(STOP_GRACE):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
