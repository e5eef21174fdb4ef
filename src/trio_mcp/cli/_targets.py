"""Turning command-line words into servers to serve and servers to reach."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import trio

from .._util import collapse_groups
from ..transports import TransportError

if TYPE_CHECKING:  # the client is imported when a target is opened: `run` serves without it
    from ..actors._client import ClientSession

__all__ = ["APP_NAMES", "TargetError", "load_app", "open_target", "transport_factory"]

#: Names a server object is looked up under when ``FILE.py`` names no object.
APP_NAMES = ("app", "server", "mcp")


class TargetError(Exception):
    """A command-line target that cannot be used; the message says why."""


def load_app(spec: str) -> Any:
    """``path/to/file.py[:obj]`` or ``package.module[:obj]`` → the server object."""
    where, _, name = spec.partition(":")
    if where.endswith(".py") or Path(where).is_file():
        path = Path(where)
        if not path.is_file():
            raise TargetError(f"no such file: {where}")
        module_name = f"_trio_mcp_app_{path.stem}"
        mod_spec = importlib.util.spec_from_file_location(module_name, path)
        if mod_spec is None or mod_spec.loader is None:
            raise TargetError(f"cannot load {where} as a Python module")
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[module_name] = module
        sys.path.insert(0, str(path.resolve().parent))
        mod_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise TargetError(f"cannot import {where!r}: {exc}") from None
    names = [name] if name else list(APP_NAMES)
    for candidate in names:
        obj = getattr(module, candidate, None)
        if obj is not None and hasattr(obj, "request_handlers"):
            return obj
    wanted = name or " / ".join(APP_NAMES)
    raise TargetError(f"{where} defines no MCP server object named {wanted}")


def transport_factory(target: Sequence[str], *, headers: dict[str, str] | None = None) -> Callable[[], Any]:
    """A factory of transport actors for a URL or a stdio command line."""
    if not target:
        raise TargetError("no target: give a URL or '-- command args…'")
    first = target[0]
    url = urlparse(first)
    if len(target) == 1 and url.scheme in ("ws", "wss"):
        from ..transports.websocket import WebSocketTransport

        return lambda: WebSocketTransport(first, headers=headers)
    if len(target) == 1 and url.scheme in ("http", "https"):
        if url.path.rstrip("/").endswith("/sse"):
            from ..transports.sse import SseTransport

            return lambda: SseTransport(first, headers=headers)
        from ..transports.http import StreamableHttpTransport

        return lambda: StreamableHttpTransport(first, headers=headers)
    from ..transports.stdio import StdioServerParameters, StdioTransport

    params = StdioServerParameters(command=first, args=tuple(target[1:]), inherit_env=True)
    return lambda: StdioTransport(params)


@asynccontextmanager
async def open_target(target: Sequence[str], **client_options: Any) -> AsyncIterator[ClientSession]:
    """An initialized client session with the server ``target`` names."""
    from ..actors._client import open_session

    factory = transport_factory(target)
    with collapse_groups(causes=(TransportError,)):
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(factory().run)
            async with open_session(stream, **client_options) as session:
                yield session
            nursery.cancel_scope.cancel()
