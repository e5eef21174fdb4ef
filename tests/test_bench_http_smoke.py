"""Smoke test of benchmarks/bench_http.py: it runs end to end against real
Streamable HTTP server processes (ours, the official SDK's and the
hypercorn floor's) and prints every expected JSON line with positive
numbers. No timing thresholds: the numbers themselves are not asserted on.

What it keeps that the neutral-driver benchmark (bench_http_neutral.py)
does not drive: trio-mcp's own HTTP client and the official SDK's client,
each against both servers, 64 calls in flight, and the httpx->hypercorn
floor. So it runs the JSON answers of the handshake era only
(``--handshake-only --no-sse``: trio-mcp's SSE answers and both eras are
the neutral benchmark's); which rows each option selects is checked below
without running them."""

from __future__ import annotations

import importlib.util
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
MODERN = "2026-07-28"
FLOOR = ("httpx", "hypercorn", "floor")
EXPECTED = {
    (c, s, mode, n)
    for c, s, mode in [
        (OURS, OURS, "json"),
        (SDK, SDK, "json"),
        (SDK, OURS, "json"),
        (OURS, SDK, "json"),
        FLOOR,
    ]
    for n in (1, 64)
}
TIMEOUT = 240


def run_bench() -> tuple[subprocess.CompletedProcess[str], bool]:
    # Own process group, so a hung run is stopped whole (bench, servers, SDK
    # client); the servers also stop by themselves when their stdin closes.
    return procs.run_isolated(
        [sys.executable, "benchmarks/bench_http.py", "--seconds", "0.2", "--handshake-only", "--no-sse"],
        TIMEOUT,
    )


def test_bench_http_runs_and_reports_every_row() -> None:
    proc, survivors = run_bench()
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"

    objects = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    objects = [o for o in objects if o.get("bench") == "http"]
    rows = [o for o in objects if not o.get("summary")]
    summaries = [o for o in objects if o.get("summary")]

    seen = {(r["client"], r["server"], r["mode"], r["concurrency"]) for r in rows}
    assert seen == EXPECTED, f"missing: {EXPECTED - seen}, unexpected: {seen - EXPECTED}"
    assert len(rows) == len(seen), "a row was printed twice"
    for row in rows:
        assert row["kind"] == "calls" and row["impl"] == f"{row['client']}->{row['server']}", row
        for key in ("calls_per_s", "mean_us", "p50_us", "p99_us", "calls", "client_cpu_us", "server_cpu_us"):
            assert isinstance(row[key], (int, float)) and row[key] > 0, (key, row)
        assert row["p50_us"] <= row["p99_us"], row
        if row["mode"] != "floor":  # the floor speaks HTTP only
            assert row["protocol"] not in (None, MODERN), row

    assert len(summaries) == 1, summaries
    summary = summaries[0]
    for name, keys in (
        ("ratios", {"seq", "c64"}),
        ("p50_ratios", {"seq", "c64"}),
        ("server_ratios", {f"{c} client {n}" for c in (OURS, SDK) for n in ("seq", "c64")}),
        ("client_ratios", {f"{s} server {n}" for s in (OURS, SDK) for n in ("seq", "c64")}),
        ("cpu_ratios", {f"{side} {n}" for side in ("client", "server") for n in ("seq", "c64")}),
        ("ceiling_ratios", {"seq", "c64"}),
    ):
        assert set(summary[name]) == keys, (name, summary)
        assert all(isinstance(v, (int, float)) and v > 0 for v in summary[name].values()), (name, summary)
    assert "ratios_vs_2026" not in summary and "sse_ratios" not in summary, summary  # (not run)
    assert summary["targets"] == {"seq": 3.0, "c64": 5.0}
    assert summary["sdk_version"]

    # every process the benchmark started (servers, SDK clients) has ended:
    # they all live in the benchmark's process group
    assert not survivors, "processes started by the benchmark are still running"


def test_bench_http_floor_rows_run_by_default_and_can_be_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # the module puts benchmarks/ on it
    spec = importlib.util.spec_from_file_location("bench_http", ROOT / "benchmarks" / "bench_http.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    def modes(*argv: str) -> list[str]:
        return [mode for _, _, mode in bench.selected_pairings(bench.parse_args(list(argv)))]

    assert modes().count("floor") == 1
    assert modes("--ours-only").count("floor") == 1
    assert "floor" not in modes("--no-floor")
    assert "floor" not in modes("--ours-only", "--no-floor")

    def pairings(*argv: str) -> list[tuple[str, str, str]]:
        return bench.selected_pairings(bench.parse_args(list(argv)))

    assert {p for p in pairings() if p[2] == MODERN} == {(OURS, OURS, MODERN), (SDK, SDK, MODERN)}
    assert [p for p in pairings("--ours-only") if p[2] == MODERN] == [(OURS, OURS, MODERN)]
    assert MODERN not in modes("--handshake-only")
    assert "sse" in modes() and "sse" not in modes("--no-sse")
    # what the smoke run above selects: the JSON rows of both clients against both servers, the floor
    assert set(pairings("--handshake-only", "--no-sse")) == {(c, s, m) for c, s, m, _ in EXPECTED}
