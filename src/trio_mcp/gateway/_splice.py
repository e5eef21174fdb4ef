"""The byte path of the forwarding path (:mod:`._forward`), over stdio both
ways: a plain ``tools/call`` read from the client is passed to its server as
bytes, and the server's answer to it back to the client, as bytes.

Both stdio streams offer each line of a read to a tap before they decode it
(:meth:`StdioStream.set_tap <trio_mcp.transports.StdioStream.set_tap>`):

* the client's stream, to its :class:`ForwardingStream
  <._forward.ForwardingStream>` (``take``): a line that is a plain call of a
  routed tool is read as a header (:class:`Head`: the id, the method, the
  tool's name; the arguments kept as the client's JSON, unread) and written
  to its server with the server's id and tool name spliced in; the calls of
  one read go to each server in one write;
* a server's stream, to its :class:`BackendTap`: an answer whose id is one of
  those calls is read as a header (:class:`Answer`: the id; the result kept
  as the server's JSON) and written to its client with the client's id
  spliced in; the answers of one read go to each client in one write.

A line either tap does not take (anything but these two: a call with a
progress token or a task, any other message, invalid UTF-8, a malformed
error) is decoded by its stream as before, and so are the lines after it in
the same read (none overtakes an earlier one: a cancellation still reaches a
server before the calls read after it): the frame path of :mod:`._forward`
or the handler path gives the same answers as without taps.
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING, Any, Final

import msgspec
from msgspec import UNSET, Raw, UnsetType

if TYPE_CHECKING:
    from ..actors._peer import Peer
    from ._forward import ForwardingStream
    from ._routes import Call

__all__ = ["Answer", "BackendTap", "Head", "backend_tap", "read_answer", "read_head", "utf8"]

_SKIPPED: Final = (msgspec.DecodeError, msgspec.ValidationError)


class _Params(msgspec.Struct):
    """``tools/call`` params as a proxy reads them: the arguments unread."""

    name: str
    arguments: Raw | UnsetType = UNSET
    meta: Raw | UnsetType = msgspec.field(default=UNSET, name="_meta")
    task: Raw | UnsetType = UNSET


class Head(msgspec.Struct):
    """A request line as a proxy reads it (an answer's fields: not a request)."""

    id: int | str
    method: str
    params: _Params
    jsonrpc: str = ""
    result: Raw | UnsetType = UNSET
    error: Raw | UnsetType = UNSET


class Answer(msgspec.Struct):
    """An answer line as a proxy reads it: the result or error unread."""

    id: int | str | None = None
    jsonrpc: str = ""
    result: Raw | UnsetType = UNSET
    error: Raw | UnsetType = UNSET
    method: Raw | UnsetType = UNSET


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
    """The tap on one server session's stdio stream: the answers to the calls
    forwarded as bytes (``calls``, by the server's id) go back to their
    clients as bytes. Everything else is left to the server's peer. A call is
    also expected at the peer (:meth:`Peer.expect`), which fails it when the
    session ends."""

    __slots__ = ("_forget", "_fronts", "calls", "peer")

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self._forget = peer.forget
        self.calls: dict[int | str, Call] = {}
        #: The clients answered in this read (their lines are written at flush).
        self._fronts: list[ForwardingStream] = []

    def take(self, line: bytes) -> bool:
        calls = self.calls
        if not calls:
            return False
        try:
            answer = read_answer(line)
        except _SKIPPED:
            return False
        ident = answer.id
        call = calls.get(ident)  # type: ignore[arg-type]
        if call is None or answer.jsonrpc != "2.0" or answer.method is not UNSET:
            return False
        result = answer.result
        if result is not UNSET:
            if answer.error is not UNSET or not (line.isascii() or utf8(line)):
                return False
            body = b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (call.front_json, result)
        else:
            error = answer.error
            if error is UNSET or not (line.isascii() or utf8(line)) or not _valid_error(error):
                return False
            body = b'{"jsonrpc":"2.0","id":%s,"error":%s}' % (call.front_json, error)
            call.route.counts.errors += 1
        del calls[ident]  # type: ignore[arg-type]
        self._forget(ident)  # type: ignore[arg-type]
        call.done = True
        front = call.front
        front._calls.pop(call.front_id, None)
        lines = front._answers
        if not lines:
            self._fronts.append(front)
        lines.append(body)
        return True

    def flush(self) -> None:
        fronts = self._fronts
        if fronts:
            for front in fronts:
                front._write_answers()
            fronts.clear()


def _valid_error(error: Raw) -> bool:
    try:
        _read_error(error)
    except _SKIPPED:
        return False
    return True


def backend_tap(peer: Peer) -> BackendTap | None:
    """The tap on ``peer``'s stream, installed on first use (None: the stream
    has no taps, or another one)."""
    stream: Any = peer.stream
    if getattr(type(stream), "set_tap", None) is None:
        return None
    tap = stream.tap
    if tap is None:
        tap = BackendTap(peer)
        stream.set_tap(tap)
    return tap if type(tap) is BackendTap else None
