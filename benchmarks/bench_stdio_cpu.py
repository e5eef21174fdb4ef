"""Server CPU time per stdio ``tools/call``, over a fixed number of calls: a
figure that a loaded machine barely moves (unlike calls/s).

    .venv/bin/python benchmarks/bench_stdio_cpu.py                      # trio-mcp and the TS SDK, 3 rounds
    .venv/bin/python benchmarks/bench_stdio_cpu.py --calls 20000 --rounds 5
    .venv/bin/python benchmarks/bench_stdio_cpu.py --targets trio-mcp,gateway --concurrencies 1,64
    .venv/bin/python benchmarks/bench_stdio_cpu.py --targets trio-mcp --profile /tmp/prof   # cProfile ours
    .venv/bin/python benchmarks/bench_stdio_cpu.py --targets trio-mcp --callgrind           # instructions

A small blocking driver in this process (no MCP client library; standard
library only) spawns each server, sends ``initialize`` and
``notifications/initialized``, then per concurrency keeps that many
``tools/call`` of ``echo`` in flight: every answer read is replaced by a new
request, the requests of one read going out in one write (as the Node driver
of ``bench_stdio_neutral.py`` does). After ``--warmup`` calls, ``--calls``
calls are measured. A row: the server side's CPU time (user + system, from
``/proc/<pid>/stat``, of the server process and, for ``gateway``, of the
gateway and its server) per call, the CPU time of the process spawned alone
(``front_cpu_us``: the gateway or relay without its server, from
``/proc/<pid>/task/*/schedstat``), and the wall-clock calls/s (an indication
only on a busy machine). Targets, one process each, rotated over the rounds:

* ``trio-mcp``: ``servers/trio_echo_server.py`` (project venv);
* ``ts-sdk``: ``drivers/ts_stdio_server.mjs`` (Node, the pinned TypeScript SDK);
* ``gateway``: ``trio-mcp gateway FILE -t stdio`` in front of ``trio_echo_server.py``;
* ``relay``: ``servers/trio_relay.py`` in front of ``trio_echo_server.py``: bytes
  relayed by trio, nothing parsed (the floor of any trio gateway);
* ``routing-relay``: ``servers/trio_routing_relay.py`` in front of it: each line
  decoded, its id and tool name swapped, encoded again (the floor of a trio
  gateway that routes);
* ``gateway-baseline``: ``gateway`` with ``trio_mcp`` from ``--baseline SRC``;
* ``trio-floor``: ``servers/trio_floor_server.py``, a trio JSON-lines echo with no
  MCP at all: what our server adds is its figure less this one;
* ``baseline``: ``trio_echo_server.py`` importing ``trio_mcp`` from ``--baseline SRC``
  (another checkout's ``src``, e.g. ``git archive main src | tar -x -C /tmp/main``):
  before/after comparisons in one run.

``--profile DIR`` runs our server under cProfile (one ``.prof`` file per
concurrency, over the measured calls only) and prints the call counts per
request; ``--callgrind`` runs our server (and the ``gateway`` or ``relay`` process, not
its server) under ``valgrind --tool=callgrind`` twice per concurrency (``--calls`` and twice that many measured calls) and
prints the instructions per call (the difference of the two, so start-up
cancels out): the steadiest figure of all, independent of the machine's load.
With ``--steady`` one run per concurrency counts the measured calls alone
(instrumentation off until the warm-up is done, switched on and dumped with
``callgrind_control``): what start-up or shutdown compiles or collects in one
run and not the other (up to ±10 k instructions per call over 1,000 calls)
cannot leak in.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _procs import DRIVERS, node_binary
from _report import cpu_ns, load_average

OURS = HERE / "servers" / "trio_echo_server.py"
TS = DRIVERS / "ts_stdio_server.mjs"
FLOOR = HERE / "servers" / "trio_floor_server.py"
#: The targets that front our echo server (their own CPU is reported apart).
PROXIES = ("gateway", "gateway-baseline", "relay", "routing-relay")
PAYLOAD = "hello, benchmark"
CALL = (
    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":'
    b'{"name":"%s","arguments":{"text":"' + PAYLOAD.encode() + b'"}}}\n'
)
INIT = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"bench-stdio-cpu","version":"1.0"}}}\n'
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
)
TICKS = os.sysconf("SC_CLK_TCK")
#: Seconds any one read may wait for the server before the run fails
#: (under valgrind, ten times as long: start-up alone can take a minute).
READ_TIMEOUT = 60.0


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds of ``pids`` (and their reaped children: none here)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


class Driver:
    """A JSON-lines connection to a server process over its stdin/stdout."""

    def __init__(
        self, argv: Sequence[str], env: dict[str, str] | None = None, read_timeout: float = READ_TIMEOUT
    ) -> None:
        self.read_timeout = read_timeout
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.win = self.proc.stdin.fileno()
        self.rout = self.proc.stdout.fileno()
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.rout, selectors.EVENT_READ)
        self.carry = b""
        self.next_id = 1
        self.tool = b"echo"

    def lines(self) -> list[bytes]:
        """The complete lines of the next read (blocks until some arrive)."""
        while True:
            if not self.sel.select(self.read_timeout):
                raise RuntimeError(f"no answer from the server in {self.read_timeout} s")
            data = os.read(self.rout, 1 << 20)
            if not data:
                raise RuntimeError(f"the server closed its stdout (exit {self.proc.poll()})")
            chunk = self.carry + data
            cut = chunk.rfind(b"\n") + 1
            self.carry = chunk[cut:]
            if cut:
                return chunk[:cut].splitlines()

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.win, view)
            view = view[n:]

    def initialize(self) -> None:
        self.write(INIT)
        for line in self.lines():
            if b'"id":0' in line:
                return
        raise RuntimeError("no initialize answer")

    def calls(self, total: int, concurrency: int) -> float:
        """``total`` calls with ``concurrency`` in flight; the wall seconds."""
        begin = time.perf_counter()
        start = min(total, concurrency)
        sent = start
        done = 0
        self.write(b"".join(CALL % (self.next_id + i, self.tool) for i in range(start)))
        self.next_id += start
        while done < total:
            answers = 0
            for line in self.lines():
                if b'"result"' not in line:
                    raise RuntimeError(f"unexpected answer: {line[:300]!r}")
                answers += 1
            done += answers
            more = min(answers, total - sent)
            if more:
                self.write(b"".join(CALL % (self.next_id + i, self.tool) for i in range(more)))
                self.next_id += more
                sent += more
        return time.perf_counter() - begin

    def close(self) -> int | None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def server_pids(driver: Driver, target: str) -> list[int]:
    """The processes whose CPU time counts: the server, or the gateway and its children."""
    pids = [driver.proc.pid]
    if target in PROXIES:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            children = Path(f"/proc/{driver.proc.pid}/task/{driver.proc.pid}/children").read_text().split()
            if children:
                return pids + [int(c) for c in children]
            time.sleep(0.05)
        raise RuntimeError("the gateway started no server")
    return pids


def command(target: str, args: argparse.Namespace, workdir: Path) -> tuple[list[str], dict[str, str] | None]:
    env = dict(os.environ)
    if target == "ts-sdk":
        return [args.node, str(TS)], None
    if target in ("gateway", "gateway-baseline"):
        config = workdir / "gateway.json"
        config.write_text(
            json.dumps({"mcpServers": {"echo": {"command": sys.executable, "args": [str(OURS)]}}})
        )
        return [
            sys.executable,
            "-m",
            "trio_mcp.cli",
            "gateway",
            str(config),
            "-t",
            "stdio",
            "--no-watch",
        ], env if target == "gateway" else env | {"PYTHONPATH": str(args.baseline)}
    if target == "trio-floor":
        return [sys.executable, str(FLOOR)], env
    if target in ("relay", "routing-relay"):
        relay = HERE / "servers" / ("trio_relay.py" if target == "relay" else "trio_routing_relay.py")
        return [sys.executable, str(relay), sys.executable, str(OURS)], env
    if target == "baseline":
        env["PYTHONPATH"] = str(args.baseline)  # another checkout's trio_mcp first
    return [sys.executable, str(OURS)], env


def run_one(
    target: str, concurrency: int, calls: int, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    argv, env = command(target, args, workdir)
    prof = None
    if args.profile is not None and target in ("trio-mcp", "gateway", "routing-relay"):
        # Our server, or the gateway's or the routing relay's process (not its server).
        prof = Path(args.profile) / f"{target}-c{concurrency}.prof"
        argv = [sys.executable, str(HERE / "servers" / "profiled.py"), str(prof), *argv[1:]]
    driver = Driver(argv, env)
    if target.startswith("gateway") or target == "routing-relay":
        driver.tool = b"echo__echo"  # the gateway's name for the server's tool
    try:
        driver.initialize()
        pids = server_pids(driver, target)
        driver.calls(args.warmup, concurrency)
        if prof is not None:
            os.kill(driver.proc.pid, signal.SIGUSR1)  # start profiling
        before, front_before = cpu_seconds(pids), cpu_ns(driver.proc.pid) or 0
        wall = driver.calls(calls, concurrency)
        cpu = cpu_seconds(pids) - before
        front = (cpu_ns(driver.proc.pid) or 0) - front_before
    finally:
        status = driver.close()
    if status != 0:
        raise RuntimeError(f"{target} exited with {status}")
    return {
        "target": target,
        "concurrency": concurrency,
        "calls": calls,
        "server_cpu_us": round(cpu / calls * 1e6, 1),
        # The process spawned alone (the gateway or relay without its server), from schedstat (ns).
        "front_cpu_us": round(front / calls / 1e3, 1),
        "calls_per_s": round(calls / wall),
    }


def _totals(path: Path) -> int:
    """The instruction count of one callgrind output file."""
    text = path.read_text(errors="replace")
    match = re.search(r"^summary:\s+(\d+)", text, re.MULTILINE) or re.search(
        r"^totals:\s+(\d+)", text, re.MULTILINE
    )
    if match is None:
        raise RuntimeError(f"no totals in {path}")
    return int(match.group(1))


def callgrind(target: str, concurrency: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Instructions per call of our server (or of the gateway or relay process,
    not its server): two runs, ``calls`` and ``2 * calls`` measured calls; with
    ``--steady``, one run counting the measured calls alone (instrumentation
    switched on after the warm-up with ``callgrind_control``, then dumped), free
    of what start-up and shutdown do differently from one run to the next."""
    counts = []
    for n in (args.calls,) if args.steady else (args.calls, 2 * args.calls):
        out = workdir / f"cg.{target}.c{concurrency}.{n}"
        argv, env = command(target, args, workdir)
        steady = ["--instr-atstart=no"] if args.steady else []
        argv = ["valgrind", "--tool=callgrind", *steady, f"--callgrind-out-file={out}", *argv]
        driver = Driver(argv, env, read_timeout=10 * READ_TIMEOUT)
        if target.startswith("gateway") or target == "routing-relay":
            driver.tool = b"echo__echo"
        try:
            driver.initialize()
            driver.calls(args.warmup, concurrency)
            if args.steady:
                pid = str(driver.proc.pid)
                subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
                driver.calls(n, concurrency)
                subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
            else:
                driver.calls(n, concurrency)
        finally:
            driver.close()
        # With --steady, the dump made by callgrind_control -d (``out.1``) holds the measured calls.
        counts.append(_totals(out.with_name(out.name + ".1") if args.steady else out))
    per_call = counts[0] / args.calls if args.steady else (counts[1] - counts[0]) / args.calls
    return {
        "target": target,
        "concurrency": concurrency,
        "calls": args.calls,
        "instructions_per_call": round(per_call),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--targets",
        default="trio-mcp,ts-sdk",
        help="trio-mcp, ts-sdk, trio-floor, gateway, gateway-baseline, relay, routing-relay, baseline "
        "(default %(default)s)",
    )
    parser.add_argument("--concurrencies", default="1,8,64,256", help="calls in flight (default %(default)s)")
    parser.add_argument(
        "--calls", type=int, default=10000, help="measured calls per row (default %(default)s)"
    )
    parser.add_argument(
        "--warmup", type=int, default=2000, help="calls before the measured ones (default %(default)s)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default %(default)s)")
    parser.add_argument("--node", default=None, help="node binary (default: the pinned Node 22, else PATH)")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="the src directory of another trio-mcp checkout: target `baseline` runs our server with it",
    )
    parser.add_argument("--profile", default=None, help="cProfile our server into this directory")
    parser.add_argument(
        "--callgrind", action="store_true", help="instructions per call of our server (valgrind)"
    )
    parser.add_argument(
        "--steady",
        action="store_true",
        help="with --callgrind: count the measured calls alone in one run (callgrind_control), "
        "not the difference of two runs",
    )
    args = parser.parse_args(argv)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    concurrencies = [int(c) for c in args.concurrencies.split(",")]
    args.node = args.node or node_binary()
    if {"baseline", "gateway-baseline"} & set(targets) and args.baseline is None:
        parser.error("targets baseline and gateway-baseline need --baseline SRC_DIR")
    if "ts-sdk" in targets and args.node is None:
        parser.error("ts-sdk needs node (bash scripts/setup-interop)")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if args.callgrind:
            if shutil.which("valgrind") is None:
                parser.error("--callgrind needs valgrind")
            if args.steady and shutil.which("callgrind_control") is None:
                parser.error("--steady needs callgrind_control (valgrind's)")
            for c in concurrencies:
                for target in targets:
                    if target != "ts-sdk":
                        row = callgrind(target, c, args, workdir) | {"load": load_average()}
                        print(json.dumps(row), flush=True)
            return 0
        if args.profile is not None:
            Path(args.profile).mkdir(parents=True, exist_ok=True)
        for r in range(args.rounds):
            order = targets[r % len(targets) :] + targets[: r % len(targets)]
            load = load_average()
            for c in concurrencies:
                for target in order:
                    row = run_one(target, c, args.calls, args, workdir) | {"round": r + 1, "load": load}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    print()
    print(f"{'target':<10} {'in flight':>9} {'server CPU us/call (median)':>28} {'calls/s (median)':>17}")
    for c in concurrencies:
        for target in targets:
            mine = [x for x in rows if x["target"] == target and x["concurrency"] == c]
            cpu = statistics.median(x["server_cpu_us"] for x in mine)
            cps = statistics.median(x["calls_per_s"] for x in mine)
            print(f"{target:<10} {c:>9} {cpu:>28.1f} {cps:>17.0f}")
    for c in concurrencies:
        med = {
            t: statistics.median(
                x["server_cpu_us"] for x in rows if x["target"] == t and x["concurrency"] == c
            )
            for t in targets
        }
        if "trio-mcp" in med and "ts-sdk" in med:
            print(f"c{c}: TS CPU/call / ours = {med['ts-sdk'] / med['trio-mcp']:.2f}")
        if "trio-mcp" in med and "baseline" in med:
            print(f"c{c}: baseline CPU/call / ours = {med['baseline'] / med['trio-mcp']:.2f}")
        if "trio-floor" in med:
            for name in ("trio-mcp", "baseline"):
                if name in med:
                    print(
                        f"c{c}: {name} CPU/call above the trio floor = {med[name] - med['trio-floor']:.1f} us"
                    )
        for proxy in PROXIES:
            if "trio-mcp" in med and proxy in med:
                print(f"c{c}: direct CPU/call / {proxy} = {med['trio-mcp'] / med[proxy]:.2f}")
            if proxy in med:
                own = statistics.median(
                    x["front_cpu_us"] for x in rows if x["target"] == proxy and x["concurrency"] == c
                )
                print(f"c{c}: {proxy} process alone CPU/call = {own:.1f} us")
    print(f"load average now {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
