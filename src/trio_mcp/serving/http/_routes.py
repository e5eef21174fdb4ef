"""Where a request to a :class:`~trio_mcp.serving.http.StreamableHttpApp`
goes besides the MCP endpoint (its custom routes), and whether its ``Host``
and ``Origin`` are allowed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Final

from ...transports._asgi import HttpError, Receive, Scope, Send
from ...transports.http._security import HostPolicy

__all__ = ["AsgiCallable", "HostCheck", "Routes"]

#: An ASGI 3 application (a custom route).
AsgiCallable = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Most (Host, Origin) pairs whose verdict a :class:`HostCheck` keeps.
HOST_VERDICTS: Final = 256


class Routes:
    """Custom routes by path: exactly ``"/path"``, or every path under
    ``"/prefix/"`` (the longest prefix wins). ``taken``: paths the app
    serves itself."""

    def __init__(self, taken: Iterable[str | None]) -> None:
        self._taken = {path for path in taken if path is not None}
        self._exact: dict[str, AsgiCallable] = {}
        self._prefixes: list[tuple[str, AsgiCallable]] = []

    def mount(self, path: str, app: AsgiCallable) -> None:
        if not path.startswith("/"):
            raise ValueError(f"a route's path must start with '/', not {path!r}")
        taken = {*self._taken, *self._exact}
        taken.update(prefix for prefix, _ in self._prefixes)
        if path in taken:
            raise ValueError(f"the path {path!r} is taken already")
        if path.endswith("/"):
            self._prefixes.append((path, app))
            self._prefixes.sort(key=lambda item: -len(item[0]))
        else:
            self._exact[path] = app

    def find(self, path: str | None) -> AsgiCallable | None:
        """The route serving ``path``, if any."""
        if path is None:
            return None
        route = self._exact.get(path)
        if route is None:
            for prefix, app in self._prefixes:
                if path.startswith(prefix):
                    return app
        return route


class HostCheck:
    """``421`` for a ``Host``, ``403`` for an ``Origin`` not allowed; the
    verdicts on the last :data:`HOST_VERDICTS` pairs seen are kept (clients
    send the same ones request after request)."""

    def __init__(self, allowed_hosts: Iterable[str], allowed_origins: Iterable[str]) -> None:
        self._policy = HostPolicy(allowed_hosts, allowed_origins)
        self._verdicts: dict[tuple[str | None, str | None], int] = {}

    def check(self, host: str | None, origin: str | None) -> None:
        key = (host, origin)
        status = self._verdicts.get(key)
        if status is None:
            status = 0
            if not self._policy.host_allowed(host):
                status = 421
            elif not self._policy.origin_allowed(origin):
                status = 403
            if len(self._verdicts) >= HOST_VERDICTS:
                self._verdicts.clear()
            self._verdicts[key] = status
        if status == 421:
            raise HttpError(421, "Host not allowed")
        if status == 403:
            raise HttpError(403, "Origin not allowed")
