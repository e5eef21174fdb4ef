"""Smoke test of benchmarks/bench_http_asgi.py: a few calls of every app and
era straight into the ASGI apps; its JSON document has a positive CPU time
for each. No thresholds on the figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 300

APPS = ("floor", "minimal", "trio-mcp", "trio-mcp sse")
ERAS = ("handshake", "2026-07-28")


def test_bench_http_asgi_reports_every_app_and_era() -> None:
    cmd = [sys.executable, "benchmarks/bench_http_asgi.py", "--calls", "20", "--repeats", "1", "--json"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["calls"] == 20
    rows = {(r["app"], r["era"]): r["value"] for r in doc["rows"]}
    assert set(rows) == {(a, e) for a in APPS for e in ERAS}
    assert all(value > 0 for value in rows.values())


def test_bench_http_asgi_profiles_one_target() -> None:
    cmd = [
        sys.executable,
        "benchmarks/bench_http_asgi.py",
        "--profile",
        "trio-mcp:handshake",
        "--calls",
        "20",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("trio-mcp handshake: ")
    assert "Python calls per call" in proc.stdout
