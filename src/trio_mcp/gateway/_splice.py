"""The byte path of the forwarding path (:mod:`._forward`), over stdio both
ways: a plain ``tools/call`` read from the client is passed to its server
with its arguments as the client's bytes, and the server's answer to it back
to the client with its result as the server's bytes.

Both stdio streams hand the complete lines of each read to a tap before they
decode them (:meth:`StdioStream.set_tap <trio_mcp.transports.StdioStream.set_tap>`):

* the client's stream, to its :class:`ForwardingStream
  <._forward.ForwardingStream>` (``take``): the read's lines are read as
  headers in one call (:class:`Head`: the id, the tool's name; the arguments
  kept as the client's JSON, unread), and each plain call of a routed tool
  gets the server's id and tool name; the calls of one read go to each server
  as JSON lines made in one call, in one write. The first line that is not
  such a call and the lines after it are decoded by the stream (none
  overtakes an earlier one: a cancellation reaches a server before the calls
  read after it);
* a server's stream, to its :class:`BackendTap`: the read's lines are read
  as answers in one call (:class:`Answer`: the id; the result kept as the
  server's JSON), and each answer to one of the tap's calls, wherever it is
  in the read, gets its client's id; the answers of one read go to each
  client in the same way. The other lines are decoded by the stream, in their
  order, for the server's peer.

A read with a line the headers do not fit (a call with a progress token, a
task or anything else, invalid UTF-8, a notification) is read one line at a
time: the lines that fit still take this path (on the client's side, up to
the first that does not).

The calls on this path are the tap's own: their ids at the server are the
tap's (from :data:`FIRST_ID` up, apart from the ids of the peer's own
requests), kept in its table (:attr:`BackendTap.calls`), not in the peer's.
The tap is one entry at the peer (:meth:`Peer.expect
<trio_mcp.actors._peer.Peer.expect>`), under an id never sent: when the
session ends, the peer fails it, and the tap fails every call still out.

What this path leaves takes the frame path of :mod:`._forward` or the
handler path, which give the same answers as without taps; an answer to one
of the tap's calls that is not a plain result or a JSON-RPC error is decoded
here and delivered as the peer would have.
"""

from __future__ import annotations

import codecs
import itertools
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
import outcome
from msgspec import UNSET, Raw, UnsetType

from ..protocol import ErrorResponse, Response, decode

if TYPE_CHECKING:
    from ..actors._peer import Peer
    from ._forward import ForwardingStream
    from ._routes import Call

__all__ = [
    "FIRST_ID",
    "ISSUED",
    "Answer",
    "BackendTap",
    "Head",
    "backend_tap",
    "read_answer",
    "read_head",
    "utf8",
]

#: What a line that does not fit a header raises.
SKIPPED: Final = (msgspec.DecodeError, msgspec.ValidationError)

#: The first id of the tap's calls at a server, and the one past the last: a
#: range no peer reaches with its own requests, below 2**31 (servers that keep
#: ids in 32 bits).
FIRST_ID: Final = 1 << 30
#: Ids a tap issues before it starts again at FIRST_ID (its writer counts them).
ISSUED: Final = (1 << 30) - (1 << 20)


class _Params(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """``tools/call`` params as a proxy reads them: the arguments unread,
    nothing else (a progress token, a task: not this path)."""

    name: str
    arguments: Raw | UnsetType = UNSET


class Head(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A plain ``tools/call`` request line as a proxy reads it (any other line does not fit)."""

    jsonrpc: Literal["2.0"]
    id: int | str
    method: Literal["tools/call"]
    params: _Params


class Answer(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """An answer to one of the tap's calls as a proxy reads it: the result or
    error unread (a request, a notification, another id type: does not fit)."""

    jsonrpc: Literal["2.0"]
    id: int | str
    result: Raw | UnsetType = UNSET
    error: Raw | UnsetType = UNSET


class _Error(msgspec.Struct):
    """What a JSON-RPC error object must have."""

    code: int
    message: str


read_head: Final = msgspec.json.Decoder(Head).decode
read_answer: Final = msgspec.json.Decoder(Answer).decode
_read_error: Final = msgspec.json.Decoder(_Error).decode


def utf8(line: bytes) -> bool:
    """``line`` is valid UTF-8 (msgspec checks only the strings it decodes)."""
    if line.isascii():
        return True
    try:
        codecs.utf_8_decode(line, "strict", True)
    except UnicodeDecodeError:
        return False
    return True


class BackendTap:
    """The tap on one server session's stdio stream: the calls forwarded as
    bytes (``calls``, by their id at the server, from ``ids``) and their
    answers, which go back to their clients as bytes. Everything else is
    left to the server's peer."""

    __slots__ = ("_fronts", "calls", "closed", "ids", "issued", "peer")

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.calls: dict[int, Call] = {}
        #: The ids of the calls at the server, and how many were taken (see :meth:`restart`).
        self.ids = itertools.count(FIRST_ID)
        self.issued = 0
        #: The peer's session ended (its calls were failed).
        self.closed = False
        #: The clients answered in this read (their lines are written at its end).
        self._fronts: list[ForwardingStream] = []
        peer.expect(self)  # the session's end reaches the tap: see deliver

    def restart(self) -> None:
        """More than :data:`ISSUED` ids were taken from :attr:`ids`: start
        again at :data:`FIRST_ID` before the range ends (a call out that long
        ago has passed its deadline)."""
        self.issued = 0
        self.ids = itertools.count(FIRST_ID)

    def take(self, chunk: bytes, ascii: bool) -> tuple[int, list[bytes]]:
        """The answers to the tap's calls in ``chunk`` (one read of the
        server), to their clients; the other lines returned, in order."""
        calls = self.calls
        if not calls:
            return 0, chunk.split(b"\n")
        lines: list[bytes] | None = None
        whole = ascii or utf8(chunk)
        answers = _answers(chunk) if whole else None
        if answers is None:  # one line at a time (one that is not UTF-8: the peer's)
            lines = chunk.split(b"\n")
            answers = [_answer(line) if whole or utf8(line) else _NO_ANSWER for line in lines]
        left: list[bytes] = []
        fronts = self._fronts
        # The client of the last answer, in locals: a read's answers mostly go to one.
        front: Any = None
        for i, answer in enumerate(answers):
            call = calls.pop(answer.id, None)  # type: ignore[arg-type]
            if call is None or answer.result is UNSET or answer.error is not UNSET:
                if lines is None:
                    lines = messages(chunk)
                odd = None if call is None else self._odd(call, answer, lines[i])
                if call is None or not odd:
                    if odd is None:
                        left.append(lines[i])  # not an answer to one of ours: the peer's
                    continue
            call.done = True
            if call.front is not front:
                front = call.front
                open_calls, out = front._calls, front._answers
                if not out:
                    fronts.append(front)
                add = out.append
            ident = call.front_id
            open_calls.pop(ident, None)
            answer.id = ident  # the answer as its client gets it: its id
            add(answer)
        if fronts:
            for front in fronts:
                front._write_answers()
            fronts.clear()
        return len(answers) - len(left), left

    def _odd(self, call: Call, answer: Answer, line: bytes) -> bool | None:
        """An answer to ``call`` that is not a plain result: True, an error
        passed on as it came; False, delivered as the peer would have; None
        (the call is out again): not an answer, the peer logs it."""
        error = answer.error
        if answer.result is UNSET and error is not UNSET and _valid_error(error):
            call.route.counts.errors += 1
            return True
        frame = decode(line)
        if type(frame) is Response or type(frame) is ErrorResponse:
            call.deliver(outcome.Value(frame))
            return False
        self.calls[answer.id] = call  # type: ignore[index]
        return None

    def deliver(self, value: outcome.Outcome[Any]) -> None:
        """The peer's session ended (``value``: its error): every call out ends with it."""
        self.closed = True
        calls = list(self.calls.values())
        self.calls.clear()
        for call in calls:
            call.deliver(value)


#: JSON's whitespace on a line (a line of nothing else is blank: no message).
_BLANK: Final = b" \t\r"
#: What a line that is not an answer reads as (no call has its id).
_NO_ANSWER: Final = Answer("2.0", -1)
_read_answers: Final = msgspec.json.Decoder(Answer).decode_lines
_read_heads: Final = msgspec.json.Decoder(Head).decode_lines


def _answer(line: bytes) -> Answer:
    try:
        return read_answer(line)
    except SKIPPED:
        return _NO_ANSWER


def _answers(chunk: bytes) -> list[Answer] | None:
    """Every line of ``chunk`` as an answer (blank lines skipped), or None (a line is not one)."""
    try:
        return _read_answers(chunk)
    except SKIPPED:
        return None


def messages(chunk: bytes) -> list[bytes]:
    """The lines of ``chunk`` that are not blank (one per message the JSON
    lines decoders read from it, in order)."""
    return [line for line in chunk.split(b"\n") if line.strip(_BLANK)]


def read_heads(chunk: bytes, ascii: bool) -> tuple[list[Head], list[bytes] | None]:
    """The plain calls at the start of ``chunk`` (the complete lines of a
    read; ``ascii``: all of it is ASCII): every message's (and None) when
    all are plain calls (blank lines skipped); else those before the first
    line that is not, and the lines."""
    if ascii or utf8(chunk):
        try:
            return _read_heads(chunk), None
        except SKIPPED:
            pass
    lines = chunk.split(b"\n")
    heads = []
    for line in lines:
        try:
            head = read_head(line)
        except SKIPPED:
            break
        if not (ascii or utf8(line)):
            break
        heads.append(head)
    return heads, lines


def _valid_error(error: Raw) -> bool:
    try:
        _read_error(error)
    except SKIPPED:
        return False
    return True


def backend_tap(peer: Peer) -> BackendTap | None:
    """The tap on ``peer``'s stream, installed on first use (None: the stream
    has no taps, or another one, or the peer is closed)."""
    stream: Any = peer.stream
    if getattr(type(stream), "set_tap", None) is None:
        return None
    tap = stream.tap
    if tap is None:
        if peer.closed:
            return None
        tap = BackendTap(peer)
        stream.set_tap(tap)
    return tap if type(tap) is BackendTap and not tap.closed else None
