"""OAuth for the command line: a token cache on disk and a browser login.

* :class:`FileTokenStorage`: the OAuth client's tokens and client
  registrations in one JSON file, ``$XDG_CACHE_HOME/trio-mcp/oauth.json``
  (``~/.cache/…`` by default), readable by the user only (0600, in a 0700
  directory), so a second command needs no login.
* :class:`LoopbackBrowserHandler`: the authorization code flow of a person
  at a terminal. It listens on ``http://127.0.0.1:PORT/callback``, opens the
  authorization URL in the browser (or prints it on stderr when there is no
  browser), and takes the redirect that comes back.
"""

from __future__ import annotations

import os
import secrets
import sys
import webbrowser
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec
import trio

from ..auth import AuthorizationRequest, ClientInformation, OAuthToken

__all__ = ["FileTokenStorage", "LoopbackBrowserHandler", "cache_dir"]

#: Largest HTTP request head the callback listener reads, in bytes.
MAX_CALLBACK_REQUEST: Final = 16 * 1024
#: Seconds one connection to the callback listener may take to send its request.
CALLBACK_READ_TIMEOUT: Final = 10.0

_PAGE: Final = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n\r\n"
    b"<!doctype html><title>trio-mcp</title><p>Authorization received: you can close this window.</p>"
)
_NOT_FOUND: Final = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/trio-mcp`` (``~/.cache/trio-mcp`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trio-mcp"


class _Cache(msgspec.Struct):
    tokens: dict[str, OAuthToken] = msgspec.field(default_factory=dict)
    clients: dict[str, ClientInformation] = msgspec.field(default_factory=dict)


class FileTokenStorage:
    """A :class:`~trio_mcp.auth.TokenStorage` in one JSON file, mode 0600."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = trio.Lock()

    @classmethod
    def default(cls) -> FileTokenStorage:
        return cls(cache_dir() / "oauth.json")

    def _read(self) -> _Cache:
        try:
            return msgspec.json.decode(self.path.read_bytes(), type=_Cache)
        except FileNotFoundError:
            return _Cache()
        except (msgspec.DecodeError, msgspec.ValidationError):
            return _Cache()  # a damaged cache only costs a new login

    def _write(self, cache: _Cache) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # its own temporary file: bench workers (processes) may write at once
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(msgspec.json.encode(cache))
        os.chmod(temporary, 0o600)  # even if it existed with other permissions
        os.replace(temporary, self.path)

    async def _update(self, change: Any) -> None:
        async with self._lock:
            cache = self._read()
            change(cache)
            self._write(cache)

    async def load_tokens(self, server_url: str) -> OAuthToken | None:
        return self._read().tokens.get(server_url)

    async def save_tokens(self, server_url: str, tokens: OAuthToken) -> None:
        await self._update(lambda cache: cache.tokens.__setitem__(server_url, tokens))

    async def delete_tokens(self, server_url: str) -> None:
        await self._update(lambda cache: cache.tokens.pop(server_url, None))

    async def load_client(self, issuer: str) -> ClientInformation | None:
        return self._read().clients.get(issuer)

    async def save_client(self, issuer: str, client: ClientInformation) -> None:
        await self._update(lambda cache: cache.clients.__setitem__(issuer, client))


def _has_browser() -> bool:
    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return False
    # text browsers would take over this terminal; a person can paste the URL instead
    return type(browser).__name__ not in ("GenericBrowser",) or bool(os.environ.get("BROWSER"))


class LoopbackBrowserHandler:
    """An :class:`~trio_mcp.auth.AuthorizationHandler` for a person at a terminal."""

    def __init__(self, listener: trio.SocketListener, *, out: Any = None) -> None:
        self._listener = listener
        port = listener.socket.getsockname()[1]
        self._redirect_uri = f"http://127.0.0.1:{port}/callback"
        self._out = out

    @classmethod
    @asynccontextmanager
    async def listening(cls, *, out: Any = None) -> AsyncIterator[LoopbackBrowserHandler]:
        """A handler listening on a free port of 127.0.0.1 for the ``async with`` body."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        try:
            yield cls(listeners[0], out=out)
        finally:
            for listener in listeners:
                await listener.aclose()

    @property
    def redirect_uri(self) -> str:
        return self._redirect_uri

    async def authorize(self, request: AuthorizationRequest) -> str:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._send_user, request.url)
            redirect = await self._callback()
            nursery.cancel_scope.cancel()  # a browser command still running is abandoned
        return redirect

    async def _send_user(self, url: str) -> None:
        out = self._out or sys.stderr
        if _has_browser():
            print("trio-mcp: log in in the browser (waiting for it)…", file=out, flush=True)
            # webbrowser may wait for the browser command: in a thread, beside the listener
            if await trio.to_thread.run_sync(webbrowser.open, url, abandon_on_cancel=True):
                return
        print(f"trio-mcp: to authorize, open this URL in a browser:\n  {url}", file=out, flush=True)

    async def _callback(self) -> str:
        """The redirect back to ``/callback`` (bounded by the OAuth client's
        ``authorization_timeout``); other requests get a 404."""
        while True:
            stream = await self._listener.accept()
            async with stream:
                target = await _request_target(stream)
                if target is not None and urlsplit(target).path == "/callback":
                    await stream.send_all(_PAGE)
                    return f"http://127.0.0.1:{urlsplit(self._redirect_uri).port}{target}"
                await stream.send_all(_NOT_FOUND)


async def _request_target(stream: trio.abc.Stream) -> str | None:
    """The request target of one HTTP request (``/callback?code=…``), or None."""
    head = b""
    with trio.move_on_after(CALLBACK_READ_TIMEOUT):
        while b"\r\n" not in head and len(head) < MAX_CALLBACK_REQUEST:
            chunk = await stream.receive_some(4096)
            if not chunk:
                break
            head += chunk
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != "GET" or not parts[1].startswith("/"):
        return None
    return parts[1]
