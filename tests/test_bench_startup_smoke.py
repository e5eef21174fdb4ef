"""Smoke test of benchmarks/bench_startup.py: one short round of real
processes (the interpreter, the trio floor server, our echo server, and
``trio-mcp run``, each answering a real ``initialize``); its JSON document
has every spawn with positive wall and CPU times, the differences of each
round, the import profile of our server, and no process it started is left
running. No timing thresholds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import _procs as procs
import bench_startup

TARGETS = ("python", "trio-floor", "trio-mcp", "trio-mcp run")
TIMEOUT = 300


def test_bench_startup_times_every_target_and_profiles_our_imports() -> None:
    cmd = [
        sys.executable,
        "benchmarks/bench_startup.py",
        *("--rounds", "1", "--spawns", "2", "--imports", "1", "--json"),
        *("--targets", ",".join(TARGETS)),
    ]
    proc, survivors = procs.run_isolated(cmd, TIMEOUT)
    assert not survivors, "processes started by the benchmark are still running"
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    doc = json.loads(proc.stdout)

    rows = doc["rows"]
    assert sorted(r["impl"] for r in rows) == sorted(t for t in TARGETS for _ in range(2))
    for row in rows:
        assert row["wall_ms"] > 0 and row["cpu_ms"] > 0, row
    differences = doc["summary"]["differences"]
    assert set(differences) == {"ours - floor", "trio-mcp run - floor"}
    assert set(differences["ours - floor"]["rounds"]) == {"1"}

    profile = doc["imports"]
    assert profile["runs"] == 1
    # our server's imports are profiled module by module, ours among them
    assert "trio_mcp.server._app" in profile["ours"]
    assert {"trio", "msgspec"} <= set(profile["groups"])
    assert 0 < profile["ours_ms"] < profile["total_ms"]


def test_differences_are_of_the_per_round_medians() -> None:
    rows = [
        {"round": 1, "impl": "trio-mcp", "wall_ms": 300.0, "cpu_ms": 110.0},
        {"round": 1, "impl": "trio-mcp", "wall_ms": 320.0, "cpu_ms": 130.0},
        {"round": 1, "impl": "trio-floor", "wall_ms": 250.0, "cpu_ms": 100.0},
        {"round": 2, "impl": "trio-mcp", "wall_ms": 290.0, "cpu_ms": 105.0},
        {"round": 2, "impl": "trio-floor", "wall_ms": 260.0, "cpu_ms": 95.0},
    ]
    summary = bench_startup.summarize(rows)
    ours = summary["differences"]["ours - floor"]
    assert ours["rounds"] == {
        "1": {"wall_ms": 60.0, "cpu_ms": 20.0},
        "2": {"wall_ms": 30.0, "cpu_ms": 10.0},
    }
    assert ours["wall_ms"]["median"] == 45.0
    assert summary["medians"]["trio-mcp"]["wall_ms"] == {"median": 300.0, "min": 290.0, "max": 320.0}
    # no base in this run: no difference against one
    assert "ours - base" not in summary["differences"]
