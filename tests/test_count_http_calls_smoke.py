"""Smoke test of benchmarks/count_http_calls.py: a few calls of every target
and era, sequential and 8 in flight, served in process by the real servers
over loopback; its JSON document has every row with positive counts and a
ratio over the floor for each of ours. No thresholds on the counts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 300

TARGETS = ("trio-mcp", "trio-mcp sse", "floor")
ERAS = ("handshake", "2026-07-28")


def test_count_http_calls_reports_every_row() -> None:
    cmd = [
        sys.executable,
        "benchmarks/count_http_calls.py",
        "--calls",
        "20",
        "--concurrency",
        "8",
        "--top",
        "3",
        "--json",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    rows = {(r["target"], r["era"], r["concurrency"]): r for r in doc["rows"]}
    assert set(rows) == {(t, e, c) for t in TARGETS for e in ERAS for c in (1, 8)}
    for row in rows.values():
        assert row["calls"] == 20
        assert row["py_calls"] > 0 and row["task_steps"] > 0 and row["sends"] > 0
        assert row["instructions"] is None  # no --callgrind
    assert all(rows[(t, ERAS[0], 1)]["top"] for t in TARGETS)  # --top: the first row of each target
    ratios = {(r["target"], r["era"], r["concurrency"]) for r in doc["ratios"]}
    assert ratios == {(t, e, c) for t in TARGETS[:2] for e in ERAS for c in (1, 8)}
    assert all(r["py_calls"] > 0 and r["task_steps"] > 0 for r in doc["ratios"])
