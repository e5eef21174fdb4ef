"""Where a network server actor listens: apart from :mod:`._base`, so that a
stdio server process does not build this class."""

from __future__ import annotations

import attrs

from ._base import host_in_url

__all__ = ["ServerInfo"]


@attrs.frozen
class ServerInfo:
    """Where a network server actor listens (its ``task_status.started`` value)."""

    host: str
    port: int
    #: What clients open (for the legacy SSE transport: the event stream).
    url: str

    @classmethod
    def at(cls, scheme: str, host: str, port: int, path: str) -> ServerInfo:
        return cls(host, port, f"{scheme}://{host_in_url(host)}:{port}{path}")
