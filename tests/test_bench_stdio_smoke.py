"""Smoke test of benchmarks/bench_stdio.py: it runs end to end against real
server processes and prints every expected JSON line with positive numbers.
No timing thresholds: the numbers themselves are not asserted on.

What it keeps that the neutral-driver benchmark (bench_stdio_neutral.py)
does not drive: trio-mcp's own stdio client and the official SDK's client,
each against both servers, 64 calls in flight. So it runs the handshake era
only and one timed spawn per server (the 2026-07-28 rows, optional here,
and the spawn statistics are the neutral benchmark's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import _procs as procs

SDK_PYTHON = ROOT / ".cache" / "sdk-venv" / "bin" / "python"

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(
        not SDK_PYTHON.exists(),
        reason="official SDK venv .cache/sdk-venv is absent (bash scripts/setup-interop creates it)",
    ),
]

OURS, SDK = "trio-mcp", "mcp-sdk"
HANDSHAKE = "handshake"
PAIRS = {(OURS, OURS), (SDK, SDK), (SDK, OURS), (OURS, SDK)}
EXPECTED_CALLS = {(c, s, HANDSHAKE, n) for c, s in PAIRS for n in (1, 64)}
EXPECTED_SPAWNS = {(OURS, HANDSHAKE), (SDK, HANDSHAKE)}
EXPECTED_RSS = {(s, c, HANDSHAKE) for c, s in PAIRS}
SPAWNS = 1
TIMEOUT = 240


def run_bench() -> subprocess.CompletedProcess[str]:
    # Own process group, so a hung run is stopped whole (bench, SDK client);
    # the servers stop when their client goes away (stdin EOF, or trio-mcp's
    # parent-death signal).
    proc, _ = procs.run_isolated(
        [
            sys.executable,
            "benchmarks/bench_stdio.py",
            *("--seconds", "0.2", "--spawns", str(SPAWNS), "--handshake-only"),
        ],
        TIMEOUT,
    )
    return proc


def test_bench_stdio_runs_and_reports_every_row() -> None:
    proc = run_bench()
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"

    objects = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    objects = [o for o in objects if o.get("bench") == "stdio"]
    rows = [o for o in objects if not o.get("summary")]
    summaries = [o for o in objects if o.get("summary")]

    calls = [r for r in rows if r["kind"] == "calls"]
    seen = {(r["client"], r["server"], r["mode"], r["concurrency"]) for r in calls}
    assert seen == EXPECTED_CALLS, f"missing: {EXPECTED_CALLS - seen}, unexpected: {seen - EXPECTED_CALLS}"
    assert len(calls) == len(seen), "a row was printed twice"
    for row in calls:
        for key in ("calls_per_s", "mean_us", "p50_us", "p99_us", "calls"):
            assert isinstance(row[key], (int, float)) and row[key] > 0, (key, row)
        assert row["p50_us"] <= row["p99_us"], row
        assert row["protocol"] != "2026-07-28", row

    spawns = [r for r in rows if r["kind"] == "spawn"]
    seen_spawns = {(r["impl"], r["mode"]) for r in spawns}
    assert seen_spawns == EXPECTED_SPAWNS, seen_spawns
    assert len(spawns) == len(seen_spawns)
    for row in spawns:
        assert row["spawns"] == SPAWNS, row
        for key in ("median_ms", "p90_ms", "min_ms", "max_ms"):
            assert isinstance(row[key], (int, float)) and row[key] > 0, (key, row)
        assert row["min_ms"] <= row["median_ms"] <= row["p90_ms"] <= row["max_ms"], row

    rss = [r for r in rows if r["kind"] == "rss"]
    seen_rss = {(r["impl"], r["client"], r["mode"]) for r in rss}
    assert seen_rss == EXPECTED_RSS, seen_rss
    assert len(rss) == len(seen_rss)
    for row in rss:
        assert isinstance(row["peak_rss_mb"], (int, float)) and row["peak_rss_mb"] > 0, row

    assert len(summaries) == 1, summaries
    summary = summaries[0]
    for key, names in (
        ("ratios", {"seq", "c64"}),
        ("p50_ratios", {"seq", "c64"}),
        ("server_ratios", {f"{c} client {n}" for c in (SDK, OURS) for n in ("seq", "c64")}),
        ("client_ratios", {f"{s} server {n}" for s in (SDK, OURS) for n in ("seq", "c64")}),
    ):
        ratios = summary[key]
        assert set(ratios) == names, (key, ratios)
        assert all(isinstance(v, (int, float)) and v > 0 for v in ratios.values()), (key, ratios)
    for key in ("spawn_median_ratio", "spawn_p90_ratio", "rss_ratio"):
        assert isinstance(summary[key], (int, float)) and summary[key] > 0, (key, summary)
    # the human-readable part is there too
    assert "calls/s" in proc.stdout and "spawn -> initialized" in proc.stdout and "peak RSS" in proc.stdout
