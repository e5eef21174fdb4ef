"""How a command reaches a server: the target and connection options, in one place.

Every client command (and ``bench``) takes the same options::

    parser = argparse.ArgumentParser()
    add_connection_options(parser)
    args = parser.parse_args()
    async with open_client(args, target) as session:   # an initialized ClientSession
        ...

TARGET is a URL (``http(s)://…/mcp`` Streamable HTTP, ``…/sse`` legacy SSE,
``ws(s)://…`` WebSocket) or, after ``--``, a command line starting a stdio
server. ``--header 'Name: value'`` (repeatable) and ``--auth`` apply to URLs:

* ``--auth env:VAR``: ``Authorization: Bearer $VAR``;
* ``--auth client-credentials --client-id ID --client-secret-env VAR`` (or
  ``--client-key FILE.pem``): the OAuth client_credentials grant;
* ``--auth oauth``: the OAuth authorization code flow (the browser opens, or
  the URL is printed; tokens are cached, 0600, in the user's cache directory).

``--timeout SECONDS`` bounds the whole command (connecting included).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Final, Literal
from urllib.parse import urlparse

import attrs
import trio

from .._util import collapse_groups
from ..actors._client import ClientSession, open_session
from ._observe import NotificationObserver, ObservedStream
from ._targets import TargetError, transport_factory

__all__ = [
    "AuthSettings",
    "EXIT_CONNECTION",
    "EXIT_OK",
    "EXIT_PROTOCOL",
    "EXIT_TIMEOUT",
    "EXIT_TOOL_ERROR",
    "EXIT_USAGE",
    "add_auth_options",
    "add_connection_options",
    "auth_settings",
    "connect_transport",
    "open_client",
    "parse_headers",
    "split_target",
]

#: Exit codes of the client commands.
EXIT_OK: Final = 0
#: The tool answered ``isError: true``.
EXIT_TOOL_ERROR: Final = 1
#: Bad command line: unknown option, verb, tool or argument, a value of the wrong type.
EXIT_USAGE: Final = 2
#: The server answered with a JSON-RPC error (unknown resource, invalid params…).
EXIT_PROTOCOL: Final = 3
#: No MCP server could be reached: refused, not an MCP endpoint, authorization failed, it died.
EXIT_CONNECTION: Final = 4
#: ``--timeout`` ran out.
EXIT_TIMEOUT: Final = 5

_HEADER_NAME: Final = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """The target and connection options (see the module docstring)."""
    group = parser.add_argument_group("connection")
    group.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header sent with every request to a URL target (repeatable)",
    )
    group.add_argument(
        "--timeout",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help="give up after this long, connecting included (default: no limit)",
    )
    add_auth_options(group)
    group.add_argument(
        "--era",
        choices=("auto", "handshake", "modern"),
        default="auto",
        help="protocol era to speak (default: probe)",
    )


def add_auth_options(group: Any) -> None:
    """``--auth`` and the OAuth client options (also used by ``bench``)."""
    group.add_argument(
        "--auth",
        default=None,
        metavar="env:VAR | client-credentials | oauth",
        help="authorization for a URL target: a bearer token from $VAR, the OAuth client "
        "credentials grant, or the OAuth authorization code flow (browser)",
    )
    group.add_argument("--client-id", default=None, help="OAuth client id (client-credentials)")
    group.add_argument(
        "--client-secret-env",
        default=None,
        metavar="VAR",
        help="environment variable holding the OAuth client secret",
    )
    group.add_argument(
        "--client-key", default=None, metavar="FILE.pem", help="private key for private_key_jwt"
    )
    group.add_argument("--scope", default=None, help="OAuth scopes to request (space-separated)")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def parse_headers(raw: Sequence[str]) -> dict[str, str]:
    """``['Name: value', …]`` → a dict; raises :class:`TargetError` for a malformed one."""
    headers: dict[str, str] = {}
    for item in raw:
        name, sep, value = item.partition(":")
        name = name.strip()
        if not sep or not _HEADER_NAME.match(name):
            raise TargetError(f"--header wants 'Name: value', not {item!r}")
        headers[name] = value.strip()
    return headers


def split_target(words: Sequence[str], command: Sequence[str]) -> tuple[list[str], list[str]]:
    """The target and the remaining words: the command after ``--`` when there
    is one, else the first word (a URL)."""
    if command:
        return list(command), list(words)
    if not words:
        raise TargetError("no target: give a URL or '-- command args…'")
    return [words[0]], list(words[1:])


def _is_url(target: Sequence[str]) -> bool:
    return len(target) == 1 and urlparse(target[0]).scheme in ("http", "https", "ws", "wss")


@attrs.frozen
class AuthSettings:
    """What ``--auth`` and its options say, secrets left out: a token or a
    client secret is named by its environment variable and read when used,
    so the settings can be handed to another process (bench workers)."""

    #: "bearer" (a token from ``token_env``), "client-credentials" or "oauth".
    kind: Literal["bearer", "client-credentials", "oauth"]
    token_env: str | None = None
    client_id: str | None = None
    client_secret_env: str | None = None
    #: Path of a PEM private key (private_key_jwt).
    client_key: str | None = None
    #: Space-separated scopes to request.
    scope: str | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> AuthSettings:
        return cls(**raw)


def auth_settings(args: argparse.Namespace) -> AuthSettings | None:
    """The :class:`AuthSettings` of parsed ``--auth`` options (None: no ``--auth``);
    raises :class:`TargetError` for a wrong spelling or a missing option."""
    spec = args.auth
    if spec is None:
        return None
    if spec.startswith("env:"):
        var = spec.partition(":")[2]
        if not var:
            raise TargetError("--auth env:VAR names the environment variable holding the token")
        return AuthSettings(kind="bearer", token_env=var)
    if spec == "client-credentials":
        if not args.client_id:
            raise TargetError("--auth client-credentials needs --client-id")
        return AuthSettings(
            kind="client-credentials",
            client_id=args.client_id,
            client_secret_env=args.client_secret_env,
            client_key=args.client_key,
            scope=args.scope,
        )
    if spec == "oauth":
        return AuthSettings(kind="oauth", scope=args.scope)
    raise TargetError(f"--auth wants env:VAR, client-credentials or oauth, not {spec!r}")


def _bearer(var: str) -> str:
    token = os.environ.get(var)
    if not token:
        raise TargetError(f"--auth env:{var}: the environment variable {var} is not set")
    return token


async def _oauth_client(auth_settings: AuthSettings, url: str, stack: AsyncExitStack) -> Any:
    """An ``httpx.AsyncClient`` authorizing with OAuth as ``auth_settings`` say."""
    import httpx

    from ..auth import ClientCredentials, ClientMetadata, OAuthClientAuth
    from ._oauth import FileTokenStorage, LoopbackBrowserHandler

    settings = auth_settings
    scopes = settings.scope.split() if settings.scope else None
    storage = FileTokenStorage.default()
    if settings.kind == "client-credentials":
        var = settings.client_secret_env
        secret = os.environ.get(var) if var else None
        if var and not secret:
            raise TargetError(f"the environment variable {var} is not set")
        key = None
        if settings.client_key:
            try:
                key = await trio.Path(settings.client_key).read_bytes()
            except OSError as exc:
                raise TargetError(f"--client-key: {exc}") from None
        assert settings.client_id is not None
        credentials = ClientCredentials(client_id=settings.client_id, client_secret=secret, private_key=key)
        auth = OAuthClientAuth(url, client_credentials=credentials, storage=storage, scopes=scopes)
    else:
        handler = await stack.enter_async_context(LoopbackBrowserHandler.listening())
        auth = OAuthClientAuth(
            url,
            authorization_handler=handler,
            storage=storage,
            client_metadata=ClientMetadata(client_name="trio-mcp"),
            scopes=scopes,
        )
    return await stack.enter_async_context(httpx.AsyncClient(auth=auth, timeout=httpx.Timeout(30.0)))


async def connect_transport(
    target: Sequence[str],
    *,
    headers: dict[str, str] | None,
    auth: AuthSettings | None,
    stack: AsyncExitStack,
) -> Callable[[], Any]:
    """A factory of transports to ``target`` with ``headers`` and ``auth`` (an
    OAuth HTTP client, when one is needed, lives as long as ``stack``); raises
    :class:`TargetError` when they do not apply or a secret is missing."""
    headers = dict(headers or {})
    if not _is_url(target):
        if headers or auth:
            raise TargetError("--header and --auth apply to URL targets, not to a stdio command")
        return transport_factory(target)
    if auth is not None and auth.kind == "bearer":
        assert auth.token_env is not None
        headers["Authorization"] = f"Bearer {_bearer(auth.token_env)}"
    if auth is None or auth.kind == "bearer":
        return transport_factory(target, headers=headers or None)
    url = target[0]
    if urlparse(url).scheme not in ("http", "https") or url.rstrip("/").endswith("/sse"):
        raise TargetError("--auth client-credentials / oauth work with Streamable HTTP URLs")
    http_client = await _oauth_client(auth, url, stack)
    from ..transports.http import StreamableHttpTransport

    return lambda: StreamableHttpTransport(url, headers=headers or None, http_client=http_client)


@asynccontextmanager
async def open_client(
    args: argparse.Namespace,
    target: Sequence[str],
    *,
    observer: NotificationObserver | None = None,
    **session_options: Any,
) -> AsyncIterator[ClientSession]:
    """An initialized :class:`ClientSession` with ``target``, as the connection
    options in ``args`` say. ``observer`` sees every notification in the
    server's order (see :class:`ObservedStream`)."""
    auth = auth_settings(args)
    headers = parse_headers(args.header)
    with collapse_groups():
        async with AsyncExitStack() as stack:
            factory = await connect_transport(target, headers=headers, auth=auth, stack=stack)
            nursery = await stack.enter_async_context(trio.open_nursery())
            stream = await nursery.start(factory().run)
            if observer is not None:
                stream = ObservedStream(stream, observer)
            async with open_session(stream, era=args.era, **session_options) as session:
                yield session
            nursery.cancel_scope.cancel()
