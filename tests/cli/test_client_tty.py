"""The client commands on a terminal (a pseudo-terminal): the live progress
bar, elicitation answered at the keyboard; and server-everything's
elicitation tool, declined when there is no terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

from tests.peers import npm_path

from .conftest import CLI, EXAMPLE, ROOT

STDIO = ["--", sys.executable, EXAMPLE]
WAIT = 60.0


def run_on_pty(args: list[str], *, answers: str = "", stdin_tty: bool = False) -> tuple[int, str, str]:
    """Run the CLI with stderr (and stdin, if ``stdin_tty``) on a pty; its exit
    status, stdout, and everything the terminal showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*CLI, *args],
        stdin=slave if stdin_tty else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "100", "TERM": "xterm"},
    )
    os.close(slave)
    if answers:
        os.write(master, answers.encode())
    shown = b""
    deadline = time.monotonic() + WAIT
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if master in ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every holder of the slave end closed it
                    break
                if not chunk:
                    break
                shown += chunk
            elif proc.poll() is not None:
                break
        assert proc.stdout is not None
        out = proc.stdout.read().decode()
        status = proc.wait(timeout=WAIT)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    return status, out, shown.decode(errors="replace")


def test_progress_is_a_live_bar_on_a_terminal() -> None:
    status, out, shown = run_on_pty(["call", "long_running_operation", "duration=1", "steps=4", *STDIO])
    assert status == 0, shown
    assert out.startswith("Long running operation completed")
    assert "━" in shown and "100%" in shown, shown  # rich's bar, drawn to the end
    assert "step 4 of 4" in shown
    assert "progress 1/4" not in shown  # no plain lines on a terminal


def test_elicitation_is_answered_at_the_keyboard() -> None:
    # name, age (default), newsletter, theme, then "send these answers?" (default yes)
    status, out, shown = run_on_pty(
        ["call", "collect_preferences", *STDIO], answers="Ada\n\ny\ndark\n\n", stdin_tty=True
    )
    assert status == 0, shown
    assert "The server asks: Tell us about yourself" in shown
    assert out.strip() == "Hello Ada (30); newsletter: yes; theme: dark.", shown


def run_without_terminal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=WAIT,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


def test_elicitation_without_a_terminal_is_declined_with_a_message() -> None:
    out = run_without_terminal("call", "collect_preferences", *STDIO)
    assert out.returncode == 0 and out.stdout.strip() == "The user chose to decline."
    assert "declined (not a terminal" in out.stderr


def test_server_everything_elicitation_tool_appears_and_is_declined() -> None:
    node = str(npm_path(".bin/node"))
    entry = str(npm_path("@modelcontextprotocol/server-everything/dist/index.js"))
    target = ["--", node, entry, "stdio"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_without_terminal(*args, *target)

    tools = run("tools")
    assert tools.returncode == 0, tools.stderr
    assert "trigger-elicitation-request" in tools.stdout.split()
    echo = run("call", "echo", "message=from the cli")
    assert echo.returncode == 0 and "from the cli" in echo.stdout, echo.stderr
    asked = run("call", "trigger-elicitation-request")
    assert asked.returncode == 0, asked.stderr
    assert "declined (not a terminal" in asked.stderr
    assert "decline" in asked.stdout.lower()
