"""Start-up of a stdio server, spawn -> the first answer to ``initialize``, against its floors.

    .venv/bin/python benchmarks/bench_startup.py                     # 5 rounds, 3 spawns per target and round
    .venv/bin/python benchmarks/bench_startup.py --rounds 9 --spawns 2
    .venv/bin/python benchmarks/bench_startup.py --imports 7         # and where our import's CPU goes
    .venv/bin/python benchmarks/bench_startup.py --targets trio-floor,trio-mcp --json
    .venv/bin/python benchmarks/bench_startup.py --base /tmp/main/src   # and main's servers, interleaved
    .venv/bin/python benchmarks/bench_startup.py --rounds 0 --callgrind --base /tmp/main/src   # instructions

Targets, every one in each round (the order rotated every round), each
spawned ``--spawns`` times in a row:

* the interpreter alone, to its exit: ``python -c pass`` (``python``), with
  ``-S`` (no ``site``) and with ``-I`` (isolated);
* imports alone, to exit: ``python -c "import trio"`` (``import trio``), ``python -c
  "import msgspec, attrs, cattrs"`` (``import msgspec+attrs+cattrs``);
* servers, to the first answer to ``initialize`` (a JSON-RPC line written to
  their stdin as soon as they are spawned): ``trio-floor``
  (``servers/trio_floor_server.py``: trio and msgspec, no MCP, the floor of
  any server on our stack), ``trio-mcp`` (``servers/trio_echo_server.py``, the
  server ``bench_stdio_neutral.py`` spawns), ``trio-mcp run`` (the console
  script serving ``servers/trio_echo_app.py`` with ``-t stdio``), ``ts-sdk``
  (``drivers/ts_stdio_server.mjs``), ``node-echo`` (Node's floor) and
  ``mcp-sdk`` (the official Python SDK, not run by default: about 1.5 s).

Per spawn: the wall time from before the spawn to the answer (or the exit),
and the process's CPU time (user + sys, from ``getrusage`` of the reaped
child: its whole life, shutdown included), which a busy machine inflates
much less than the wall time. Reported: medians (min–max) over every spawn,
and per round the differences that matter (ours - floor, in ms) with each
round's load average.

``--imports N`` then runs our server's imports (``trio_echo_server.py
--import-only``) N times under an import hook that charges each module the
CPU time (``time.thread_time_ns``) of its own execution, without the modules
it imports (``python -X importtime`` does the same in wall time, which a busy
machine's preemptions make useless): the median per module, summed by
package. ``--callgrind`` counts the instructions each Python target executes
(once each, under valgrind: the figure a loaded machine does not move): a
server's from spawn to its answer, the others' to the end of their code. ``--base SRC`` adds ``trio-mcp (base)`` and ``trio-mcp run
(base)``: the same servers with trio-mcp from another source tree (``src`` of
``git worktree add --detach /tmp/main main``), for before/after in one run.
Before anything runs, trio-mcp's byte-code cache is brought up to date (as
``pip install`` does): with ``PYTHONDONTWRITEBYTECODE`` set, every spawn of
an editable install would compile our sources otherwise.
"""

from __future__ import annotations

import argparse
import compileall
import dataclasses
import json
import os
import resource
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _procs import (
    DRIVERS,
    ROOT,
    SDK_PYTHON,
    emit,
    fmt_spread,
    load_line,
    node_binary,
    run_rounds,
    spread,
    stop_process,
    text_table,
)
from _report import load_average, sdk_env

BENCH = "startup"
OURS = "trio-mcp"
FLOOR = "trio-floor"
TIMEOUT = 30.0  # per spawn
CALLGRIND_TIMEOUT = 900.0  # per spawn under valgrind, on a loaded machine
#: Issue 17's target for ours, printed for context, never asserted.
TARGET_MS = 120.0
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench-startup", "version": "1.0"},
    },
}
#: The differences reported per round: (name, minuend, subtrahend).
DIFFERENCES = (
    ("ours - floor", OURS, FLOOR),
    ("trio-mcp run - floor", "trio-mcp run", FLOOR),
    ("ours - base", OURS, f"{OURS} (base)"),
    ("trio-mcp run - base", "trio-mcp run", "trio-mcp run (base)"),
    ("floor - import trio", FLOOR, "import trio"),
    ("import trio - python", "import trio", "python"),
)


@dataclass(frozen=True)
class Target:
    name: str
    argv: tuple[str, ...]
    answers: bool  # a server: timed to its answer to initialize (else to its exit)
    runtime: str = "ours"  # "ours", "sdk" or "node"
    #: trio-mcp's source tree to run (``PYTHONPATH``), when not the installed one (``--base``).
    src: Path | None = None


def all_targets(node: str | None, sdk_python: Path, base: Path | None) -> list[Target]:
    py = sys.executable
    script = Path(py).with_name("trio-mcp")
    run = (str(script),) if script.exists() else (py, "-m", "trio_mcp.cli")
    targets = [
        Target("python", (py, "-c", "pass"), False),
        Target("python -S", (py, "-S", "-c", "pass"), False),
        Target("python -I", (py, "-I", "-c", "pass"), False),
        Target("import trio", (py, "-c", "import trio"), False),
        Target("import msgspec+attrs+cattrs", (py, "-c", "import msgspec, attrs, cattrs"), False),
        Target(FLOOR, (py, str(HERE / "servers" / "trio_floor_server.py")), True),
        Target(OURS, (py, str(HERE / "servers" / "trio_echo_server.py")), True),
        Target(
            "trio-mcp run", (*run, "run", str(HERE / "servers" / "trio_echo_app.py"), "-t", "stdio"), True
        ),
    ]
    if base is not None:  # the same two servers, trio-mcp's code from another tree
        targets += [
            Target(f"{t.name} (base)", t.argv, True, src=base)
            for t in targets
            if t.name in (OURS, "trio-mcp run")
        ]
    if node is not None:
        targets.append(Target("ts-sdk", (node, str(DRIVERS / "ts_stdio_server.mjs")), True, "node"))
        targets.append(Target("node-echo", (node, str(DRIVERS / "echo_stdio_server.mjs")), True, "node"))
    targets.append(
        Target("mcp-sdk", (str(sdk_python), str(HERE / "servers" / "sdk_echo_server.py")), True, "sdk")
    )
    return targets


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _read_answer(proc: subprocess.Popen[bytes], deadline: float) -> None:
    """Read the process's stdout until a line holds the answer to request 1."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise RuntimeError("no answer to initialize in time")
            if not selector.select(left):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the server exited (status {proc.wait()}) before answering")
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip() and json.loads(line).get("id") == 1:
                    return


def spawn_once(target: Target, prefix: tuple[str, ...] = (), timeout: float = TIMEOUT) -> tuple[float, float]:
    """Spawn ``target`` once (``prefix`` before its argv: valgrind): (wall ms
    to its answer or exit, CPU ms of its whole life)."""
    env = sdk_env() if target.runtime == "sdk" else dict(os.environ)
    if target.src is not None:
        env["PYTHONPATH"] = str(target.src)
    if prefix:
        env["PYTHONHASHSEED"] = "0"  # the same instructions run after run
    pipe = subprocess.PIPE if target.answers else subprocess.DEVNULL
    cpu = _children_cpu()
    begin = time.perf_counter()
    proc = subprocess.Popen((*prefix, *target.argv), cwd=ROOT, env=env, stdin=pipe, stdout=pipe)
    try:
        if target.answers:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(INIT).encode() + b"\n")
            proc.stdin.flush()
            _read_answer(proc, begin + timeout)
        else:
            proc.wait(timeout)
        wall = time.perf_counter() - begin
        if prefix and target.answers:
            # counted to its answer: a signal whose default action ends it at
            # once (no handler of trio-mcp run's, no finalization), after
            # which valgrind writes its counts
            proc.send_signal(signal.SIGUSR2)
            proc.wait(timeout)
    finally:
        status = stop_process(proc)
    if prefix and target.answers and status == -signal.SIGUSR2:
        status = 0
    if status != 0:
        raise RuntimeError(f"{target.name} exited with status {status}")
    return wall * 1000, (_children_cpu() - cpu) * 1000


def instructions(target: Target, workdir: Path) -> int:
    """Instructions ``target`` executes (valgrind's callgrind): a server's
    from spawn to its answer to ``initialize``; a ``-c`` target's to the end of
    its code (run with ``os._exit`` appended: neither counts the interpreter's
    finalization, which costs tens of millions of instructions)."""
    out = workdir / f"callgrind.{os.getpid()}.out"
    prefix = ("valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={out}")
    if not target.answers and target.argv[-2] == "-c":
        target = dataclasses.replace(
            target, argv=(*target.argv[:-1], f"{target.argv[-1]}; import os; os._exit(0)")
        )
    spawn_once(target, prefix, CALLGRIND_TIMEOUT)
    with open(out) as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {out}")


# The import hook of --imports: run with ``python -c HOOK script --import-only``.
# It charges each module the thread CPU time of its own execution (what it
# imports is charged to those modules) and prints ``name<TAB>self_ns<TAB>total_ns``.
HOOK = """
import runpy, sys, time
import importlib._bootstrap as bootstrap
clock = time.thread_time_ns
original = bootstrap._find_and_load
stack, seen = [], {}
def find_and_load(name, import_):
    begin = clock()
    stack.append(0)
    try:
        return original(name, import_)
    finally:
        total = clock() - begin
        children = stack.pop()
        if stack:
            stack[-1] += total
        if name not in seen:
            seen[name] = (total - children, total)
bootstrap._find_and_load = find_and_load
script = sys.argv[1]
sys.argv = sys.argv[1:]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit:
    pass
bootstrap._find_and_load = original
for name, (own, total) in seen.items():
    print(f"{name}\\t{own}\\t{total}")
"""


def import_profile(runs: int, src: Path | None = None) -> dict[str, Any]:
    """Median CPU ms per module of our server's imports over ``runs`` runs,
    and summed by package (trio-mcp's by subpackage); ``src``: trio-mcp's
    code from that tree."""
    script = str(HERE / "servers" / "trio_echo_server.py")
    env = None if src is None else dict(os.environ, PYTHONPATH=str(src))
    per: dict[str, list[float]] = {}
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", HOOK, script, "--import-only"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        for line in out.splitlines():
            name, own, _total = line.split("\t")
            per.setdefault(name, []).append(int(own) / 1e6)
    modules = {name: statistics.median(values + [0.0] * (runs - len(values))) for name, values in per.items()}
    groups: dict[str, float] = {}
    for name, ms in modules.items():
        parts = name.split(".")
        key = ".".join(parts[:2]) if parts[0] == "trio_mcp" else parts[0]
        if parts[0] not in ("trio_mcp", "trio", "msgspec", "attr", "attrs", "outcome", "sniffio", "idna"):
            key = "sortedcontainers" if parts[0] == "sortedcontainers" else "(stdlib and others)"
        groups[key] = groups.get(key, 0.0) + ms
    ours = {n: round(ms, 2) for n, ms in modules.items() if n.startswith("trio_mcp")}
    return {
        "runs": runs,
        "total_ms": round(sum(modules.values()), 1),
        "ours_ms": round(sum(ours.values()), 1),
        "groups": {k: round(v, 1) for k, v in sorted(groups.items(), key=lambda kv: -kv[1])},
        "ours": dict(sorted(ours.items(), key=lambda kv: -kv[1])),
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        mine = by.setdefault(row["impl"], {"wall_ms": [], "cpu_ms": []})
        mine["wall_ms"].append(row["wall_ms"])
        mine["cpu_ms"].append(row["cpu_ms"])
    medians = {impl: {k: spread(v) for k, v in values.items()} for impl, values in by.items()}
    differences: dict[str, Any] = {}
    for name, a, b in DIFFERENCES:
        per_round = {}
        for n in sorted({r["round"] for r in rows}):
            got = {
                impl: {
                    m: statistics.median(r[m] for r in rows if r["round"] == n and r["impl"] == impl)
                    for m in ("wall_ms", "cpu_ms")
                }
                for impl in (a, b)
                if any(r["round"] == n and r["impl"] == impl for r in rows)
            }
            if len(got) == 2:
                per_round[str(n)] = {m: round(got[a][m] - got[b][m], 1) for m in ("wall_ms", "cpu_ms")}
        if per_round:
            differences[name] = {
                "rounds": per_round,
                **{m: spread([v[m] for v in per_round.values()]) for m in ("wall_ms", "cpu_ms")},
            }
    return {"medians": medians, "differences": differences, "target_ms": TARGET_MS}


def print_report(doc: dict[str, Any]) -> None:
    s = doc["settings"]
    print(
        f"spawn -> first answer to initialize (servers) or exit (the rest); {s['rounds']} rounds, "
        f"{s['spawns']} spawns per target and round; python {s['python']}"
    )
    print(load_line(doc["rounds"]))
    print()
    summary = doc["summary"]
    body = [
        (impl, fmt_spread(m["wall_ms"], 1), fmt_spread(m["cpu_ms"], 1))
        for impl, m in summary["medians"].items()
    ]
    print("median over every spawn (min–max):")
    print(text_table(("target", "wall ms", "CPU ms (user+sys, to exit)"), body))
    print()
    rounds = [r["round"] for r in doc["rounds"]]
    body = []
    for name, d in summary["differences"].items():
        for m, title in (("wall_ms", "wall"), ("cpu_ms", "CPU")):
            cells = [f"{d['rounds'][str(n)][m]:.1f}" if str(n) in d["rounds"] else "n/a" for n in rounds]
            body.append((name, title, f"{d[m]['median']:.1f}", *cells))
    print("differences of the per-round medians, ms:")
    print(text_table(("difference", "of", "median", *(f"round {n}" for n in rounds)), body, left=2))
    print(f"issue 17's target, for context: ours spawn -> initialized ≤ {TARGET_MS:g} ms")
    if counted := doc.get("instructions"):
        print()
        print(
            "instructions executed (valgrind's callgrind): a server's from spawn to its answer to initialize, "
            "the others' to the end of their code (no finalization):"
        )
        floor = counted.get(FLOOR)
        body = []
        for name, n in counted.items():
            base = counted.get(f"{name} (base)")
            body.append(
                (
                    name,
                    f"{n / 1e6:,.1f} M",
                    "" if floor is None else f"{(n - floor) / 1e6:+,.1f} M",
                    "" if base is None else f"{n / base - 1:+.1%}",
                )
            )
        print(text_table(("target", "instructions", "- trio-floor", "vs its base"), body))
    for key, whose in (("imports", "our server's"), ("imports_base", "the base's")):
        if prof := doc.get(key):
            print()
            print(
                f"{whose} imports, CPU ms per module (median of {prof['runs']} runs): "
                f"{prof['total_ms']:.1f} in all, trio-mcp's own modules {prof['ours_ms']:.1f} "
                f"in {len(prof['ours'])} modules"
            )
            print("  by package: " + ", ".join(f"{k} {v:.1f}" for k, v in prof["groups"].items()))
            top = list(prof["ours"].items())[:20]
            print(
                "  trio-mcp's costliest: "
                + ", ".join(f"{k.removeprefix('trio_mcp.')} {v:.1f}" for k, v in top)
            )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--spawns", type=int, default=3, help="spawns per target and round (default 3)")
    parser.add_argument("--targets", default=None, help="comma-separated targets (default: all but mcp-sdk)")
    parser.add_argument("--imports", type=int, default=0, help="runs of the import profile (default 0: none)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the tables")
    parser.add_argument(
        "--sdk-python", type=Path, default=SDK_PYTHON, help="python of the official SDK's venv"
    )
    parser.add_argument("--node", default=None, help="node binary (default: the pinned Node 22, else PATH)")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="then the instructions each of our targets executes, once (valgrind; minutes under load)",
    )
    parser.add_argument(
        "--base",
        type=Path,
        default=None,
        help="another trio-mcp source tree's src (e.g. a git worktree of main): adds its trio-mcp servers",
    )
    args = parser.parse_args(argv)
    if args.rounds < 0 or args.spawns < 1 or args.imports < 0:
        parser.error("--spawns must be >= 1, --rounds and --imports >= 0 (--rounds 0: no timings)")
    if args.callgrind and shutil.which("valgrind") is None:
        parser.error("--callgrind needs valgrind")
    if args.base is not None and not (args.base / "trio_mcp" / "__init__.py").exists():
        parser.error(f"--base {args.base}: no trio_mcp package there")
    by_name = {t.name: t for t in all_targets(args.node or node_binary(), args.sdk_python, args.base)}
    names = (
        [n.strip() for n in args.targets.split(",")]
        if args.targets
        else [n for n in by_name if n != "mcp-sdk"]
    )
    if unknown := [n for n in names if n not in by_name]:
        parser.error(f"unknown targets {unknown}; choose among {list(by_name)}")
    args.targets = [by_name[n] for n in names]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import trio_mcp

    for tree in (Path(trio_mcp.__file__).parent, args.base and args.base / "trio_mcp"):
        if tree:
            compileall.compile_dir(tree, quiet=1)
    rows: list[dict[str, Any]] = []

    def run(target: Target, round_no: int) -> None:
        load = load_average()
        for _ in range(args.spawns):
            wall, cpu = spawn_once(target)
            rows.append(
                {
                    "bench": BENCH,
                    "round": round_no,
                    "impl": target.name,
                    "wall_ms": round(wall, 2),
                    "cpu_ms": round(cpu, 2),
                    "load": load,
                }
            )

    rounds, failure = run_rounds(args.rounds, args.targets, lambda t: t.name, run, "bench_startup")
    counted: dict[str, int] = {}
    if args.callgrind and failure is None:
        with tempfile.TemporaryDirectory() as workdir:
            for target in args.targets:
                if target.runtime == "ours":
                    print(f"[bench_startup] callgrind: {target.name}", file=sys.stderr, flush=True)
                    try:
                        counted[target.name] = instructions(target, Path(workdir))
                    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                        failure = f"callgrind, {target.name}: {exc}"
                        break
    doc: dict[str, Any] = {
        "bench": BENCH,
        "settings": {"rounds": args.rounds, "spawns": args.spawns, "python": sys.version.split()[0]},
        "rounds": rounds,
        "rows": rows,
        "summary": summarize(rows),
    }
    if counted:
        doc["instructions"] = counted
    if args.imports and failure is None:
        doc["imports"] = import_profile(args.imports)
        if args.base is not None:
            doc["imports_base"] = import_profile(args.imports, args.base)
    return emit(doc, args.json, print_report, failure)


if __name__ == "__main__":
    sys.exit(main())
