"""Smoke test of benchmarks/bench_workers_http.py: one short round of
``trio-mcp run -t http`` as 1 process and as 2 worker processes, driven by
the real Node driver; its JSON document has every row and ratio with
positive numbers, the server CPU summed over the right processes, and no
process it started is left running. No timing thresholds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import _procs as procs

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(
        procs.node_binary() is None or not procs.npm_peers_installed(),
        reason="node or the npm peers are absent (bash scripts/setup-interop installs them)",
    ),
]


def test_bench_workers_http_runs_both_targets_and_reports_the_ratios() -> None:
    script = [sys.executable, "benchmarks/bench_workers_http.py", "--rounds", "1", "--seconds", "0.5"]
    out, survivors = procs.run_isolated([*script, "--concurrency", "8", "--connections", "8", "--json"], 300)
    assert out.returncode == 0, out.stderr
    assert not survivors, "a process of the benchmark outlived it"
    doc = json.loads(out.stdout)
    rows = {(r["impl"], r["era"]): r for r in doc["rows"]}
    assert set(rows) == {
        (impl, era) for impl in ("1 process", "2 workers") for era in ("2026-07-28", "handshake")
    }
    for row in rows.values():
        assert row["calls"] > 0 and row["calls_per_s"] > 0 and row["server_cpu_us"] > 0
    assert {r["processes"] for r in doc["rows"] if r["impl"] == "2 workers"} == {3}  # parent + 2
    assert {r["processes"] for r in doc["rows"] if r["impl"] == "1 process"} == {1}
    ratios = doc["summary"]["ratios"]["calls_per_s 2 workers/1 process"]
    assert set(ratios) == {"2026-07-28 c8", "handshake c8"}
    assert all(value["median"] > 0 for value in ratios.values())
    assert doc["rounds"][0]["load_before"] is not None


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_bench_workers_http_session_rows_on_a_real_redis(tmp_path: Path) -> None:
    """The session rows, both kinds (any connection, pinned), with the
    sessions' connections spread evenly over the workers and each unpinned
    request sent to the next worker in turn (``--balance``): each row reports
    its share of forwarded calls and redis-server's CPU, and the ratios."""
    sock = tmp_path / "redis.sock"
    redis = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", str(sock), "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)  # nothing to wait on but the socket file
        names = "1 process redis,2 workers redis,1 process redis pinned,2 workers redis pinned"
        script = [sys.executable, "benchmarks/bench_workers_http.py", "--rounds", "1", "--seconds", "0.5"]
        options = [
            "--prime",
            "0.5",
            "--concurrency",
            "8",
            "--connections",
            "8",
            "--sessions",
            "8",
            "--balance",
        ]
        out, survivors = procs.run_isolated(
            [*script, *options, "--redis", f"unix://{sock}", "--targets", names, "--json"], 400
        )
    finally:
        procs.stop_process(redis)
    assert out.returncode == 0, out.stderr
    assert not survivors, "a process of the benchmark outlived it"
    doc = json.loads(out.stdout)
    rows = {r["impl"]: r for r in doc["rows"]}
    assert set(rows) == set(names.split(","))
    for row in rows.values():
        assert row["era"] == "handshake" and row["calls_per_s"] > 0
        assert row["forwarded"] >= 0 and row["redis_cpu_us"] >= 0 and row["capacity"] > 0
    # One process owns every session: nothing to forward.
    assert rows["1 process redis"]["forwarded"] == 0 == rows["1 process redis pinned"]["forwarded"]
    assert doc["settings"]["rotate_by"] == "process"
    for name in ("2 workers redis", "2 workers redis pinned"):
        assert sorted(rows[name]["connections_per_process"].values()) == [4, 4]
    # Every request to the next worker in turn: about half reach the one that
    # does not own their session (≈: Redis's count over an estimate of the
    # run's calls); pinned, every call is served where its session lives.
    assert rows["2 workers redis"]["forwarded"] > 0.15
    assert rows["2 workers redis pinned"]["forwarded"] < 0.05
    ratios = doc["summary"]["ratios"]
    for pair in ("2 workers redis/1 process redis", "2 workers redis pinned/1 process redis pinned"):
        assert ratios[f"calls_per_s {pair}"]["handshake c8"]["median"] > 0
        assert ratios[f"capacity {pair}"]["handshake c8"]["median"] > 0
