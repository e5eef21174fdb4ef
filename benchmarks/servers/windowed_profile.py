"""Run a benchmark server with a profiling window that signals open and close
(``profile_forwarded.py`` uses it on both nodes of a cluster).

    python benchmarks/servers/windowed_profile.py PREFIX SERVER.py [server options]

``SIGUSR1`` starts cProfile and a trio instrument (task steps, tasks
spawned) in the server's trio thread; ``SIGUSR2`` stops both and writes
``PREFIX.prof`` (cProfile's stats) and then ``PREFIX.json`` (the counts), so
a caller waits for the JSON file. The server is run as ``__main__`` with
the options given, whichever trio-mcp the interpreter imports (another
checkout's, with ``PYTHONPATH``).
"""

from __future__ import annotations

import cProfile
import json
import os
import runpy
import signal
import sys
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from count_http_calls import _StepCounter


def main() -> None:
    prefix, script, *options = sys.argv[1:]
    profiler = cProfile.Profile()
    steps = _StepCounter()

    def start(signum: int, frame: Any) -> None:
        nonlocal profiler
        profiler = cProfile.Profile()  # each window counted alone
        steps.steps = steps.spawned = 0
        trio.lowlevel.add_instrument(steps)
        profiler.enable()

    def stop(signum: int, frame: Any) -> None:
        profiler.disable()
        trio.lowlevel.remove_instrument(steps)
        profiler.dump_stats(prefix + ".prof")
        partial = prefix + ".json.part"
        with open(partial, "w") as out:
            json.dump({"steps": steps.steps, "spawned": steps.spawned}, out)
        os.replace(partial, prefix + ".json")

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = [script, *options]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
