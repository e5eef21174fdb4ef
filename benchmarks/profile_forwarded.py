"""Where a forwarded call's cost goes: CPU, Python calls and trio task steps
per call on the ingress and on the owner, local and forwarded, side by side
with another checkout (``--base``).

    .venv/bin/python benchmarks/profile_forwarded.py                      # 2,000 calls, c1 and c16
    .venv/bin/python benchmarks/profile_forwarded.py --base ../main --rounds 2 --top 25

A ``redis-server`` on a Unix socket in a temporary directory and, per tree,
two nodes of ``servers/trio_http_server.py --redis URL --direct-link``
(``--inbox``: also a pair without ``--direct-link``), each run under
``servers/windowed_profile.py``. A handshake-era session is opened on the
owner, then ``tools/call echo`` goes to the owner (``local``) or to the other
node (``forwarded``), from this process (a raw HTTP/1.1 client of
``count_http_calls.py``, one keep-alive connection per caller; its own work
is not counted). Per row, after a warm-up, two windows of ``--calls`` calls:
the first measures each process's CPU (``/proc/PID/task/*/schedstat``, in
ns: the owner, the ingress, redis-server) and the wall time per call; the
second runs with cProfile and a trio instrument switched on by signal in
both nodes (Python function calls, task steps, tasks spawned). Each node's
background work (lease, inbox reader, keeper), measured once over an idle
window, is taken off in proportion to a window's length (on a loaded
machine a window lasts long, and the background would count as the calls').
Rows and trees interleave within each round; the load average is printed
with every row: compare within a run.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _procs import UrlServer, text_table
from _report import load_average
from bench_cluster import start_redis, wait_leased
from count_http_calls import drive, prepare

SERVER = HERE / "servers" / "trio_http_server.py"
WINDOW = HERE / "servers" / "windowed_profile.py"
#: How long a node may take to write its profile once asked.
DUMP_TIMEOUT = 60.0


#: Seconds of the idle windows (no calls) that measure each node's background
#: work (lease, inbox reader, keeper), taken off the calls' windows.
IDLE = 3.0


def cpu_ns(pid: int) -> int:
    """CPU time a process's threads have used so far (``schedstat``: ns, not ticks)."""
    return sum(int(p.read_text().split()[0]) for p in Path(f"/proc/{pid}/task").glob("*/schedstat"))


class Node:
    def __init__(self, name: str, python: str, env: dict[str, str], url: str, link: bool, tmp: Path) -> None:
        self.prefix = str(tmp / f"profile-{name}")
        self.background: dict[str, float] = {}
        cmd = [python, str(WINDOW), self.prefix, str(SERVER), "--redis", url, "--node-id", name]
        self.server = UrlServer(name, [*cmd, *(["--direct-link"] if link else [])], env=env)
        wait_leased(self.server)
        host, port = self.server.url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        self.addr = (host, int(port))

    def idle(self) -> None:
        """The node's background work per second: CPU ns and counts, over :data:`IDLE` seconds."""
        began, cpu = time.perf_counter(), cpu_ns(self.server.pid)
        self.start()
        time.sleep(IDLE)
        counts = self.stop()
        seconds = time.perf_counter() - began
        self.background = {
            "cpu_ns": (cpu_ns(self.server.pid) - cpu) / seconds,
            **{k: counts[k] / seconds for k in ("py_calls", "steps", "spawned")},
        }

    def start(self) -> None:
        Path(self.prefix + ".json").unlink(missing_ok=True)
        os.kill(self.server.pid, signal.SIGUSR1)

    def stop(self) -> dict[str, Any]:
        os.kill(self.server.pid, signal.SIGUSR2)
        done = Path(self.prefix + ".json")
        deadline = time.monotonic() + DUMP_TIMEOUT
        while not done.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {self.server.name} wrote no profile")
            time.sleep(0.02)
        counts = json.loads(done.read_text())
        stats = pstats.Stats(self.prefix + ".prof")
        counts["py_calls"] = stats.total_calls  # type: ignore[attr-defined]
        counts["stats"] = stats
        return counts


def measure(
    owner: Node, ingress: Node, redis: int, calls: int, concurrency: int, warmup: int
) -> dict[str, Any]:
    """Both windows of a row; every figure per call, each node's background
    work (its idle rate times the window's length) taken off."""
    shape = prepare(owner.addr, "handshake", True)
    drive(ingress.addr, shape, warmup, concurrency, 1)
    nodes = [owner] if owner is ingress else [owner, ingress]
    pids = [owner.server.pid, ingress.server.pid, redis]
    before, began = [cpu_ns(p) for p in pids], time.perf_counter()
    drive(ingress.addr, shape, calls, concurrency, 10**6)
    wall = time.perf_counter() - began
    cpu = [(cpu_ns(p) - b) / 1e3 for p, b in zip(pids, before, strict=True)]
    for node in nodes:
        node.start()
    began = time.perf_counter()
    drive(ingress.addr, shape, calls, concurrency, 2 * 10**6)
    profiled = time.perf_counter() - began
    counted = [node.stop() for node in nodes]
    row: dict[str, Any] = {
        "owner_cpu_us": (cpu[0] - owner.background["cpu_ns"] * wall / 1e3) / calls,
        "ingress_cpu_us": 0.0
        if owner is ingress
        else (cpu[1] - ingress.background["cpu_ns"] * wall / 1e3) / calls,
        "redis_cpu_us": cpu[2] / calls,
        "wall_us": wall * 1e6 / calls * concurrency,
    }
    for role, node, c in zip(("owner", "ingress"), nodes, counted, strict=False):
        for key in ("py_calls", "steps", "spawned"):
            row[f"{role}_{key}"] = (c[key] - node.background[key] * profiled) / calls
        row[f"{role}_stats"] = c["stats"]
    return row


def by_module(stats: pstats.Stats, calls: int) -> list[str]:
    """Python calls per call, by the package folder of the function called."""
    sums: dict[str, float] = {}
    for (path, _line, name), (_cc, ncalls, _t, _c, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = "/".join(Path(path).parts[-3:-1]) if path != "~" else "builtins"
        sums[where] = sums.get(where, 0) + ncalls
    ranked = sorted(sums.items(), key=lambda kv: kv[1], reverse=True)
    return [f"    {n / calls:7.1f}  {where}" for where, n in ranked if n / calls >= 1]


def top(stats: pstats.Stats, calls: int, count: int, by_calls: bool = True) -> list[str]:
    entries = stats.stats  # type: ignore[attr-defined]
    ranked = sorted(entries.items(), key=lambda kv: kv[1][1 if by_calls else 2], reverse=True)[:count]
    lines = []
    for (path, line, name), (_cc, ncalls, tottime, cumtime, _callers) in ranked:
        where = f"{Path(path).parent.name}/{Path(path).name}:{line}" if path != "~" else "~"
        lines.append(
            f"    {ncalls / calls:7.1f} calls {tottime * 1e6 / calls:7.1f} µs self {cumtime * 1e6 / calls:8.1f} µs cum  {name} ({where})"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per window (default 2,000)")
    parser.add_argument("--warmup", type=int, default=500, help="warm-up calls per row (default 500)")
    parser.add_argument("--concurrency", default="1,16", help="callers in flight, comma-separated (1,16)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--base", metavar="TREE", default=None, help="also another checkout (its src/)")
    parser.add_argument("--inbox", action="store_true", help="also a node pair forwarding through Redis")
    parser.add_argument("--top", type=int, default=0, help="the N functions called most, forwarded rows")
    parser.add_argument("--by-time", action="store_true", help="--top by own time (wall clock) instead")
    parser.add_argument("--keep", metavar="DIR", default=None, help="write each row's cProfile stats there")
    args = parser.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    trees = {"this": os.environ.copy()}
    if args.base:
        base = dict(os.environ)
        base["PYTHONPATH"] = str(Path(args.base).resolve() / "src")
        trees["base"] = base
    pairs = [(tree, link) for tree in trees for link in ((True, False) if args.inbox else (True,))]
    with tempfile.TemporaryDirectory(prefix="profile-forwarded-") as tmp:
        redis, url = start_redis(Path(tmp))
        nodes: dict[tuple[str, bool], tuple[Node, Node]] = {}
        try:
            for tree, link in pairs:
                tag = f"{tree}{'-link' if link else '-inbox'}"
                env = trees[tree]
                owner = Node(f"{tag}-a", sys.executable, env, url, link, Path(tmp))
                ingress = Node(f"{tag}-b", sys.executable, env, url, link, Path(tmp))
                nodes[tree, link] = (owner, ingress)
            for owner, ingress in nodes.values():
                owner.idle()
                ingress.idle()
            results: list[tuple[str, int, int, str, dict[str, Any]]] = []
            for n in range(1, args.rounds + 1):
                load = load_average()
                order = pairs if n % 2 else pairs[::-1]
                for c in concurrencies:
                    for tree, link in order:
                        owner, ingress = nodes[tree, link]
                        for kind, via in (("local", owner), ("forwarded", ingress)):
                            name = f"{tree} {'link' if link else 'inbox'} {kind}"
                            print(f"[profile_forwarded] round {n} c{c} {name}", file=sys.stderr, flush=True)
                            row = measure(owner, via, redis.pid, args.calls, c, args.warmup)
                            row["load"] = f"{load}→{load_average()}"
                            if args.keep:
                                Path(args.keep).mkdir(parents=True, exist_ok=True)
                                for role in ("owner", "ingress"):
                                    if f"{role}_stats" in row:
                                        stem = f"{name.replace(' ', '-')}-c{c}-r{n}-{role}.prof"
                                        row[f"{role}_stats"].dump_stats(str(Path(args.keep) / stem))
                            results.append((name, c, n, tree, row))
        finally:
            for owner, ingress in nodes.values():
                owner.server.stop()
                ingress.server.stop()
            redis.terminate()
            redis.wait(10)
    header = ["row", "c", "rnd", "owner µs", "ingress µs", "redis µs", "wall µs", "py calls o/i",
              "steps o/i", "spawns o/i", "load"]  # fmt: skip
    body = []
    for name, c, n, _tree, row in results:
        body.append([
            name, str(c), str(n), f"{row['owner_cpu_us']:.0f}", f"{row['ingress_cpu_us']:.0f}",
            f"{row['redis_cpu_us']:.0f}", f"{row['wall_us']:.0f}",
            f"{row['owner_py_calls']:.0f}/{row.get('ingress_py_calls', 0):.0f}",
            f"{row['owner_steps']:.1f}/{row.get('ingress_steps', 0):.1f}",
            f"{row['owner_spawned']:.2f}/{row.get('ingress_spawned', 0):.2f}", row["load"],
        ])  # fmt: skip
    print(
        f"{args.calls} calls per window, {args.warmup} warm-up; CPU per call from /proc (schedstat), counts "
        f"from cProfile and a trio instrument; each node's idle rate (over {IDLE:g} s) taken off"
    )
    for (tree, link), pair in nodes.items():
        rates = ", ".join(
            f"{n.server.name} {n.background['cpu_ns'] / 1e3:.0f} µs CPU, {n.background['py_calls']:.0f} calls"
            for n in pair
        )
        print(f"  background per second, {tree} {'link' if link else 'inbox'}: {rates}")
    print(text_table(header, body))
    if args.top:
        for name, c, n, _tree, row in results:
            if n == 1:
                for role in ("owner", "ingress") if name.endswith("forwarded") else ("owner",):
                    what = "of most own time" if args.by_time else "called most"
                    print(f"\n{name} c{c}, {role}: the {args.top} functions {what} (per call)")
                    print("\n".join(top(row[f"{role}_stats"], args.calls, args.top, not args.by_time)))
                    print(f"  {name} c{c}, {role}: Python calls per call by package")
                    print("\n".join(by_module(row[f"{role}_stats"], args.calls)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
