"""Seeing a server's notifications in the order it sent them.

A client session hands log messages to a notification worker task and a
call's progress to its caller, so what a command prints from those callbacks
can come out after the result it belongs to. :class:`ObservedStream` wraps
the client's transport stream and passes every notification to a sync
callback as the session's read loop receives it: in the server's order, and
before the response that follows it reaches the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..protocol import Frame, Notification
from ..transports import MessageStream

__all__ = ["NotificationObserver", "ObservedStream"]

#: ``observer(method, params)``: called in the read loop; must not block.
NotificationObserver = Callable[[str, Any], None]


class ObservedStream:
    """A :class:`~trio_mcp.transports.MessageStream` that shows every received
    notification to ``observer`` before the session gets it.

    Only ``send``, ``receive`` and ``aclose`` are offered: the wrapped stream's
    fast paths (``receive_nowait``, inline serving) would bypass the observer."""

    def __init__(self, stream: MessageStream, observer: NotificationObserver) -> None:
        self._stream = stream
        self._observer = observer

    async def send(self, message: Any) -> None:
        await self._stream.send(message)

    async def receive(self) -> Frame:
        frame = await self._stream.receive()
        for item in frame if type(frame) is list else (frame,):
            if type(item) is Notification:
                self._observer(item.method, item.params)
        return frame

    async def aclose(self) -> None:
        await self._stream.aclose()
