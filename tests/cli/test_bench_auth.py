"""``trio-mcp bench --auth``: through the real entry point, against our
Streamable HTTP server app behind a bearer check, and behind the fake
authorization server of ``tests/auth`` (all on 127.0.0.1, ports chosen at
run time), in this process and in worker processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
from tests.auth.test_client_credentials import CLIENT_ID, SECRET, credentials_server, grants
from tests.auth.test_oauth_client import header, respond, serve, world

from .test_client_auth import _app, run_cli

TOKEN = "bench-token-7"


@attrs.define
class RequireBearer:
    """Our app, answering 401 to any request without ``Bearer TOKEN``."""

    app: Any
    refused: int = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and header(scope, "authorization") != f"Bearer {TOKEN}":
            self.refused += 1
            await respond(send, 401, {"error": "invalid_token"}, [("www-authenticate", "Bearer")])
            return
        await self.app(scope, receive, send)


def _bench(url: str, *extra: str) -> tuple[str, ...]:
    return ("bench", url, "echo", "text=hi", "-c", "2", "-n", "20", "--warmup", "0", "--json", *extra)


async def test_bench_with_a_bearer_token_from_the_environment() -> None:
    guard = RequireBearer(_app())
    async with serve(guard) as base:
        ok = await run_cli(*_bench(f"{base}/mcp", "--auth", "env:BENCH_TOKEN"), env={"BENCH_TOKEN": TOKEN})
        assert guard.refused == 0
        without = await run_cli(*_bench(f"{base}/mcp"))
        unset = await run_cli(*_bench(f"{base}/mcp", "--auth", "env:NOT_SET_ANYWHERE"))
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert (report["calls"], report["ok"]) == (20, 20)
    assert report["settings"]["auth"] == "bearer" and TOKEN not in ok.stdout.decode()
    assert without.returncode != 0 and without.stdout == b""
    assert b"401" in without.stderr and b"Traceback" not in without.stderr
    assert guard.refused > 0
    assert unset.returncode != 0 and b"NOT_SET_ANYWHERE is not set" in unset.stderr


async def test_bench_workers_read_the_token_themselves() -> None:
    guard = RequireBearer(_app())
    async with serve(guard) as base:
        out = await run_cli(
            *_bench(f"{base}/mcp", "--auth", "env:BENCH_TOKEN", "--workers", "2", "--sessions", "2"),
            env={"BENCH_TOKEN": TOKEN},
        )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert (report["calls"], report["ok"]) == (20, 20)
    assert report["settings"]["workers"] == 2
    assert report["sessions"]["opened"] == 2 and report["sessions"]["failures"] == []
    assert guard.refused == 0


async def test_bench_with_client_credentials_in_workers(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path), "SVC_SECRET": SECRET}
    async with world(credentials_server(), app=_app()) as (authz, resource):
        out = await run_cli(
            *_bench(resource.url, "--workers", "2"),
            "--auth",
            "client-credentials",
            "--client-id",
            CLIENT_ID,
            "--client-secret-env",
            "SVC_SECRET",
            env=env,
        )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["ok"] == 20
    assert grants(authz) and set(grants(authz)) == {"client_credentials"}
    assert authz.authorizations == []


async def test_bench_refuses_the_browser_flow() -> None:
    out = await run_cli(*_bench("http://127.0.0.1:9/mcp", "--auth", "oauth"))
    assert out.returncode != 0
    assert b"--auth client-credentials" in out.stderr and b"Traceback" not in out.stderr
