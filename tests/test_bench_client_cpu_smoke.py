"""Smoke test of benchmarks/bench_client_cpu.py: it runs end to end (our
client in a child process against the trio floor server, interleaved with a
baseline ``src`` and the trio floor client) and prints a positive CPU figure
per target and concurrency. The numbers themselves are not asserted on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_client_cpu_runs_and_reports_each_target() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_client_cpu.py",
            "--rounds",
            "1",
            "--calls",
            "40",
            "--warmup",
            "10",
            "--concurrencies",
            "1,4",
            "--baseline",
            str(ROOT / "src"),
            "--floor",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    medians = re.findall(r"^(\w+)\s+c=(\d+)\s+median\s+([\d.]+) us/call", out.stdout, re.MULTILINE)
    assert {(label, int(c)) for label, c, _ in medians} == {
        ("baseline", 1),
        ("ours", 1),
        ("baseline", 4),
        ("ours", 4),
        ("floor", 1),
        ("floor", 4),
    }
    assert all(float(value) > 0 for _, _, value in medians)
    assert "ours / baseline" in out.stdout
