"""The settings of a cluster node, and the error a lost owner gives."""

from __future__ import annotations

import os
import secrets
from typing import Any, Final, Literal

import attrs

from ..._util import check_positive
from ...protocol import InternalError

__all__ = ["NODE_HEADER", "ClusterSettings", "OwnerFailure", "OwnerLost"]

#: The longest ``link_dir``: a Unix socket's path holds at most 107 bytes, and
#: a node's socket adds ``/link-`` and 16 hex digits and ``.sock`` to it.
_LINK_DIR_MAX: Final = 80

#: The response header naming the node that served a request (``node_header``).
NODE_HEADER: Final = "mcp-node"

#: What a node does with a session whose owner died: take it over, or forget it (``404``).
OwnerFailure = Literal["adopt", "drop"]


def _node_id() -> str:
    return secrets.token_hex(6)


@attrs.frozen(kw_only=True)
class ClusterSettings:
    """Every option and bound of a cluster node, named (times in seconds)."""

    #: ``redis://host:port/db`` (or ``unix:///path/to/redis.sock``).
    url: str
    #: Prepended to every key and channel: several deployments share one Redis.
    prefix: str = "mcp:"
    #: This node's name in Redis and in the ``Mcp-Node`` header (default: random,
    #: never ``host:pid``, which gets reused).
    node_id: str = attrs.field(factory=_node_id)
    #: A node whose lease was not renewed for this long is dead: its sessions
    #: are adopted or dropped, their calls in flight fail.
    lease_ttl: float = 3.0
    #: How often the lease is renewed (and ingress nodes check an owner that is silent).
    renew_interval: float = 1.0
    #: ``"adopt"``: another node takes a dead owner's sessions over from their
    #: stored handshake state (same ``Mcp-Session-Id``); ``"drop"``: they are
    #: forgotten and answered ``404`` (the client initializes again).
    owner_failure: OwnerFailure = "adopt"
    #: Seconds one Redis command may take (``503`` after, for a session request).
    store_timeout: float = 2.0
    #: Entries kept in a node's inbox stream (``MAXLEN ~``).
    inbox_maxlen: int = 10_000
    #: Requests forwarded to this node served at once (``503`` beyond).
    max_forwarded: int = 1024
    #: Items queued for one forwarded response on its ingress node; a client
    #: reading slower loses that connection (it resumes with ``Last-Event-ID``).
    forward_buffer: int = 256
    #: Change notifications queued for the bus (oldest dropped beyond).
    bus_queue: int = 256
    #: Inbox entries (forwarded requests and the pieces of their answers)
    #: waiting to be written; a writer waits for room beyond.
    outbox_queue: int = 1024
    #: Inbox entries written to Redis in one command at most (the ones that
    #: queued up while the previous command was on its way).
    outbox_batch: int = 128
    #: Add ``Mcp-Node: <node_id>`` to every response (for tests and operators).
    node_header: bool = False
    #: Forward requests to their session's owner over a direct connection
    #: between the nodes (the Redis inbox stays the fallback); see ``_link``.
    direct_link: bool = False
    #: Where this node listens for direct links (private: other nodes only).
    link_host: str = "127.0.0.1"
    #: Its port (0: one chosen at run time).
    link_port: int = 0
    #: ``host:port`` the other nodes dial (default: the address listened on;
    #: set it for nodes on several machines, with ``link_host`` ``0.0.0.0``).
    link_advertise: str | None = None
    #: A directory: listen for direct links on a Unix socket in it instead of
    #: on ``link_host`` (nodes on one machine; only users allowed into the
    #: directory reach it). ``trio-mcp … --workers N --direct-link`` uses a
    #: private one.
    link_dir: str | None = None
    #: The largest frame a link takes (a forwarded request or a piece of an answer).
    link_max_frame: int = 64 << 20
    #: Serve a session's plain requests (``tools/call``, lists, reads…)
    #: answered as JSON on the node they reach, from the session's saved
    #: handshake state, instead of forwarding them to its owner (see
    #: ``_replica``; needs the app's ``json_response=True``).
    serve_on_ingress: bool = False

    def __attrs_post_init__(self) -> None:
        check_positive(
            self,
            (
                "lease_ttl",
                "renew_interval",
                "store_timeout",
                "inbox_maxlen",
                "max_forwarded",
                "forward_buffer",
                "bus_queue",
                "outbox_queue",
                "outbox_batch",
                "link_max_frame",
            ),
        )
        if self.renew_interval >= self.lease_ttl:
            raise ValueError("ClusterSettings.renew_interval must be shorter than lease_ttl")
        if self.owner_failure not in ("adopt", "drop"):
            raise ValueError(f"owner_failure must be 'adopt' or 'drop', not {self.owner_failure!r}")
        if not 0 <= self.link_port < 65536:
            raise ValueError(f"link_port must be a port number, not {self.link_port}")
        if self.link_dir is not None:
            if self.link_advertise is not None:
                raise ValueError(
                    "link_advertise names a TCP address: a link_dir's socket is dialled by its path"
                )
            if len(os.fsencode(self.link_dir)) > _LINK_DIR_MAX:
                raise ValueError(
                    f"link_dir is too long for a Unix socket's path (at most {_LINK_DIR_MAX} bytes)"
                )
        if not self.node_id or ":" in self.node_id:
            raise ValueError("node_id must be non-empty and without ':'")

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)


class OwnerLost(InternalError):
    """The node running a request's session died before answering it (the
    answer a client gets instead of a hang; ``data.owner`` names the node)."""

    def __init__(self, owner: str, **kwargs: Any) -> None:
        super().__init__(
            "the server node handling this request was lost", data={"owner_lost": owner}, **kwargs
        )
