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
from typing import Any, Final
from urllib.parse import urlparse

import trio

from .._util import collapse_groups
from ..actors._client import ClientSession, open_session
from ._observe import NotificationObserver, ObservedStream
from ._targets import TargetError, transport_factory

__all__ = [
    "EXIT_CONNECTION",
    "EXIT_OK",
    "EXIT_PROTOCOL",
    "EXIT_TIMEOUT",
    "EXIT_TOOL_ERROR",
    "EXIT_USAGE",
    "add_connection_options",
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
    group.add_argument(
        "--era",
        choices=("auto", "handshake", "modern"),
        default="auto",
        help="protocol era to speak (default: probe)",
    )


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


def _bearer(spec: str) -> str:
    var = spec.partition(":")[2]
    if not var:
        raise TargetError("--auth env:VAR names the environment variable holding the token")
    token = os.environ.get(var)
    if not token:
        raise TargetError(f"--auth env:{var}: the environment variable {var} is not set")
    return token


async def _oauth_client(args: argparse.Namespace, url: str, stack: AsyncExitStack) -> Any:
    """An ``httpx.AsyncClient`` authorizing with OAuth as ``--auth`` says."""
    import httpx

    from ..auth import ClientCredentials, ClientMetadata, OAuthClientAuth
    from ._oauth import FileTokenStorage, LoopbackBrowserHandler

    scopes = args.scope.split() if args.scope else None
    storage = FileTokenStorage.default()
    if args.auth == "client-credentials":
        if not args.client_id:
            raise TargetError("--auth client-credentials needs --client-id")
        secret = os.environ.get(args.client_secret_env) if args.client_secret_env else None
        if args.client_secret_env and not secret:
            raise TargetError(f"the environment variable {args.client_secret_env} is not set")
        key = None
        if args.client_key:
            try:
                key = await trio.Path(args.client_key).read_bytes()
            except OSError as exc:
                raise TargetError(f"--client-key: {exc}") from None
        credentials = ClientCredentials(client_id=args.client_id, client_secret=secret, private_key=key)
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


def _transport(args: argparse.Namespace, target: Sequence[str], http_client: Any) -> Callable[[], Any]:
    headers = parse_headers(args.header)
    if not _is_url(target):
        if headers or args.auth:
            raise TargetError("--header and --auth apply to URL targets, not to a stdio command")
        return transport_factory(target)
    if args.auth and args.auth.startswith("env:"):
        headers["Authorization"] = f"Bearer {_bearer(args.auth)}"
    if http_client is None:
        return transport_factory(target, headers=headers or None)
    url = target[0]
    if urlparse(url).scheme not in ("http", "https") or url.rstrip("/").endswith("/sse"):
        raise TargetError("--auth client-credentials / oauth work with Streamable HTTP URLs")
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
    if args.auth and not (args.auth.startswith("env:") or args.auth in ("client-credentials", "oauth")):
        raise TargetError(f"--auth wants env:VAR, client-credentials or oauth, not {args.auth!r}")
    with collapse_groups():
        async with AsyncExitStack() as stack:
            http_client = None
            if args.auth in ("client-credentials", "oauth"):
                if not _is_url(target):
                    raise TargetError("--auth applies to URL targets, not to a stdio command")
                http_client = await _oauth_client(args, target[0], stack)
            factory = _transport(args, target, http_client)
            nursery = await stack.enter_async_context(trio.open_nursery())
            stream = await nursery.start(factory().run)
            if observer is not None:
                stream = ObservedStream(stream, observer)
            async with open_session(stream, era=args.era, **session_options) as session:
                yield session
            nursery.cancel_scope.cancel()
