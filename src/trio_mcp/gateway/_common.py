"""What the gateway's modules share: its names for resource URIs, its
errors, the connection settings of its servers and what it counts of each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from ..actors._connection import ConnectionSettings
from ..protocol import McpError, ResourceNotFound
from ..supervision import Backoff

__all__ = [
    "GATEWAY_SETTINGS",
    "STATUS_URI",
    "URI_SCHEME",
    "BackingServerStatistics",
    "GatewayStartError",
    "ServerUnavailable",
    "gateway_uri",
    "split_gateway_uri",
]

#: Resources of server ``s`` are shown as ``gateway://s/<the server's URI>``.
URI_SCHEME: Final = "gateway://"
#: A resource (readable, not listed) holding :meth:`Gateway.status` as JSON.
STATUS_URI: Final = "trio-mcp://gateway/status"

#: Connection settings of the gateway's servers: never given up (a server
#: that fails at start or later is retried, the delay capped at 5 s, for as
#: long as the gateway runs); calls wait at most 5 s for a restart, and fail
#: at once while the server's last start failed; a server that does not
#: answer a ping within 10 s is restarted.
GATEWAY_SETTINGS: Final = ConnectionSettings(
    backoff=Backoff(initial=0.1, maximum=5.0, multiplier=2.0, reset_after=30.0),
    reconnect_wait=5.0,
    ping_interval=30.0,
    ping_timeout=10.0,
    retry_forever=True,
)


class ServerUnavailable(McpError):
    """A server behind the gateway is down, gave up, or did not answer in time (-32003)."""

    code = -32003
    default_message = "The server behind the gateway is unavailable"


class GatewayStartError(Exception):
    """No configured server could be started; ``failures`` maps each name to why."""

    def __init__(self, failures: Mapping[str, str]) -> None:
        self.failures = dict(failures)
        detail = "; ".join(f"{name}: {reason}" for name, reason in self.failures.items())
        super().__init__(f"no server of the gateway could be started ({detail})")


def gateway_uri(server: str, uri: str) -> str:
    """The gateway's URI for ``uri`` of ``server``."""
    return f"{URI_SCHEME}{server}/{uri}"


def split_gateway_uri(uri: str) -> tuple[str, str]:
    """``gateway://server/original`` → ``(server, original)``; :class:`ResourceNotFound` otherwise."""
    if uri.startswith(URI_SCHEME):
        server, sep, original = uri[len(URI_SCHEME) :].partition("/")
        if sep and server and original:
            return server, original
    raise ResourceNotFound(
        f"Resource not found: {uri!r} is not a gateway URI ({URI_SCHEME}SERVER/URI)", data={"uri": uri}
    )


@attrs.frozen
class BackingServerStatistics:
    """One backing server's figures (:meth:`Gateway.server_statistics`)."""

    connected: bool
    #: Restarts scheduled so far (after a loss or a failed start attempt).
    restarts: int
    #: Seconds before the pending restart, as last scheduled (0 once connected).
    reconnect_delay: float
    #: Calls forwarded to it (tools, prompts, reads, completions).
    calls: int
    #: Of those, the ones that failed: unavailable, timed out, or an error answer.
    errors: int


class Counts:
    """What the gateway counts of one backing server."""

    __slots__ = ("calls", "delay", "errors")

    def __init__(self) -> None:
        self.calls = 0
        self.errors = 0
        self.delay = 0.0
