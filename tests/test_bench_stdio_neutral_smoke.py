"""Smoke test of benchmarks/bench_stdio_neutral.py: one short round against
real stdio server processes (ours, the official SDK's, the TypeScript SDK's,
the trivial Node echo that is the driver's ceiling, the minimal trio echo
that is our stack's floor) spawned by the real Node
driver; its JSON document has every row, median, ratio, spawn timing and
peak RSS, with positive numbers, and no process it started is left running.
No timing thresholds."""

from __future__ import annotations

import json
import re
import sys
import tempfile
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

IMPLS = ("trio-mcp", "mcp-sdk", "ts-sdk", "node-echo", "trio-floor")
CONCURRENCIES = (1, 8, 64, 256)
LABELS = {"seq", "c8", "c64", "c256"}
METRICS = ("calls_per_s", "p50_us", "p99_us", "server_cpu_us", "driver_cpu_us")
TIMEOUT = 240


def run_bench(*argv: str) -> str:
    """Run it briefly in a process group of its own; nothing it started may outlive it."""
    cmd = [
        sys.executable,
        "benchmarks/bench_stdio_neutral.py",
        *("--rounds", "1", "--seconds", "0.3", "--warmup", "0.1", "--spawns", "2"),
        *argv,
    ]
    proc, survivors = procs.run_isolated(cmd, TIMEOUT)
    assert not survivors, "processes started by the benchmark are still running"
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


def test_bench_stdio_neutral_reports_every_row_and_ratio() -> None:
    doc = json.loads(run_bench("--json"))
    assert doc["bench"] == "stdio_neutral"

    rows = doc["rows"]
    seen = [(r["impl"], r["concurrency"]) for r in rows]
    assert sorted(seen) == sorted((i, c) for i in IMPLS for c in CONCURRENCIES), seen
    for row in rows:
        for key in ("calls", "seconds", *METRICS):
            assert isinstance(row[key], (int, float)) and row[key] > 0, (key, row)
        assert row["p50_us"] <= row["p99_us"], row

    medians = {(m["impl"], m["concurrency"]): m for m in doc["summary"]["medians"]}
    assert set(medians) == set(seen)
    for m in medians.values():
        for key in METRICS:
            assert 0 < m[key]["min"] <= m[key]["median"] <= m[key]["max"], (key, m)

    ratios = doc["summary"]["ratios"]
    assert {name: set(per) for name, per in ratios.items()} == {
        f"calls_per_s {name}": LABELS
        for name in ("ours/ts", "ours/sdk", "ours/ceiling", "floor/ts", "ours/floor")
    }
    for per in ratios.values():
        for value in per.values():
            assert set(value["rounds"]) == {"1"} and value["median"] > 0, value

    # one round: every server's run-to-run spread is there, and nothing to spread over
    assert doc["summary"]["calls_per_s_spread"] == {impl: dict.fromkeys(LABELS, 0.0) for impl in IMPLS}

    above = doc["summary"]["ceiling_above_every_server"]  # reported, not asserted: a timing
    assert set(above) == LABELS and all(isinstance(v, bool) for v in above.values()), above

    for impl in IMPLS:  # two timed spawns and one measured process each, ended cleanly
        assert doc["summary"]["spawn_ms"][impl]["spawns"] == 2
        assert doc["summary"]["spawn_ms"][impl]["median"] > 0
        assert doc["summary"]["peak_rss_mb"][impl]["median"] > 0
    assert [p["exit"] for p in doc["processes"]] == [0] * len(IMPLS)
    (round_info,) = doc["rounds"]
    assert round_info["load_before"] >= 0 and round_info["load_after"] >= 0
    assert doc["settings"]["ts_sdk_version"] and doc["settings"]["sdk_version"]


def test_bench_stdio_neutral_text_report_names_load_spawn_and_ratios() -> None:
    out = run_bench("--targets", "trio-mcp,node-echo", "--concurrencies", "1,64")
    assert "load average (1 min) per round: round 1 " in out
    assert "the driver's ceiling (node-echo) above every server's calls/s in every round: seq " in out
    assert "spawn -> initialized, median: trio-mcp " in out and "server peak RSS MB: trio-mcp " in out
    assert re.search(
        r"^run-to-run spread of calls/s .*: trio-mcp seq 0%, c64 0%; node-echo ", out, re.MULTILINE
    )
    for rows in ("seq", "c64"):
        assert re.search(rf"^calls_per_s ours/ceiling +{rows} +[0-9.]+ +[0-9.]+$", out, re.MULTILINE), out
    assert "ours/ts" not in out.split("ratios of calls/s")[1].split("issue 17")[0]


def test_bench_stdio_neutral_trio_floor_answers_like_a_server() -> None:
    """The trio floor is driven like every server (its rows and ratios are there)."""
    out = run_bench("--targets", "trio-mcp,ts-sdk,trio-floor", "--concurrencies", "1,64")
    assert "spawn -> initialized, median: trio-mcp " in out and "trio-floor " in out
    for name in ("floor/ts", "ours/floor"):
        for rows in ("seq", "c64"):
            assert re.search(rf"^calls_per_s {name} +{rows} +[0-9.]+ +[0-9.]+$", out, re.MULTILINE), out


def test_the_spread_is_the_largest_round_over_the_smallest() -> None:
    import bench_stdio_neutral

    rows = [
        {"impl": "trio-mcp", "concurrency": 64, "round": 1, "calls_per_s": 10_000.0},
        {"impl": "trio-mcp", "concurrency": 64, "round": 2, "calls_per_s": 12_000.0},
        {"impl": "trio-mcp", "concurrency": 64, "round": 3, "calls_per_s": 11_000.0},
        {"impl": "trio-mcp", "concurrency": 1, "round": 1, "calls_per_s": 4_000.0},
        {"impl": "ts-sdk", "concurrency": 64, "round": 1, "calls_per_s": 20_000.0},
        {"impl": "ts-sdk", "concurrency": 64, "round": 2, "calls_per_s": 25_000.0},
    ]
    assert bench_stdio_neutral.round_spread(rows) == {
        "trio-mcp": {"c64": 0.2, "seq": 0.0},
        "ts-sdk": {"c64": 0.25},
    }


def drive_against_direct(targets: str) -> dict:
    """Run ``targets`` (trio-mcp, the direct row, first) at 1 and 64 in
    flight: every row ran calls, and each other target has its ratio to
    direct at both. The document."""
    doc = json.loads(run_bench("--json", "--targets", targets, "--concurrencies", "1,64"))
    rows = doc["rows"]
    assert sorted((r["impl"], r["concurrency"]) for r in rows) == sorted(
        (i, c) for i in targets.split(",") for c in (1, 64)
    )
    for row in rows:
        assert row["calls"] > 0, row
        # CPU is read in clock ticks (10 ms): the C byte copier may spend less
        # than one over a short window; a Python process serving calls never does.
        assert row["server_cpu_us"] >= 0 if row["impl"] == "c-relay" else row["server_cpu_us"] > 0, row
    ratios = doc["summary"]["ratios"]
    assert set(ratios) == {f"calls_per_s {name}/direct" for name in targets.split(",")[1:]}
    for per in ratios.values():
        assert set(per) == {"seq", "c64"} and all(v["median"] > 0 for v in per.values()), per
    return doc


def test_bench_stdio_neutral_measures_the_gateway_and_the_relays_against_direct() -> None:
    """The targets run only when named: our echo server behind `trio-mcp
    gateway` (its tool called as echo__echo), behind the line relay and
    behind the routing relay (echo__echo renamed echo: the driver fails on
    an error answer, so every call counted was routed)."""
    drive_against_direct("trio-mcp,gateway,relay,routing-relay")


def test_bench_stdio_neutral_builds_and_drives_the_floors_of_any_process_in_the_path() -> None:
    """The floor rows run only when named: the routing relay in two blocking
    Python threads (echo__echo renamed echo, so every call counted was
    routed) and the C byte copier, compiled by the benchmark with ``cc``
    (the binary removed afterwards)."""
    before = set(Path(tempfile.gettempdir()).glob("bench-stdio-neutral-c-relay-*"))
    doc = drive_against_direct("trio-mcp,thread-routing-relay,c-relay")
    assert [p["exit"] for p in doc["processes"]] == [0, 0, 0]
    assert set(Path(tempfile.gettempdir()).glob("bench-stdio-neutral-c-relay-*")) == before
