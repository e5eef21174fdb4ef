"""The ``trio-mcp`` command line: run, list, call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trio_mcp.cli._arguments import UsageError
from trio_mcp.cli._main import coerce_value
from trio_mcp.cli._targets import TargetError, load_app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "everything_server.py")
CLI = [sys.executable, "-m", "trio_mcp.cli"]


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize(
    ("raw", "schema", "expected"),
    [
        ("3", {"type": "integer"}, 3),
        ("3", {"type": "string"}, "3"),
        ("2.5", {"type": "number"}, 2.5),
        ("yes", {"type": "boolean"}, True),
        ("false", {"type": "boolean"}, False),
        ("[1, 2]", {"type": "array"}, [1, 2]),
        ('{"a": 1}', {"type": "object"}, {"a": 1}),
        ("7", {"type": ["integer", "null"]}, 7),
        ("7", None, 7),
        ("hello", None, "hello"),
    ],
)
def test_values_are_coerced_by_the_input_schema(raw: str, schema: dict | None, expected: object) -> None:
    assert coerce_value(raw, schema) == expected


def test_a_value_that_does_not_fit_is_a_clear_error() -> None:
    with pytest.raises(UsageError, match="cannot read 'x' as integer"):
        coerce_value("x", {"type": "integer"})


def test_load_app_finds_the_server_object() -> None:
    app = load_app(EXAMPLE)
    assert app.info.name == "trio-mcp-everything"
    assert load_app(f"{EXAMPLE}:app") is app or load_app(f"{EXAMPLE}:app").info.name == app.info.name
    with pytest.raises(TargetError, match="no MCP server object named nothing"):
        load_app(f"{EXAMPLE}:nothing")
    with pytest.raises(TargetError, match="no such file"):
        load_app("missing_server.py")


def test_list_over_stdio() -> None:
    out = cli("list", "--json", "--", sys.executable, EXAMPLE)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    names = {t["name"] for t in data["tools"]}
    assert {"echo", "add", "get_weather"} <= names
    assert any(t["uriTemplate"].startswith("demo://") for t in data["resourceTemplates"])


def test_call_over_stdio_coerces_and_prints() -> None:
    out = cli("call", "add", "a=2", "b=40", "--json", "--", sys.executable, EXAMPLE)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["structuredContent"] == {"result": 42.0}


def test_call_exit_status_on_errors() -> None:
    bad = cli("call", "add", "a=oops", "b=1", "--", sys.executable, EXAMPLE)
    assert bad.returncode == 2 and "cannot read 'oops' as number" in bad.stderr
    unknown = cli("call", "nope", "--", sys.executable, EXAMPLE)
    assert unknown.returncode == 2 and "no tool 'nope'" in unknown.stderr
    missing = cli("list", "--", "definitely-not-a-command-xyz")
    assert missing.returncode == 4 and "definitely-not-a-command-xyz" in missing.stderr
    # nothing listens on port 9 of 127.0.0.1: one clear line, no traceback
    unreachable = cli("list", "http://127.0.0.1:9/mcp")
    assert unreachable.returncode == 4 and "connect" in unreachable.stderr.lower()
    assert "Traceback" not in unreachable.stderr and unreachable.stderr.count("\n") == 1


def test_run_http_then_call_it_by_url(http_url: str) -> None:
    out = cli("call", http_url, "echo", "message=over http")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "over http"
