"""Parsing ``mcpServers`` configuration files into typed, frozen entries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from trio_mcp.gateway import ConfigError, GatewayConfig, RemoteEntry, StdioEntry, load_config, parse_config
from trio_mcp.transports.http import StreamableHttpTransport
from trio_mcp.transports.sse import SseTransport
from trio_mcp.transports.stdio import StdioTransport
from trio_mcp.transports.websocket import WebSocketTransport

GOOD: dict[str, Any] = {
    "mcpServers": {
        "files": {
            "command": "npx",
            "args": ["-y", "server-files", "/srv"],
            "env": {"DEBUG": "1"},
            "cwd": "/srv",
            "autoApprove": ["read"],  # other hosts' keys are ignored
        },
        "typed-stdio": {"type": "stdio", "command": "server-x"},
        "search": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer t"}},
        "streamy": {"url": "https://example.com/api", "type": "streamableHttp"},
        "legacy": {"url": "http://127.0.0.1:9000/sse"},
        "legacy.explicit": {"url": "http://127.0.0.1:9000/events", "transport": "sse"},
        "socket_1": {"url": "wss://example.com/mcp"},
        "off": {"command": "server-off", "disabled": True},
        "on": {"command": "server-on", "disabled": False},
    }
}


def test_stdio_and_remote_entries_in_file_order_with_disabled_ones_skipped() -> None:
    config = parse_config(GOOD, environ={})
    assert config.names == (
        "files",
        "typed-stdio",
        "search",
        "streamy",
        "legacy",
        "legacy.explicit",
        "socket_1",
        "on",
    )
    assert config.disabled == ("off",)
    files = config.servers[0]
    assert files == StdioEntry(
        name="files", command="npx", args=("-y", "server-files", "/srv"), env={"DEBUG": "1"}, cwd="/srv"
    )
    remotes = {e.name: e for e in config.servers if isinstance(e, RemoteEntry)}
    assert remotes["search"].transport == "http"
    assert dict(remotes["search"].headers) == {"Authorization": "Bearer t"}
    assert remotes["streamy"].transport == "http"
    assert remotes["legacy"].transport == "sse"  # inferred from the /sse path
    assert remotes["legacy.explicit"].transport == "sse"
    assert remotes["socket_1"].transport == "ws"  # inferred from wss://


def test_the_servers_key_used_by_editors_is_accepted_too() -> None:
    config = parse_config({"servers": {"a": {"command": "x"}}, "inputs": []}, environ={})
    assert config.names == ("a",)


def test_entries_are_frozen_down_to_their_maps() -> None:
    entry = parse_config(GOOD, environ={}).servers[0]
    assert isinstance(entry, StdioEntry)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        entry.command = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        entry.env["DEBUG"] = "0"  # type: ignore[index]
    hash(entry)  # usable as a key


def test_environment_variables_are_expanded_where_documented() -> None:
    data = {
        "mcpServers": {
            "a": {
                "command": "${TOOLS}/server",
                "args": ["--token=${TOKEN}", "$TOKEN", "${MISSING:-fallback}"],
                "env": {"KEY": "${TOKEN}"},
                "cwd": "${TOOLS}",
            },
            "b": {
                "url": "https://${HOSTNAME_X:-example.com}/mcp",
                "headers": {"Authorization": "Bearer ${TOKEN}"},
            },
        }
    }
    config = parse_config(data, environ={"TOOLS": "/opt/tools", "TOKEN": "s3cret"})
    a, b = config.servers
    assert isinstance(a, StdioEntry) and isinstance(b, RemoteEntry)
    assert a.command == "/opt/tools/server" and a.cwd == "/opt/tools"
    assert a.args == ("--token=s3cret", "$TOKEN", "fallback")  # only ${...} is interpreted
    assert dict(a.env) == {"KEY": "s3cret"}
    assert b.url == "https://example.com/mcp" and dict(b.headers) == {"Authorization": "Bearer s3cret"}


def _servers(**entries: Any) -> dict[str, Any]:
    return {"mcpServers": entries}


BAD: list[tuple[Any, str | None, str | None, str]] = [
    # (data, server, field, words the message must hold)
    ([], None, None, "must be an object, not a list"),
    ({"files": {"command": "x"}}, None, None, "no servers found: expected one of 'mcpServers'"),
    ({"mcpServers": "x"}, None, "mcpServers", "must be an object of servers"),
    (_servers(a="npx"), "a", None, "must be an object, not a string"),
    (_servers(a={"args": ["x"]}), "a", "command", "either 'command'"),
    (_servers(a={"command": 3}), "a", "command", "must be a string, not a number (3)"),
    (_servers(a={"command": ""}), "a", "command", "must not be empty"),
    (_servers(a={"command": "x", "args": "--flag"}), "a", "args", "must be a list of strings"),
    (_servers(a={"command": "x", "args": ["ok", 7]}), "a", "args[1]", "must be a string, not a number (7)"),
    (_servers(a={"command": "x", "env": ["A=1"]}), "a", "env", "must be an object of strings"),
    (_servers(a={"command": "x", "env": {"PORT": 80}}), "a", "env.PORT", "must be a string"),
    (_servers(a={"command": "x", "env": {"K": "${NOPE}"}}), "a", "env.K", "${NOPE} is not set"),
    (_servers(a={"command": "x", "cwd": None, "disabled": "yes"}), "a", "disabled", "true or false"),
    (_servers(a={"command": "x", "url": "http://h/mcp"}), "a", "url", "not both"),
    (_servers(a={"command": "x", "type": "sse"}), "a", "type", "needs a 'url'"),
    (_servers(a={"url": "http://h/mcp", "type": "stdio"}), "a", "command", "needs a 'command'"),
    (_servers(a={"url": "http://h/mcp", "type": "grpc"}), "a", "type", "unknown transport type 'grpc'"),
    (_servers(a={"url": "http://h/mcp", "transport": "pigeon"}), "a", "transport", "unknown transport type"),
    (_servers(a={"url": "http://h/mcp", "type": 1}), "a", "type", "must be a string"),
    (_servers(a={"url": "http://h/mcp", "type": "sse", "transport": "ws"}), "a", "transport", "give one"),
    (_servers(a={"url": "ftp://h/mcp"}), "a", "url", "not an http(s):// or ws(s):// URL"),
    (_servers(a={"url": "/relative/mcp"}), "a", "url", "not an http(s):// or ws(s):// URL"),
    (_servers(a={"url": "http://h/mcp", "type": "ws"}), "a", "url", "needs a ws:// or wss:// URL"),
    (_servers(a={"url": "ws://h/mcp", "type": "http"}), "a", "url", "needs a http:// or https:// URL"),
    (
        _servers(a={"url": "http://h/mcp", "headers": {"X": None}}),
        "a",
        "headers.X",
        "must be a string, not null",
    ),
    (_servers(my__server={"command": "x"}), "my__server", None, "must not contain '__'"),
    (_servers(**{"my server": {"command": "x"}}), "my server", None, "only letters, digits"),
    (_servers(**{"": {"command": "x"}}), None, "mcpServers", "must not be empty"),
]


@pytest.mark.parametrize(("data", "server", "field", "words"), BAD)
def test_each_kind_of_bad_input_is_a_config_error_naming_server_and_field(
    data: Any, server: str | None, field: str | None, words: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data, environ={})
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.server, err.field) == (server, field)
    assert words in str(err), str(err)
    if server is not None:  # the message starts with where: mcpServers.NAME[.FIELD]
        where = ".".join(p for p in ("mcpServers", server, field) if p)
        assert str(err).startswith(f"{where}: "), str(err)


def test_files_that_cannot_be_read_or_decoded(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the configuration file"):
        load_config(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "mcpServers": {\n    "a": {"command": "x",}\n    "b": 1\n  }\n}\n')
    with pytest.raises(ConfigError, match=r"broken.json:4: not valid JSON \(JSONC\): Unexpected"):
        load_config(broken)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD))
    assert load_config(good, environ={}, inherit_env=True) == GatewayConfig(
        [
            attrs.evolve(e, inherit_env=True) if isinstance(e, StdioEntry) else e
            for e in parse_config(GOOD, environ={}).servers
        ],
        ["off"],
    )


def test_each_entry_makes_fresh_transports_of_its_kind() -> None:
    config = parse_config(GOOD, environ={})
    by_name = {e.name: e for e in config.servers}
    make = by_name["files"].transport_factory(close_grace=0.5)
    first, second = make(), make()
    assert isinstance(first, StdioTransport) and first is not second  # one per restart
    params = first.params
    assert (params.command, params.args, dict(params.env), params.cwd) == (
        "npx",
        ("-y", "server-files", "/srv"),
        {"DEBUG": "1"},
        "/srv",
    )
    assert params.name == "files" and params.close_grace == 0.5 and params.inherit_env is False
    search = by_name["search"].transport_factory()()
    assert isinstance(search, StreamableHttpTransport)
    assert search.url == "https://example.com/mcp" and search.headers == {"authorization": "Bearer t"}
    assert isinstance(by_name["legacy"].transport_factory()(), SseTransport)
    assert isinstance(by_name["socket_1"].transport_factory()(), WebSocketTransport)


def test_the_readme_example_parses() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### A gateway over a host's configuration file", 1)[1]
    example = json.loads(section.split("```json\n", 1)[1].split("```", 1)[0])
    # the README shows examples/gateway.json as it is
    shipped = Path(__file__).resolve().parents[2] / "examples" / "gateway.json"
    assert example == json.loads(shipped.read_text())
    config = parse_config(example, environ={})
    assert config.names == ("demo", "everything", "roots") and config.disabled == ("off",)
    # the remote entry the README describes in prose
    remote = {"remote": json.loads(section.split('`"remote": ', 1)[1].split("`", 1)[0])}
    assert parse_config({"mcpServers": remote}, environ={"TOKEN": "t"}).names == ("remote",)
    with pytest.raises(ConfigError, match=r"mcpServers.remote.headers.Authorization: \$\{TOKEN\} is not set"):
        parse_config({"mcpServers": remote}, environ={})
