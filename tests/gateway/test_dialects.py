"""One real configuration file per MCP host, written as that host writes it,
served end to end: ``trio-mcp gateway FILE`` runs as a process speaking MCP
over its stdin/stdout, starts the file's local stdio servers (and reaches a
remote one on 127.0.0.1 where the host's format has one), and a client of
that process sees exactly the servers, tools and values the file asks for:
disabled servers stay off, variables and inputs reach the servers'
environment, tool filters hide tools and refuse them on call.

The local servers are ``fixtures/probe_server.py`` (its ``env`` tool tells
what reached its environment); the remote one is an in-process
:class:`HttpServer`. Each test checks that every process the gateway started
is gone after the client closed the gateway's stdin.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from tests.gateway.test_gateway import children, processes, wait_gone

from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.protocol import InvalidParams
from trio_mcp.server import MCPServer
from trio_mcp.serving.http import HttpServer
from trio_mcp.transports.stdio import StdioServerParameters, StdioTransport

__all__ = ["processes"]  # the fixture, imported for these tests

PROBE = str(Path(__file__).parent / "fixtures" / "probe_server.py")
PY = sys.executable
TIMEOUT = 30.0


def remote_app() -> MCPServer:
    app = MCPServer("remote")

    @app.tool
    def where() -> str:
        """Where this server runs."""
        return "remote"

    @app.tool
    def delete_note() -> str:
        """A tool the configuration hides."""
        return "deleted"

    return app


@asynccontextmanager
async def remote_server() -> AsyncIterator[str]:
    async with trio.open_nursery() as nursery:
        info = await nursery.start(HttpServer(remote_app(), host="127.0.0.1", port=0, path="/mcp").run)
        yield info.url
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def gateway_over_stdio(
    path: Path, seen: set[int], *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """A ``trio-mcp gateway`` process serving ``path`` over stdio, and a client of it."""
    params = StdioServerParameters(
        command=PY,
        args=("-m", "trio_mcp.cli", "gateway", str(path), "--no-watch", *args),
        env={"HOME": os.environ.get("HOME", "/root"), **(env or {})},
        cwd=path.parent,
        name="gateway",
        close_grace=10.0,
    )
    transport = StdioTransport(params)
    async with trio.open_nursery() as nursery:
        stream = await nursery.start(transport.run)
        assert transport.pid is not None
        seen.add(transport.pid)
        async with open_session(stream) as client:
            seen.update(children(transport.pid))
            yield client
        await stream.aclose()
    assert await wait_gone(seen, timeout=10.0) == set()


async def tools_of(client: ClientSession) -> list[str]:
    return sorted(t.name for t in await client.list_all_tools())


async def text_of(client: ClientSession, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error is not True, result
    return str(result.content[0].text)


PROBE_TOOLS = ["cancellations", "cwd", "delete_note", "env", "pid", "read_notes", "slow", "write_note"]


def prefixed(server: str, names: list[str]) -> list[str]:
    return [f"{server}__{n}" for n in names]


# ---------------------------------------------------------------- the hosts


def claude_desktop(tmp: Path, remote: str) -> Path:
    path = tmp / "claude_desktop_config.json"
    config = {
        "mcpServers": {
            "probe": {"command": PY, "args": [PROBE], "env": {"CLAUDE": "desktop"}},
        }
    }
    path.write_text(json.dumps(config, indent=2))
    return path


async def check_claude_desktop(client: ClientSession, tmp: Path) -> None:
    assert await tools_of(client) == prefixed("probe", PROBE_TOOLS)
    assert await text_of(client, "probe__env", name="CLAUDE") == "desktop"


def vscode(tmp: Path, remote: str) -> Path:
    folder = tmp / "project" / ".vscode"
    folder.mkdir(parents=True)
    path = folder / "mcp.json"
    path.write_text(
        """{
  // Inputs are prompted on first server start, then stored securely by VS Code.
  "inputs": [
    {
      "type": "promptString",
      "id": "api-key",
      "description": "Probe API key",
      "password": true
    }
  ],
  "servers": {
    "probe": {
      "type": "stdio",
      "command": "PY",
      "args": ["PROBE"],
      "env": {
        "API_KEY": "${input:api-key}",
        "WORKSPACE": "${workspaceFolder}",
      },
    },
  },
}
""".replace("PY", PY).replace("PROBE", PROBE)
    )
    return path


async def check_vscode(client: ClientSession, tmp: Path) -> None:
    assert await tools_of(client) == prefixed("probe", PROBE_TOOLS)
    assert await text_of(client, "probe__env", name="API_KEY") == "s3cret-from-option"
    assert await text_of(client, "probe__env", name="WORKSPACE") == str((tmp / "project").resolve())


def cursor(tmp: Path, remote: str) -> Path:
    folder = tmp / "repo" / ".cursor"
    folder.mkdir(parents=True)
    (tmp / "repo" / ".env").write_text("# local secrets\nFROM_ENV_FILE=dotenv-value\nexport QUOTED='q v'\n")
    path = folder / "mcp.json"
    config = {
        "mcpServers": {
            "probe": {
                "command": PY,
                "args": [PROBE],
                "env": {"TOKEN": "${env:PROBE_TOKEN}", "HOME_SEEN": "${userHome}"},
                "envFile": "${workspaceFolder}/.env",
            }
        }
    }
    path.write_text(json.dumps(config, indent=2))
    return path


async def check_cursor(client: ClientSession, tmp: Path) -> None:
    assert await text_of(client, "probe__env", name="TOKEN") == "cursor-token"
    assert await text_of(client, "probe__env", name="HOME_SEEN") == os.environ.get("HOME", "/root")
    assert await text_of(client, "probe__env", name="FROM_ENV_FILE") == "dotenv-value"
    assert await text_of(client, "probe__env", name="QUOTED") == "q v"


def zed(tmp: Path, remote: str) -> Path:
    path = tmp / "settings.json"
    path.write_text(
        """// Zed settings
//
// For information on how to configure Zed, see the Zed documentation.
{
  "theme": "One Dark",
  "context_servers": {
    "probe": {
      "source": "custom",
      "command": "PY",
      "args": ["PROBE", "--name", "zed-probe"],
      "env": {"EDITOR_NAME": "zed"}
    },
    "legacy": {
      "command": {
        "path": "PY",
        "args": ["PROBE"],
        "env": {"STYLE": "old"}
      },
      "settings": {}
    }
  }
}
""".replace("PY", PY).replace("PROBE", PROBE)
    )
    return path


async def check_zed(client: ClientSession, tmp: Path) -> None:
    assert await tools_of(client) == sorted(prefixed("legacy", PROBE_TOOLS) + prefixed("probe", PROBE_TOOLS))
    assert await text_of(client, "probe__env", name="EDITOR_NAME") == "zed"
    assert await text_of(client, "legacy__env", name="STYLE") == "old"


def codex(tmp: Path, remote: str) -> Path:
    path = tmp / "config.toml"
    path.write_text(
        f"""model = "o4-mini"
approval_policy = "on-request"

[mcp_servers.probe]
command = "{PY}"
args = ["{PROBE}"]
env = {{ "CODEX" = "yes" }}
enabled_tools = ["env", "read_*"]

[mcp_servers.other]
command = "{PY}"
args = ["{PROBE}"]
disabled_tools = ["delete_note", "write_note"]
tool_timeout_sec = 30

[mcp_servers.off]
command = "definitely-not-started"
enabled = false
"""
    )
    return path


async def check_codex(client: ClientSession, tmp: Path) -> None:
    assert await tools_of(client) == sorted(
        [
            "probe__env",
            "probe__read_notes",
            *prefixed("other", ["cancellations", "cwd", "env", "pid", "read_notes", "slow"]),
        ]
    )
    assert await text_of(client, "probe__env", name="CODEX") == "yes"
    with pytest.raises(InvalidParams, match="server 'probe' has no tool 'pid'"):
        await client.call_tool("probe__pid", {})  # filtered: unknown on call too
    with pytest.raises(InvalidParams, match="server 'other' has no tool 'delete_note'"):
        await client.call_tool("other__delete_note", {})


def gemini(tmp: Path, remote: str) -> Path:
    folder = tmp / ".gemini"
    folder.mkdir()
    path = folder / "settings.json"
    config = {
        "theme": "GitHub",
        "mcpServers": {
            "probe": {
                "command": PY,
                "args": [PROBE],
                "env": {"GEMINI": "cli"},
                "timeout": 30000,
                "trust": False,
                "includeTools": ["env", "read_notes"],
            },
            "remote": {"httpUrl": remote, "excludeTools": ["delete_note"]},
        },
    }
    path.write_text(json.dumps(config, indent=2))
    return path


async def check_gemini(client: ClientSession, tmp: Path) -> None:
    assert await tools_of(client) == ["probe__env", "probe__read_notes", "remote__where"]
    assert await text_of(client, "probe__env", name="GEMINI") == "cli"
    assert await text_of(client, "remote__where") == "remote"
    with pytest.raises(InvalidParams, match="has no tool 'delete_note'"):
        await client.call_tool("remote__delete_note", {})


def windsurf(tmp: Path, remote: str) -> Path:
    path = tmp / "mcp_config.json"
    config = {
        "mcpServers": {
            "probe": {"command": PY, "args": [PROBE], "env": {"WINDSURF": "cascade"}},
            "remote": {"serverUrl": remote, "headers": {"X-Probe": "windsurf"}},
        }
    }
    path.write_text(json.dumps(config, indent=2))
    return path


async def check_windsurf(client: ClientSession, tmp: Path) -> None:
    assert await tools_of(client) == sorted(
        [*prefixed("probe", PROBE_TOOLS), "remote__delete_note", "remote__where"]
    )
    assert await text_of(client, "probe__env", name="WINDSURF") == "cascade"
    assert await text_of(client, "remote__where") == "remote"


def goose(tmp: Path, remote: str) -> Path:
    path = tmp / "config.yaml"
    path.write_text(
        f"""GOOSE_PROVIDER: openai
GOOSE_MODEL: gpt-4o
extensions:
  developer:
    bundled: true
    display_name: Developer
    enabled: true
    name: developer
    timeout: 300
    type: builtin
  probe:
    args:
    - {PROBE}
    bundled: null
    cmd: {PY}
    description: a probe server
    enabled: true
    env_keys: []
    envs:
      GOOSE: honk
    name: probe
    timeout: 300
    type: stdio
  sleeping:
    args: []
    cmd: definitely-not-started
    enabled: false
    envs: {{}}
    name: sleeping
    type: stdio
"""
    )
    return path


async def check_goose(client: ClientSession, tmp: Path) -> None:
    assert await tools_of(client) == prefixed("probe", PROBE_TOOLS)
    assert await text_of(client, "probe__env", name="GOOSE") == "honk"


def continue_dev(tmp: Path, remote: str) -> Path:
    folder = tmp / ".continue" / "mcpServers"
    folder.mkdir(parents=True)
    path = folder / "probe.yaml"
    path.write_text(
        f"""name: Probe MCP servers
version: 0.0.1
schema: v1
mcpServers:
  - name: Probe Server
    command: {PY}
    args:
      - {PROBE}
    env:
      CONTINUE: "yes"
"""
    )
    return path


async def check_continue(client: ClientSession, tmp: Path) -> None:
    assert await tools_of(client) == prefixed("Probe-Server", PROBE_TOOLS)
    assert await text_of(client, "Probe-Server__env", name="CONTINUE") == "yes"


def opencode(tmp: Path, remote: str) -> Path:
    path = tmp / "opencode.json"
    config = {
        "$schema": "https://opencode.ai/config.json",
        "mcp": {
            "probe": {
                "type": "local",
                "command": [PY, PROBE],
                "enabled": True,
                "environment": {"OPENCODE": "yes"},
            },
            "remote": {"type": "remote", "url": remote, "enabled": True},
            "off": {"type": "local", "command": ["definitely-not-started"], "enabled": False},
        },
    }
    path.write_text(json.dumps(config, indent=2))
    return path


async def check_opencode(client: ClientSession, tmp: Path) -> None:
    assert await tools_of(client) == sorted(
        [*prefixed("probe", PROBE_TOOLS), "remote__delete_note", "remote__where"]
    )
    assert await text_of(client, "probe__env", name="OPENCODE") == "yes"
    assert await text_of(client, "remote__where") == "remote"


def mcp_proxy(tmp: Path, remote: str) -> Path:
    path = tmp / "servers.json"
    config = {
        "mcpServers": {
            "probe": {
                "enabled": True,
                "timeout": 60,
                "command": PY,
                "args": [PROBE],
                "env": {"PROXY": "named"},
                "transportType": "stdio",
            },
            "off": {"enabled": False, "command": "definitely-not-started", "args": []},
        }
    }
    path.write_text(json.dumps(config, indent=2))
    return path


async def check_mcp_proxy(client: ClientSession, tmp: Path) -> None:
    assert await tools_of(client) == prefixed("probe", PROBE_TOOLS)
    assert await text_of(client, "probe__env", name="PROXY") == "named"


HOSTS: dict[str, tuple[Callable[[Path, str], Path], Any, int]] = {
    # name: (write the file, check the served gateway, stdio servers it starts)
    "claude-desktop": (claude_desktop, check_claude_desktop, 1),
    "vscode": (vscode, check_vscode, 1),
    "cursor": (cursor, check_cursor, 1),
    "zed": (zed, check_zed, 2),
    "codex": (codex, check_codex, 2),
    "gemini": (gemini, check_gemini, 1),
    "windsurf": (windsurf, check_windsurf, 1),
    "goose": (goose, check_goose, 1),
    "continue": (continue_dev, check_continue, 1),
    "opencode": (opencode, check_opencode, 1),
    "mcp-proxy": (mcp_proxy, check_mcp_proxy, 1),
}


@pytest.mark.parametrize("host", list(HOSTS))
async def test_each_hosts_file_is_served_end_to_end_over_stdio(
    host: str, tmp_path: Path, processes: set[int]
) -> None:
    write, check, local_servers = HOSTS[host]
    with trio.fail_after(TIMEOUT):
        async with remote_server() as remote:
            path = write(tmp_path, remote)
            env = {"PROBE_TOKEN": "cursor-token"}
            async with gateway_over_stdio(
                path, processes, "--input", "api-key=s3cret-from-option", env=env
            ) as client:
                assert client.server_info is not None and client.server_info.name == "trio-mcp-gateway"
                assert len(processes) == 1 + local_servers  # the gateway and the enabled stdio servers
                await check(client, tmp_path)
