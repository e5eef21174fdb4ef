"""What the process benchmarks share: server processes that print their URL
and stop when their stdin closes, the Node drivers and their npm peers, what
``/proc`` says about a process (peak RSS), running every target in
interleaved rounds, and the medians and per-round ratios of their rows.

Standard library only.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from _report import find, label, load_average, sdk_env

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DRIVERS = HERE / "drivers"
#: The pinned npm peers (undici, the TypeScript SDK, Node 22), installed by
#: ``bash scripts/setup-interop``.
NPM_DIR = ROOT / "tests" / "interop"
PINNED_NODE = NPM_DIR / "node_modules" / ".bin" / "node"
SERVER_START_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0
T = TypeVar("T")


def node_binary() -> str | None:
    """The pinned Node 22 if installed, else ``node`` on the PATH, else ``None``."""
    if PINNED_NODE.exists():
        return str(PINNED_NODE)
    return shutil.which("node")


def npm_peers_installed() -> bool:
    """The npm packages the Node drivers load are installed."""
    modules = NPM_DIR / "node_modules"
    return all((modules / name / "package.json").exists() for name in ("undici", "@modelcontextprotocol/sdk"))


def missing_parts(node: str | None, sdk_python: Path | None) -> list[str]:
    """What a Node-driven benchmark needs and does not find (``sdk_python``:
    the official SDK venv's python, when a target needs it)."""
    missing = []
    if node is None:
        missing.append("node (Node.js >= 20)")
    if not npm_peers_installed():
        missing.append(f"the npm peers in {NPM_DIR.relative_to(ROOT)}/node_modules")
    if sdk_python is not None and not sdk_python.exists():
        missing.append(f"the official SDK venv ({sdk_python})")
    return missing


def npm_version(name: str) -> str | None:
    """The installed version of one of the pinned npm peers."""
    try:
        with open(NPM_DIR / "node_modules" / name / "package.json") as f:
            return str(json.load(f)["version"])
    except (OSError, ValueError, KeyError):
        return None


def node_version(node: str) -> str:
    return subprocess.run(
        [node, "--version"], capture_output=True, text=True, timeout=30, check=True
    ).stdout.strip()


def sdk_version(python: Path) -> str | None:
    """The official SDK's version in its venv."""
    code = "import importlib.metadata as m; print(m.version('mcp'))"
    try:
        out = subprocess.run(
            [str(python), "-c", code], env=sdk_env(), capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def peak_rss_mb(pid: int) -> float | None:
    """``VmHWM`` of a live process (its peak resident set), in MB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def clock_ticks() -> int:
    """Clock ticks per second of ``/proc/<pid>/stat``'s utime and stime."""
    return os.sysconf("SC_CLK_TCK")


def stop_process(proc: subprocess.Popen[Any]) -> int | None:
    """Close its stdin (our servers stop at EOF), then SIGTERM, then SIGKILL;
    each step bounded. Returns its exit status."""
    if proc.poll() is None:
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    return proc.returncode


class UrlServer:
    """A server process that prints ``url <url>`` on its first stdout line
    once it listens and stops when its stdin closes: started, its URL read
    (bounded), stopped with :func:`stop_process`."""

    def __init__(self, name: str, cmd: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            list(cmd), cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            self.url = self._read_url(SERVER_START_TIMEOUT)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_url(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buffer = b""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"the {self.name} server printed no URL within {timeout:g} s")
                if selector.select(left):
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        raise RuntimeError(
                            f"the {self.name} server exited (status {self.proc.wait()}) before listening"
                        )
                    buffer += chunk
        line = buffer.split(b"\n", 1)[0].decode()
        if not line.startswith("url http"):
            raise RuntimeError(f"unexpected first line from the {self.name} server: {line!r}")
        return line.split()[1]

    def stop(self) -> int | None:
        return stop_process(self.proc)


def run_driver(node: str, script: str, options: dict[str, Any], budget: float) -> list[dict[str, Any]]:
    """Run a Node driver of ``drivers/`` with its JSON options; its JSON lines
    (one per row). Raises ``RuntimeError`` when it fails or overruns."""
    cmd = [node, str(DRIVERS / script), json.dumps(options)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=budget)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"{script} did not finish within {budget:g} s") from None
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"{script} exited with status {proc.returncode}")
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of the rounds' values."""
    return {
        "median": round(statistics.median(values), 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
    }


def medians(
    rows: Sequence[dict[str, Any]], keys: Sequence[str], metrics: Sequence[str]
) -> list[dict[str, Any]]:
    """One entry per distinct value of ``keys`` among ``rows`` (in the order
    first seen): those values, and the :func:`spread` of each metric over the rows."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    out = []
    for key, mine in groups.items():
        entry: dict[str, Any] = dict(zip(keys, key))
        for metric in metrics:
            values = [r[metric] for r in mine if r.get(metric) is not None]
            if values:
                entry[metric] = spread(values)
        out.append(entry)
    return out


def round_ratios(
    rows: Sequence[dict[str, Any]], metric: str, num: str, den: str, keys: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """``metric`` of impl ``num`` over impl ``den`` in each round, for each
    value of ``keys`` (named like ``handshake c64``), with its :func:`spread`:
    ``{"handshake c64": {"median": .., "min": .., "max": .., "rounds": {"1": ..}}}``."""
    per_key: dict[str, dict[str, float]] = {}
    for a in rows:
        if a["impl"] != num or not a.get(metric):
            continue
        match = {k: a[k] for k in keys}
        b = find(list(rows), round=a["round"], impl=den, **match)
        if b is None or not b.get(metric):
            continue
        name = " ".join(label(v) if k == "concurrency" else str(v) for k, v in match.items())
        per_key.setdefault(name, {})[str(a["round"])] = round(a[metric] / b[metric], 2)
    return {name: {**spread(list(v.values())), "rounds": v} for name, v in per_key.items()}


def ratio_table(ratios: dict[str, dict[str, dict[str, Any]]], rounds: Sequence[int], what: str) -> str:
    """The ratios of :func:`round_ratios` by name: one line per name and key,
    its median and its value in each round."""
    header = ("ratio", what, "median", *(f"round {n}" for n in rounds))
    body = []
    for name, per in ratios.items():
        for key, value in per.items():
            cells = [f"{value['rounds'][str(n)]:.2f}" if str(n) in value["rounds"] else "n/a" for n in rounds]
            body.append((name, key, f"{value['median']:.2f}", *cells))
    return text_table(header, body, left=2)


#: The columns of :func:`median_table` after the grouping keys: (metric, title, digits).
MEDIAN_COLUMNS = (
    ("calls_per_s", "calls/s", 0),
    ("p50_us", "p50 µs", 0),
    ("p99_us", "p99 µs", 0),
    ("server_cpu_us", "server CPU µs/call", 1),
    ("driver_cpu_us", "driver CPU µs/call", 1),
)


def median_table(entries: Sequence[dict[str, Any]], keys: Sequence[tuple[str, str]]) -> str:
    """The entries of :func:`medians`: its ``keys`` (field, title), then
    each of :data:`MEDIAN_COLUMNS` as ``median (min–max)``."""
    header = (*(title for _, title in keys), *(title for _, title, _ in MEDIAN_COLUMNS))
    body = [
        (
            *(str(m[field]) for field, _ in keys),
            *(fmt_spread(m.get(metric), digits) for metric, _, digits in MEDIAN_COLUMNS),
        )
        for m in entries
    ]
    return "median over the rounds (min–max):\n" + text_table(header, body, left=len(keys) - 1)


def load_line(rounds: Sequence[dict[str, Any]]) -> str:
    return "load average (1 min) per round: " + ", ".join(
        f"round {r['round']} {r['load_before']}→{r['load_after']}" for r in rounds
    )


def run_rounds(
    count: int, targets: Sequence[T], name: Callable[[T], str], run: Callable[[T, int], None], tag: str
) -> tuple[list[dict[str, Any]], str | None]:
    """``run(target, round)`` for every target in each of ``count`` rounds,
    one at a time, the order rotated by one every round; the 1-minute load
    average before and after each round. Stops at the first failure
    (``RuntimeError``, ``OSError``, a subprocess error) and returns it as text."""
    rounds: list[dict[str, Any]] = []
    failure = None
    for n in range(1, count + 1):
        info: dict[str, Any] = {"round": n, "load_before": load_average()}
        shift = (n - 1) % len(targets)
        for target in [*targets[shift:], *targets[:shift]]:
            print(f"[{tag}] round {n}/{count}: {name(target)}", file=sys.stderr, flush=True)
            try:
                run(target, n)
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                failure = f"round {n}, {name(target)}: {exc}"
                break
        info["load_after"] = load_average()
        rounds.append(info)
        if failure is not None:
            break
    return rounds, failure


def fmt_spread(s: dict[str, float] | None, digits: int = 0) -> str:
    """``median (min–max)``, or ``n/a``."""
    if not s:
        return "n/a"
    if s["min"] == s["max"]:
        return f"{s['median']:,.{digits}f}"
    return f"{s['median']:,.{digits}f} ({s['min']:,.{digits}f}–{s['max']:,.{digits}f})"


def text_table(header: Sequence[str], body: Sequence[Sequence[str]], left: int = 1) -> str:
    """Columns padded to their widest cell; the first ``left`` columns left-aligned."""
    widths = [max([len(h), *(len(b[i]) for b in body)]) for i, h in enumerate(header)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        )

    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *(fmt(b) for b in body)])


def run_isolated(cmd: Sequence[str], timeout: float) -> tuple[subprocess.CompletedProcess[str], bool]:
    """Run ``cmd`` (stdin closed, output captured) in a process group of its
    own, killed whole if it overruns ``timeout`` (``RuntimeError``). Returns
    its result and whether any process of the group outlived it (those are
    killed before returning)."""
    proc = subprocess.Popen(
        list(cmd),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise RuntimeError(f"{cmd} did not finish in {timeout:g} s\nstdout:\n{out}\nstderr:\n{err}") from None
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        survivors = False
    else:
        survivors = True
        os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), survivors
