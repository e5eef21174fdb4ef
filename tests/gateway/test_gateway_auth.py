"""A gateway config entry's ``auth``: the gateway in front of our Streamable
HTTP server app behind a bearer check, or behind the fake authorization
server of ``tests/auth`` (client credentials); all on 127.0.0.1, ports
chosen at run time. A wrong token leaves the server down with the reason,
retried, and the gateway running; a bad entry is a ConfigError naming file,
line, server and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from tests.auth.test_client_credentials import CLIENT_ID, SECRET, credentials_server, grants
from tests.auth.test_oauth_client import serve, world
from tests.cli.test_bench_auth import TOKEN, RequireBearer
from tests.cli.test_client_auth import _app
from tests.gateway.test_fleet import FOREVER

from trio_mcp.gateway import open_gateway
from trio_mcp.gateway._config import ConfigError, load_config, parse_config
from trio_mcp.testing import connected

TIMEOUT = 30.0


def _config(url: str, auth: dict[str, Any], environ: dict[str, str]) -> Any:
    return parse_config({"mcpServers": {"guarded": {"url": url, "auth": auth}}}, environ=environ)


async def _echo(gateway: Any) -> str:
    async with connected(gateway) as client:
        names = {t.name for t in await client.list_all_tools()}
        assert "guarded__echo" in names
        result = await client.call_tool("guarded__echo", {"text": "through"})
        assert result.is_error is not True, result
        return str(result.content[0].text)


async def test_a_bearer_token_from_the_environment() -> None:
    guard = RequireBearer(_app())
    with trio.fail_after(TIMEOUT):
        async with serve(guard) as base:
            config = _config(f"{base}/mcp", {"type": "bearer", "tokenEnv": "GW_TOKEN"}, {"GW_TOKEN": TOKEN})
            async with open_gateway(config, settings=FOREVER) as gateway:
                assert await _echo(gateway) == "through"
    assert guard.refused == 0


async def test_a_wrong_token_leaves_the_server_down_with_the_reason_and_retried() -> None:
    guard = RequireBearer(_app())
    with trio.fail_after(TIMEOUT):
        async with serve(guard) as base:
            config = _config(f"{base}/mcp", {"type": "bearer", "tokenEnv": "GW_TOKEN"}, {"GW_TOKEN": "wrong"})
            async with open_gateway(config, settings=FOREVER) as gateway:
                conn = gateway.host.servers["guarded"]
                assert conn.state == "down" and "401" in gateway.failed["guarded"]
                status = gateway.status()["servers"]["guarded"]
                assert status["state"] == "down" and "401" in status["last_error"]
                refused = guard.refused
                while guard.refused == refused:  # it keeps trying (and keeps being refused)
                    await conn.wait_changed()
                async with connected(gateway) as client:
                    failed = await client.call_tool("guarded__echo", {"text": "x"})
                    assert failed.is_error is True
                    assert "server 'guarded' is unavailable" in failed.content[0].text
                assert "guarded" in gateway.host.servers


async def test_client_credentials(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with world(credentials_server(), app=_app()) as (authz, resource):
            auth = {"type": "client_credentials", "clientId": CLIENT_ID, "clientSecretEnv": "GW_SECRET"}
            config = _config(resource.url, auth, {"GW_SECRET": SECRET})
            async with open_gateway(config, settings=FOREVER) as gateway:
                assert await _echo(gateway) == "through"
    assert grants(authz) == ["client_credentials"]


def test_the_secret_stays_out_of_the_entry_repr() -> None:
    auth = {"type": "client_credentials", "clientId": "svc", "clientSecretEnv": "GW_SECRET"}
    config = _config("http://127.0.0.1:9/mcp", auth, {"GW_SECRET": "s3cret-value"})
    assert "s3cret-value" not in repr(config)


@pytest.mark.parametrize(
    ("entry", "environ", "field", "message"),
    [
        ({"auth": {"type": "bearer"}}, {}, "auth.tokenEnv", "missing"),
        ({"auth": {"type": "basic"}}, {}, "auth.type", "must be one of 'bearer', 'client_credentials'"),
        ({"auth": {"type": "bearer", "tokenEnv": "NOPE"}}, {}, "auth.tokenEnv", "NOPE is not set"),
        ({"auth": {"type": "bearer", "tokenEnv": 3}}, {}, "auth.tokenEnv", "must be a string"),
        (
            {"auth": {"type": "bearer", "tokenEnv": "T", "clientId": "x"}},
            {"T": "t"},
            "auth.clientId",
            "apply",
        ),
        ({"auth": {"type": "bearer", "tokenEnv": "T", "extra": 1}}, {"T": "t"}, "auth", "extra"),
        ({"auth": {"type": "client_credentials", "clientId": "svc"}}, {}, "auth", "clientSecretEnv"),
        (
            {"auth": {"type": "client_credentials", "clientId": "s", "clientKey": "none.pem"}},
            {},
            "auth.clientKey",
            "cannot read the key",
        ),
    ],
)
def test_a_bad_auth_entry_names_file_line_server_and_field(
    tmp_path: Path, entry: dict[str, Any], environ: dict[str, str], field: str, message: str
) -> None:
    path = tmp_path / "gateway.json"
    servers = {
        "other": {"url": "http://127.0.0.1:9/mcp"},
        "guarded": {"url": "http://127.0.0.1:9/mcp", **entry},
    }
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ=environ)
    error = caught.value
    assert (error.server, error.file) == ("guarded", str(path))
    assert error.field is not None and error.field.startswith(field) and error.line is not None
    assert message in str(error)


def test_auth_is_for_url_servers() -> None:
    with pytest.raises(ConfigError, match=r"mcpServers\.local\.auth: applies to URL servers"):
        parse_config(
            {"mcpServers": {"local": {"command": "x", "auth": {"type": "bearer", "tokenEnv": "T"}}}},
            environ={"T": "t"},
        )
