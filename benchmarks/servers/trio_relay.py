"""The floor of any trio stdio gateway: bytes relayed, nothing understood.

    .venv/bin/python benchmarks/servers/trio_relay.py COMMAND [ARGS...]

Spawns ``COMMAND`` and relays its stdin and stdout, one trio task per
direction: wait until readable, one read, one write. No parsing, no ids, no
deadlines: what is left of a gateway once everything it decides is taken
away (a read from the client, a write to the server, a read from it, a write
to the client). ``bench_gateway.py`` and ``bench_stdio_cpu.py`` run it as the
``relay`` row: the cost a gateway written on trio cannot go below.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Awaitable, Callable

import trio


async def write_all(dst: int, data: bytes) -> None:
    """Write all of ``data`` to the non-blocking ``dst``, waiting while it is full."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(dst, view)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(dst)
            continue
        view = view[n:]


async def pump(src: int, dst: int) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends (both non-blocking)."""
    while True:
        try:
            data = os.read(src, 1 << 16)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(src)
            continue
        if not data:
            return
        await write_all(dst, data)


Pump = Callable[[int, int], Awaitable[None]]


async def relay(child: subprocess.Popen[bytes], upstream: Pump = pump, downstream: Pump = pump) -> int:
    """Relay this process's stdin to ``child`` with ``upstream`` and the
    child's stdout to this process's stdout with ``downstream``, until stdin
    ends and the child exits; its exit status."""
    assert child.stdin is not None and child.stdout is not None
    to_child, from_child = child.stdin.fileno(), child.stdout.fileno()
    for fd in (0, 1, to_child, from_child):
        os.set_blocking(fd, False)
    async with trio.open_nursery() as nursery:

        async def answers() -> None:
            await downstream(from_child, 1)
            nursery.cancel_scope.cancel()

        nursery.start_soon(answers)
        await upstream(0, to_child)
        child.stdin.close()  # the server sees EOF and exits; downstream drains its last answers
    return await trio.to_thread.run_sync(child.wait)


if __name__ == "__main__":
    sys.exit(trio.run(relay, subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)))
