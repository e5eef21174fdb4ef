"""Smoke test of benchmarks/bench_stdio_clients.py: one short round of our
client and the trio floor client (and the Node driver, when the npm peers are
installed), each against a real server process of ours; every client prints a
row with positive calls/s and CPU figures, and the ratios over the driver.
The numbers themselves are not asserted on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import _procs as procs


def test_bench_stdio_clients_runs_and_reports_each_client() -> None:
    with_node = procs.npm_peers_installed() and procs.node_binary() is not None
    clients = ["ours", "floor"] + (["node"] if with_node else [])
    out = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_stdio_clients.py",
            "--rounds",
            "1",
            "--seconds",
            "0.3",
            "--warmup",
            "0.1",
            "--concurrencies",
            "1,8",
            "--clients",
            ",".join(clients),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = re.findall(r"^(\w+)\s+(\d+)\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)\s*$", out.stdout, re.MULTILINE)
    assert {(name, int(c)) for name, c, *_ in rows} == {(name, c) for name in clients for c in (1, 8)}
    for _name, _c, calls, client_cpu, server_cpu in rows:
        assert float(calls.replace(",", "")) > 0
        assert float(client_cpu) > 0 and float(server_cpu) > 0
    assert "load average" in out.stdout
    if with_node:
        assert re.search(r"ours/node c=8: median [\d.]+", out.stdout)
