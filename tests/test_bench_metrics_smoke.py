"""Smoke test of benchmarks/bench_metrics.py: it runs end to end and prints
its JSON summary with a row per variant. No timing thresholds: the figures
themselves are not asserted on, only that each was measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_metrics_runs_and_reports_every_variant() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_metrics.py",
            "--rounds",
            "1",
            "--calls",
            "50",
            "--profile-calls",
            "20",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert summary["bench"] == "metrics"
    for figure in ("calls_per_s", "cpu_us_per_call", "py_calls_per_request"):
        assert set(summary[figure]) == {"off", "noop", "on", "native"}
        assert all(value > 0 for value in summary[figure].values())
    # The middleware adds Python calls to each request: the profile sees them.
    calls = summary["py_calls_per_request"]
    assert calls["off"] < calls["noop"] < calls["on"]
