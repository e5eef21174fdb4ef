"""Event stores: where SSE events wait so a broken stream can be resumed.

Every event the server writes on an SSE stream is first stored here and
gets its id from the store; a client that lost the connection sends the id
of the last event it saw in ``Last-Event-ID`` and the server replays what
followed it on the same stream. The store decides the id format (ids are
opaque to everybody else) and must keep ids unique across all streams.

A store is bounded: old events fall out, and then a resumption cannot be
complete. :class:`MemoryEventStore` keeps the newest events of each stream
and the most recently used streams, both bounds named settings.

To keep events across processes (several server workers behind a load
balancer), implement :class:`EventStore` on a shared database.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Final, Protocol, runtime_checkable

__all__ = ["EventStore", "MemoryEventStore", "StoredEvent"]

#: ``(event_id, data)``; ``data`` is the encoded JSON-RPC message, or ``b""``
#: for a priming event (an id with no message).
StoredEvent = tuple[str, bytes]

_SEP: Final = ":"


@runtime_checkable
class EventStore(Protocol):
    """What the Streamable HTTP server needs to make SSE streams resumable.

    ``stream_id`` values are chosen by the server (short, URL-safe, without
    ``":"``). Every method is awaited under the server's own bounds; an
    implementation backed by I/O should apply its own timeouts too. A store
    whose writes never block may also define ``store_event_nowait(stream_id,
    data) -> str`` (as :class:`MemoryEventStore` does), which the server then
    calls instead of ``store_event``, without a deadline.
    """

    async def store_event(self, stream_id: str, data: bytes) -> str:
        """Append an event to ``stream_id``; return its new, unique id."""
        ...

    async def stream_of(self, event_id: str) -> str | None:
        """The stream an event id belongs to, or None if unknown/forgotten."""
        ...

    async def events_after(self, event_id: str) -> list[StoredEvent] | None:
        """The events stored after ``event_id`` on its stream, oldest first
        (best effort: events that fell out of the bound are missing), or
        None when the stream is unknown."""
        ...

    async def forget_stream(self, stream_id: str) -> None:
        """Drop a stream's events (it was delivered in full, or its session ended)."""
        ...


class _Kept:
    """One stream's newest events (their data alone: ``events[i]`` has the
    sequence number ``next - len(events) + i``) and its next sequence
    number. Two containers a stream, however many events: a busy server
    keeps thousands of streams, and the collector walks every container."""

    __slots__ = ("events", "next")

    def __init__(self, max_events: int) -> None:
        self.next = 0
        self.events: deque[bytes] = deque(maxlen=max_events)


class MemoryEventStore:
    """An in-process, bounded :class:`EventStore`.

    Ids are ``"<stream_id>:<sequence>"``. Each stream keeps its newest
    ``max_events_per_stream`` events; at most ``max_streams`` streams are
    kept, the least recently written one is dropped first.
    """

    def __init__(self, max_events_per_stream: int = 256, *, max_streams: int = 4096) -> None:
        if max_events_per_stream < 1:
            raise ValueError("max_events_per_stream must be at least 1")
        if max_streams < 1:
            raise ValueError("max_streams must be at least 1")
        self.max_events_per_stream = max_events_per_stream
        self.max_streams = max_streams
        self._streams: OrderedDict[str, _Kept] = OrderedDict()
        self.events_evicted = 0
        self.streams_evicted = 0

    async def store_event(self, stream_id: str, data: bytes) -> str:
        return self.store_event_nowait(stream_id, data)

    def store_event_nowait(self, stream_id: str, data: bytes) -> str:
        if _SEP in stream_id:
            raise ValueError(f"stream ids must not contain {_SEP!r}")
        kept = self._streams.get(stream_id)
        if kept is None:
            while len(self._streams) >= self.max_streams:
                self._streams.popitem(last=False)
                self.streams_evicted += 1
            kept = self._streams[stream_id] = _Kept(self.max_events_per_stream)
        else:
            self._streams.move_to_end(stream_id)
        events = kept.events
        seq = kept.next
        kept.next = seq + 1
        if len(events) == events.maxlen:
            self.events_evicted += 1
        events.append(data)
        return f"{stream_id}{_SEP}{seq}"

    @staticmethod
    def _parse(event_id: str) -> tuple[str, int] | None:
        stream_id, sep, seq = event_id.rpartition(_SEP)
        if not sep or not stream_id or not seq.isdigit():
            return None
        return stream_id, int(seq)

    async def stream_of(self, event_id: str) -> str | None:
        parsed = self._parse(event_id)
        if parsed is None or parsed[0] not in self._streams:
            return None
        return parsed[0]

    async def events_after(self, event_id: str) -> list[StoredEvent] | None:
        parsed = self._parse(event_id)
        if parsed is None:
            return None
        stream_id, last = parsed
        kept = self._streams.get(stream_id)
        if kept is None:
            return None
        events = kept.events
        first = kept.next - len(events)  # the sequence number of events[0]
        skip = max(0, last + 1 - first)
        return [(f"{stream_id}{_SEP}{first + i}", events[i]) for i in range(skip, len(events))]

    async def forget_stream(self, stream_id: str) -> None:
        self._streams.pop(stream_id, None)

    def statistics(self) -> dict[str, int]:
        return {
            "streams": len(self._streams),
            "events": sum(len(kept.events) for kept in self._streams.values()),
            "events_evicted": self.events_evicted,
            "streams_evicted": self.streams_evicted,
        }
