"""The README's example and its first command keep working."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_python_example_runs() -> None:
    text = (ROOT / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.DOTALL)[0]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["liftoff", "Hello, world!"]


def test_demo_command_shows_a_working_session() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "trio_mcp.cli", "demo", "--calls", "50", "--fleet-calls", "120"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "add(2, 40) -> {'result': 42}" in out.stdout
    assert "countdown -> liftoff" in out.stdout
    assert "isError=True" in out.stdout
    assert "calls/s" in out.stdout
    # the supervised fleet: a crash, a reconnect, and the load run's summary
    assert "flaky: disconnected" in out.stdout and "flaky: reconnected" in out.stdout
    assert "behind one gateway at http://127.0.0.1:" in out.stdout
    summary = [line for line in out.stdout.splitlines() if line.startswith("fleet: 120 calls")]
    assert summary and "through the gateway" in summary[0] and " ok, " in summary[0], out.stdout
