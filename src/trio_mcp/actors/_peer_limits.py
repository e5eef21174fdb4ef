"""The bounds of a peer (:class:`PeerLimits`, all named) and the refusal of
an oversized batch (its counters, :class:`PeerStatistics`, are in
:mod:`._peer_statistics`, imported when first asked for)."""

from __future__ import annotations

from typing import Any

import attrs

from .._util import DEFAULT_WARNING_INTERVAL, check_positive, numeric_fields
from ..protocol import ErrorResponse, InvalidRequest, error_response

__all__ = ["PeerLimits", "oversized_batch"]


@attrs.frozen(kw_only=True)
class PeerLimits:
    """Every bound of a peer, named. All are counts of messages unless noted."""

    #: Handler workers serving inbound requests at once.
    max_concurrent_handlers: int = 64
    #: Inbound requests waiting for a worker; one more is answered at once
    #: with ServerOverloaded (-32001) instead of being queued.
    max_queued_requests: int = 256
    #: Inbound notifications waiting for the (single, in-order) notification
    #: worker; one more is dropped and counted in ``notifications_dropped``.
    #: Also bounds the progress notifications waiting for one caller's
    #: ``on_progress`` callback.
    max_queued_notifications: int = 1024
    #: Error answers produced by the read loop (parse errors, overload)
    #: waiting to be written; when full, the read loop stops reading until
    #: there is room (the other side is not reading our answers), counted in
    #: ``reads_paused``. No answer is ever dropped.
    max_queued_replies: int = 256
    #: Messages in one inbound JSON-RPC batch; a larger batch is refused at
    #: once with one -32600 error (id null) and none of it is served.
    max_batch_items: int = 1024
    #: Seconds a shielded ``notifications/cancelled`` send may take.
    cancel_send_timeout: float = 1.0
    #: Seconds between two log lines about the same repeated problem (dropped
    #: notifications): the ones in between are counted and summarized.
    warning_interval: float = DEFAULT_WARNING_INTERVAL
    #: Seconds in-flight handlers may run on after the other side closed its
    #: end cleanly (EOF) before they are cancelled.
    drain_grace: float = 2.0
    #: Seconds ``aclose`` may spend closing the transport.
    close_timeout: float = 2.0

    def __attrs_post_init__(self) -> None:
        check_positive(self, numeric_fields(self))


def oversized_batch(items: list[Any], limit: int) -> ErrorResponse | None:
    """The one error that refuses a JSON-RPC batch of more than ``limit``
    messages (:attr:`PeerLimits.max_batch_items`), or None if it is accepted.
    Transports that gather batches themselves (Streamable HTTP) use it too."""
    if len(items) <= limit:
        return None
    return error_response(
        None,
        InvalidRequest(f"Invalid Request: a batch of {len(items)} messages; at most {limit} are accepted"),
    )
