"""The bounds of the Streamable HTTP client transport, each a named setting."""

from __future__ import annotations

import attrs

from ..._util import check_positive, numeric_fields

__all__ = ["HttpClientSettings"]


@attrs.frozen(kw_only=True)
class HttpClientSettings:
    """Every bound of the client transport, named. Times in seconds."""

    #: Opening a TCP connection.
    connect_timeout: float = 10.0
    #: A whole POST of a notification or a response (``send`` waits for it).
    post_timeout: float = 30.0
    #: Silence tolerated on an SSE stream before it is treated as broken and
    #: resumed (servers send keep-alive comments more often than this).
    sse_read_timeout: float = 300.0
    #: ``aclose``: the DELETE and the connection shutdown, together.
    close_timeout: float = 1.5
    #: Largest JSON body or SSE event accepted from the server, in bytes.
    max_message_size: int = 4 << 20
    #: Messages received and not yet taken by ``receive``.
    receive_buffer: int = 64
    #: After a POST stream delivered every answer, how long its end may take
    #: to arrive: read to the end, the connection is reused (keep-alive);
    #: abandoned, it is thrown away.
    sse_tail_timeout: float = 1.0
    #: Consecutive failed reconnections of an SSE stream before giving up.
    max_reconnects: int = 5
    #: Delay before reconnecting when the server gave no ``retry`` hint.
    default_retry: float = 1.0
    #: Largest reconnection delay honoured (a server's ``retry`` is capped).
    max_retry: float = 30.0
    #: Open the GET stream after initialization.
    open_get_stream: bool = True
    #: Request POSTs on the wire at once; more wait their turn (in order).
    max_request_posts: int = 64
    #: Requests waiting for their turn; one more is answered at once with
    #: -32001 (ServerOverloaded) instead of being queued.
    max_queued_requests: int = 10_000
    #: Connections of the pool beyond ``max_request_posts``: for the
    #: notification and response POSTs, the GET stream and the DELETE.
    spare_connections: int = 8

    def __attrs_post_init__(self) -> None:
        check_positive(self, numeric_fields(self))
