"""A gateway: the servers of an ``mcpServers`` configuration file, started
and supervised, shown to clients as one MCP server.

::

    async with open_gateway("mcp.json") as gateway:
        await serve(gateway, ...)   # any server transport: stdio, HttpServer(gateway), …

or from the command line: ``trio-mcp gateway mcp.json -t http --port 8000``.
See :mod:`trio_mcp.gateway._config` for the file format and
:mod:`trio_mcp.gateway._gateway` for how names, URIs and failures are shown.
"""

from ._config import (
    ConfigError,
    GatewayConfig,
    RemoteEntry,
    RemoteTransport,
    ServerEntry,
    StdioEntry,
    load_config,
    parse_config,
)
from ._gateway import (
    GATEWAY_SETTINGS,
    URI_SCHEME,
    Gateway,
    GatewayStartError,
    ServerUnavailable,
    gateway_uri,
    open_gateway,
    split_gateway_uri,
)

__all__ = [
    "GATEWAY_SETTINGS",
    "URI_SCHEME",
    "ConfigError",
    "Gateway",
    "GatewayConfig",
    "GatewayStartError",
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
