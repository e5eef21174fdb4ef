"""What a request forwarded to its session's owner costs: two trio-mcp nodes
on one real Redis, driven by the neutral Node HTTP driver.

    bash scripts/setup-interop                         # once: redis-server, undici, Node 22
    .venv/bin/python benchmarks/bench_cluster.py       # 3 rounds, 3 s per row
    .venv/bin/python benchmarks/bench_cluster.py --rounds 5 --seconds 5 --json

Processes, each on 127.0.0.1: a ``redis-server`` on a Unix socket in a
temporary directory, nodes ``a`` and ``b`` (``servers/trio_http_server.py
--redis``: ``HttpServer`` with a ``RedisCluster``, JSON answers) and
``memory``, the same server without Redis. Rows, each ``tools/call echo``
in a handshake-era session at concurrency 1 and 16, in an order rotated
every round:

* ``memory``: the session on a server alone (no cluster: the baseline);
* ``local``: opened on ``a`` and used on ``a`` (the owner serves it; the
  cluster's cost on the fast path);
* ``forwarded``: opened on ``a`` and used on ``b`` (every call forwarded to the
  owner through Redis and its answer relayed back: a session opened on one
  node and used on another);
* ``forwarded link``: the same on nodes ``la`` and ``lb`` started with
  ``--direct-link`` (forwarded over a direct connection between the nodes).

Reported: the median over the rounds of calls/s, p50/p99 latency and the CPU
per call of the server side (``memory``: its process; the others: both
nodes and redis-server, with the split: owner / ingress / redis-server), and
per round the ratios forwarded/local, forwarded link/local and local/memory, with the 1-minute load average (the machine
is shared: compare ratios, CPU per call above all, not absolute figures).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _procs import UrlServer, clock_ticks, node_binary, run_driver, stop_process
from _report import load_average

SERVER = HERE / "servers" / "trio_http_server.py"
ROWS = ("memory", "local", "forwarded", "forwarded link")
CONCURRENCIES = (1, 16)
METRICS = ("calls_per_s", "p50_us", "p99_us", "server_cpu_us")


def start_redis(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("bench_cluster: redis-server is not installed (bash scripts/setup-interop)")
    sock = directory / "redis.sock"
    proc = subprocess.Popen(
        [binary, "--port", "0", "--unixsocket", str(sock), "--save", "", "--appendonly", "no",
         "--dir", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while not sock.exists():
        if time.monotonic() > deadline:
            stop_process(proc)
            raise SystemExit("bench_cluster: redis-server did not start")
        time.sleep(0.02)
    return proc, f"unix://{sock}"


def wait_leased(server: UrlServer) -> None:
    """Until the node holds its cluster lease (its /readyz says so)."""
    base = server.url.rsplit("/", 1)[0]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=2) as answer:
                if json.loads(answer.read())["cluster"]["healthy"]:
                    return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    raise SystemExit(f"bench_cluster: node {server.name} took no lease")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--json", action="store_true", help="one JSON document instead of the tables")
    args = parser.parse_args()
    node = node_binary()
    if node is None:
        raise SystemExit("bench_cluster: Node 22 with undici is needed (bash scripts/setup-interop)")
    results: dict[str, dict[int, list[dict[str, Any]]]] = {r: {c: [] for c in CONCURRENCIES} for r in ROWS}
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        redis, url = start_redis(Path(tmp))
        servers: dict[str, UrlServer] = {}
        try:
            py = sys.executable
            servers["a"] = UrlServer("a", [py, str(SERVER), "--redis", url, "--node-id", "a"])
            servers["b"] = UrlServer("b", [py, str(SERVER), "--redis", url, "--node-id", "b"])
            link = ["--redis", url, "--direct-link", "--node-id"]
            servers["la"] = UrlServer("la", [py, str(SERVER), *link, "la"])
            servers["lb"] = UrlServer("lb", [py, str(SERVER), *link, "lb"])
            servers["memory"] = UrlServer("memory", [py, str(SERVER)])
            for name in ("a", "b", "la", "lb"):
                wait_leased(servers[name])
            plan = {
                "memory": (servers["memory"], servers["memory"]),
                "local": (servers["a"], servers["a"]),
                "forwarded": (servers["b"], servers["a"]),
                "forwarded link": (servers["lb"], servers["la"]),
            }
            # The owner first, then the ingress, then redis-server (the split's order).
            cluster_pids = [servers["a"].pid, servers["b"].pid, redis.pid]
            linked = [servers["la"].pid, servers["lb"].pid, redis.pid]
            pids = {
                "memory": [servers["memory"].pid],
                "local": cluster_pids,
                "forwarded": cluster_pids,
                "forwarded link": linked,
            }
            for n in range(1, args.rounds + 1):
                info: dict[str, Any] = {"round": n, "load_before": load_average()}
                shift = (n - 1) % len(ROWS)
                for row in [*ROWS[shift:], *ROWS[:shift]]:
                    print(f"[bench_cluster] round {n}/{args.rounds}: {row}", file=sys.stderr, flush=True)
                    called, opened = plan[row]
                    options = {
                        "url": called.url,
                        "initUrl": opened.url,
                        "eras": ["handshake"],
                        "concurrencies": list(CONCURRENCIES),
                        "connections": max(CONCURRENCIES),
                        "warmup": args.warmup,
                        "seconds": args.seconds,
                        "prime": args.warmup,
                        # CPU per call of every server-side process the row uses.
                        "serverPid": pids[row],
                        "clockTicks": clock_ticks(),
                    }
                    budget = (args.seconds + args.warmup) * len(CONCURRENCIES) * 4 + 60
                    for line in run_driver(node, "http_driver.mjs", options, budget):
                        results[row][line["concurrency"]].append(line)
                info["load_after"] = load_average()
                rounds.append(info)
        finally:
            for server in servers.values():
                server.proc.send_signal(signal.SIGTERM)
                server.stop()
            stop_process(redis)
    report = summarize(results, rounds)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


def summarize(
    results: dict[str, dict[int, list[dict[str, Any]]]], rounds: list[dict[str, Any]]
) -> dict[str, Any]:
    medians = {
        row: {
            str(c): {m: round(statistics.median(r[m] for r in results[row][c]), 1) for m in METRICS}
            for c in CONCURRENCIES
        }
        for row in ROWS
    }
    for row in ROWS:
        for c in CONCURRENCIES:
            splits = [r["server_cpu_split_us"] for r in results[row][c] if "server_cpu_split_us" in r]
            if splits and len(splits[0]) > 1:
                # CPU µs per call of each server-side process (nodes a, b, redis-server).
                medians[row][str(c)]["split"] = [round(statistics.median(s), 1) for s in zip(*splits)]
    ratios = []
    for index, info in enumerate(rounds):
        per: dict[str, Any] = {"round": info["round"], "load": [info["load_before"], info["load_after"]]}
        for c in CONCURRENCIES:
            fwd, local, mem = (results[row][c][index] for row in ("forwarded", "local", "memory"))
            linked = results["forwarded link"][c][index]
            for metric in METRICS:
                per[f"c{c} {metric} forwarded/local"] = round(fwd[metric] / local[metric], 2)
                per[f"c{c} {metric} forwarded link/local"] = round(linked[metric] / local[metric], 2)
                per[f"c{c} {metric} local/memory"] = round(local[metric] / mem[metric], 2)
        ratios.append(per)
    return {"medians": medians, "ratios": ratios}


def print_report(report: dict[str, Any]) -> None:
    print("median over the rounds (calls/s, p50 µs, p99 µs, server-side CPU µs per call):")
    for row, by_c in report["medians"].items():
        cells = "  ".join(
            f"c{c}: {v['calls_per_s']:.0f}/s p50 {v['p50_us']:.0f} p99 {v['p99_us']:.0f} "
            f"cpu {v['server_cpu_us']:.0f}" + (f" (owner/ingress/redis {v['split']})" if "split" in v else "")
            for c, v in by_c.items()
        )
        print(f"  {row:<14} {cells}")
    print("ratios per round (load average before→after):")
    for per in report["ratios"]:
        print(f"  round {per['round']} (load {per['load'][0]}→{per['load'][1]}):")
        for key, value in per.items():
            if key not in ("round", "load"):
                print(f"    {key}: {value}")


if __name__ == "__main__":
    sys.exit(main())
