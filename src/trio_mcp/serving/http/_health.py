"""Health endpoints: ``GET /healthz`` (the process is alive) and
``GET /readyz`` (it takes sessions), both JSON.

Readiness is the app's own (running, not draining nor stopping, below ``max_sessions``)
and, when given, a readiness callback's: a callable (sync or async) returning
a JSON-able mapping whose ``"ready"`` key (default true) says whether the
server is ready; the rest of the mapping is reported as it is (a gateway
reports each backing server there). A callback that fails or takes longer
than ``readiness_timeout`` makes the server not ready.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from ...protocol import encode
from ...transports._asgi import HttpError, Scope, Send, respond

if TYPE_CHECKING:
    from ._app import StreamableHttpApp

__all__ = ["Readiness", "answer_health", "answer_ready"]

log = logging.getLogger("trio_mcp.http.server")

#: A readiness callback: returns (or awaits to) a JSON-able mapping; its
#: ``"ready"`` key (default true) decides ``200`` or ``503``.
Readiness = Callable[[], "Mapping[str, Any] | Awaitable[Mapping[str, Any]]"]

_GET_ONLY = [(b"allow", b"GET")]


def _get_only(scope: Scope) -> None:
    if scope.get("method") not in ("GET", "HEAD"):
        raise HttpError(405, "Method not allowed", headers=_GET_ONLY)


async def answer_health(scope: Scope, send: Send) -> None:
    _get_only(scope)
    await respond(send, 200, b'{"status":"ok"}')


async def answer_ready(app: StreamableHttpApp, scope: Scope, send: Send) -> None:
    _get_only(scope)
    settings = app.settings
    sessions = app.registry.count()
    report: dict[str, Any] = {"ready": True, "sessions": sessions, "maxSessions": settings.max_sessions}
    if app.draining:
        report.update(ready=False, reason="draining")
    elif not app.running:
        report.update(ready=False, reason="not running")
    elif not settings.stateless and sessions >= settings.max_sessions:
        report.update(ready=False, reason="at max_sessions")
    check = app.readiness
    if check is not None:
        try:
            with trio.fail_after(settings.readiness_timeout):
                found = check()
                if inspect.isawaitable(found):
                    found = await found
            details = msgspec.to_builtins(found)
            if not isinstance(details, dict):
                raise TypeError(f"the readiness callback returned {type(found).__name__}, not a mapping")
        except trio.TooSlowError:
            details = {"ready": False, "reason": f"readiness check took over {settings.readiness_timeout} s"}
        except Exception as exc:
            log.exception("readiness callback failed")
            details = {"ready": False, "reason": f"readiness check failed: {exc!r}"}
        ready = bool(details.pop("ready", True)) and report["ready"]
        report.update(details)
        report["ready"] = ready
    await respond(send, 200 if report["ready"] else 503, encode(report))
