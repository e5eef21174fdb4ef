"""Several Streamable HTTP server processes and nodes serving the same
sessions, behind any load balancer (round robin, no stickiness), through
Redis (the ``redis`` extra: ``pip install 'trio-mcp[redis]'``).

:class:`RedisCluster` plugs into a :class:`~trio_mcp.serving.http.StreamableHttpApp`
(``HttpServer(app, cluster=RedisCluster(ClusterSettings(url=...)))``, or the
``redis_url`` setting, or ``trio-mcp run … -t http --redis URL``). Without
one, the app keeps its sessions in memory, as one process does.

Design (following ``SCALE-OUT.md`` §4, with one change): the node that
answers ``initialize`` owns the session; any node takes any request, and one
for a session owned elsewhere is forwarded *whole* (the HTTP request, not its
JSON-RPC frames) to the owner's inbox stream, served there by the same
POST/GET/DELETE code as a direct one, its response relayed back through the
asking node's inbox. So the owner's event store stays the one source of
event ids and replays (a resumption on any node is forwarded like anything
else), the owner re-runs every check (``Host``, version, session) itself, and
the HTTP modules need one hook (:class:`~trio_mcp.serving.http.ClusterHook`)
instead of a remote mode for their streams. A stream is lost with its owner
(its calls fail with :class:`OwnerLost`, a later resumption gets ``410``),
which is all a durable per-stream Redis Stream would have saved: the
handlers that fed it die with the owner. Fencing is by the owner's lease
nonce, checked in the same script as every write it makes, plus a fence
counter on the session bumped by each adoption.

A second change (``direct_link``, ``--direct-link``): the forwarded request
and its answer can go over a direct connection between the two nodes
instead of through the inboxes, which halves what a forwarded request costs
(most of it was the Redis client's work on both nodes, not Redis's); Redis
stays the registry, the lease and fence authority, and the fallback
(:mod:`._link`).

A third (``serve_on_ingress``, ``--serve-on-ingress``): a node serves a
session's plain requests answered as JSON (tool calls, lists, reads) itself,
in a replica of the session restored from its saved handshake state, instead
of forwarding them; what those calls send the client goes through the owner,
and the client's answers are routed back by a mark in the request ids
(:mod:`._replica`). Everything else is still forwarded.

Modules: ``_settings`` (:class:`ClusterSettings`, :class:`OwnerLost`),
``_redis`` (the keys and commands), ``_node`` (the node: lease, inbox,
routing), ``_bus`` (pub/sub between the nodes), ``_registry`` (the session
registry and handshake state), ``_tunnel`` (requests forwarded to their
session's owner), ``_link`` (the direct links), ``_replica`` (sessions owned
elsewhere, served where their requests land).
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
