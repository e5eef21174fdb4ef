"""What people look at: the live display in a real terminal (tmux), the HTML
report rendered by headless Chromium, the PNG plot. tmux and Chromium come
from ``bash scripts/setup-interop`` (Debian packages)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "everything_server.py")
CLI = [sys.executable, "-m", "trio_mcp.cli"]
TIMEOUT = 120


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: run bash scripts/setup-interop")
    return path


def run_group(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in its own process group; the whole group is killed if it
    outlives the timeout (Chromium starts helpers)."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kw
    )  # type: ignore[call-overload]
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_the_live_display_in_a_real_terminal(tmp_path: Path) -> None:
    tmux = need("tmux")
    sock, raw, report = tmp_path / "tmux.sock", tmp_path / "pane.raw", tmp_path / "report.json"
    bench = [*CLI, "bench", "echo", "message=hi", "-c", "4", "-d", "3s", "--warmup", "1s", "--json",
             "--", sys.executable, EXAMPLE]  # fmt: skip
    # the live display goes to the terminal (stderr), the JSON report to a file;
    # then the pane signals the test and waits (kept on screen for capture-pane)
    script = (
        f"{shlex.join(bench)} > {shlex.quote(str(report))}; {tmux} -S {sock} wait-for -S bench-done; read _"
    )
    t = [tmux, "-S", str(sock)]
    try:
        subprocess.run(
            [*t, "new-session", "-d", "-s", "bench", "-x", "110", "-y", "30", "-c", str(ROOT), script],
            check=True,
            timeout=30,
        )
        subprocess.run([*t, "pipe-pane", "-t", "bench", "-o", f"cat >> {shlex.quote(str(raw))}"], check=True)
        subprocess.run([*t, "wait-for", "bench-done"], check=True, timeout=TIMEOUT)
        pane = subprocess.run(
            [*t, "capture-pane", "-p", "-t", "bench"], check=True, capture_output=True, text=True
        ).stdout
    finally:
        subprocess.run([*t, "kill-server"], check=False, capture_output=True, timeout=30)
    for label in ("trio-mcp bench", "elapsed", "remaining", "calls/s", "now", "overall", "ok",
                  "isError", "failed", "latency now", "p50", "p99", "in flight"):  # fmt: skip
        assert label in pane, (label, pane)
    assert re.search(r"calls/s\s+│?\s*[\d,.]+ now, [\d,.]+ overall", pane), pane
    # it was redrawn while the run went on, not printed once at the end
    stream = raw.read_bytes().decode(errors="replace")
    assert stream.count("remaining") >= 2, stream[-2000:]
    assert json.loads(report.read_text())["calls"] > 0  # stdout stayed clean JSON


def test_the_html_report_renders_its_charts_in_headless_chromium(tmp_path: Path) -> None:
    chromium = need("chromium")
    html, png = tmp_path / "report.html", tmp_path / "plot.png"
    out = run_group(
        [*CLI, "bench", "echo", "message=hi", "--rate", "150/s", "-d", "3s", "--warmup", "0.5",
         "--html", str(html), "--plot", str(png), "--", sys.executable, EXAMPLE],
        cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    page = html.read_text()
    # one self-contained file: nothing to fetch, nothing to run
    assert "<script" not in page and "<link" not in page and 'src="http' not in page
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}"]  # fmt: skip
    dom = run_group([chromium, *flags, "--dump-dom", html.as_uri()])
    assert dom.returncode == 0, dom.stderr
    for chart in ("chart-latency", "chart-throughput", "chart-percentiles"):
        svg = re.search(rf'<svg id="{chart}".*?</svg>', dom.stdout, re.DOTALL)
        assert svg is not None, chart
        lines = re.findall(r'<polyline class="series" data-series="([^"]+)" points="([^"]+)"', svg.group(0))
        assert lines, chart
        for name, points in lines:
            coords = [tuple(map(float, p.split(","))) for p in points.split()]
            assert len(coords) >= 2, (chart, name)
            assert len({x for x, _ in coords}) >= 2, (chart, name)  # spread over the x axis
        # drawn from real figures: some series rises above the x axis (a non-zero figure)
        frame = re.search(
            r'<rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)" class="frame"', svg.group(0)
        )
        assert frame is not None, chart
        axis = float(frame.group(1)) + float(frame.group(2))
        tops = [min(float(p.split(",")[1]) for p in pts.split()) for _, pts in lines]
        assert min(tops) < axis - 10, (chart, tops, axis)
    shot = tmp_path / "report-screenshot.png"
    taken = run_group([chromium, *flags, f"--screenshot={shot}", "--window-size=940,1300", html.as_uri()])
    assert taken.returncode == 0, taken.stderr
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    print(f"screenshot kept at {shot}")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
