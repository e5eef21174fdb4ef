"""What the forwarding path (:mod:`._forward`) keeps per route, per forwarded
call and per server session: :class:`Route` (where a public tool name's calls
go, checked by identity), :class:`Call` (one call out: what its server's peer
or tap answers) and :class:`Upstream` (a server session: its peer, writer and
stream tap)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

import msgspec
import outcome

from ..actors._client import ClientSession
from ..actors._connection import Connection
from ..protocol import CallToolResult, ErrorResponse, McpError, Response, TextContent, encode_lines
from ._common import Counts
from ._pacing import Deadlines, Writer
from ._splice import ISSUED, BackendTap, Head, backend_tap

if TYPE_CHECKING:
    from ._forward import ForwardingStream
    from ._gateway import Gateway

__all__ = ["Call", "Route", "Upstream", "failed_call"]

_encode: Final = msgspec.json.Encoder().encode


def failed_call(text: str) -> CallToolResult:
    """A call that failed at the gateway, as the model reads it."""
    return CallToolResult(content=[TextContent(text=text)], is_error=True)


class Route:
    """Where calls of one public tool name go, for one session of its server:
    what :meth:`ForwardingStream._forward` would otherwise look up per call.
    Valid while its server's session, tool list and configuration entry are
    the ones it was made with (three identity checks, once per read of the
    client on the byte path)."""

    __slots__ = (
        "calls",
        "checked",
        "conn",
        "counts",
        "deadline",
        "due",
        "entry",
        "head",
        "heads",
        "ids",
        "peer",
        "public",
        "server",
        "session",
        "tap",
        "timeout",
        "tool",
        "tools",
        "upstream",
    )

    def __init__(
        self,
        public: str,
        server: str,
        tool: str,
        conn: Connection,
        upstream: Upstream,
        gateway: Gateway,
        deadlines: Deadlines,
    ) -> None:
        self.public = public
        self.server = server
        self.conn = conn
        self.session = upstream.session
        self.peer = upstream.peer
        self.upstream = upstream
        self.tools = conn.tools
        self.entry = gateway.entries.get(server)
        self.timeout = gateway.call_timeout(server)
        self.counts = upstream.counts
        #: The tool's name at its server, and the params' JSON up to it.
        self.tool = tool
        self.head = b'{"name":' + _encode(tool)
        #: The server's stream tap (None: its answers come through its peer),
        #: its table of calls, and (for the current read) its ids.
        tap = self.tap = upstream.tap
        self.calls = None if tap is None else tap.calls
        self.ids = None if tap is None else tap.ids
        #: The calls for the server read in this read of the client (the upstream's).
        self.heads = upstream.heads
        #: The deadline queue of its calls, the read it was last checked in
        #: and the deadline of the calls of that read.
        self.due = deadlines.queue(self.timeout)
        self.checked = -1
        self.deadline = 0.0

    def valid(self, gateway: Gateway) -> bool:
        """Its server's session, tool list and configuration entry are the ones it was made with."""
        return (
            self.conn.live_session is self.session
            and self.conn.tools is self.tools
            and gateway.entries.get(self.server) is self.entry
        )

    def forget(self, backend_id: int) -> None:
        """No answer to ``backend_id`` is awaited any more."""
        self.peer.forget(backend_id)
        if self.calls is not None:
            self.calls.pop(backend_id, None)


class Call(msgspec.Struct, eq=False):
    """One forwarded call: what its server's peer delivers the answer to (a
    struct: made without a Python frame, once per call)."""

    front: ForwardingStream
    front_id: int | str
    route: Route
    #: The client's progress token (None: it asked for none).
    token: Any
    backend_id: int = 0
    deadline: float = math.inf
    done: bool = False

    def deliver(self, value: outcome.Outcome[Any]) -> None:
        """The server answered (or its session ended): the client's answer, with its id."""
        if self.done:
            return
        self.done = True
        front = self.front
        calls = front._calls
        ident = self.front_id
        calls.pop(ident, None)
        route = self.route
        if self.token is not None or route.tap is not None:
            route.forget(self.backend_id)  # its progress entry, its entry at the tap
        if type(value) is outcome.Value:
            msg = value.value
            if type(msg) is Response:
                out: Any = Response(id=ident, result=msg.result)
            else:
                out = ErrorResponse(id=ident, error=msg.error)
                route.counts.errors += 1
        else:
            error = value.error  # type: ignore[attr-defined]
            why = error.message if isinstance(error, McpError) else str(error)
            out = Response(id=ident, result=failed_call(f"server {route.server!r} is unavailable: {why}"))
            route.counts.errors += 1
        front._writer.send_soon(out, alone=not calls)

    def deliver_progress(self, item: tuple[float, Any, Any], limit: int) -> bool:
        return self.done or self.front._relay_progress(self, item)


class Upstream:
    """One server session as the forwarding path sees it: its peer, a writer,
    its stream's tap, its counts and the calls for it read in this read of
    the client (``heads``, written at the read's end)."""

    __slots__ = ("counts", "heads", "peer", "session", "tap", "writer")

    def __init__(self, session: ClientSession, counts: Counts) -> None:
        self.session = session
        self.peer = session.peer
        self.writer = Writer(session.peer.stream)
        self.tap: BackendTap | None = backend_tap(session.peer)
        self.counts = counts
        self.heads: list[Head] = []

    def flush(self) -> None:
        """Write the calls of this read to the server (the byte path)."""
        heads = self.heads
        n = len(heads)
        self.counts.calls += n
        self.writer.send_data(encode_lines(heads))
        heads.clear()
        tap = self.tap
        if tap is not None:
            tap.issued += n
            if tap.issued > ISSUED:
                tap.restart()
