"""``--header`` and ``--auth`` of the client commands, through the real entry
point, against our Streamable HTTP server app behind the fake authorization
servers of ``tests/auth`` (all on 127.0.0.1, ports chosen at run time)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio
from tests.auth.test_client_credentials import CLIENT_ID, SECRET, credentials_server, grants
from tests.auth.test_oauth_client import header, lifespan, serve, world

from trio_mcp import MCPServer
from trio_mcp.cli._oauth import FileTokenStorage
from trio_mcp.serving.http import HttpServerSettings, StreamableHttpApp

from .conftest import CLI, ROOT

WAIT = 60.0

# A "browser" for the authorization code flow: follows the redirects of the
# authorization URL it is given, as a person's browser would, ending on the
# CLI's loopback callback.
BROWSER = textwrap.dedent(
    """
    import sys, httpx
    httpx.get(sys.argv[1], follow_redirects=True, timeout=10)
    """
)


def _app() -> StreamableHttpApp:
    server = MCPServer("protected")

    @server.tool
    def echo(text: str) -> str:
        return text

    return StreamableHttpApp(server, settings=HttpServerSettings())


async def run_cli(*args: str, env: dict[str, str] | None = None) -> trio.CompletedProcess[bytes]:
    with trio.fail_after(WAIT):
        return await trio.run_process(
            [*CLI, *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdin=None,
        )


@attrs.define
class Recorder:
    """The app, recording the headers of every request."""

    app: Any
    seen: list[dict[str, str | None]] = attrs.field(factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append({name: header(scope, name) for name in ("authorization", "x-trace")})
        await self.app(scope, receive, send)


async def test_headers_and_a_bearer_token_from_the_environment() -> None:
    recorder = Recorder(_app())
    async with serve(recorder) as base:
        out = await run_cli(
            "call",
            f"{base}/mcp",
            "echo",
            "text=hi",
            "-H",
            "X-Trace: abc",
            "--auth",
            "env:MY_TOKEN",
            env={"MY_TOKEN": "tok-123"},
        )
        unset = await run_cli("ping", f"{base}/mcp", "--auth", "env:NOT_SET_ANYWHERE")
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().strip() == "hi"
    assert recorder.seen and all(
        s == {"authorization": "Bearer tok-123", "x-trace": "abc"} for s in recorder.seen
    )
    assert unset.returncode == 2 and b"NOT_SET_ANYWHERE is not set" in unset.stderr


async def test_client_credentials(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path), "SVC_SECRET": SECRET}
    async with world(credentials_server(), app=_app()) as (authz, resource):
        out = await run_cli(
            "call",
            resource.url,
            "echo",
            "text=as a service",
            "--auth",
            "client-credentials",
            "--client-id",
            CLIENT_ID,
            "--client-secret-env",
            "SVC_SECRET",
            env=env,
        )
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().strip() == "as a service"
    assert grants(authz) == ["client_credentials"]
    assert authz.authorizations == []  # no user involved


async def test_authorization_code_flow_with_a_browser_and_a_token_cache(tmp_path: Path) -> None:
    browser = tmp_path / "browser.py"
    browser.write_text(BROWSER)
    cache = tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache), "BROWSER": f"{sys.executable} {browser} %s"}
    async with world(app=_app()) as (authz, resource):
        first = await run_cli("call", resource.url, "echo", "text=logged in", "--auth", "oauth", env=env)
        second = await run_cli("call", resource.url, "echo", "text=again", "--auth", "oauth", env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.decode().strip() == "logged in"
    assert b"log in in the browser" in first.stderr
    assert second.returncode == 0, second.stderr
    assert second.stdout.decode().strip() == "again"
    # one login: the second command used the cached token
    assert len(authz.authorizations) == 1 and authz.authorizations[0]["redirect_uri"].startswith(
        "http://127.0.0.1:"
    )
    token_file = cache / "trio-mcp" / "oauth.json"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
    assert resource.url in token_file.read_text()


async def test_without_a_browser_the_url_is_printed_for_the_person(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "BROWSER": "", "PATH": "/nonexistent"}
    async with world(app=_app()) as (authz, resource):
        with trio.fail_after(WAIT):
            proc = await trio.lowlevel.open_process(
                [*CLI, "call", resource.url, "echo", "text=pasted", "--auth", "oauth"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=ROOT,
                env=env,
            )
            try:
                assert proc.stdout is not None and proc.stderr is not None
                shown = b""
                while b"/authorize?" not in shown or not shown.endswith(b"\n"):
                    chunk = await proc.stderr.receive_some(4096)
                    assert chunk, shown
                    shown += chunk
                url = next(w for w in shown.decode().split() if "/authorize?" in w)
                # the person opens the URL in a browser somewhere
                async with httpx.AsyncClient() as http:
                    await http.get(url, follow_redirects=True, timeout=10)
                output = b""
                while chunk := await proc.stdout.receive_some(4096):
                    output += chunk
                await proc.wait()
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            assert proc.returncode == 0, shown
    assert b"to authorize, open this URL in a browser" in shown
    assert output.decode().strip() == "pasted"
    assert len(authz.authorizations) == 1


def test_token_cache_file_is_private(tmp_path: Path) -> None:
    from trio_mcp.auth import OAuthToken

    storage = FileTokenStorage(tmp_path / "dir" / "oauth.json")

    async def save() -> OAuthToken | None:
        await storage.save_tokens("http://x/mcp", OAuthToken(access_token="secret"))
        return await storage.load_tokens("http://x/mcp")

    loaded = trio.run(save)
    assert loaded is not None and loaded.access_token == "secret"
    assert stat.S_IMODE((tmp_path / "dir" / "oauth.json").stat().st_mode) == 0o600


async def html_404(scope: Any, receive: Any, send: Any) -> None:
    """A web server that is not MCP: every request is an HTML 404."""
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/html")]})
    await send({"type": "http.response.body", "body": b"<html><body>Not Found</body></html>"})


async def test_an_html_404_is_one_line_naming_the_status_and_url() -> None:
    async with serve(html_404) as base:
        out = await run_cli("tools", f"{base}/mcp")
    err = out.stderr.decode()
    assert out.returncode == 4
    assert (
        err
        == f"trio-mcp: {base}/mcp answered HTTP 404 Not Found (text/html): not an MCP endpoint (is the URL right?)\n"
    )
