"""What every actor shares.

An actor here is an object with ``async def run(self, *, task_status=...)``,
started with ``await nursery.start(actor.run)``: ``task_status.started(...)``
reports it ready (a peer, a session, a stream), a normal return carries an
:class:`ExitReason`, a crash raises. Its inbound work is bounded: the peer's
admission and notification queues, a transport's buffers, a supervisor's
event channel; each bound is a named setting of that actor.
"""

from __future__ import annotations

__all__ = ["ExitReason"]


class ExitReason:
    """Why an actor's ``run`` returned (a normal exit; crashes raise)."""

    __slots__ = ("detail", "kind")

    def __init__(self, kind: str, detail: str = "") -> None:
        self.kind = kind  # "eof", "closed", "cancelled", ...
        self.detail = detail

    def __repr__(self) -> str:
        return f"ExitReason({self.kind!r}{', ' + repr(self.detail) if self.detail else ''})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExitReason) and (self.kind, self.detail) == (other.kind, other.detail)

    def __hash__(self) -> int:
        return hash((self.kind, self.detail))
