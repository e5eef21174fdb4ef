"""The routing relay of ``trio_routing_relay.py`` without trio: one blocking
OS thread per direction, the same decoding, id swapping and encoding.

    .venv/bin/python benchmarks/servers/thread_routing_relay.py COMMAND [ARGS...]

What a Python process that routes costs when no event loop stands between
a read and its write (a thread blocked in ``read`` is woken by the kernel
and writes at once): ``bench_stdio_neutral.py`` runs it as the
``thread-routing-relay`` row, next to ``routing-relay`` and ``c-relay``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from trio_routing_relay import Ids, encode_lines


def pump(src: int, dst: int, rewrite: Callable[[bytes], list[Any]]) -> None:
    """Relay the complete lines of ``src`` to ``dst``, rewritten, until ``src`` ends (then close ``dst``)."""
    rest = b""
    while True:
        data = os.read(src, 1 << 16)
        if not data:
            os.close(dst)
            return
        cut = data.rfind(b"\n") + 1
        if not cut:
            rest += data
            continue
        lines, rest = rest + data[:cut], data[cut:]
        out = memoryview(encode_lines(rewrite(lines)))
        while out:
            out = out[os.write(dst, out) :]


def main() -> int:
    child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    ids = Ids({"echo__echo": "echo"})
    assert child.stdin is not None and child.stdout is not None
    up = threading.Thread(target=pump, args=(0, child.stdin.fileno(), ids.to_server), daemon=True)
    down = threading.Thread(target=pump, args=(child.stdout.fileno(), 1, ids.to_client), daemon=True)
    up.start()
    down.start()
    up.join()
    child.wait()
    down.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
