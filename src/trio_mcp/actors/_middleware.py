"""Middleware: a chain of async callables around request handling, on which
logging, timing, auth and tracing are built without touching handlers.

Server side (any transport): installed on the app
(``LowLevelServer(..., middleware=[...])`` or ``app.add_middleware(mw)``),
each one is ``async def mw(ctx, call_next)``. ``ctx`` is the request's
:class:`~trio_mcp.actors._server.Context`: ``ctx.method``, ``ctx.params``
(plain JSON values), ``ctx.session``, ``ctx.request_id`` and
``ctx.request_headers`` (the HTTP request's headers, None when the request
did not come over HTTP). ``await call_next()`` runs the rest of the chain and
the handler and returns the result (a wire Struct or a dict) or raises the
error; a middleware may return something else, or raise an
:class:`~trio_mcp.protocol.McpError` to answer with that error without
calling the handler (short-circuit). Any other exception becomes an
internal-error answer (-32603), as a handler's would; the session lives on.
The first middleware is the outermost. ``ping`` is answered by the peer
itself and passes no middleware.

Client side: ``ClientSession(..., middleware=[...])``, each one
``async def mw(call, call_next)`` around every call the session makes
through its API (``call_tool``, ``list_tools``, ``read_resource``…):
``call.method``, ``call.params`` (as the session is about to send them),
``call.session``; ``call_next()`` returns the typed result or raises
(:class:`ClientCall` and ``ClientMiddleware`` are in :mod:`._client_call`:
a server process does not build them).

Without middleware nothing of this runs: a session checks once, when it is
made, whether there is a chain.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._server import Context

__all__ = ["Next", "ServerMiddleware", "run_chain"]

#: What a middleware calls to run the rest of the chain (and the handler).
Next = Callable[[], Awaitable[Any]]
#: ``async def mw(ctx: Context, call_next: Next) -> result``.
ServerMiddleware = Callable[["Context", Next], Awaitable[Any]]


def run_chain(
    chain: Sequence[Callable[[Any, Next], Awaitable[Any]]], subject: Any, last: Next
) -> Awaitable[Any]:
    """Run ``chain`` around ``last`` (await what this returns):
    ``chain[0](subject, next)`` first, the last middleware's ``call_next``
    running ``last()``."""
    if len(chain) == 1:  # the common case (one middleware, e.g. metrics): no frame of ours
        return chain[0](subject, last)

    async def step(index: int) -> Any:
        if index == len(chain):
            return await last()
        return await chain[index](subject, partial(step, index + 1))

    return step(0)
