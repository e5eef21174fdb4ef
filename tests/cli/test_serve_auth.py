"""``trio-mcp run/gateway -t http --auth-…`` as deployed: the real server
process checking tokens of a local authorization server (JWTs signed with a
real key, a JWKS; in this process, on 127.0.0.1 port 0), and our own client
command (``trio-mcp call --auth client-credentials``) getting its token from
the 401 and calling. Every process is stopped by its test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from cryptography.hazmat.primitives import serialization
from tests.auth.test_oauth_client import serve
from tests.serving.http.authserver import CLIENT_ID, SECRET, JwtAuthServer

from ._procs import ROOT
from .conftest import CLI
from .test_client_auth import run_cli

WAIT = 60.0
EXAMPLE = str(ROOT / "examples" / "protected_server.py")


@asynccontextmanager
async def authorization_server() -> AsyncIterator[JwtAuthServer]:
    authz = JwtAuthServer()
    async with serve(authz) as base:
        authz.base = base
        yield authz


@asynccontextmanager
async def cli_server(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[str, list[str]]]:
    """The CLI serving over HTTP on a free port: its URL and its start-up
    lines up to the authorization line. Its process group is stopped on exit
    (SIGTERM, then SIGKILL after 10 s)."""
    with trio.fail_after(WAIT):
        process = await trio.lowlevel.open_process(
            [*CLI, *args, "-t", "http", "--port", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    try:
        assert process.stderr is not None
        text = ""
        with trio.fail_after(WAIT):
            while "authorization:" not in text or not text.endswith("\n"):
                chunk = await process.stderr.receive_some(4096)
                assert chunk, f"the server ended: {text}"
                text += chunk.decode()
        lines = [line for line in text.splitlines() if line.strip()]
        serving = next(line for line in lines if line.startswith("serving"))
        yield serving.rsplit(" ", 1)[-1], lines
    finally:
        with trio.CancelScope(shield=True):
            os.killpg(process.pid, signal.SIGTERM)
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
                await process.wait()


def client_credentials(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    args = ["--auth", "client-credentials", "--client-id", CLIENT_ID, "--client-secret-env", "SVC_SECRET"]
    return args, {"XDG_CACHE_HOME": str(tmp_path), "SVC_SECRET": SECRET}


def source_flags(source: str, authz: JwtAuthServer, tmp_path: Path) -> tuple[list[str], str]:
    """The ``--auth-…`` options checking tokens one way, and how the start-up line names it."""
    if source == "jwks":
        return ["--auth-jwks", authz.jwks_url, "--auth-issuer", authz.issuer], authz.jwks_url
    if source == "key":
        key = tmp_path / "issuer.pem"
        key.write_bytes(
            authz.keys[authz.signing_kid]
            .public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        return ["--auth-key", str(key), "--auth-issuer", authz.issuer], str(key)
    client, _ = authz.introspection_client
    flags = ["--auth-introspect", authz.introspection_url, "--auth-client-id", client]
    flags += ["--auth-client-secret-env", "RS_SECRET", "--auth-issuer", authz.issuer]
    return flags, f"introspection at {authz.introspection_url}"


@pytest.mark.parametrize("source", ["jwks", "key", "introspect"])
async def test_run_checks_tokens_and_our_client_goes_through_the_whole_flow(
    source: str, tmp_path: Path
) -> None:
    async with authorization_server() as authz:
        flags, named = source_flags(source, authz, tmp_path)
        secret = {"RS_SECRET": authz.introspection_client[1]}
        async with cli_server("run", EXAMPLE, *flags, "--auth-scope", "notes", env=secret) as (url, lines):
            metadata = url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource/mcp"
            assert lines[-1] == (
                f"authorization: bearer tokens checked with {named}, issued by {authz.issuer}, "
                f"scopes required: notes; metadata: {metadata}"
            )
            refused = await run_cli("call", url, "whoami")
            auth, env = client_credentials(tmp_path)
            who = await run_cli("call", url, "whoami", "--json", *auth, env=env)
            added = await run_cli("call", url, "add_note", "text=remember", *auth, env=env)
    assert refused.returncode == 4, refused.stderr
    assert b"401" in refused.stderr
    assert who.returncode == 0, who.stderr
    answer = json.loads(json.loads(who.stdout)["content"][0]["text"])
    assert answer == {"subject": "alice", "client_id": CLIENT_ID, "scopes": ["notes"]}
    # add_note needs notes:write: a 403, the client steps up (asking for both scopes), the call succeeds.
    assert added.returncode == 0, added.stderr
    assert added.stdout.decode().strip() == "1 notes"
    scopes = [r["form"].get("scope") for r in authz.token_requests]
    assert scopes[-1] == "notes notes:write" and all(s in ("notes", "notes notes:write") for s in scopes)
    assert all(r["form"]["resource"] == url for r in authz.token_requests)
    assert (authz.introspections != []) is (source == "introspect")


async def test_gateway_with_a_jwks(tmp_path: Path) -> None:
    config = tmp_path / "gateway.json"
    everything = str(ROOT / "examples" / "everything_server.py")
    config.write_text(
        json.dumps({"mcpServers": {"everything": {"command": sys.executable, "args": [everything]}}})
    )
    async with authorization_server() as authz:
        flags = ["--auth-jwks", authz.jwks_url, "--auth-issuer", authz.issuer]
        async with cli_server("gateway", str(config), *flags, cwd=tmp_path) as (url, _):
            refused = await run_cli("tools", url)
            auth, env = client_credentials(tmp_path)
            tools = await run_cli("tools", url, *auth, env=env)
    assert refused.returncode == 4 and b"401" in refused.stderr
    assert tools.returncode == 0, tools.stderr
    assert b"echo" in tools.stdout
    assert [r["form"]["grant_type"] for r in authz.token_requests] == ["client_credentials"]


async def test_auth_flags_that_cannot_work_are_refused() -> None:
    for args, message in (
        (["--auth-issuer", "https://as"], b"need --auth-jwks"),
        (["--auth-jwks", "https://as/jwks"], b"need --auth-issuer"),
        (["--auth-jwks", "https://as/jwks", "--auth-issuer", "https://as", "-t", "sse"], b"need -t http"),
        (["--auth-jwks", "https://as/jwks", "--auth-introspect", "https://as/i"], b"one of"),
    ):
        out = await run_cli("run", EXAMPLE, *args)
        assert out.returncode != 0 and message in out.stderr, (args, out.stderr)
