"""The client commands through the real entry point (``python -m trio_mcp.cli``)
against real servers: ours over stdio and Streamable HTTP, server-everything
over stdio. Every process is bounded by ``timeout`` and stopped by the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import CLI, EXAMPLE, ROOT

STDIO = ["--", sys.executable, EXAMPLE]
UNION_SERVER = textwrap.dedent(
    '''
    import os
    from trio_mcp import MCPServer

    app = MCPServer("unions")

    @app.tool
    def lookup(code: str | None = None, count: int | None = None, flag: bool | str = False) -> str:
        """Report the types the arguments arrived as."""
        return f"{type(code).__name__}:{code!r} {type(count).__name__}:{count!r} {type(flag).__name__}:{flag!r}"

    @app.tool
    def record(note: str) -> str:
        """Append the note to $RECORD_FILE."""
        with open(os.environ["RECORD_FILE"], "a") as file:
            file.write(note + "\\n")
        return "recorded"

    if __name__ == "__main__":
        import trio
        from trio_mcp.transports.stdio import stdio_server_stream

        async def main() -> None:
            async with stdio_server_stream() as stream:
                await app.serve(stream)

        trio.run(main)
    '''
)


def cli(
    *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [*CLI, *args], check=False, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=full_env
    )


@pytest.fixture
def union_server(tmp_path: Path) -> list[str]:
    path = tmp_path / "union_server.py"
    path.write_text(UNION_SERVER)
    return ["--", sys.executable, str(path)]


# ------------------------------------------------------------- every verb


@pytest.mark.parametrize(
    ("words", "check"),
    [
        (["tools"], lambda d: {"echo", "add"} <= {t["name"] for t in d["tools"]}),
        (["resources"], lambda d: "demo://readme" in {r["uri"] for r in d["resources"]}),
        (
            ["templates"],
            lambda d: "demo://greeting/{name}" in {t["uriTemplate"] for t in d["resourceTemplates"]},
        ),
        (["prompts"], lambda d: "code_review" in {p["name"] for p in d["prompts"]}),
        (["list"], lambda d: set(d) == {"tools", "prompts", "resources", "resourceTemplates"}),
        (["call", "echo", "message=hi there"], lambda d: d["content"][0]["text"] == "hi there"),
        (["read", "demo://greeting/Ada"], lambda d: d["contents"][0]["text"] == "Hello, Ada!"),
        (["prompt", "code_review", "code=x=1"], lambda d: "x=1" in json.dumps(d["messages"])),
        (
            ["complete", "demo://greeting/{name}", "name", "G"],
            lambda d: d["completion"]["values"] == ["Grace", "Guido"],
        ),
        (["set-level", "debug"], lambda d: d == {"level": "debug"}),
        (["ping"], lambda d: d["ok"] is True and d["seconds"] >= 0),
    ],
)
def test_every_verb_prints_one_json_object_over_stdio(words: list[str], check: object) -> None:
    out = cli(*words, "--json", *STDIO)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)  # exactly one object: json.loads refuses trailing data
    assert callable(check) and check(data), data


def test_readable_output_summarizes_media() -> None:
    image = cli("call", "get_tiny_image", *STDIO)
    assert image.returncode == 0, image.stderr
    assert "[image image/png, 74 bytes]" in image.stdout.splitlines()
    audio = cli("call", "get_audio_clip", *STDIO)
    assert audio.stdout.strip() == "[audio audio/wav, 444 bytes]"
    blob = cli("read", "demo://logo.png", *STDIO)
    assert blob.stdout.strip().startswith("[demo://logo.png: image/png, ") and "bytes]" in blob.stdout


def test_progress_and_logs_go_to_stderr_as_lines_when_not_a_terminal() -> None:
    out = cli("call", "long_running_operation", "duration=0.2", "steps=2", *STDIO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Long running operation completed")
    assert "progress 1/2" in out.stderr and "progress 2/2" in out.stderr
    logs = cli("call", "log_messages", "--log-level", "warning", *STDIO)
    lines = logs.stderr.splitlines()
    assert any(line.startswith("[server warning") for line in lines), logs.stderr
    assert not any(line.startswith("[server info") for line in lines), logs.stderr


# ------------------------------------------------------------- arguments


def test_unions_are_coerced_as_their_schema_says(union_server: list[str]) -> None:
    out = cli("call", "lookup", "code=12345", "count=3", "flag=true", *union_server)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "str:'12345' int:3 bool:True"
    null = cli("call", "lookup", "code=null", "flag=maybe", *union_server)
    assert null.stdout.strip() == "NoneType:None NoneType:None str:'maybe'"
    bad = cli("call", "lookup", "count=many", *union_server)
    assert bad.returncode == 2 and "cannot read 'many' as integer" in bad.stderr


def test_unknown_arguments_and_tools_are_refused_before_the_call(
    union_server: list[str], tmp_path: Path
) -> None:
    record = tmp_path / "record.txt"
    env = {"RECORD_FILE": str(record)}
    unknown_key = cli("call", "record", "nte=hi", *union_server, env=env)
    assert unknown_key.returncode == 2
    assert "tool 'record' has no argument 'nte'; did you mean 'note'?" in unknown_key.stderr
    assert not record.exists()  # nothing was called
    unknown_tool = cli("call", "recrod", "note=hi", *union_server, env=env)
    assert unknown_tool.returncode == 2 and "no tool 'recrod'; did you mean 'record'?" in unknown_tool.stderr
    assert not record.exists()
    ok = cli("call", "record", "note=hi", *union_server, env=env)
    assert ok.returncode == 0 and record.read_text() == "hi\n"


# ------------------------------------------------------------- exit codes and errors


def test_exit_codes_and_the_json_error_envelope() -> None:
    tool_error = cli("call", "add", "a=1", *STDIO)  # b is missing: the tool answers isError
    assert tool_error.returncode == 1 and "Missing required argument `b`" in tool_error.stdout
    protocol = cli("read", "demo://nothing", "--json", *STDIO)
    assert protocol.returncode == 3 and protocol.stdout == ""
    envelope = json.loads(protocol.stderr)
    assert envelope["error"]["kind"] == "protocol" and envelope["error"]["exitCode"] == 3
    assert "demo://nothing" in envelope["error"]["message"]
    usage = cli("set-level", "loud", *STDIO)
    assert usage.returncode == 2 and "set-level needs one LEVEL" in usage.stderr
    connection = cli("ping", "--json", "http://127.0.0.1:9/mcp")
    assert connection.returncode == 4 and json.loads(connection.stderr)["error"]["kind"] == "connection"
    slow = cli("call", "long_running_operation", "duration=30", "steps=2", "--timeout", "1", *STDIO)
    assert slow.returncode == 5 and "--timeout" in slow.stderr
    assert all("Traceback" not in o.stderr for o in (tool_error, protocol, usage, connection, slow))


def test_a_closed_pipe_is_no_traceback() -> None:
    proc = subprocess.Popen([*CLI, "list", *STDIO], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before anything is written (`| head` that stopped early)
    try:
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_version_and_help_show_no_internal_verbs() -> None:
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("trio-mcp 0.")
    top = cli("--help")
    assert "==SUPPRESS==" not in top.stdout and "demo-server" not in top.stdout
    for verb in ("list", "tools", "call", "read", "prompt", "complete", "set-level", "ping"):
        assert f"    {verb}" in top.stdout
    call_help = cli("call", "--help")
    for option in ("--header", "--timeout", "--auth", "--json", "--log-level"):
        assert option in call_help.stdout


# ------------------------------------------------------------- over HTTP


def test_verbs_over_streamable_http(http_url: str) -> None:
    out = cli("call", http_url, "echo", "message=over http", "--header", "X-Trace: 1", "--timeout", "30")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "over http"
    read = cli("read", http_url, "demo://greeting/Ada")
    assert read.stdout.strip() == "Hello, Ada!"
    ping = cli("ping", http_url)
    assert ping.returncode == 0 and "answered in" in ping.stdout


def test_a_wrong_path_is_one_line_naming_the_status_and_url(http_url: str) -> None:
    wrong = http_url.rsplit("/", 1)[0] + "/nothing-here"
    out = cli("list", wrong)
    assert out.returncode == 4
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert f"{wrong} answered HTTP 404 Not Found" in out.stderr and "not an MCP endpoint" in out.stderr
