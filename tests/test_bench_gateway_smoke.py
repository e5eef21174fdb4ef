"""Smoke test of benchmarks/bench_gateway.py: one short round runs end to
end (a direct server, a gateway process and the trio relay floor in front of
one) and prints every row and a summary with the ratios of both. The numbers are not asserted on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_gateway_runs_and_reports_every_row() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_gateway.py",
            "--rounds",
            "1",
            "--seconds",
            "0.2",
            "--concurrency",
            "8",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    objects = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    rows = [o for o in objects if not o.get("summary")]
    assert {(r["impl"], r["concurrency"]) for r in rows} == {
        (impl, c) for impl in ("direct", "gateway", "relay") for c in (1, 8)
    }
    for row in rows:
        assert row["bench"] == "gateway" and row["calls"] > 0 and row["servers_cpu_us_per_call"] > 0, row
    (summary,) = [o for o in objects if o.get("summary")]
    for key in ("seq", "c8"):
        for proxy in ("gateway", "relay"):
            entry = summary[key]
            assert entry[f"{proxy}_ratio"] > 0 and len(entry[f"{proxy}_ratio_per_round"]) == 1, summary
            assert f"{proxy}_added_cpu_us_per_call" in entry, summary
    assert "loadavg_before" in summary and "calls/s" in proc.stderr
