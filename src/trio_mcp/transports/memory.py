"""In-memory transport: a connected pair of message streams.

Three modes:

* ``"zero-copy"`` — Structs are passed through as they are. Fastest; the
  receiver's cached decoders accept instances as well as raw JSON.
  Payloads are shared, not copied: treat them as immutable.
* ``"bytes"`` — every message is encoded and decoded exactly as on a wire.
* ``"inline"`` — ``"zero-copy"``, and a request is served by the other
  end in the sender's task, with no frame and no task switch, as the
  official SDK's in-process client does in the 2026-07-28 era (see
  :meth:`~trio_mcp.actors.Peer.request`): a *stateless* request (one that
  depends on no earlier message: that era's requests) always; any other
  request (but ``initialize``) when nothing sent before it is still queued
  for the other end, so it overtakes nothing. Notifications,
  ``initialize`` and ``subscriptions/listen`` cross the pair as in
  ``"zero-copy"``.

When the receiving end's consumer registered a direct receiver (a
:class:`~trio_mcp.actors.Peer` does) and nothing is queued in the channel, a
request or response is handed to it from the sending task instead of waking
the reader first: one task switch less per message, same order, same codec.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

import trio

from ..protocol import ErrorResponse, Frame, Request, Response, decode, encode
from ._base import TransportClosed

__all__ = ["DEFAULT_MEMORY_BUFFER", "MemoryStream", "memory_pair"]

#: Messages buffered per direction before ``send`` blocks (backpressure).
DEFAULT_MEMORY_BUFFER: Final = 64

#: Frames the other end may take directly (see :meth:`MemoryStream.set_direct`).
_DIRECT_KINDS: Final = (Request, Response, ErrorResponse)

Mode = Literal["zero-copy", "bytes", "inline"]


class MemoryStream:
    """One end of an in-memory pair; see :func:`memory_pair`."""

    def __init__(
        self,
        send_channel: trio.MemorySendChannel[Any],
        receive_channel: trio.MemoryReceiveChannel[Any],
        mode: Mode,
    ) -> None:
        self._send = send_channel
        self._receive = receive_channel
        self._bytes = mode == "bytes"
        self.mode: Mode = mode
        #: The other end of the pair (set by :func:`memory_pair`).
        self._other: MemoryStream | None = None
        self._direct: Callable[[Any], bool] | None = None
        self._inline: Callable[..., Awaitable[Any]] | None = None
        #: This end's reader waits in receive() with nothing buffered or handed to it.
        self._waiting = False
        self.direct_deliveries = 0

    def set_direct(self, receiver: Callable[[Any], bool] | None) -> None:
        """Let the other end hand frames straight to ``receiver`` (the
        consumer of this end, e.g. a peer's dispatch) when nothing is queued
        ahead of them, skipping one task switch per message; ``receiver``
        returns False for frames it leaves to the ordinary path. Order is kept:
        a frame goes direct only while this end's reader waits in ``receive``
        with nothing queued or handed to it."""
        self._direct = receiver

    def set_inline(self, server: Callable[..., Awaitable[Any]] | None) -> None:
        """Let the other end have ``server`` (this end's consumer, e.g. a
        peer's inline server: ``await server(request, sink)`` -> the answer)
        answer a stateless request in the sending task; used only when the
        pair is in ``"inline"`` mode."""
        self._inline = server

    @property
    def inline(self) -> Callable[..., Awaitable[Any]] | None:
        """What serves this end's stateless requests in the sending task
        (``"inline"`` mode, while the other end's consumer runs), else None."""
        other = self._other
        if self.mode != "inline" or other is None:
            return None
        return other._inline

    @property
    def inline_in_order(self) -> Callable[..., Awaitable[Any]] | None:
        """:attr:`inline` for any request, but only while nothing this end
        sent is still queued for the other end (its reader waits in
        ``receive``): a request served now overtakes nothing."""
        other = self._other
        if self.mode != "inline" or other is None or not other._waiting:
            return None
        return other._inline

    async def send(self, message: Any) -> None:
        other = self._other
        # Only while the reader waits in receive() with nothing queued or
        # handed to it yet: then no earlier frame can be overtaken.
        if (
            other is not None
            and other._direct is not None
            and type(message) in _DIRECT_KINDS
            and other._waiting
        ):
            frame = decode(encode(message)) if self._bytes else message
            if other._direct(frame):
                self.direct_deliveries += 1
                await trio.lowlevel.checkpoint_if_cancelled()
                return
        item = encode(message) if self._bytes else message
        try:
            # Room in the buffer: deliver without a schedule point (the
            # caller awaits its reply next anyway); full: wait (backpressure).
            self._send.send_nowait(item)
            if other is not None:
                other._waiting = False  # an item is on its way to that reader
        except trio.WouldBlock:
            try:
                await self._send.send(item)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise TransportClosed("in-memory peer closed") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise TransportClosed("in-memory peer closed") from None

    async def receive(self) -> Frame:
        try:
            try:
                item = self._receive.receive_nowait()
            except trio.WouldBlock:
                # Nothing buffered: the reader now waits (direct hand-over allowed).
                self._waiting = True
                try:
                    item = await self._receive.receive()
                finally:
                    self._waiting = False
            else:
                await trio.lowlevel.checkpoint_if_cancelled()
        except (trio.ClosedResourceError, trio.EndOfChannel):
            raise trio.EndOfChannel from None
        return decode(item) if self._bytes else item

    def receive_nowait(self) -> Frame:
        """A frame already buffered, or :class:`trio.WouldBlock`."""
        try:
            item = self._receive.receive_nowait()
        except trio.ClosedResourceError:
            raise trio.EndOfChannel from None
        return decode(item) if self._bytes else item

    async def send_raw(self, data: bytes) -> None:
        """Send raw bytes, bypassing the encoder (bytes mode; for fault tests)."""
        if not self._bytes:
            raise TypeError("send_raw needs a bytes-mode pair")
        try:
            await self._send.send(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise TransportClosed("in-memory peer closed") from None

    async def aclose(self) -> None:
        self._direct = None
        self._inline = None
        await self._send.aclose()
        await self._receive.aclose()

    def statistics(self) -> dict[str, int]:
        s = self._send.statistics()
        return {"buffered": s.current_buffer_used, "buffer": int(s.max_buffer_size)}


def memory_pair(
    *, mode: Mode = "zero-copy", buffer: int = DEFAULT_MEMORY_BUFFER
) -> tuple[MemoryStream, MemoryStream]:
    """Two connected streams; what one sends the other receives."""
    if mode not in ("zero-copy", "bytes", "inline"):
        raise ValueError(f"mode must be 'zero-copy', 'bytes' or 'inline', not {mode!r}")
    a_send, b_recv = trio.open_memory_channel[Any](buffer)
    b_send, a_recv = trio.open_memory_channel[Any](buffer)
    a, b = MemoryStream(a_send, a_recv, mode), MemoryStream(b_send, b_recv, mode)
    a._other, b._other = b, a
    return a, b
