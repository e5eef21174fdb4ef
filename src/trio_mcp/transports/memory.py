"""In-memory transport: a connected pair of message streams.

Two modes:

* ``"zero-copy"`` — Structs are passed through as they are. Fastest; the
  receiver's cached decoders accept instances as well as raw JSON.
  Payloads are shared, not copied: treat them as immutable.
* ``"bytes"`` — every message is encoded and decoded exactly as on a wire.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import trio

from ..protocol import Frame, decode, encode
from ._base import TransportClosed

__all__ = ["MemoryStream", "memory_pair", "DEFAULT_MEMORY_BUFFER"]

#: Messages buffered per direction before ``send`` blocks (backpressure).
DEFAULT_MEMORY_BUFFER: Final = 64

Mode = Literal["zero-copy", "bytes"]


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

    async def send(self, message: Any) -> None:
        item = encode(message) if self._bytes else message
        try:
            # Room in the buffer: deliver without a schedule point (the
            # caller awaits its reply next anyway); full: wait (backpressure).
            self._send.send_nowait(item)
        except trio.WouldBlock:
            try:
                await self._send.send(item)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise TransportClosed("in-memory peer closed") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise TransportClosed("in-memory peer closed") from None

    async def receive(self) -> Frame:
        try:
            item = await self._receive.receive()
        except trio.ClosedResourceError:
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
        await self._send.aclose()
        await self._receive.aclose()

    def statistics(self) -> dict[str, int]:
        s = self._send.statistics()
        return {"buffered": s.current_buffer_used, "buffer": int(s.max_buffer_size)}


def memory_pair(
    *, mode: Mode = "zero-copy", buffer: int = DEFAULT_MEMORY_BUFFER
) -> tuple[MemoryStream, MemoryStream]:
    """Two connected streams; what one sends the other receives."""
    if mode not in ("zero-copy", "bytes"):
        raise ValueError(f"mode must be 'zero-copy' or 'bytes', not {mode!r}")
    a_send, b_recv = trio.open_memory_channel[Any](buffer)
    b_send, a_recv = trio.open_memory_channel[Any](buffer)
    return MemoryStream(a_send, a_recv, mode), MemoryStream(b_send, b_recv, mode)
