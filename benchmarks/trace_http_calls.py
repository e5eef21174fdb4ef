"""Where a Streamable HTTP call's server CPU goes, ours against the hypercorn
floor: user and system CPU, and system calls, per call.

    .venv/bin/python benchmarks/trace_http_calls.py                     # trio-mcp and floor, 2 rounds
    .venv/bin/python benchmarks/trace_http_calls.py --strace --calls 2000
    .venv/bin/python benchmarks/trace_http_calls.py --base ../main/src  # + the baseline's server

The servers of ``bench_http_neutral.py`` (``servers/``: ``trio-mcp`` with
JSON answers, ``floor``: hypercorn serving a do-nothing ASGI app), each in
its own process, driven by the raw HTTP/1.1 client of
``count_http_calls.py`` (keep-alive, one connection per caller), per era
(``handshake``, ``2026-07-28``) sequentially and with ``--concurrency`` in
flight, the targets interleaved over ``--rounds`` in a rotated order.
``--base DIR`` adds ``base``: our server with ``PYTHONPATH=DIR`` (the
``src`` of another checkout, such as main's), to compare before and after.

Per row, after a warm-up: the server's user and system CPU per call
(``/proc/<pid>/stat`` over ``--calls`` calls; clock ticks, so use a few
thousand calls), its context switches, and its garbage collections by
generation with their CPU time (a ``sitecustomize`` hook, :data:`GC_HOOK`); with ``--strace``, a second window
under ``strace -f -c`` attached to the server: its system calls per call, by
name. Absolute CPU figures depend on the load (printed); compare the ratios
of rows of the same round.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from statistics import median
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _procs import UrlServer, clock_ticks, text_table
from _report import label, load_average
from count_http_calls import FLOOR, HANDSHAKE, MODERN, OURS, drive, prepare

BASE = "base"
STRACE_ATTACH_TIMEOUT = 30.0
STRACE_STOP_TIMEOUT = 30.0
#: The system calls shown in their own column (the rest are summed in ``other``).
SHOWN = ("sendto", "recvfrom", "epoll_wait", "epoll_ctl", "futex", "getpid", "clock_gettime")


#: Loaded into every server process (``sitecustomize`` on its ``PYTHONPATH``):
#: counts the garbage collector's collections by generation and the CPU time
#: they take, written as JSON to ``$TRACE_GC_FILE`` on SIGUSR2.
GC_HOOK = """
import gc, json, os, signal, time

_counts = [0, 0, 0]
_seconds = [0.0, 0.0]


def _collected(phase, info):
    if phase == "start":
        _seconds[1] = time.thread_time()
    else:
        _counts[info["generation"]] += 1
        _seconds[0] += time.thread_time() - _seconds[1]


def _dump(*_):
    path = os.environ["TRACE_GC_FILE"]
    with open(path + ".tmp", "w") as out:
        json.dump({"collections": _counts, "seconds": _seconds[0]}, out)
    os.replace(path + ".tmp", path)


gc.callbacks.append(_collected)
signal.signal(signal.SIGUSR2, _dump)
"""
GC_READ_TIMEOUT = 10.0


def _command(target: str, base: Path | None) -> list[str]:
    """A target's server: ``base`` runs the server script of its own checkout
    (``base`` is that checkout's ``src``), as its code was benchmarked then."""
    script = "floor_http_server.py" if target == FLOOR else "trio_http_server.py"
    servers = base.parent / "benchmarks" / "servers" if target == BASE and base else HERE / "servers"
    return [sys.executable, str(servers / script)]


def _env(target: str, base: Path | None, hook_dir: str) -> dict[str, str]:
    path = [hook_dir] if target != BASE or base is None else [str(base), hook_dir]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "TRACE_GC_FILE": f"{hook_dir}/gc.json"}


def _gc_stats(pid: int, hook_dir: str) -> tuple[list[int], float]:
    """The server's collections by generation so far, and their CPU seconds (see :data:`GC_HOOK`)."""
    path = Path(hook_dir) / "gc.json"
    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + GC_READ_TIMEOUT
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the server wrote no GC counts")
        time.sleep(0.01)
    found = json.loads(path.read_text())
    return found["collections"], found["seconds"]


def _proc_cpu(pid: int) -> tuple[int, int, int]:
    """utime, stime (clock ticks) and context switches (voluntary + not) of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    switches = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
            switches += int(line.split()[1])
    return int(fields[11]), int(fields[12]), switches


def _strace_window(pid: int, run: Any) -> dict[str, int]:
    """System calls by name while ``run()`` runs, with ``strace -f -c`` attached to ``pid``."""
    with tempfile.NamedTemporaryFile(suffix=".strace") as out:
        proc = subprocess.Popen(
            ["strace", "-f", "-c", "-o", out.name, "-p", str(pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stderr is not None
            deadline = time.monotonic() + STRACE_ATTACH_TIMEOUT
            line = proc.stderr.readline()  # "strace: Process N attached"
            if "attached" not in line or time.monotonic() > deadline:
                raise RuntimeError(f"strace did not attach: {line!r}")
            run()
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=STRACE_STOP_TIMEOUT)
        return _parse_strace(Path(out.name).read_text())


def _parse_strace(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 5 and re.fullmatch(r"[\d.]+", parts[0]) and parts[-1] != "total":
            counts[parts[-1]] = int(parts[3])
    return counts


def measure(target: str, args: argparse.Namespace, round_no: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as hook_dir:
        Path(hook_dir, "sitecustomize.py").write_text(GC_HOOK)
        return _measure(target, args, round_no, hook_dir)


def _measure(target: str, args: argparse.Namespace, round_no: int, hook_dir: str) -> list[dict[str, Any]]:
    server = UrlServer(target, _command(target, args.base), _env(target, args.base, hook_dir))
    rows = []
    ticks = clock_ticks()
    try:
        host, _, port = server.url.split("/")[2].rpartition(":")
        addr = (host, int(port))
        ident = 1
        for era in args.eras:
            shape = prepare(addr, era, target != FLOOR)
            for concurrency in args.concurrencies:
                drive(addr, shape, max(300, args.calls // 3), concurrency, ident)
                ident += args.calls
                gc0, gc_s0 = _gc_stats(server.pid, hook_dir)
                user0, sys0, sw0 = _proc_cpu(server.pid)
                drive(addr, shape, args.calls, concurrency, ident)
                user1, sys1, sw1 = _proc_cpu(server.pid)
                gc1, gc_s1 = _gc_stats(server.pid, hook_dir)
                ident += args.calls
                row: dict[str, Any] = {
                    "round": round_no,
                    "target": target,
                    "era": era,
                    "concurrency": concurrency,
                    "load": load_average(),
                    "user_us": (user1 - user0) / ticks * 1e6 / args.calls,
                    "sys_us": (sys1 - sys0) / ticks * 1e6 / args.calls,
                    "switches": (sw1 - sw0) / args.calls,
                    "gc_per_1k": [1000 * (b - a) / args.calls for a, b in zip(gc0, gc1, strict=True)],
                    "gc_us": (gc_s1 - gc_s0) * 1e6 / args.calls,
                }
                if args.strace:

                    def window(
                        shape: Any = shape, concurrency: int = concurrency, first: int = ident
                    ) -> None:
                        drive(addr, shape, args.calls, concurrency, first)

                    counts = _strace_window(server.pid, window)
                    ident += args.calls
                    row["syscalls"] = {name: n / args.calls for name, n in counts.items()}
                rows.append(row)
    finally:
        server.stop()
    return rows


def report(rows: list[dict[str, Any]], targets: list[str]) -> None:
    keys = sorted({(r["era"], r["concurrency"]) for r in rows}, key=lambda k: (k[0] != HANDSHAKE, k[1]))
    header = ["target", "era", "conc", "user µs", "sys µs", "cpu µs", "gc µs", "gc0/1/2 per 1k", "switches"]
    header.append("syscalls")
    header += list(SHOWN) + ["other"]
    body = []
    for era, conc in keys:
        for target in targets:
            mine = [r for r in rows if r["target"] == target and r["era"] == era and r["concurrency"] == conc]
            if not mine:
                continue
            line = [target, era, label(conc)]
            user = median(r["user_us"] for r in mine)
            system = median(r["sys_us"] for r in mine)
            line += [f"{user:.0f}", f"{system:.0f}", f"{user + system:.0f}"]
            line.append(f"{median(r['gc_us'] for r in mine):.1f}")
            line.append("/".join(f"{median(r['gc_per_1k'][g] for r in mine):.1f}" for g in range(3)))
            line.append(f"{median(r['switches'] for r in mine):.2f}")
            traced = [r["syscalls"] for r in mine if "syscalls" in r]
            if traced:
                merged: dict[str, list[float]] = defaultdict(list)
                for counts in traced:
                    for name in set(counts) | set(SHOWN):
                        merged[name].append(counts.get(name, 0.0))
                per = {name: median(values) for name, values in merged.items()}
                line.append(f"{sum(per.values()):.2f}")
                line += [f"{per[name]:.2f}" for name in SHOWN]
                line.append(f"{sum(v for k, v in per.items() if k not in SHOWN):.2f}")
            else:
                line += ["n/a"] * (len(SHOWN) + 2)
            body.append(tuple(line))
    print(text_table(tuple(header), body, left=3))
    print("\nper round, ours / floor (cpu µs per call; user, sys):")
    for round_no in sorted({r["round"] for r in rows}):
        for era, conc in keys:
            pick = {
                r["target"]: r
                for r in rows
                if r["round"] == round_no and r["era"] == era and r["concurrency"] == conc
            }
            floor = pick.get(FLOOR)
            if floor is None:
                continue
            floor_cpu = floor["user_us"] + floor["sys_us"]
            parts = []
            for target in targets:
                if target == FLOOR or target not in pick:
                    continue
                r = pick[target]
                cpu = r["user_us"] + r["sys_us"]
                parts.append(
                    f"{target} {cpu / floor_cpu:.3f} (user {r['user_us'] / max(floor['user_us'], 1e-9):.2f},"
                    f" sys {r['sys_us'] / max(floor['sys_us'], 1e-9):.2f})"
                )
            print(f"  round {round_no} {era:<10} {label(conc):<4} load {floor['load']}: " + "; ".join(parts))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default=f"{OURS},{FLOOR}", help="comma-separated (default: %(default)s)")
    parser.add_argument("--base", type=Path, default=None, help="PYTHONPATH of the 'base' target")
    parser.add_argument(
        "--eras", default=f"{HANDSHAKE},{MODERN}", help="comma-separated (default: %(default)s)"
    )
    parser.add_argument("--calls", type=int, default=3000, help="calls per window (default 3000)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, targets rotated (default 2)")
    parser.add_argument("--concurrency", type=int, default=64, help="callers in flight of the c rows (64)")
    parser.add_argument("--seq-only", action="store_true", help="sequential calls only")
    parser.add_argument("--strace", action="store_true", help="also count system calls (strace -f -c)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    args.targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if args.base is not None and BASE not in args.targets:
        args.targets.insert(1, BASE)
    if unknown := [t for t in args.targets if t not in (OURS, BASE, FLOOR)]:
        parser.error(f"unknown targets {unknown}")
    if BASE in args.targets and args.base is None:
        parser.error("the base target needs --base")
    args.eras = [e.strip() for e in args.eras.split(",") if e.strip()]
    args.concurrencies = [1] if args.seq_only else [1, args.concurrency]
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    rows: list[dict[str, Any]] = []
    for round_no in range(1, args.rounds + 1):
        shift = (round_no - 1) % len(args.targets)
        for target in args.targets[shift:] + args.targets[:shift]:
            print(f"[trace_http_calls] round {round_no}: {target}", file=sys.stderr, flush=True)
            rows += measure(target, args, round_no)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{args.calls} calls per window; load average now {load_average()}")
        report(rows, args.targets)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
