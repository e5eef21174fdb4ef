"""Smoke test of benchmarks/bench_inprocess.py: it runs end to end and prints
every expected JSON line with positive numbers. No timing thresholds: the
numbers themselves are not asserted on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SDK_PYTHON = ROOT / ".cache" / "sdk-venv" / "bin" / "python"

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(
        not SDK_PYTHON.exists(),
        reason="official SDK venv .cache/sdk-venv is absent (bash scripts/setup-interop creates it)",
    ),
]

EXPECTED = {
    ("trio-mcp", "zero-copy", 1),
    ("trio-mcp", "zero-copy", 64),
    ("trio-mcp", "bytes", 1),
    ("trio-mcp", "bytes", 64),
    ("trio-mcp", "inline", 1),
    ("trio-mcp", "inline", 64),
    ("trio-mcp", "zero-copy 2026", 1),
    ("trio-mcp", "zero-copy 2026", 64),
    ("trio-mcp", "bytes 2026", 1),
    ("trio-mcp", "bytes 2026", 64),
    ("trio-mcp", "inline 2026", 1),
    ("trio-mcp", "inline 2026", 64),
    ("mcp-sdk", "legacy", 1),
    ("mcp-sdk", "legacy", 64),
}
OPTIONAL = {("mcp-sdk", "2026-07-28", 1), ("mcp-sdk", "2026-07-28", 64)}
RATIO_KEYS = {"zero-copy seq", "zero-copy c64", "bytes seq", "bytes c64", "inline seq", "inline c64"}


def test_bench_inprocess_runs_and_reports_every_row() -> None:
    proc = subprocess.run(
        [sys.executable, "benchmarks/bench_inprocess.py", "--seconds", "0.2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"

    objects = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    rows = [o for o in objects if o.get("bench") == "inprocess" and not o.get("summary")]
    summaries = [o for o in objects if o.get("bench") == "inprocess" and o.get("summary")]

    seen = {(r["impl"], r["mode"], r["concurrency"]) for r in rows}
    assert EXPECTED <= seen, f"missing rows: {EXPECTED - seen}"
    assert seen <= EXPECTED | OPTIONAL, f"unexpected rows: {seen - EXPECTED - OPTIONAL}"
    assert len(rows) == len(seen), "a row was printed twice"
    for row in rows:
        for key in ("calls_per_s", "mean_us", "p50_us", "p99_us", "calls"):
            assert isinstance(row[key], (int, float)) and row[key] > 0, (key, row)
        assert row["p50_us"] <= row["p99_us"], row

    assert len(summaries) == 1, summaries
    for key in ("ratios", "p50_ratios"):
        ratios = summaries[0][key]
        assert set(ratios) == RATIO_KEYS, key
        assert all(isinstance(v, (int, float)) and v > 0 for v in ratios.values()), (key, ratios)
    # the human-readable part is there too
    assert "calls/s" in proc.stdout and "× SDK legacy" in proc.stdout
