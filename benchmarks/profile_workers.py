"""Where the CPU of ``trio-mcp run … --workers N`` goes, per call and per
process: Python function calls and trio task steps of the parent and of
each worker over a window of the neutral Node driver's load, side by side
with another checkout (``--base``). Counts per call do not depend on the
machine's load, unlike CPU time.

    .venv/bin/python benchmarks/profile_workers.py --redis unix:///tmp/r.sock
    .venv/bin/python benchmarks/profile_workers.py --redis URL --base ../main --top 30

The targets are ``bench_workers_http.py``'s (``--targets``; default: ``1
process`` and ``2 workers`` stateless, and with ``--redis`` ``1 process
redis`` and ``2 workers redis link`` with their connections spread evenly
over the workers and each request sent to the next worker in turn, on a
free connection to it, so half the session calls are forwarded to their
owner). Every process of the
server starts with ``servers/profile_hook`` on ``PYTHONPATH``: ``SIGUSR1``
opens a cProfile window in it, ``SIGUSR2`` closes it and writes the stats.
The driver runs for ``--prime`` + ``--window`` + 4 s; the window opens
``--prime`` seconds in. A call is an ``echo`` tool call (counted in the
workers' profiles, whichever served it). Printed per row: Python calls and
task steps per call of each process and of them all; with ``--top`` and
``--base``, the functions whose calls per call differ most between this tree
and the base (``--keep DIR`` keeps every process's stats, to compare two
rows with ``pstats``).
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _procs import DRIVERS, ROOT, clock_ticks, node_binary, text_table
from _report import load_average
from bench_workers_http import HANDSHAKE, MODERN, ONE, ONE_REDIS, TWO, TWO_LINK, CliServer, targets

HOOK = HERE / "servers" / "profile_hook"
#: Seconds the processes may take to write their profiles once asked.
DUMP_TIMEOUT = 60.0


def _env(base: Path | None, where: Path) -> dict[str, str]:
    env = dict(os.environ, TRIO_MCP_PROFILE_DIR=str(where))
    # The base's src first; this tree's as it is (the editable install, or a PYTHONPATH given).
    first = (
        [str(base / "src")] if base else [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    env["PYTHONPATH"] = os.pathsep.join([*first, str(HOOK)])
    return env


def profile_row(name: str, era: str, base: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    options, _, pinned, _ = args.servers[name]
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        saved = dict(os.environ)
        os.environ.update(_env(base, where))
        try:
            server = CliServer(options)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        try:
            if "--redis" in options:
                server.wait_leased()
            driver = {
                "url": server.url,
                "eras": [era],
                "handshake": True,
                "sessions": 64,
                "pinSessions": "--redis" in options,
                # Unpinned: per request the next worker, as bench_workers_http --balance.
                "rotate": False if pinned else "process",
                "balanceWorkers": len(server.pids) - 1 if "--redis" in options else 0,
                "concurrencies": [args.concurrency],
                "connections": 64,
                "warmup": 0.5,
                "prime": args.prime,
                "seconds": args.window + 4,
                "serverPid": server.pids,
                "clockTicks": clock_ticks(),
            }
            cmd = [args.node, str(DRIVERS / "http_driver.mjs"), json.dumps(driver)]
            load = load_average()
            proc = subprocess.Popen(
                cmd, cwd=ROOT, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
            )
            try:
                time.sleep(args.prime + 2)
                for pid in server.pids:
                    os.kill(pid, signal.SIGUSR1)
                time.sleep(args.window)
                for pid in server.pids:
                    os.kill(pid, signal.SIGUSR2)
                deadline = time.monotonic() + DUMP_TIMEOUT
                while not all((where / f"{pid}.json").exists() for pid in server.pids):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{name}: no profile within {DUMP_TIMEOUT:g} s")
                    time.sleep(0.1)
                out, _ = proc.communicate(timeout=args.prime + args.window + 120)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
        finally:
            server.stop()
        procs = []
        for index, pid in enumerate(server.pids):
            if args.keep is not None:
                args.keep.mkdir(parents=True, exist_ok=True)
                slug = f"{name} {era}".replace(" ", "-")
                shutil.copyfile(where / f"{pid}.prof", args.keep / f"{slug}-{index}.prof")
            stats = pstats.Stats(str(where / f"{pid}.prof"))
            counts = json.loads((where / f"{pid}.json").read_text())
            raw: Any = stats.stats  # type: ignore[attr-defined]
            funcs = {f"{Path(f[0]).name}:{f[1]}({f[2]})": v[1] for f, v in raw.items()}
            echo = sum(
                v[1] for f, v in raw.items() if f[2] == "echo" and f[0].endswith("trio_http_server.py")
            )
            role = (
                "parent" if index == 0 and len(server.pids) > 1 else f"worker {index}" if index else "process"
            )
            procs.append(
                {
                    "role": role,
                    "calls": sum(v[1] for v in raw.values()),
                    "echo": echo,
                    **counts,
                    "funcs": funcs,
                }
            )
    calls = sum(p["echo"] for p in procs)
    if not calls:
        raise RuntimeError(f"{name} {era}: no echo call in the window ({out!r})")
    tree = "base" if base else "this tree"
    return {"impl": name, "era": era, "tree": tree, "load": load, "tool_calls": calls, "procs": procs}


def per_call(row: dict[str, Any]) -> dict[str, float]:
    """Function calls per tool call, all processes summed."""
    total: dict[str, float] = {}
    for proc in row["procs"]:
        for func, n in proc["funcs"].items():
            total[func] = total.get(func, 0.0) + n / row["tool_calls"]
    return total


def _gc(proc: dict[str, Any], n: int) -> str:
    """The collector's time per call, per generation (the hook's ``gc.callbacks``)."""
    ns = proc.get("gc_ns")
    return "" if ns is None else " / ".join(f"{v / 1e3 / n:.1f}" for v in ns)


def report(rows: list[dict[str, Any]], top: int) -> None:
    lines = []
    for row in rows:
        n = row["tool_calls"]
        for proc in row["procs"]:
            lines.append(
                [
                    row["tree"],
                    f"{row['impl']} {row['era']}",
                    proc["role"],
                    f"{proc['echo'] / n:.2f}",
                    f"{proc['calls'] / n:,.0f}",
                    f"{proc['steps'] / n:.1f}",
                    f"{proc['cpu_ns'] / 1e3 / n:,.0f}",
                    _gc(proc, n),
                ]
            )
        lines.append(
            [
                row["tree"],
                f"{row['impl']} {row['era']}",
                "all",
                "1",
                f"{sum(p['calls'] for p in row['procs']) / n:,.0f}",
                f"{sum(p['steps'] for p in row['procs']) / n:.1f}",
                f"{sum(p['cpu_ns'] for p in row['procs']) / 1e3 / n:,.0f}",
                _gc(
                    {"gc_ns": [sum(p.get("gc_ns", (0, 0, 0))[g] for p in row["procs"]) for g in range(3)]}, n
                ),
            ]
        )
    head = [
        "tree",
        "row",
        "process",
        "share of tools run",
        "Python calls/call",
        "task steps/call",
        "CPU µs/call (profiled)",
        "collector µs/call, gen 0/1/2",
    ]
    print(text_table(head, lines))
    if top:
        pairs = [
            (a, b)
            for a in rows
            for b in rows
            if a["impl"] == b["impl"] and a["era"] == b["era"] and a["tree"] != "base" and b["tree"] == "base"
        ]
        pairs += [
            (a, b)
            for a in rows
            for b in rows
            if a["tree"] == b["tree"]
            and (a["impl"], b["impl"]) in ((TWO_LINK, ONE_REDIS), (TWO, ONE))
            and a["era"] == b["era"]
        ]
        for a, b in pairs:
            pa, pb = per_call(a), per_call(b)
            diff = sorted(
                ((pa.get(f, 0) - pb.get(f, 0), f) for f in pa.keys() | pb.keys()), key=lambda d: -abs(d[0])
            )
            print(
                f"\n{a['tree']} {a['impl']} - {b['tree']} {b['impl']} ({a['era']}), calls per call, top {top}:"
            )
            print(f"  total {sum(pa.values()) - sum(pb.values()):+,.0f}")
            for d, f in diff[:top]:
                print(f"  {d:+9.1f}  {pa.get(f, 0):8.1f}  {f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", metavar="URL", default=None, help="also the session rows, on this Redis")
    parser.add_argument("--base", type=Path, default=None, help="another checkout, profiled side by side")
    parser.add_argument("--targets", default=None, help="comma-separated rows (default: see the module)")
    parser.add_argument("--eras", default=f"{MODERN},{HANDSHAKE}", help="eras of the stateless rows")
    parser.add_argument("--window", type=float, default=6.0, help="seconds profiled per row (6)")
    parser.add_argument("--prime", type=float, default=4.0, help="seconds of load before the window (4)")
    parser.add_argument("--concurrency", type=int, default=64, help="callers in flight (64)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds (1)")
    parser.add_argument("--top", type=int, default=0, help="functions whose counts differ most")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    parser.add_argument(
        "--keep", type=Path, default=None, help="copy each process's cProfile stats here (for pstats callers)"
    )
    args = parser.parse_args(argv)
    args.node = node_binary()
    args.servers = targets(args.redis, link=True)
    names = (
        args.targets.split(",")
        if args.targets
        else [ONE, TWO] + ([ONE_REDIS, TWO_LINK] if args.redis else [])
    )
    rows = []
    for round_no in range(args.rounds):
        for name in names:
            eras = args.eras.split(",") if "--stateless" in args.servers[name][0] else [HANDSHAKE]
            for era in eras:
                for base in [None, args.base] if args.base else [None]:
                    print(
                        f"[profile_workers] round {round_no + 1}: {name} {era} {'base' if base else ''}",
                        file=sys.stderr,
                    )
                    rows.append(profile_row(name, era, base, args))
    report(rows, args.top)
    if args.json:
        print(json.dumps([{k: v for k, v in r.items()} for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
