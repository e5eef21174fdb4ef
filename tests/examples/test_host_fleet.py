"""``examples/host_fleet.py`` end to end: run as a subprocess with a small
load, it reports at least one crash and one reconnect, prints its summary,
exits 0, and leaves none of its server processes behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "host_fleet.py"
TIMEOUT = 30.0

SUMMARY = re.compile(
    r"^summary: (?P<calls>\d+) calls in [\d.]+ s(?: \(time limit\))?: (?P<ok>\d+) ok, "
    r"(?P<closed>\d+) failed with ConnectionClosed, (?P<other>\d+) failed otherwise; "
    r"(?P<crashes>\d+) crashes, (?P<reconnects>\d+) reconnects \(alpha (?P<alpha>\d+), beta (?P<beta>\d+), "
    r"flaky (?P<flaky>\d+)\)$",
    re.MULTILINE,
)
CHILDREN = re.compile(
    r"^children: (?P<pids>[\d ]+) \((?P<count>\d+) started, all exited and reaped\)$", re.MULTILINE
)


def _gone(pid: int) -> bool:
    """Not running: absent, or a zombie nobody reaps (not our child)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return True
    return data[data.rfind(b")") + 2 :].split()[0] in (b"Z", b"X")


async def test_host_fleet_survives_crashes_and_shuts_down_clean() -> None:
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            [sys.executable, str(EXAMPLE), "--calls", "60", "--seed", "7"],
            cwd=ROOT,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = done.stdout.decode()
    pids: list[int] = []
    children = CHILDREN.search(out)
    if children is not None:
        pids = [int(p) for p in children["pids"].split()]
    try:
        assert done.returncode == 0, out + done.stderr.decode()
        summary = SUMMARY.search(out)
        assert summary is not None, out
        counts = {key: int(value) for key, value in summary.groupdict().items()}
        assert counts["calls"] == 60 and counts["other"] == 0
        assert counts["ok"] + counts["closed"] == 60
        assert counts["crashes"] >= 1 and counts["closed"] >= 1
        assert counts["reconnects"] >= 1 and counts["flaky"] == counts["reconnects"]
        assert counts["alpha"] == counts["beta"] == 0
        # the events were printed as they happened
        assert re.search(r"flaky +disconnected", out), out
        assert re.search(r"flaky +reconnect scheduled in [\d.]+ s \(attempt 1\)", out), out
        assert re.search(r"flaky +connected to flaky .*connect #2\)", out), out
        assert "failed: ConnectionClosed:" in out and "crashing at call" in out
        # every server process it started is gone: 2 everything servers + each life of the flaky one
        # (+ one whose start the shutdown may have cut short)
        assert children is not None, out
        assert len(pids) == int(children["count"])
        assert 3 + counts["reconnects"] <= len(pids) <= 4 + counts["reconnects"]
        survivors = [pid for pid in pids if not _gone(pid)]
        assert not survivors, f"children of the example still running: {survivors}"
    finally:
        for pid in pids:
            if not _gone(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def test_help_works_from_the_repo_root() -> None:
    done = subprocess.run(
        [sys.executable, "examples/host_fleet.py", "--help"], cwd=ROOT, capture_output=True, timeout=TIMEOUT
    )
    assert done.returncode == 0 and b"--calls" in done.stdout
