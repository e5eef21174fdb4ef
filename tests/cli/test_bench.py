"""``trio-mcp bench``: the command against real server processes over every
transport, its reports, thresholds, worker processes, a dying server and
Ctrl-C. (The load generator's figures are checked in tests/bench.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import CLI, EXAMPLE, ROOT, serving_example

RUN_TIMEOUT = 120


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=cwd, check=False
    )


def stdio(*extra: str) -> list[str]:
    return ["--", sys.executable, EXAMPLE, *extra]


@pytest.fixture(params=["http", "sse", "ws"])
def served_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The everything example served over each network transport: its URL."""
    with serving_example(request.param) as url:
        yield url


def test_bench_a_stdio_server_as_json() -> None:
    from hdrh.histogram import HdrHistogram

    out = cli("bench", "echo", "message=hi", "-c", "4", "-n", "300", "--warmup", "0.2", "--json", *stdio())
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert (report["calls"], report["ok"], report["failed"]) == (300, 300, {})
    assert report["protocol"] == "2026-07-28"  # the auto client probes, the server speaks it
    assert report["target"].endswith("everything_server.py")
    assert report["settings"]["callers"] == 4 and report["settings"]["calls"] == 300
    assert report["operations"]["call echo"]["calls"] == 300
    assert sum(i["calls"] for i in report["intervals"]) == 300
    histogram = HdrHistogram.decode(report["total"]["histograms"]["corrected"].encode())
    assert histogram.get_total_count() == 300
    assert histogram.get_value_at_percentile(99) == report["total"]["latency_us"]["p99"]


def test_a_bad_argument_stops_the_bench_before_the_load() -> None:
    out = cli("bench", "echo", "text=hi", "-n", "10", *stdio())
    assert out.returncode == 1
    assert "answered isError before the load run" in out.stderr and "message" in out.stderr
    assert out.stdout == ""


def test_bench_every_network_transport_with_headers_and_sessions(served_url: str) -> None:
    out = cli(
        "bench",
        served_url,
        "echo",
        "message=hi",
        "-c",
        "6",
        "-n",
        "240",
        "--sessions",
        "3",
        "--warmup",
        "0.1",
        "--era",
        "handshake",
        "--header",
        "X-Bench: yes",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert (report["calls"], report["ok"]) == (240, 240)
    assert report["protocol"] == "2025-11-25"
    assert report["sessions"]["opened"] == 3 and report["sessions"]["mean_us"] > 0
    assert report["settings"]["headers"] == ["X-Bench"]  # names only, values are not reported


def test_the_text_summary_has_a_spectrum_and_a_histogram() -> None:
    out = cli("bench", "echo", "message=hi", "--rate", "200/s", "-d", "1s", "--warmup", "0", *stdio())
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "200 calls/s (open model)" in text and "0 failed" in text
    assert "percentile spectrum" in text and "p99.99" in text
    assert "latency histogram" in text and "■" in text
    assert "uncorrected (from send)" in text
    assert "[   1.0s" in out.stderr  # the plain live lines when not on a terminal


def test_thresholds_decide_the_exit_status_and_failures_are_listed(tmp_path: Path) -> None:
    passing = cli(
        "bench",
        "echo",
        "message=hi",
        "-n",
        "50",
        "--warmup",
        "0",
        "--threshold",
        "p99<10s",
        "--threshold",
        "error_rate<1%",
        *stdio(),
    )
    assert passing.returncode == 0, passing.stderr
    assert "threshold ✓ p99<10s" in passing.stdout
    failing = cli(
        "bench",
        "echo",
        "message=hi",
        "-n",
        "50",
        "--warmup",
        "0",
        "--threshold",
        "p50<1us",
        "--threshold",
        "call echo:calls_per_s>1000000",
        "--threshold",
        "error_rate<1%",
        *stdio(),
    )
    assert failing.returncode == 1
    assert "threshold failed: p50<1us" in failing.stderr
    assert "threshold failed: call echo:calls_per_s>1000000" in failing.stderr
    assert "error_rate" not in failing.stderr  # it passed
    bad = cli("bench", "echo", "message=hi", "--threshold", "p99<<3", *stdio())
    assert bad.returncode != 0 and "not a threshold" in bad.stderr


def test_compare_two_runs(tmp_path: Path) -> None:
    paths = []
    for callers in ("1", "4"):
        out = cli(
            "bench", "echo", "message=hi", "-c", callers, "-n", "200", "--warmup", "0", "--json", *stdio()
        )
        assert out.returncode == 0, out.stderr
        path = tmp_path / f"c{callers}.json"
        path.write_text(out.stdout)
        paths.append(str(path))
    out = cli("bench", "compare", *paths)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    a = json.loads(Path(paths[0]).read_text())
    b = json.loads(Path(paths[1]).read_text())
    row = next(line for line in lines if line.startswith("all") and "calls/s" in line)
    ratio = float(row.split()[-1])
    assert ratio == pytest.approx(b["calls_per_s"] / a["calls_per_s"], abs=0.001)
    assert any(line.startswith("call echo") and " p99 " in line for line in lines)


def test_a_scenario_file_with_a_data_file(tmp_path: Path) -> None:
    (tmp_path / "cities.csv").write_text("city,n\nOslo,1\nLima,2\n")
    (tmp_path / "mix.toml").write_text(
        'data = "cities.csv"\n'
        "[[operations]]\n"
        'tool = "get_weather"\nweight = 2\narguments = { city = { column = "city" } }\n'
        'thresholds = ["error_rate<1%"]\n'
        "[[operations]]\n"
        'resource = "demo://greeting/{name}"\narguments = { name = { choice = ["a", "b"] } }\n'
        "[[operations]]\n"
        'list = "prompts"\n'
    )
    out = cli(
        "bench",
        "--scenario",
        str(tmp_path / "mix.toml"),
        "-n",
        "400",
        "--warmup",
        "0",
        "--json",
        *stdio(),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    counts = {name: f["calls"] for name, f in report["operations"].items()}
    assert counts == {"call get_weather": 200, "read demo://greeting/{name}": 100, "list prompts": 100}
    assert report["ok"] == 400
    assert report["thresholds"] == [
        {"threshold": "call get_weather:error_rate<1%", "actual": 0.0, "shown": "0%", "passed": True}
    ]


def test_two_workers_each_load_the_server_and_their_histograms_merge() -> None:
    from hdrh.histogram import HdrHistogram

    out = cli(
        "bench",
        "echo",
        "message=hi",
        "-c",
        "8",
        "-n",
        "600",
        "--workers",
        "2",
        "--sessions",
        "2",
        "--warmup",
        "0.2",
        "--json",
        *stdio(),
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    # each worker process spent its half of the budget, and both are in the merged figures
    assert report["per_worker"] == [{"worker": 0, "calls": 300}, {"worker": 1, "calls": 300}]
    assert (report["calls"], report["ok"]) == (600, 600)
    assert report["sessions"]["opened"] == 2
    merged = HdrHistogram.decode(report["total"]["histograms"]["corrected"].encode())
    assert merged.get_total_count() == 600
    assert sum(i["calls"] for i in report["intervals"]) == 600


def test_a_server_that_dies_mid_run_is_reported() -> None:
    out = cli(
        "bench",
        "echo",
        "text=hi",
        "--rate",
        "200/s",
        "-d",
        "30s",
        "--warmup",
        "0",
        "--json",
        "--",
        *CLI,
        "demo-server",
        "--crash-after",
        "100",
    )
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["seconds"] < 20  # not the whole 30 s: the run ended with the server
    assert "connection closed" in report["stopped"]
    lost = next(e for e in report["events"] if e["kind"] == "connection-lost")
    assert lost["seconds"] is not None and lost["not_sent"] > 1000
    assert 90 <= report["ok"] <= 100  # the preflight call was its first


def test_ctrl_c_ends_the_run_and_prints_what_was_measured() -> None:
    proc = subprocess.Popen(
        [
            *CLI,
            "bench",
            "echo",
            "message=hi",
            "-c",
            "2",
            "-d",
            "60s",
            "--warmup",
            "0",
            "--live",
            "plain",
            *stdio(),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the first live line: the load is running
        assert "calls/s now" in first, first
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert proc.returncode == 130, stderr
    assert "stopped early: interrupted" in stdout
    assert "percentile spectrum" in stdout and " ok," in stdout
