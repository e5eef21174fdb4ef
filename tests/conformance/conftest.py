"""Running the official MCP conformance suite (``@modelcontextprotocol/conformance``).

Two releases are installed by ``bash scripts/setup-interop`` under
``tests/interop/node_modules`` (pinned by ``tests/interop/package.json``):
0.1.16 and, under the alias ``conformance-next``, 0.2.0-alpha.12. Both need
Node 22 (``node_modules/.bin/node``; the system Node may be older) and run
under ``tests/interop/loopback.cjs`` so that their mock servers listen on
127.0.0.1 only.

:func:`run_suite` runs one suite command with ``-o DIR`` and reads back every
scenario's ``checks.json``; :class:`SuiteRun` answers questions about it.
:func:`serve_fixture` runs ``examples/conformance_server.py --http`` and
yields its URL. Every process started here is stopped here, and every wait is
bounded.

The tests are skipped only when the npm peers were never installed (or were
installed for other pins); the skip message names ``bash scripts/setup-interop``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

try:  # run from the repository root or from tests/
    from peers import (
        LOOPBACK,
        SETUP,
        npm_path,
        sdk_path,
    )
except ImportError:  # pragma: no cover
    from tests.peers import (  # noqa: F401 (sdk_path: for the tests)
        LOOPBACK,
        SETUP,
        npm_path,
        sdk_path,
    )

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

PYTHON = Path(sys.executable)
FIXTURE_SERVER = ROOT / "examples" / "conformance_server.py"
CONFORMANCE_CLIENT = ROOT / "examples" / "conformance_client.py"

#: The suite releases, by the name the tests use: (package folder, version).
SUITES = {
    "0.1.16": ("@modelcontextprotocol/conformance", "0.1.16"),
    "0.2": ("@modelcontextprotocol/conformance-next", "0.2.0-alpha.12"),
}

#: Check statuses that fail a requirement (the suite's baseline logic counts
#: WARNING too: a SHOULD that was not met).
FAILED = ("FAILURE", "WARNING")
#: Worst first, to collapse repeated check ids.
_SEVERITY = {"FAILURE": 4, "WARNING": 3, "SUCCESS": 2, "INFO": 1, "SKIPPED": 0}
_TIMESTAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")

#: Bound of the fixture server's start (its URL on stdout).
SERVER_START_TIMEOUT = 20.0
#: Bound of its shutdown after SIGTERM (then SIGKILL).
SERVER_STOP_TIMEOUT = 5.0


# --------------------------------------------------------------- installs


def suite_entry(suite: str) -> Path:
    """The ``dist/index.js`` of a suite release, checked to be that release."""
    package, version = SUITES[suite]
    entry = npm_path(f"{package}/dist/index.js")
    installed = json.loads((entry.parent.parent / "package.json").read_text())["version"]
    if installed != version:
        pytest.fail(f"{package} is {installed}, these tests are written for {version}: run `{SETUP}`")
    return entry


def client_command(*options: str) -> str:
    """``--command`` for the client scenarios (the suite splits it on spaces
    and appends the URL): the client with these options."""
    parts = [str(PYTHON), str(CONFORMANCE_CLIENT), *options]
    if any(" " in part for part in parts):
        pytest.fail(f"the suite splits --command on spaces; these paths contain one: {parts}")
    return " ".join(parts)


def node_env() -> dict[str, str]:
    env = dict(os.environ)
    preload = f"--require {LOOPBACK}"
    env["NODE_OPTIONS"] = f"{env['NODE_OPTIONS']} {preload}" if env.get("NODE_OPTIONS") else preload
    env["NO_COLOR"] = "1"
    env.pop("MCP_CONFORMANCE_SCENARIO", None)
    return env


# -------------------------------------------------------------- processes


def _stop(proc: subprocess.Popen[Any], grace: float) -> None:
    """SIGTERM the process group, then SIGKILL it; reap."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    if proc.poll() is None:
        proc.wait(timeout=grace)


@contextmanager
def serve_fixture(log: Path, *options: str) -> Iterator[str]:
    """Run ``examples/conformance_server.py --http --port 0 [options]``; yield its URL."""
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [str(PYTHON), str(FIXTURE_SERVER), "--http", "--port", "0", *options],
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            assert proc.stdout is not None
            lines: list[str] = []
            reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)
            reader.start()
            reader.join(SERVER_START_TIMEOUT)
            url = lines[0].strip() if lines else ""
            if not url.startswith("http://127.0.0.1:"):
                pytest.fail(
                    f"the fixture server did not print its URL within {SERVER_START_TIMEOUT}s "
                    f"(got {url!r}, exit status {proc.poll()}); stderr:\n{log.read_text()[-2000:]}"
                )
            yield url
        finally:
            _stop(proc, SERVER_STOP_TIMEOUT)
            if proc.stdout is not None:
                proc.stdout.close()


# ------------------------------------------------------------------ suite


@dataclass
class SuiteRun:
    """One run of the suite: its exit status, output and every check it emitted."""

    command: list[str]
    returncode: int
    output: str
    seconds: float
    out_dir: Path
    #: scenario -> its checks (the dicts of ``checks.json``).
    results: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: scenario -> the client's stderr (client runs).
    client_stderr: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return f"`{' '.join(self.command[1:])}` exited {self.returncode} after {self.seconds:.1f}s"

    def checks(self, scenario: str) -> list[dict[str, Any]]:
        if scenario not in self.results:
            pytest.fail(f"{self.describe()}: no results for {scenario!r}; got {sorted(self.results)}")
        return self.results[scenario]

    def status(self, scenario: str, check_id: str) -> str:
        """The worst status of ``check_id`` in ``scenario`` (ids repeat); ``MISSING`` if absent."""
        statuses = [c["status"] for c in self.checks(scenario) if c["id"] == check_id]
        return max(statuses, key=_SEVERITY.__getitem__) if statuses else "MISSING"

    def failed(self, scenario: str, *, ignore: Sequence[str] = ()) -> list[dict[str, Any]]:
        """The checks of ``scenario`` that failed (FAILURE or WARNING), except the ``ignore`` ids."""
        return [c for c in self.checks(scenario) if c["status"] in FAILED and c["id"] not in ignore]

    def by_id(self, scenario: str, check_id: str) -> list[dict[str, Any]]:
        found = [c for c in self.checks(scenario) if c["id"] == check_id]
        if not found:
            ids = sorted({c["id"] for c in self.checks(scenario)})
            pytest.fail(f"{scenario}: no check {check_id!r}; ids: {ids}")
        return found


def explain(checks: Sequence[dict[str, Any]]) -> str:
    """Failed checks as the suite states them: id, status, requirement, what it saw."""
    lines = []
    for c in checks:
        lines.append(f"  {c['id']} [{c['status']}] {c.get('description', '')}")
        if c.get("errorMessage"):
            lines.append(f"      -> {c['errorMessage']}")
    return "\n".join(lines)


def _collect(run: SuiteRun, *, server: bool) -> None:
    for path in sorted(run.out_dir.rglob("checks.json")):
        folder = path.parent.relative_to(run.out_dir).as_posix()
        name = _TIMESTAMP.sub("", folder)
        if server:
            name = name.removeprefix("server-")
        if name in run.results:
            pytest.fail(f"{run.describe()}: scenario {name!r} reported twice")
        run.results[name] = json.loads(path.read_text())
        stderr = path.parent / "stderr.txt"
        if stderr.is_file():
            run.client_stderr[name] = stderr.read_text()


def run_suite(suite: str, args: Sequence[str], out_dir: Path, *, timeout: float) -> SuiteRun:
    """``node <suite>/dist/index.js ARGS -o OUT_DIR`` under the loopback preload.

    Bounded by ``timeout`` seconds; the whole process group (the suite, its
    mock servers, the client processes it started) is killed on expiry."""
    node = npm_path(".bin/node")
    command = [str(node), str(suite_entry(suite)), *args, "-o", str(out_dir)]
    started = time.monotonic()
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=node_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc, 5.0)
        output, _ = proc.communicate()
        pytest.fail(f"`{' '.join(command[1:])}` took longer than {timeout}s; output tail:\n{output[-4000:]}")
    finally:
        _stop(proc, 5.0)
    run = SuiteRun(command, proc.returncode, output, time.monotonic() - started, out_dir)
    _collect(run, server=args[0] == "server")
    return run


# ------------------------------------------------------------------ plans


@dataclass(frozen=True)
class Gap:
    """A requirement trio-mcp is known to miss: the test for it expects
    success and is marked ``xfail(strict=True)`` with ``reason``.

    ``check`` names one check id of ``scenario``; ``None`` means the whole
    scenario (one root cause for all of its checks)."""

    scenario: str
    check: str | None
    reason: str

    @property
    def key(self) -> str:
        return self.scenario if self.check is None else f"{self.scenario}:{self.check}"


@dataclass(frozen=True)
class Plan:
    """One suite run and what it must report."""

    key: str
    #: The scored scenarios (each must pass, up to its gaps).
    scenarios: tuple[str, ...]
    #: Run and reported but not scored (pending, added after the release):
    #: tested like the scored ones, except that they do not decide the exit status.
    unscored: tuple[str, ...] = ()
    #: Run but not tested: unimplemented extensions (listed in the baseline file).
    extensions: tuple[str, ...] = ()
    gaps: tuple[Gap, ...] = ()

    def gaps_of(self, scenario: str) -> list[Gap]:
        return [g for g in self.gaps if g.scenario == scenario]

    def whole(self, scenario: str) -> Gap | None:
        return next((g for g in self.gaps_of(scenario) if g.check is None), None)

    def exit_gaps(self) -> list[Gap]:
        """The gaps that make the suite exit non-zero (those of scored scenarios)."""
        return [g for g in self.gaps if g.scenario in self.scenarios]

    def check_cases(self) -> list[Any]:
        """``pytest.param`` per tested scenario (xfail when the whole scenario is a gap)."""
        cases = []
        for scenario in (*self.scenarios, *self.unscored):
            gap = self.whole(scenario)
            marks = [pytest.mark.xfail(strict=True, reason=gap.reason)] if gap else []
            cases.append(pytest.param(self, scenario, id=f"{self.key}:{scenario}", marks=marks))
        return cases

    def gap_cases(self) -> list[Any]:
        """``pytest.param`` per check-level gap, each xfail(strict=True)."""
        return [
            pytest.param(
                self,
                gap,
                id=f"{self.key}:{gap.key}",
                marks=[pytest.mark.xfail(strict=True, reason=gap.reason)],
            )
            for gap in self.gaps
            if gap.check is not None
        ]

    def exit_case(self) -> Any:
        gaps = self.exit_gaps()
        marks = []
        if gaps:
            names = ", ".join(sorted({g.key for g in gaps}))
            marks = [pytest.mark.xfail(strict=True, reason=f"BUG: the known gaps fail the run: {names}")]
        return pytest.param(self, id=self.key, marks=marks)


def assert_scenario_passes(run: SuiteRun, plan: Plan, scenario: str) -> None:
    """Every check of ``scenario`` passed, except the check-level gaps (tested on their own)."""
    checks = run.checks(scenario)
    assert checks, f"{scenario}: the suite reported no check at all"
    ignore = [g.check for g in plan.gaps_of(scenario) if g.check is not None]
    failed = run.failed(scenario, ignore=ignore)
    assert not failed, f"{scenario}: {len(failed)} check(s) failed ({run.describe()}):\n{explain(failed)}"
    assert any(c["status"] == "SUCCESS" for c in checks) or ignore, f"{scenario}: no check succeeded"


def assert_gap_closed(run: SuiteRun, gap: Gap) -> None:
    """The requirement of a gap now holds (every occurrence of its check passed)."""
    assert gap.check is not None
    status = run.status(gap.scenario, gap.check)
    bad = [c for c in run.checks(gap.scenario) if c["id"] == gap.check and c["status"] != "SUCCESS"]
    assert status == "SUCCESS", f"{gap.key}: {status}\n{explain(bad)}"


def assert_reported(run: SuiteRun, plan: Plan) -> None:
    """The run reported exactly the scenarios the plan knows (nothing skipped, nothing new)."""
    expected = {*plan.scenarios, *plan.unscored, *plan.extensions}
    got = set(run.results)
    assert got == expected, (
        f"{run.describe()}: missing {sorted(expected - got)}, unexpected {sorted(got - expected)}"
    )


def details(run: SuiteRun, scenario: str, check_id: str) -> dict[str, Any]:
    """The ``details`` of the (first) ``check_id`` of ``scenario``."""
    return run.by_id(scenario, check_id)[0].get("details") or {}
