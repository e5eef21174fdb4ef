"""Smoke test of benchmarks/bench_workers_http.py: one short round of
``trio-mcp run -t http`` as 1 process and as 2 worker processes, driven by
the real Node driver; its JSON document has every row and ratio with
positive numbers, the server CPU summed over the right processes, and no
process it started is left running. No timing thresholds."""

from __future__ import annotations

import json
import sys
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
