"""Server-sent events: writing events and an incremental, bounded parser.

The parser follows the WHATWG event-stream rules: lines end with CRLF, LF or
CR; ``:`` starts a comment; fields ``data`` (joined with newlines),
``event``, ``id`` (ignored when it contains NUL; it persists across events)
and ``retry`` (digits only); a blank line dispatches the event, unless no
data arrived. One event's data is bounded: a peer cannot make it buffer
without limit.
"""

from __future__ import annotations

import attrs

__all__ = ["PING", "SseDecoder", "SseError", "SseEvent", "format_event", "format_retry"]

#: A comment line: keeps idle connections alive and finds dead ones.
PING = b": ping\n\n"


def format_event(event_id: str | None, data: bytes) -> bytes:
    """One ``message`` event; ``data`` is compact JSON (no line breaks) or
    empty (a priming event: an id and an empty ``data`` field)."""
    if event_id is None:
        return b"data: " + data + b"\n\n"
    return b"id: " + event_id.encode() + b"\ndata: " + data + b"\n\n"


def format_retry(milliseconds: int) -> bytes:
    return b"retry: %d\n\n" % milliseconds


class SseError(Exception):
    """The event stream broke the rules or a bound."""


@attrs.frozen
class SseEvent:
    event: str
    data: str
    id: str | None


class SseDecoder:
    """Feed bytes, get complete events. ``last_event_id`` and ``retry``
    (milliseconds) reflect every field seen so far, including those of
    events that were not dispatched (a priming event has no data)."""

    def __init__(self, max_event_size: int = 4 << 20) -> None:
        self.max_event_size = max_event_size
        self.last_event_id: str | None = None
        self.retry: int | None = None
        self._buf = bytearray()
        self._data: list[str] = []
        self._size = 0
        self._event = ""
        self._first = True

    def feed(self, chunk: bytes) -> list[SseEvent]:
        buf = self._buf
        buf += chunk
        if self._first and buf:
            if buf.startswith(b"\xef\xbb\xbf"):
                del buf[:3]
            self._first = False
        out: list[SseEvent] = []
        start = 0
        n = len(buf)
        while start < n:
            i_lf = buf.find(b"\n", start)
            i_cr = buf.find(b"\r", start, i_lf if i_lf >= 0 else n)
            if i_cr >= 0:
                if i_cr + 1 == n:
                    break  # a CR at the end: maybe the first half of CRLF
                end, nxt = i_cr, i_cr + (2 if buf[i_cr + 1] == 0x0A else 1)
            elif i_lf >= 0:
                end, nxt = i_lf, i_lf + 1
            else:
                break
            event = self._line(bytes(buf[start:end]))
            start = nxt
            if event is not None:
                out.append(event)
        del buf[:start]
        if len(buf) > self.max_event_size:
            raise SseError(f"an event-stream line exceeds {self.max_event_size} bytes")
        return out

    def _line(self, raw: bytes) -> SseEvent | None:
        if not raw:
            return self._dispatch()
        if raw[0] == 0x3A:  # ':' comment
            return None
        line = raw.decode("utf-8", "replace")
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._size += len(value) + 1
            if self._size > self.max_event_size:
                raise SseError(f"an event exceeds {self.max_event_size} bytes")
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif name == "retry" and value.isdigit():
            self.retry = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        data, event = self._data, self._event
        self._data, self._size, self._event = [], 0, ""
        if not data:
            return None
        return SseEvent(event or "message", "\n".join(data), self.last_event_id)
