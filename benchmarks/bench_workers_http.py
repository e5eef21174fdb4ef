"""What ``trio-mcp run … -t http --workers 2`` buys: calls/s of 1 and 2 server processes on one port, driven by the neutral Node driver.

    bash scripts/setup-interop                                   # once: undici, Node 22
    .venv/bin/python benchmarks/bench_workers_http.py            # 3 rounds, 5 s per row
    .venv/bin/python benchmarks/bench_workers_http.py --rounds 5 --seconds 10 --json
    .venv/bin/python benchmarks/bench_workers_http.py --redis redis://127.0.0.1:6379/0
    .venv/bin/python benchmarks/bench_workers_http.py --redis URL --direct-link --baseline OTHER/.venv/bin/python

The server is ``trio-mcp run benchmarks/servers/trio_http_server.py -t http
--json-response`` (``echo(text)``, JSON answers), on 127.0.0.1 and a free
port, as one process (``--workers 1``) or as a parent and 2 worker
processes sharing its socket (``--workers 2``). Targets, one at a time, in
an order rotated every round:

* ``1 process`` and ``2 workers`` (``--stateless``): the 2026-07-28 era
  (stateless ``tools/call``) and the handshake era served without sessions;
* with ``--redis URL`` also ``1 process redis`` and ``2 workers redis``
  (``--redis URL``, sessions shared through Redis): the handshake era with
  ``--sessions`` sessions (64 by default, caller i using session i mod 64),
  each opened on a keep-alive connection of its own (so they start on every
  process, as the kernel hands out the connections), round robin per
  request with no stickiness: with ``--balance``, each request to the next
  process in turn on a connection to it that carries no call, as a
  round-robin balancer sends it (haproxy's ``balance roundrobin``; one
  process: on any free connection); without, each request on the next of
  those connections in turn, waiting behind the call it carries
  (``--rotate-by connection`` gives this with ``--balance`` too: the
  rotation of earlier versions, which held a call back while other
  connections were free). With 2 processes half the requests reach the one
  that does not own their session and are forwarded to it;
* and ``1 process redis pinned`` and ``2 workers redis pinned``: the same
  sessions, each request on its session's own connection, so a session lives
  where the kernel gave its connection, and is forwarded only when that
  connection is replaced (a client that keeps its connection).

With ``--direct-link`` also ``2 workers redis link`` and ``2 workers redis
pinned link``: the same 2-worker session rows with ``--direct-link`` (a
forwarded request goes to its owner over a direct connection between the
workers, a Unix socket in the parent's private directory, instead of through
Redis; ratios against the same 1-process rows), ``2 workers redis link
tcp``, the unpinned one with its links over loopback TCP (``--link-host
127.0.0.1``), and ``2 workers redis ingress``, the unpinned one with
``--serve-on-ingress``: a request that reaches the worker not owning its
session is served there, from the session's saved handshake state, instead
of being forwarded (nothing but the first requests of a session, before its
owner saved that state, is forwarded).
With ``--baseline PYTHON`` every row runs again, named ``… (base)``, served
by that interpreter's trio-mcp (another checkout's venv, or a script running
this venv's python with ``PYTHONPATH=OTHER/src``), in the same rounds: this
tree and the baseline compared under the same load.

The kernel hands the connections of a port shared by several processes to
whichever process accepts first, so the driver's 64 connections may split
unevenly (29/35, 44/20 and 30/34 in three runs): with a request per
connection in turn, a process's share of the requests is its share of the
connections, whoever owns the sessions. ``--balance`` spreads them evenly
(the driver's ``balanceWorkers``: each connection asks ``/readyz`` which
process it reached and is kept while that one has under its share), as a
round-robin load balancer in front of the processes would; the rows then
report ``connections_per_process``.

Both kinds spread the sessions over the processes (round robin, as the
kernel hands out the connections). With ``--redis``, each session row also
reports the share of its calls that were forwarded (≈: from Redis's count
of inbox entries, ``INFO commandstats``, two per forwarded call, over the
calls of the whole driver run).

The driver (``drivers/http_driver.mjs``: raw JSON-RPC over an undici Pool of
``--connections`` keep-alive connections) runs ``--concurrency`` callers per
row for ``--seconds`` after a warm-up (``--prime`` seconds more for its
first row: Node's and the server's CPU per call settle over the first few
thousand calls, and on 2 CPUs the driver's share decides the 2-worker
figure). A row: calls/s, p50/p99 latency, the server's CPU µs per call
(parent and workers summed, from ``/proc``), the same less what the idle
processes spend per second (measured over 2 s before the row: lease
renewals, inbox reads; on a loaded machine the calls/s fall and it would
count as the calls' cost), the driver's. Reported:
medians over the rounds (min–max); per round the ratio 2 workers / 1
process of calls/s and of *capacity*, the calls/s the CPU per call allows
on an idle machine (each server process at most one CPU, the busiest with
its share of the work; server, driver and redis-server sharing the CPUs), which a loaded machine can estimate where
its calls/s mean little; the busiest worker's share of the workers' CPU (how
evenly the kernel spread the connections); issue 12's targets, for context
(≥ 1.7 for the stateless era, ≥ 1.5 for sessions); each round's load
average. The machine has 2 cores shared with whatever else runs: only a
quiet machine can show the ratio the cores allow.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _procs import (
    ROOT,
    STOP_TIMEOUT,
    add_common_args,
    clock_ticks,
    emit,
    load_line,
    median_table,
    medians,
    missing_parts,
    node_version,
    npm_version,
    ratio_table,
    resolve_common,
    round_ratios,
    run_driver,
    run_rounds,
    text_table,
)
from _report import default_warmup, find, load_average

BENCH = "workers_http"
#: Seconds a server (2 workers, each importing the whole stack) may take to
#: start and hold its leases: a loaded machine is slow.
START_TIMEOUT = 90.0
SERVER = HERE / "servers" / "trio_http_server.py"
HANDSHAKE = "handshake"
MODERN = "2026-07-28"
SECONDS = 5.0
ONE, TWO = "1 process", "2 workers"
ONE_REDIS, TWO_REDIS = "1 process redis", "2 workers redis"
ONE_PINNED, TWO_PINNED = "1 process redis pinned", "2 workers redis pinned"
TWO_LINK, TWO_PINNED_LINK = "2 workers redis link", "2 workers redis pinned link"
TWO_LINK_TCP = "2 workers redis link tcp"
#: Over links, a session's plain requests served on the worker they reach (``--serve-on-ingress``).
TWO_INGRESS = "2 workers redis ingress"
BASE = " (base)"
#: The session rows' lease: long, as a loaded machine may starve a renewal
#: (a lapsed lease answers 503 and ends the driver's run).
LEASE = ("--lease-ttl", "10")
#: Issue 12's targets for 2 workers over 1 process (calls/s); printed, never asserted.
TARGETS = {"stateless era": 1.7, "handshake-era sessions (Redis)": 1.5}
METRICS = (
    "calls_per_s",
    "p50_us",
    "p99_us",
    "server_cpu_us",
    "server_cpu_net_us",
    "server_sys_us",
    "driver_cpu_us",
)
#: Seconds over which a server's idle CPU (lease renewals, inbox reads: what
#: it spends per second whatever the calls) is measured before a row.
IDLE_SECONDS = 2.0


def progress(message: str) -> None:
    print(f"[bench_workers_http] {message}", file=sys.stderr, flush=True)


class CliServer:
    """``trio-mcp run SERVER -t http --port 0 ARGS``: started, its URL and its
    processes read from its start-up lines (bounded), stopped with SIGTERM
    (it drains, then exits; SIGKILL beyond the bound)."""

    def __init__(self, args: list[str], python: str = sys.executable) -> None:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - open as long as the server runs
        cmd = [python, "-m", "trio_mcp.cli", "run", str(SERVER), "-t", "http", "--port", "0", *args]
        # PYTHONFAULTHANDLER: a server that does not start is sent SIGABRT and
        # writes where its threads stood into its log (see _started).
        env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log, env=env
        )
        self.workers = "--workers" in args and args[args.index("--workers") + 1] != "1"
        try:
            self.url, self.pids = self._started()
        except BaseException:
            self.stop()
            raise

    def _started(self) -> tuple[str, list[int]]:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            text = self._said()
            url = re.search(r"^serving .* at (\S+)$", text, re.MULTILINE)
            pids = re.search(r"\(pids ([\d, ]+)\)", text)
            if url and (pids or not self.workers):
                workers = [int(p) for p in pids.group(1).split(", ")] if pids else []
                return url.group(1), [self.proc.pid, *workers]
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited (status {self.proc.returncode}):\n{text}")
            time.sleep(0.05)
        self.proc.send_signal(signal.SIGABRT)  # its stacks, into the log
        try:
            self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        text = self._said()
        raise RuntimeError(f"the server did not start within {START_TIMEOUT:g} s; its log:\n{text}")

    def _said(self) -> str:
        """The log so far, read at its offsets: the server writes through the
        same open file, so a seek here would move where its next line lands
        (over the lines before it)."""
        return os.pread(self.log.fileno(), 1 << 20, 0).decode(errors="replace")

    def wait_leased(self) -> None:
        """Until every process holds its cluster lease: ``/readyz`` (each
        answer from whichever process the kernel hands the connection) says
        so 4 times per process in a row, within the start bound."""
        readyz = self.url.rsplit("/", 1)[0] + "/readyz"
        deadline = time.monotonic() + START_TIMEOUT
        streak = 0
        while streak < 4 * len(self.pids):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server's processes took no lease within {START_TIMEOUT:g} s")
            try:
                with urllib.request.urlopen(readyz, timeout=5) as answer:
                    healthy = json.loads(answer.read())["cluster"]["healthy"]
            except (OSError, ValueError, KeyError):
                healthy = False
            streak = streak + 1 if healthy else 0
            if not healthy:
                time.sleep(0.05)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT * 4)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


Target = tuple[list[str], tuple[str, ...], bool, str]


def targets(redis: str | None, link: bool = False, baseline: str | None = None) -> dict[str, Target]:
    """Name -> (the server's options, the eras it is driven in, sessions
    pinned to connections, the python that runs it)."""
    here = sys.executable
    found: dict[str, Target] = {
        ONE: (["--json-response", "--workers", "1", "--stateless"], (MODERN, HANDSHAKE), False, here),
        TWO: (["--json-response", "--workers", "2", "--stateless"], (MODERN, HANDSHAKE), False, here),
    }
    if redis:
        rows = [
            (ONE_REDIS, "1", False),
            (TWO_REDIS, "2", False),
            (ONE_PINNED, "1", True),
            (TWO_PINNED, "2", True),
        ]
        for name, workers, pinned in rows:
            options = ["--json-response", "--workers", workers, "--redis", redis, *LEASE]
            found[name] = (options, (HANDSHAKE,), pinned, here)
        if link:
            for name, pinned in ((TWO_LINK, False), (TWO_PINNED_LINK, True)):
                options = ["--json-response", "--workers", "2", "--redis", redis, *LEASE, "--direct-link"]
                found[name] = (options, (HANDSHAKE,), pinned, here)
            # The links over loopback TCP instead of the workers' Unix sockets.
            options = [*found[TWO_LINK][0], "--link-host", "127.0.0.1"]
            found[TWO_LINK_TCP] = (options, (HANDSHAKE,), False, here)
            found[TWO_INGRESS] = ([*found[TWO_LINK][0], "--serve-on-ingress"], (HANDSHAKE,), False, here)
    if baseline:
        for name, (options, eras, pinned, _) in list(found.items()):
            found[name + BASE] = (options, eras, pinned, baseline)
    return found


class RedisProbe:
    """Redis's count of inbox entries (XADD, scripts' included) and its
    process's CPU ticks, read before and after a row through ``redis-cli``
    (both None without it; the ticks None unless redis-server runs here)."""

    def __init__(self, url: str) -> None:
        cli = shutil.which("redis-cli")
        where = ["-s", url.removeprefix("unix://")] if url.startswith("unix://") else ["-u", url]
        self.command = None if cli is None else [cli, *where, "info"]
        found = re.search(r"^process_id:(\d+)", self._info("server"), re.MULTILINE)
        self.pid = int(found.group(1)) if found and Path(f"/proc/{found.group(1)}/stat").exists() else None

    def _info(self, section: str) -> str:
        if self.command is None:
            return ""
        return subprocess.run(
            [*self.command, section], capture_output=True, text=True, timeout=10, check=False
        ).stdout

    def snapshot(self) -> tuple[int | None, int | None]:
        found = re.search(r"^cmdstat_xadd:calls=(\d+)", self._info("commandstats"), re.MULTILINE)
        entries = None if self.command is None else int(found.group(1)) if found else 0
        return entries, None if self.pid is None else process_ticks(self.pid)


def process_ticks(pid: int) -> int:
    """CPU time (utime + stime, clock ticks) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def cpu_ns(pid: int) -> int:
    """CPU time a process's threads have used so far, in ns (``schedstat``)."""
    return sum(int(p.read_text().split()[0]) for p in Path(f"/proc/{pid}/task").glob("*/schedstat"))


def idle_rate(pids: list[int]) -> float:
    """The server processes' CPU µs per second with no calls (over :data:`IDLE_SECONDS`)."""
    before, began = sum(cpu_ns(p) for p in pids), time.monotonic()
    time.sleep(IDLE_SECONDS)
    return (sum(cpu_ns(p) for p in pids) - before) / 1e3 / (time.monotonic() - began)


def capacity(row: dict[str, Any], processes: int) -> float:
    """Calls/s the row's CPU per call allows on an idle machine of this
    many CPUs: the server's processes (at most one CPU each, the busiest
    with its share of the work), the driver and redis-server sharing them."""
    cpus = os.cpu_count() or 1
    server = row.get("server_cpu_net_us", row["server_cpu_us"])
    total = server + row["driver_cpu_us"] + row.get("redis_cpu_us", 0.0)
    busiest = row.get("busiest_worker", 1.0 / processes)
    return min(1e6 / (server * busiest), cpus * 1e6 / total)


def rotation(args: argparse.Namespace, pinned: bool) -> str | bool:
    """The driver's ``rotate`` for a row: per request over the processes, on a
    free connection (a round-robin balancer: ``--balance`` and ``--rotate-by
    process``; one process: any free connection), over the connections in
    turn, or not at all (pinned rows)."""
    if pinned:
        return False
    if args.balance and args.rotate_by == "process":
        return "process"
    return "connection"


def run_target(name: str, round_no: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    options, eras, pinned, python = args.servers[name]
    load = load_average()
    server = CliServer(options, python)
    if "--redis" in options:
        try:
            server.wait_leased()
        except BaseException:
            server.stop()
            raise
    idle = idle_rate(server.pids)
    probe = RedisProbe(args.redis) if args.redis and "--redis" in options else None
    before = probe.snapshot() if probe is not None else (None, None)
    workers_before = [process_ticks(pid) for pid in server.pids[1:]]
    try:
        driver = {
            "url": server.url,
            "eras": list(eras),
            "handshake": True,
            "sessions": args.sessions,
            # Every session opened on a connection of its own (so sessions start on
            # every process); pinned: its calls there, else on each connection in turn.
            "pinSessions": "--redis" in options,
            "rotate": rotation(args, pinned) if "--redis" in options else False,
            # --balance: the sessions' connections spread evenly over the processes.
            "balanceWorkers": len(server.pids) - 1 if args.balance and "--redis" in options else 0,
            "concurrencies": [args.concurrency],
            "connections": args.connections,
            "warmup": args.warmup,
            "prime": args.prime,
            "seconds": args.seconds,
            "serverPid": server.pids,
            "clockTicks": clock_ticks(),
        }
        budget = len(eras) * (args.warmup + args.seconds + 10) + args.prime + 30
        rows = run_driver(args.node, "http_driver.mjs", driver, budget)
        spent = [
            process_ticks(pid) - ticks for pid, ticks in zip(server.pids[1:], workers_before, strict=True)
        ]
        if sum(spent) > 0:
            # How evenly the kernel spread the connections over the driver's run
            # (0.5 for 2 workers: evenly; 1: one worker did all).
            for row in rows:
                row["busiest_worker"] = round(max(spent) / sum(spent), 3)
        if probe is not None and len(rows) == 1 and rows[0]["calls_per_s"]:
            # Over the whole driver run (warm-up and priming too): ≈.
            after = probe.snapshot()
            calls = rows[0]["calls_per_s"] * (args.seconds + args.warmup + args.prime)
            if before[0] is not None and after[0] is not None and "--direct-link" not in options:
                rows[0]["forwarded"] = round((after[0] - before[0]) / 2 / calls, 3)
            if before[1] is not None and after[1] is not None:
                rows[0]["redis_cpu_us"] = round((after[1] - before[1]) * 1e6 / clock_ticks() / calls, 1)
    finally:
        status = server.stop()
    if status not in (0, None):
        progress(f"note: the {name} server exited with status {status}")
    if len(rows) != len(eras):
        raise RuntimeError(f"{name}: the driver printed {len(rows)} rows, not {len(eras)}")
    for row in rows:
        row.pop("content_type", None)
        row.update(bench=BENCH, round=round_no, impl=name, processes=len(server.pids), load=load)
        # What the idle processes spend per second, taken off (a loaded machine's
        # low calls/s would count it as the calls' cost; a quiet one's hides it).
        row["server_idle_us_per_s"] = round(idle, 1)
        if row["calls_per_s"]:
            row["server_cpu_net_us"] = round(row["server_cpu_us"] - idle / row["calls_per_s"], 1)
        row["capacity"] = round(capacity(row, max(1, len(server.pids) - 1)), 1)
    return rows


#: A 2-worker row and the 1-process row it is compared with, and the target that applies.
ACCOUNTED = (
    (TWO, (ONE,), "stateless era"),
    (TWO_PINNED, (ONE_PINNED, ONE_REDIS), "handshake-era sessions (Redis)"),
    (TWO_REDIS, (ONE_REDIS,), "handshake-era sessions (Redis)"),
    (TWO_LINK, (ONE_REDIS,), "handshake-era sessions (Redis)"),
    (TWO_INGRESS, (ONE_REDIS,), "handshake-era sessions (Redis)"),
)


def accounting(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per round, 2-worker row and era: where the CPUs go per call (the
    workers, the driver, redis-server; their sum times calls/s is the CPUs
    the row used), and what the target allows. One process is bounded by
    one CPU (``S1`` µs per call: 10⁶/S1 calls/s, the driver on the other);
    2 workers by the machine's CPUs shared with the driver and redis-server
    (``cpus·10⁶/(S2 + D2 + R2)``); so 2 workers reach ``T``× one process only
    if ``S2 ≤ cpus·S1/T − D2 − R2``: ``allowed_server_us``."""
    cpus = os.cpu_count() or 1
    out = []
    for two, ones, target in ACCOUNTED:
        for suffix in ("", BASE):
            for a in (r for r in rows if r["impl"] == two + suffix):
                same = {"round": a["round"], "era": a["era"], "concurrency": a["concurrency"]}
                b = next((r for one in ones if (r := find(rows, impl=one + suffix, **same))), None)
                if b is None or not a["calls_per_s"]:
                    continue
                s2 = a.get("server_cpu_net_us", a["server_cpu_us"])
                s1 = b.get("server_cpu_net_us", b["server_cpu_us"])
                extra = a["driver_cpu_us"] + a.get("redis_cpu_us", 0.0)
                out.append(
                    {
                        "round": a["round"],
                        "impl": a["impl"],
                        "era": a["era"],
                        "workers_us": a.get("server_cpu_split_us", [])[1:],
                        "server_us": s2,
                        "driver_us": a["driver_cpu_us"],
                        "redis_us": a.get("redis_cpu_us", 0.0),
                        "cpus_used": round(a["calls_per_s"] * (a["server_cpu_us"] + extra) / 1e6, 2),
                        "one_process_us": s1,
                        "server_ratio": round(s2 / s1, 2),
                        "allowed_server_us": round(cpus * s1 / TARGETS[target] - extra, 1),
                        "target": TARGETS[target],
                    }
                )
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = {}
    pairs = [(TWO, ONE), (TWO_REDIS, ONE_REDIS), (TWO_PINNED, ONE_PINNED)]
    pairs += [(TWO_LINK, ONE_REDIS), (TWO_PINNED_LINK, ONE_PINNED), (TWO_LINK, TWO_REDIS)]
    pairs += [(num + BASE, den + BASE) for num, den in pairs[:3]]
    pairs += [(num + BASE, den + BASE) for num, den in pairs[3:5]]
    pairs += [(TWO_REDIS, TWO_REDIS + BASE), (TWO_LINK, TWO_LINK + BASE), (TWO_LINK, TWO_LINK_TCP)]
    pairs += [(TWO_INGRESS, ONE_REDIS), (TWO_INGRESS, TWO_LINK), (TWO_INGRESS, TWO_INGRESS + BASE)]
    for num, den in pairs:
        if per := round_ratios(rows, "calls_per_s", num, den, ("era", "concurrency")):
            ratios[f"calls_per_s {num}/{den}"] = per
        if per := round_ratios(rows, "server_cpu_us", num, den, ("era", "concurrency")):
            ratios[f"server_cpu_us {num}/{den}"] = per
        if per := round_ratios(rows, "server_cpu_net_us", num, den, ("era", "concurrency")):
            ratios[f"server_cpu_net_us {num}/{den}"] = per
        if per := round_ratios(rows, "capacity", num, den, ("era", "concurrency")):
            ratios[f"capacity {num}/{den}"] = per
    forwarded = {
        impl: [r["forwarded"] for r in rows if r["impl"] == impl and "forwarded" in r]
        for impl in dict.fromkeys(r["impl"] for r in rows)
    }
    return {
        "medians": medians(rows, ("impl", "era", "concurrency"), METRICS),
        "ratios": ratios,
        "forwarded": {impl: shares for impl, shares in forwarded.items() if shares},
        "accounting": accounting(rows),
    }


def print_report(doc: dict[str, Any]) -> None:
    s = doc["settings"]
    print(
        f"trio-mcp run -t http --json-response, 1 process vs 2 worker processes on one port; neutral Node "
        f"driver (undici {s['undici']}, {s['connections']} keep-alive connections, {s['concurrency']} callers, "
        f"Node {s['node_version']}); {s['rounds']} rounds, {s['seconds']:g} s per row after {s['warmup']:g} s "
        f"warm-up ({s['warmup'] + s['prime']:g} s for a driver's first row); {os.cpu_count()} CPUs; Redis: {s['redis'] or 'not given (no session rows)'}"
    )
    print(load_line(doc["rounds"]))
    print()
    print(
        median_table(
            doc["summary"]["medians"], (("impl", "server"), ("era", "era"), ("concurrency", "callers"))
        )
    )
    print()
    print("ratios (calls_per_s: > 1 serves more; server_cpu_us: > 1 spends more per call):")
    print(ratio_table(doc["summary"]["ratios"], [r["round"] for r in doc["rounds"]], "era callers"))
    if busiest := [r for r in doc["rows"] if "busiest_worker" in r]:
        print(
            "the busiest worker's share of the workers' CPU (0.5: the kernel spread the connections evenly):"
        )
        for r in busiest:
            print(f"  round {r['round']} {r['impl']:<24} {r['era']:<10} {r['busiest_worker']:.2f}")
    if forwarded := doc["summary"].get("forwarded"):
        print(
            "share of the calls forwarded to their session's owner, redis-server's CPU µs/call (≈, per round):"
        )
        for impl, shares in forwarded.items():
            cpu = [r.get("redis_cpu_us") for r in doc["rows"] if r["impl"] == impl and "forwarded" in r]
            cells = (f"{share:.1%} {c or 0:.0f} µs" for share, c in zip(shares, cpu, strict=True))
            print(f"  {impl:<24} " + "  ".join(cells))
    if booked := doc["summary"].get("accounting"):
        print(
            "CPU µs per call of each worker, the driver and redis-server; the CPUs they used together "
            "(calls/s × their sum); the server CPU per call the target allows (cpus·S1/target − driver − redis):"
        )
        body = [
            (
                str(e["round"]),
                e["impl"],
                e["era"],
                " + ".join(f"{w:,.0f}" for w in e["workers_us"]),
                f"{e['driver_us']:,.0f}",
                f"{e['redis_us']:,.0f}",
                f"{e['cpus_used']:.2f}",
                f"{e['server_us']:,.0f} ({e['server_ratio']:.2f}×)",
                f"{e['allowed_server_us']:,.0f} ({e['allowed_server_us'] / e['one_process_us']:.2f}×) for {e['target']}",
            )
            for e in booked
        ]
        head = (
            "round",
            "server",
            "era",
            "workers",
            "driver",
            "redis",
            "CPUs",
            "server (÷ 1 process)",
            "allowed",
        )
        print(text_table(head, body, left=3))
    print(
        "capacity: the calls/s a row's CPU per call allows on an idle machine (server processes at most "
        "one CPU each, the busiest worker with its share; server, driver and redis-server sharing the CPUs)"
    )
    print("issue 12's targets, for context: " + ", ".join(f"{k} ≥ {v:.1f}×" for k, v in TARGETS.items()))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, [ONE, TWO], SECONDS)
    parser.add_argument("--warmup", type=float, default=None, help="warm-up per row (default min(0.5, s/2))")
    parser.add_argument(
        "--prime",
        type=float,
        default=5.0,
        help="more warm-up for a driver's first row (default 5 s: Node's and the servers' CPU per call "
        "settle over the first few thousand calls, and the driver shares the CPUs with the servers)",
    )
    parser.add_argument("--concurrency", type=int, default=64, help="callers in flight (default 64)")
    parser.add_argument("--connections", type=int, default=64, help="the driver's keep-alive connections")
    parser.add_argument("--sessions", type=int, default=64, help="handshake-era sessions with --redis (64)")
    parser.add_argument(
        "--redis", metavar="URL", default=None, help="also run the session rows on this Redis"
    )
    parser.add_argument(
        "--direct-link",
        action="store_true",
        help="with --redis: also the 2-worker session rows over direct links",
    )
    parser.add_argument(
        "--balance",
        action="store_true",
        help="with --redis: spread the sessions' connections evenly over the worker processes (as a "
        "round-robin balancer would) instead of as the kernel's accept race falls",
    )
    parser.add_argument(
        "--rotate-by",
        choices=("process", "connection"),
        default="process",
        help="with --balance, the unpinned session rows: each request to the next worker process on a "
        "free connection to it, as a round-robin balancer (default), or on the next connection in "
        "turn, waiting behind the call it carries (the rotation of earlier versions)",
    )
    parser.add_argument(
        "--baseline",
        metavar="PYTHON",
        default=None,
        help="also run every row with this interpreter's trio-mcp, named '… (base)'",
    )
    args = parser.parse_args(argv)
    if min(args.concurrency, args.connections, args.sessions) < 1:
        parser.error("--concurrency, --connections and --sessions must be >= 1")
    if args.warmup is None:
        args.warmup = default_warmup(args.seconds)
    args.servers = targets(args.redis, args.direct_link, args.baseline)
    if (args.redis or args.baseline) and args.targets == f"{ONE},{TWO}":
        args.targets = ",".join(args.servers)
    resolve_common(parser, args, {name: name for name in args.servers})
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if missing := missing_parts(args.node, None):
        print(
            f"bench_workers_http: missing {', '.join(missing)}\n  install: bash scripts/setup-interop",
            file=sys.stderr,
        )
        return 2
    settings = {
        "rounds": args.rounds,
        "seconds": args.seconds,
        "warmup": args.warmup,
        "prime": args.prime,
        "concurrency": args.concurrency,
        "connections": args.connections,
        "sessions": args.sessions,
        "redis": args.redis,
        "balance": args.balance,
        "rotate_by": args.rotate_by if args.balance else "connection",
        "node_version": node_version(args.node),
        "undici": npm_version("undici"),
        "cpus": os.cpu_count(),
    }
    rows: list[dict[str, Any]] = []

    def run(name: str, round_no: int) -> None:
        rows.extend(run_target(name, round_no, args))

    rounds, failure = run_rounds(args.rounds, args.targets, lambda name: name, run, "bench_workers_http")
    doc = {"bench": BENCH, "settings": settings, "rounds": rounds, "rows": rows, "summary": summarize(rows)}
    return emit(doc, args.json, print_report, failure)


if __name__ == "__main__":
    sys.exit(main())
