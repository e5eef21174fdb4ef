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


def test_one_node_requirement_in_readme_scripts_and_tests() -> None:
    from tests.peers import NODE_MIN_MAJOR

    readme = (ROOT / "README.md").read_text()
    script = (ROOT / "scripts" / "setup-interop").read_text()
    assert set(re.findall(r"Node ≥ (\d+)", readme)) == {str(NODE_MIN_MAJOR)}
    assert re.findall(r"^NODE_MIN_MAJOR=(\d+)$", script, re.MULTILINE) == [str(NODE_MIN_MAJOR)]


def test_readme_shows_every_client_verb_with_an_example() -> None:
    from trio_mcp.cli._client import CLIENT_VERBS

    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The command line", 1)[1].split("\n## ", 1)[0]
    for verb in CLIENT_VERBS:
        assert re.search(
            rf"^\| `{re.escape(verb)}` \|.*\| `trio-mcp {re.escape(verb)} ", section, re.MULTILINE
        ), verb
