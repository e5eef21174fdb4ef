"""Run a server script under cProfile (CPU time), from its first SIGUSR1 to its exit.

    python benchmarks/servers/profiled.py OUT.prof SCRIPT [ARGS...]
    python benchmarks/servers/profiled.py OUT.prof -m MODULE [ARGS...]

For ``bench_stdio_cpu.py --profile``: the driver sends SIGUSR1 after its
warm-up, so the profile covers the measured calls only; the stats are
written to ``OUT.prof`` when the script returns (its stdin closed).
"""

import cProfile
import runpy
import signal
import sys
import time


def main() -> None:
    out, script = sys.argv[1], sys.argv[2]
    profile = cProfile.Profile(time.process_time)  # CPU time: preemption does not count
    signal.signal(signal.SIGUSR1, lambda *_: profile.enable())
    module = script == "-m"
    sys.argv = sys.argv[3:] if module else sys.argv[2:]
    try:
        if module:
            runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(script, run_name="__main__")
    except SystemExit:
        pass
    finally:
        profile.disable()
        profile.dump_stats(out)


if __name__ == "__main__":
    main()
