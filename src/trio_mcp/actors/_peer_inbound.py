"""A peer's inbound side: what the role actor (the *dispatcher*) gives it,
the request being served (:class:`InboundRequest`), and the bookkeeping of
admitted requests and batches."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
import trio
from msgspec import UNSET, Raw, Struct

from ..protocol import InternalError, MethodNotFound, Request, coerce, encode, error_response

if TYPE_CHECKING:
    from ._peer import Peer

__all__ = ["Dispatcher", "InboundRequest", "PlainStarter"]


class Dispatcher(Protocol):
    """What a role actor gives the peer."""

    async def handle_request(self, request: InboundRequest) -> Any:
        """Return the result (Struct, builtins or Raw) or raise McpError."""

    async def handle_notification(self, method: str, params: Any) -> None:
        """Handle one notification, in arrival order."""

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        """Optionally handle a notification synchronously in the read loop
        (for state changes that must precede later requests, such as
        ``notifications/initialized``). Return True if handled. Must not block."""


#: A dispatcher's optional plain path, its method ``start_plain(request)``:
#: the handler of ``request`` as a coroutine not started yet, or None (the
#: general path: :meth:`Dispatcher.handle_request`). The coroutine returns
#: the result (or raises, as a handler does); it must need nothing of the
#: envelope (:class:`InboundRequest`) the general path makes. Over streams
#: that gather answers the read loop steps it by hand (see ``_peer_pool``):
#: one that finishes without waiting costs no envelope, no in-flight entry
#: and no task switch; one that waits is admitted then and served on as any.
PlainStarter = Callable[[Request], "Coroutine[Any, Any, Any] | None"]


class _NullDispatcher:
    async def handle_request(self, request: InboundRequest) -> Any:
        raise MethodNotFound(f"Method not found: {request.method}")

    async def handle_notification(self, method: str, params: Any) -> None:
        return None

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        return False


class _Batch:
    """The answers of one inbound JSON-RPC batch, gathered into one array."""

    __slots__ = ("replies", "waiting")

    def __init__(self) -> None:
        self.waiting: set[int | str] = set()
        self.replies: list[Any] = []


class _Slot:
    """An admitted inbound request's cancellation state."""

    __slots__ = ("cancellable", "cancelled", "scope")

    def __init__(self, cancellable: bool) -> None:
        self.scope: trio.CancelScope | None = None
        self.cancelled = False
        self.cancellable = cancellable


class _Meta(Struct):
    meta: dict[str, Any] = msgspec.field(default_factory=dict, name="_meta")


def _no_meta(params: Raw) -> bool:
    """Whether raw JSON params surely have no ``_meta`` key (no ``_meta`` in
    the text and no ``\\u`` escape that could spell it): then nothing needs
    decoding (most requests)."""
    text = memoryview(params).tobytes()
    return b"_meta" not in text and b"\\u" not in text


class InboundRequest:
    """A request being served; handed to the dispatcher."""

    __slots__ = ("_meta", "id", "method", "params", "peer")

    def __init__(self, peer: Peer, request: Request) -> None:
        self.peer = peer
        self.id = request.id
        self.method = request.method
        self.params = request.params
        self._meta: dict[str, Any] | None = None

    @property
    def meta(self) -> dict[str, Any]:
        """The request's ``_meta`` object (decoded on first use)."""
        if self._meta is None:
            params = self.params
            if params is UNSET or params is None:
                self._meta = {}
            elif isinstance(params, dict):
                meta = params.get("_meta")
                self._meta = meta if isinstance(meta, dict) else {}
            elif isinstance(params, Struct):
                meta = getattr(params, "meta", UNSET)
                self._meta = meta if isinstance(meta, dict) else {}
            elif type(params) is Raw and _no_meta(params):
                self._meta = {}
            else:
                try:
                    self._meta = coerce(params, _Meta).meta
                except (msgspec.ValidationError, msgspec.DecodeError):
                    self._meta = {}
        return self._meta

    @property
    def progress_token(self) -> int | str | None:
        token = self.meta.get("progressToken")
        return token if type(token) in (int, str) else None

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the caller asked for progress."""
        token = self.progress_token
        if token is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.peer.notify("notifications/progress", params)


def _encodable(out: Any, problem: str) -> Any:
    """``out`` (an answer, or a batch's array of them) with every answer the
    codec cannot write replaced by a -32603 error."""
    if type(out) is not list:
        return error_response(out.id, InternalError(problem))
    fixed = []
    for reply in out:
        try:
            encode(reply)
            fixed.append(reply)
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
            fixed.append(error_response(reply.id, InternalError(problem)))
    return fixed
