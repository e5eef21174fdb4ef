"""A gateway: the servers of an MCP host's configuration file, started and
supervised, shown to clients as one MCP server.

::

    async with open_gateway("mcp.json", watch=1.0) as gateway:
        await serve(gateway, ...)   # any server transport: stdio, HttpServer(gateway), …

or from the command line: ``trio-mcp gateway mcp.json -t http --port 8000``.
See :mod:`trio_mcp.gateway._config` for the file formats and
:mod:`trio_mcp.gateway._gateway` for how names, URIs, filters and failures
are shown, :mod:`trio_mcp.gateway._fleet` for reloads.
"""

from ._config import (
    ConfigError,
    Filter,
    Filters,
    GatewayConfig,
    RemoteEntry,
    RemoteTransport,
    ServerEntry,
    StdioEntry,
    load_config,
    parse_config,
)
from ._fleet import Fleet, ReloadOutcome, open_gateway
from ._gateway import (
    GATEWAY_SETTINGS,
    STATUS_URI,
    URI_SCHEME,
    BackingServerStatistics,
    Gateway,
    GatewayStartError,
    ServerUnavailable,
    gateway_uri,
    split_gateway_uri,
)

__all__ = [
    "GATEWAY_SETTINGS",
    "STATUS_URI",
    "URI_SCHEME",
    "BackingServerStatistics",
    "ConfigError",
    "Filter",
    "Filters",
    "Fleet",
    "Gateway",
    "GatewayConfig",
    "GatewayStartError",
    "ReloadOutcome",
    "RemoteEntry",
    "RemoteTransport",
    "ServerEntry",
    "ServerUnavailable",
    "StdioEntry",
    "gateway_uri",
    "load_config",
    "open_gateway",
    "parse_config",
    "split_gateway_uri",
]
