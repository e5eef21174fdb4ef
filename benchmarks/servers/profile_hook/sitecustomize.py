"""A profiling window in every Python process started with this directory on
``PYTHONPATH`` and ``TRIO_MCP_PROFILE_DIR`` set (``profile_workers.py``: the
parent and the worker processes of ``trio-mcp run --workers N``).

``SIGUSR1`` starts cProfile and a trio instrument (task steps) in the
process's main thread; ``SIGUSR2`` stops both and writes ``DIR/PID.prof``,
then ``DIR/PID.json`` (the counts, the process's CPU ns over the window, and
the garbage collector's collections and ns per generation over it).
"""

from __future__ import annotations

import os

if os.environ.get("TRIO_MCP_PROFILE_DIR"):
    import cProfile
    import gc
    import json
    import signal
    import time
    from pathlib import Path
    from typing import Any

    _where = Path(os.environ["TRIO_MCP_PROFILE_DIR"])

    class _Steps:
        def __init__(self) -> None:
            self.steps = 0

        def before_task_step(self, task: Any) -> None:
            self.steps += 1

    class _Collections:
        """The collector's passes and their time, per generation."""

        def __init__(self) -> None:
            self.counts = [0, 0, 0]
            self.ns = [0, 0, 0]
            self._began = 0

        def __call__(self, phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                self._began = time.perf_counter_ns()
            else:
                generation = info["generation"]
                self.counts[generation] += 1
                self.ns[generation] += time.perf_counter_ns() - self._began

    _state: dict[str, Any] = {}

    def _start(signum: int, frame: Any) -> None:
        import trio

        steps = _Steps()
        try:
            trio.lowlevel.add_instrument(steps)
        except RuntimeError:  # not inside trio.run (the process is starting or ending)
            steps.steps = -1
        collections = _Collections()
        gc.callbacks.append(collections)
        profiler = cProfile.Profile()
        _state.update(profiler=profiler, steps=steps, collections=collections, began=time.process_time_ns())
        profiler.enable()

    def _stop(signum: int, frame: Any) -> None:
        import trio

        profiler = _state.pop("profiler", None)
        if profiler is None:
            return
        profiler.disable()
        collections = _state.pop("collections")
        gc.callbacks.remove(collections)
        steps = _state.pop("steps")
        if steps.steps >= 0:
            try:
                trio.lowlevel.remove_instrument(steps)
            except (RuntimeError, KeyError):
                pass
        pid = os.getpid()
        profiler.dump_stats(_where / f"{pid}.prof")
        counts = {
            "steps": steps.steps,
            "cpu_ns": time.process_time_ns() - _state.pop("began"),
            "gc_counts": collections.counts,
            "gc_ns": collections.ns,
        }
        (_where / f"{pid}.json.part").write_text(json.dumps(counts))
        os.replace(_where / f"{pid}.json.part", _where / f"{pid}.json")

    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
