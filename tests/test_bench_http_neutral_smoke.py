"""Smoke test of benchmarks/bench_http_neutral.py: one short round against
real server processes (ours JSON and SSE, the official SDK's, the TypeScript
SDK's, the hypercorn floor) driven by the real Node driver; its JSON
document has every row, median and ratio, with positive numbers, and no
process it started is left running. No timing thresholds."""

from __future__ import annotations

import json
import re
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
        not SDK_PYTHON.exists() or not procs.npm_peers_installed(),
        reason="the SDK venv or the npm peers are absent (bash scripts/setup-interop installs them)",
    ),
]

HANDSHAKE, MODERN = "handshake", "2026-07-28"
ERAS = {
    "trio-mcp": (HANDSHAKE, MODERN),
    "trio-mcp sse": (HANDSHAKE, MODERN),
    "mcp-sdk": (HANDSHAKE, MODERN),
    "ts-sdk": (HANDSHAKE,),
    "floor": (HANDSHAKE, MODERN),
    "floor-conn": (HANDSHAKE, MODERN),
}
EXPECTED_ROWS = {(impl, era, c) for impl, eras in ERAS.items() for era in eras for c in (1, 64)}
EXPECTED_RATIOS = {
    f"{metric} {pair}": {
        f"{era} {c}"
        for era in (HANDSHAKE, MODERN)
        if pair != "ours/ts" or era == HANDSHAKE
        for c in ("seq", "c64")
    }
    for metric in ("calls_per_s", "server_cpu_us")
    for pair in ("ours/sdk", "ours/ts", "ours/floor", "ours/floor-conn", "sse/json")
}
ROW_NUMBERS = (
    "calls",
    "seconds",
    "calls_per_s",
    "mean_us",
    "p50_us",
    "p99_us",
    "server_cpu_us",
    "driver_cpu_us",
    "peak_rss_mb",
)
TIMEOUT = 240


SHORT = ("--rounds", "1", "--seconds", "0.3", "--warmup", "0.1")


def run_bench(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run it briefly in a process group of its own; nothing it started may outlive it."""
    cmd = [sys.executable, "benchmarks/bench_http_neutral.py", *SHORT, *argv]
    proc, survivors = procs.run_isolated(cmd, TIMEOUT)
    assert not survivors, "processes started by the benchmark are still running"
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def test_bench_http_neutral_reports_every_row_and_ratio() -> None:
    doc = json.loads(run_bench("--json").stdout)

    assert doc["bench"] == "http_neutral"
    rows = doc["rows"]
    seen = [(r["impl"], r["era"], r["concurrency"]) for r in rows]
    assert set(seen) == EXPECTED_ROWS and len(seen) == len(EXPECTED_ROWS), seen
    for row in rows:
        for key in ROW_NUMBERS:
            assert isinstance(row[key], (int, float)) and row[key] > 0, (key, row)
        assert row["p50_us"] <= row["p99_us"], row
        assert row["answer"] == ("sse" if row["impl"] == "trio-mcp sse" else "json"), row
        assert row["round"] == 1

    medians = {(m["impl"], m["era"], m["concurrency"]): m for m in doc["summary"]["medians"]}
    assert set(medians) == EXPECTED_ROWS
    for m in medians.values():
        for key in ("calls_per_s", "p50_us", "p99_us", "server_cpu_us", "driver_cpu_us", "peak_rss_mb"):
            assert m[key]["min"] > 0 and m[key]["min"] <= m[key]["median"] <= m[key]["max"], (key, m)

    ratios = doc["summary"]["ratios"]
    assert {name: set(per) for name, per in ratios.items()} == EXPECTED_RATIOS
    for per in ratios.values():
        for value in per.values():
            assert set(value["rounds"]) == {"1"} and value["median"] > 0, value

    (round_info,) = doc["rounds"]
    assert round_info["load_before"] >= 0 and round_info["load_after"] >= 0
    settings = doc["settings"]
    assert settings["hypercorn"]["keep_alive"] is True and settings["hypercorn"]["accesslog"] is None
    assert settings["undici"] and settings["ts_sdk_version"] and settings["sdk_version"]


def test_bench_http_neutral_text_report_names_settings_load_and_ratios() -> None:
    out = run_bench("--targets", "trio-mcp,floor", "--handshake-only").stdout
    assert "keep-alive on" in out and "access log off" in out
    assert "load average (1 min) per round: round 1 " in out
    for name, rows in (("calls_per_s ours/floor", "seq"), ("server_cpu_us ours/floor", "c64")):
        assert re.search(rf"^{name} +handshake {rows} +[0-9.]+ +[0-9.]+$", out, re.MULTILINE), out
    assert "2026-07-28" not in out.split("median over the rounds")[1]
