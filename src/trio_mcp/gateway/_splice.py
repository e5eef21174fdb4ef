"""The byte path of the forwarding path (:mod:`._forward`), over stdio both
ways: a plain ``tools/call`` read from the client is passed to its server as
bytes, and the server's answer to it back to the client, as bytes.

Both stdio streams hand the lines of each read to a tap before they decode
them (:meth:`StdioStream.set_tap <trio_mcp.transports.StdioStream.set_tap>`):

* the client's stream, to its :class:`ForwardingStream
  <._forward.ForwardingStream>` (``take``): a line that is a plain call of a
  routed tool is read as a header (:class:`Head`: the id, the tool's name;
  the arguments kept as the client's JSON, unread) and written to its server
  with the server's id and tool name spliced in; the calls of one read go to
  each server in one write. The first line it does not take and the lines
  after it are decoded by the stream (none overtakes an earlier one: a
  cancellation reaches a server before the calls read after it);
* a server's stream, to its :class:`BackendTap`: an answer to one of those
  calls, wherever it is in the read, is read as a header (:class:`Answer`:
  the id; the result kept as the server's JSON) and written to its client
  with the client's id spliced in; the answers of one read go to each client
  in one write. The other lines are decoded by the stream, in their order,
  for the server's peer.

The calls on this path are the tap's own: their ids at the server are the
tap's (from :data:`FIRST_ID` up, apart from the ids of the peer's own
requests), kept in its table (:attr:`BackendTap.calls`), not in the peer's.
The tap is one entry at the peer (:meth:`Peer.expect
<trio_mcp.actors._peer.Peer.expect>`), under an id never sent: when the
session ends, the peer fails it, and the tap fails every call still out.

A line the headers do not fit (a call with a progress token, a task or
anything else, invalid UTF-8, an answer with an error that is not one) takes
the frame path of :mod:`._forward` or the handler path, which give the same
answers as without taps; an answer to one of the tap's calls that does not fit
is decoded here and delivered as the peer would have.
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

__all__ = ["FIRST_ID", "Answer", "BackendTap", "Head", "backend_tap", "read_answer", "read_head", "utf8"]

#: What a line that does not fit a header raises.
SKIPPED: Final = (msgspec.DecodeError, msgspec.ValidationError)
_LEFT: Final = (msgspec.DecodeError, msgspec.ValidationError, KeyError)

#: The first id of the tap's calls at a server, and the one past the last: a
#: range no peer reaches with its own requests, below 2**31 (servers that keep
#: ids in 32 bits).
FIRST_ID: Final = 1 << 30
_END_ID: Final = (1 << 31) - 1


class _Params(msgspec.Struct, forbid_unknown_fields=True):
    """``tools/call`` params as a proxy reads them: the arguments unread,
    nothing else (a progress token, a task: not this path)."""

    name: str
    arguments: Raw | UnsetType = UNSET


class Head(msgspec.Struct, forbid_unknown_fields=True):
    """A plain ``tools/call`` request line as a proxy reads it (any other line does not fit)."""

    jsonrpc: Literal["2.0"]
    id: int | str
    method: Literal["tools/call"]
    params: _Params


class Answer(msgspec.Struct, forbid_unknown_fields=True):
    """An answer to one of the tap's calls as a proxy reads it: the result or
    error unread (a request, a notification, another id type: does not fit)."""

    jsonrpc: Literal["2.0"]
    id: int
    result: Raw | UnsetType = UNSET
    error: Raw | UnsetType = UNSET


class _Error(msgspec.Struct):
    """What a JSON-RPC error object must have."""

    code: int
    message: str


read_head: Final = msgspec.json.Decoder(Head).decode
read_answer: Final = msgspec.json.Decoder(Answer).decode
_read_error: Final = msgspec.json.Decoder(_Error).decode
_encode: Final = msgspec.json.Encoder().encode

_RESULT: Final = b'{"jsonrpc":"2.0","id":%d,"result":%s}'
_ERROR: Final = b'{"jsonrpc":"2.0","id":%d,"error":%s}'


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
        #: The ids of the calls at the server (see :meth:`issue`).
        self.ids = itertools.count(FIRST_ID)
        self.issued = 0
        #: The peer's session ended (its calls were failed).
        self.closed = False
        #: The clients answered in this read (their lines are written at its end).
        self._fronts: list[ForwardingStream] = []
        peer.expect(self)  # the session's end reaches the tap: see deliver

    def issued_more(self, n: int) -> None:
        """``n`` more ids were taken from :attr:`ids`: start again at
        :data:`FIRST_ID` before the range ends (a call out that long ago
        would have passed its deadline)."""
        self.issued += n
        if self.issued > _END_ID - FIRST_ID - (1 << 20):
            self.issued = 0
            self.ids = itertools.count(FIRST_ID)

    def take(self, lines: list[bytes], ascii: bool) -> list[bytes]:
        """The answers to the tap's calls in ``lines`` (one read of the
        server), to their clients; the other lines returned, in order."""
        calls = self.calls
        if not calls:
            return lines
        left: list[bytes] = []
        fronts = self._fronts
        for line in lines:
            try:
                answer = read_answer(line)
                call = calls.pop(answer.id)
            except _LEFT:
                left.append(line)  # not an answer to one of ours: the peer's
                continue
            result = answer.result
            ident = call.front_id
            if result is not UNSET and answer.error is UNSET and (ascii or utf8(line)):
                if type(ident) is int:
                    body = _RESULT % (ident, result)
                else:
                    body = b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (_encode(ident), result)
            else:
                odd = self._odd(call, answer, line)
                if odd is None:
                    left.append(line)
                if type(odd) is not bytes:
                    continue
                body = odd
            call.done = True
            front = call.front
            front._calls.pop(ident, None)
            out = front._answers
            if not out:
                fronts.append(front)
            out.append(body)
        if fronts:
            for front in fronts:
                front._write_answers()
            fronts.clear()
        return left

    def _odd(self, call: Call, answer: Answer, line: bytes) -> bytes | bool | None:
        """An answer to ``call`` that is not a plain result: an error, as
        bytes for its client, when it is one; else what the peer would
        deliver, delivered (True); None (the call is out again): not an
        answer, the peer logs it."""
        error = answer.error
        if answer.result is UNSET and error is not UNSET and utf8(line) and _valid_error(error):
            call.route.counts.errors += 1
            ident = call.front_id
            if type(ident) is int:
                return _ERROR % (ident, error)
            return b'{"jsonrpc":"2.0","id":%s,"error":%s}' % (_encode(ident), error)
        frame = decode(line)
        if type(frame) is Response or type(frame) is ErrorResponse:
            call.deliver(outcome.Value(frame))
            return True
        self.calls[answer.id] = call
        return None

    def deliver(self, value: outcome.Outcome[Any]) -> None:
        """The peer's session ended (``value``: its error): every call out ends with it."""
        self.closed = True
        calls = list(self.calls.values())
        self.calls.clear()
        for call in calls:
            call.deliver(value)


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
