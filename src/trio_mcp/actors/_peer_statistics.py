"""A snapshot of a peer's counters: imported when a peer's statistics are
first asked for, so that a server process does not build this class at
start-up (each attrs class costs about a millisecond)."""

from __future__ import annotations

import attrs

__all__ = ["PeerStatistics"]


@attrs.frozen
class PeerStatistics:
    """A snapshot of a peer's counters (see :meth:`Peer.statistics`)."""

    pending_calls: int
    handlers_running: int
    workers: int
    requests_queued: int
    notifications_queued: int
    requests_served: int
    requests_overloaded: int
    requests_cancelled_by_peer: int
    notifications_dropped: int
    #: Times the read loop stopped reading until the other side took our answers.
    reads_paused: int
    unmatched_responses: int
    invalid_frames: int
