"""Several Streamable HTTP server processes and nodes serving the same
sessions, behind any load balancer (round robin, no stickiness), through
Redis (the ``redis`` extra: ``pip install 'trio-mcp[redis]'``).

:class:`RedisCluster` plugs into a :class:`~trio_mcp.serving.http.StreamableHttpApp`
(``HttpServer(app, cluster=RedisCluster(ClusterSettings(url=...)))``, or the
``redis_url`` setting, or ``trio-mcp run … -t http --redis URL``). Without
one, the app keeps its sessions in memory, as one process does.

Modules: ``_settings`` (:class:`ClusterSettings`, :class:`OwnerLost`),
``_redis`` (the keys and commands), ``_node`` (the node: lease, inbox, bus,
routing), ``_registry`` (the session registry and handshake state),
``_tunnel`` (requests forwarded to their session's owner).
"""

from typing import TYPE_CHECKING

from ._settings import NODE_HEADER, ClusterSettings, OwnerFailure, OwnerLost

if TYPE_CHECKING:
    from ._node import RedisCluster

__all__ = [
    "NODE_HEADER",
    "ClusterSettings",
    "OwnerFailure",
    "OwnerLost",
    "RedisCluster",
]


def __getattr__(name: str) -> object:
    # RedisCluster needs coredis (the ``redis`` extra): imported when asked for.
    if name == "RedisCluster":
        from ._node import RedisCluster

        return RedisCluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
