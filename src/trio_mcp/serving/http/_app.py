"""The Streamable HTTP server transport (MCP 2025-03-26 .. 2025-11-25).

:class:`StreamableHttpApp` is an ASGI 3 application serving one MCP
endpoint; :class:`HttpServer` runs it on hypercorn's trio worker.

One endpoint, three methods:

* ``POST`` carries one JSON-RPC message (or, in 2025-03-26, a batch).
  Notifications and responses are accepted with ``202``. Requests are
  answered on the same HTTP response, as ``application/json`` or as a
  ``text/event-stream`` on which the handler's own notifications and
  server-to-client requests travel before the answer (see *Routing*).
* ``GET`` opens the session's standalone SSE stream for server-initiated
  messages (one at a time: ``409`` while one is open), or, with
  ``Last-Event-ID``, resumes a broken stream.
* ``DELETE`` ends the session.

Sessions
--------
``initialize`` creates a session: a :class:`~trio_mcp.server.ServerSession`
over a per-session :class:`MessageStream` (:class:`HttpSessionStream`); its
id comes back in ``Mcp-Session-Id`` and every later request must carry it
(``400`` without, ``404`` once it is unknown or ended: the client then
initializes again). ``MCP-Protocol-Version`` is checked on every later
request (``400`` for a version this server does not speak; absent means
the negotiated one). A request answered as JSON is served in its POST's own
ASGI task when nothing is queued ahead of it in its session (no hop to a
worker task; :meth:`HttpSessionStream.serve_here`), inside the POST's one
cancel scope: its client going away (watched from ``disconnect_watch_delay``
on) or cancelling it ends it, and its answer is written straight from the
POST. Stateless requests of the 2026-07-28 era (version in
the header or in ``_meta``, no session id) are served in the POST's own
ASGI task by the app's one stateless server session (no session actor per
request; :meth:`~trio_mcp.actors.Peer.serve_inline`): the handler's
notifications go on that POST's stream (JSON-only answers drop them, and
count them), the client going away cancels the handler, and a
server-to-client request fails it at once. ``subscriptions/listen``, and
every stateless request of an app made per session, gets a fresh session
that lives as long as that one POST, everything it sends travelling on
that POST's stream.
Their headers must mirror the body (``Mcp-Method``, ``Mcp-Name``…; a
``tools/call`` also the ``Mcp-Param-*`` of the tool's ``x-mcp-header``
annotations, checked against the input schema the app lists for that tool):
``400`` and -32020 otherwise (see :mod:`._headers`).

Routing (server to client)
--------------------------
The session's ``send`` routes every message:

* a response goes to the POST that carried its request;
* a request or notification sent while a request handler runs (the peer
  sets :data:`~trio_mcp.transports.RELATED_REQUEST`) goes on that request's
  POST stream, which becomes an SSE stream if it was not one yet;
* anything else, or a related message whose POST is answered as JSON, goes
  to the standalone (GET) stream.

Response format: with ``json_response=None`` (the default, *auto*) a POST is
answered as JSON when the answer comes first, and upgraded to SSE when a
related message comes first (if the client accepts SSE); ``True`` always
answers JSON (related messages go to the GET stream); ``False`` always
answers SSE.

Buffering and bounds (all in :class:`HttpServerSettings`)
---------------------------------------------------------
* POST bodies enter the session through a bounded queue
  (``inbound_queue``); a POST that cannot enqueue within
  ``enqueue_timeout`` gets ``503``.
* Each SSE connection has a bounded event queue (``sse_buffer``). A
  ``send`` waits for room at most ``write_timeout``; a client that reads
  too slowly loses its connection (it resumes from the event store), it
  never blocks the session for longer.
* Every event of an SSE stream is stored first in the :class:`EventStore`
  (bounded; default :class:`MemoryEventStore`), which gives it its id.
  A GET with ``Last-Event-ID`` replays what followed on that stream and
  then carries on live if the stream is still open (a POST stream whose
  connection broke keeps collecting its handler's messages and its answer).
  A resuming connection takes the stream over from an old one the server
  has not seen die yet (no ``409`` for a resumption). A completed POST
  stream stays in the store ``completed_stream_retention`` seconds (a
  write to a dead connection succeeds: the client may still resume), and
  a session's streams are forgotten when it ends. SSE streams start with
  a priming event (an id, no data) and a ``retry`` hint from 2025-11-25
  on; a handler can end its POST's HTTP response early with
  :func:`close_sse_stream` (SEP-1699 polling) and the client resumes.
* Without a GET stream: messages for the standalone stream wait in a
  bounded backlog (``standalone_backlog``, oldest dropped first and
  counted) until the first GET stream opens, which receives them. Once a
  GET stream has been open and is gone, messages are kept only in the event
  store, for a resumption with ``Last-Event-ID``; a fresh GET (no
  ``Last-Event-ID``) starts a new stream. Without an event store they are
  dropped and counted (``statistics().messages_dropped``).

Security: ``Host`` and ``Origin`` are checked against allow-lists (default:
the loopback names, any port): ``421`` for a host, ``403`` for an origin
not allowed. :class:`HttpServer` binds 127.0.0.1 by default.

Shutdown: closing the app (``aclose`` / cancelling ``run``) ends every
session and every SSE stream at once; :meth:`HttpServer.stop` then stops
the listener within ``graceful_timeout``. Draining first
(:meth:`StreamableHttpApp.drain`, :meth:`HttpServer.drain`, SIGTERM to
``trio-mcp run``) lets the work under way finish: the registry is told
(:meth:`SessionRegistry.drain`), new work (``initialize``, a sessionless
request, a new GET stream) gets ``503`` with ``Retry-After`` and
``/readyz`` answers ``503``, the GET streams' connections end (clients
reconnect, through a load balancer to another node) and so do the
``subscriptions/listen`` streams (clients listen again), and requests in
sessions are still served while the responses in flight end, within a bound.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import trio

from ...actors._server import ServerSession
from ...auth.resource import ResourceServer
from ...protocol import HANDSHAKE_VERSIONS
from ...transports._asgi import AsgiApp, HttpError, Receive, Scope, Send, error_body, header_map, respond
from ._auth import HttpAuth
from ._config import (
    DEFAULT_STORE,
    SESSION_HEADER,
    VERSION_HEADER,
    HttpServerSettings,
    HttpServerStatistics,
)
from ._cors import is_preflight, preflight_headers, with_cors
from ._eventstore import EventStore, MemoryEventStore
from ._get import handle_delete, handle_get
from ._health import Readiness, answer_health, answer_ready
from ._metrics import Metrics, install_metrics
from ._post import handle_post
from ._routes import AsgiCallable, HostCheck, Routes
from ._session import HttpSessionStream
from ._sessions import ClusterHook, ExpiryPolicy, MemorySessionRegistry, SessionRegistry
from ._stateless import StatelessPath
from ._watch import DisconnectWatch

__all__ = ["AsgiCallable", "StreamableHttpApp"]

log = logging.getLogger("trio_mcp.http.server")


class StreamableHttpApp(AsgiApp):
    """The Streamable HTTP endpoint as an ASGI 3 application.

    ``app`` is a :class:`~trio_mcp.server.LowLevelServer` (or
    :class:`~trio_mcp.server.MCPServer`) shared by all sessions, or a
    zero-argument factory returning a fresh one per session.

    Sessions run in the nursery of :meth:`run` (``await
    nursery.start(app.run)``); when served by a plain ASGI server the app
    runs itself inside the ASGI lifespan instead.

    Besides the MCP endpoint it answers ``GET /healthz`` and ``GET /readyz``
    (see :mod:`._health`; ``readiness`` is an optional callback adding to
    the readiness report), and the custom ``routes``: ASGI apps by path
    (``"/path"`` exactly, or every path under ``"/prefix/"``), also added
    with :meth:`mount`. Every route passes the same ``Host`` and ``Origin``
    checks as the MCP endpoint.

    ``auth``: a :class:`~trio_mcp.auth.resource.ResourceServer` makes the
    endpoint an OAuth 2.1 resource server (see :mod:`._auth`); its
    ``resource`` URI must be set (:class:`HttpServer` fills in its own URL).

    ``metrics``: ``True`` (a fresh :class:`~trio_mcp.observability.Metrics`)
    or a ``Metrics`` of your own: the app's requests are counted and
    ``GET /metrics`` (``settings.metrics_path``) answers them in the
    Prometheus text format, with the sessions, SSE streams, queues and
    refusals of this server (see :mod:`._metrics`). Off by default.
    """

    def __init__(
        self,
        app: Any,
        *,
        settings: HttpServerSettings | None = None,
        event_store: EventStore | None | str = DEFAULT_STORE,
        registry: SessionRegistry | None = None,
        routes: Mapping[str, AsgiCallable] | None = None,
        readiness: Readiness | None = None,
        auth: ResourceServer | None = None,
        metrics: Metrics | bool = False,
        **options: Any,
    ) -> None:
        if settings is None:
            settings = HttpServerSettings(**options)
        elif options:
            settings = attrs.evolve(settings, **options)
        self.settings = settings
        if hasattr(app, "start_session") and hasattr(app, "request_handlers"):
            self._shared: Any = app
            self._factory: Callable[[], Any] | None = None
        elif callable(app):
            self._shared = None
            self._factory = app
        else:
            raise TypeError("app must be a LowLevelServer / MCPServer or a factory returning one")
        if isinstance(event_store, str):
            if event_store != DEFAULT_STORE:
                raise ValueError(f"event_store must be an EventStore, None or {DEFAULT_STORE!r}")
            self.event_store: EventStore | None = MemoryEventStore()
        else:
            self.event_store = event_store
        self._hosts = HostCheck(settings.allowed_hosts, settings.allowed_origins)
        #: Where sessions are found by id (:class:`MemorySessionRegistry` by default).
        self.registry: SessionRegistry = MemorySessionRegistry() if registry is None else registry
        #: Shares sessions with other processes (:mod:`trio_mcp.serving.cluster`); None: alone.
        self.cluster: ClusterHook | None = None
        self._nursery: trio.Nursery | None = None
        self._running = False
        self._closed = False
        self._draining = False
        self._drained = False
        #: The sessions of open ``subscriptions/listen`` streams (a drain ends them).
        self.listening: set[HttpSessionStream] = set()
        self._stop = trio.Event()
        self._lifespan_ready = trio.Event()
        #: Completed streams to forget, three items each (deadline, session,
        #: stream id) rather than a tuple each: a busy SSE server keeps tens of
        #: thousands, and the collector walks every container it keeps.
        self._retained: deque[Any] = deque()
        self._retained_wakeup = trio.Event()
        self._dropped = 0
        self._created = 0
        self._expired = 0
        self._evicted = 0
        self._refused = 0
        #: POSTs refused with 503 (their session's inbound queue stayed full).
        self.posts_refused = 0
        #: When unused sessions end (see :class:`SessionRegistry`).
        self.expiry = ExpiryPolicy(settings.session_idle_timeout, settings.handshake_timeout)
        self._sse_connections = 0
        self._pumps = 0
        self._pumps_done = trio.Event()
        #: Watches the clients of slow POSTs for going away (see :mod:`._watch`).
        self.watch = DisconnectWatch(settings.disconnect_watch_delay)
        #: Stateless requests (2026-07-28, and all of them with ``stateless=True``).
        self.stateless = StatelessPath(self)
        #: Adds to the ``/readyz`` report (see :mod:`._health`).
        self.readiness = readiness
        #: The custom routes (see :meth:`mount`).
        self.routes = Routes((settings.path, settings.health_path, settings.ready_path))
        for path, route in (routes or {}).items():
            self.mount(path, route)
        #: OAuth 2.1 resource server checks (see :mod:`._auth`), or None.
        self.auth = None if auth is None else HttpAuth(auth, self)
        if self.auth is not None:
            for path in self.auth.metadata_paths():
                self.mount(path, self.auth.serve_metadata)

        #: Prometheus metrics (None: off), served at ``settings.metrics_path``.
        self.metrics: Metrics | None = None
        if metrics:
            self.metrics = install_metrics(self, Metrics() if metrics is True else metrics)

    def mount(self, path: str, app: AsgiCallable) -> None:
        """Serve the ASGI app ``app`` at ``path`` (exactly), or at every path
        under it when ``path`` ends with ``/``. It receives ``http`` scopes only,
        after the ``Host`` and ``Origin`` checks."""
        self.routes.mount(path, app)

    @property
    def running(self) -> bool:
        """Whether the app hosts sessions now (started, not stopping)."""
        return self._nursery is not None and not self._closed

    @property
    def draining(self) -> bool:
        """Whether :meth:`drain` was called: no new work is taken."""
        return self._draining

    def check_taking_work(self) -> None:
        """``503`` unless the app takes new work (sessions, sessionless
        requests, GET streams): not running, or draining (then with
        ``Retry-After``: another node, or this one restarted, will)."""
        if self._draining:
            retry = str(max(1, round(self.settings.retry_interval)))
            raise HttpError(
                503,
                "Service Unavailable: this server is shutting down; retry (on another node)",
                headers=[(b"retry-after", retry.encode())],
            )
        if not self.running:
            raise HttpError(503, "Server is not running")

    # ------------------------------------------------------------ lifecycle

    async def run(
        self, *, task_status: trio.TaskStatus[StreamableHttpApp] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Host the sessions until :meth:`aclose` (or cancellation)."""
        if self._running:
            raise RuntimeError("a StreamableHttpApp runs once at a time")
        self._running = True
        if self.settings.stateless and self._shared is None:
            assert self._factory is not None
            self._shared = self._factory()  # no sessions: one app serves every request
        try:
            async with trio.open_nursery() as nursery:
                if self._shared is not None:
                    nursery.start_soon(self._hold_lifespan, self._shared)
                    await self._lifespan_ready.wait()
                await nursery.start(self.watch.run)
                self._nursery = nursery
                if self.expiry.period is not None:
                    nursery.start_soon(self._reaper)
                nursery.start_soon(self._janitor)
                task_status.started(self)
                await self._stop.wait()
                nursery.cancel_scope.cancel()
        finally:
            self._closed = True
            self._nursery = None
            self.watch.close()
            for session in self.registry.local():
                self.end_session(session, "server stopped")
            self.stateless.end()
            self._running = False

    async def _hold_lifespan(self, app: Any) -> None:
        async with app.running():
            self._lifespan_ready.set()
            await trio.sleep_forever()

    async def aclose(self) -> None:
        """End every session and SSE stream, and stop :meth:`run`."""
        self._closed = True
        for session in self.registry.local():
            self.end_session(session, "server stopped")
        self.stateless.end()
        self._stop.set()
        await trio.lowlevel.checkpoint()

    def start_draining(self) -> None:
        """Refuse new work from now on (``503``; :meth:`drain` does the rest)."""
        self._draining = True

    async def drain(self, timeout: float) -> None:
        """Stop taking new work and let the work under way end (see the
        module): the registry's :meth:`~SessionRegistry.drain` (bounded by
        ``store_timeout``), the GET streams' connections ended, then a wait
        of at most ``timeout`` seconds for the responses in flight. The app
        keeps running (call :meth:`aclose` after)."""
        if self._drained:
            return
        self._drained = self._draining = True
        try:
            with trio.move_on_after(self.settings.store_timeout):
                await self.registry.drain()
        except Exception:
            log.exception("the session registry failed to drain")
        for session in self.registry.local():
            standalone = session.standalone
            if standalone.conn is not None:
                standalone.detach(standalone.conn)  # its queued events still go out
        for session in list(self.listening):
            self.end_session(session, "server draining")  # listen streams are never answered
        with trio.move_on_after(timeout):
            await self.wait_responses_done()

    async def wait_responses_done(self) -> None:
        """After :meth:`aclose` or :meth:`drain`: wait until every response
        in flight has ended."""
        if self._pumps == 0:
            await trio.lowlevel.checkpoint()
            return
        while self._pumps:
            if self._pumps_done.is_set():  # set when an earlier count reached 0
                self._pumps_done = trio.Event()
            await self._pumps_done.wait()

    def statistics(self) -> HttpServerStatistics:
        return HttpServerStatistics(
            sessions=self.registry.count(),
            sse_connections=self._sse_connections,
            messages_dropped=self._dropped,
            sessions_created=self._created,
            sessions_expired=self._expired,
            sessions_evicted=self._evicted,
            sessions_refused=self._refused,
            posts_refused=self.posts_refused,
        )

    async def terminate_session(self, session_id: str) -> bool:
        """End a session as if its client had sent DELETE; False if unknown."""
        session = await self.registry.get(session_id)
        if session is None:
            return False
        self.end_session(session, "terminated by the server")
        await trio.lowlevel.checkpoint()
        return True

    def response_started(self) -> None:
        """A streaming response begins (counted, for :meth:`wait_responses_done`)."""
        self._pumps += 1

    def response_ended(self) -> None:
        self._pumps -= 1
        if self._pumps == 0 and (self._closed or self._draining):
            self._pumps_done.set()

    def end_session(self, session: HttpSessionStream, reason: str) -> None:
        """End a session at once (idempotent, never blocks)."""
        if self.registry.remove(session):
            log.debug("session %s ended: %s", session.id, reason)
        session._close()
        if session.cancel_scope is not None:
            session.cancel_scope.cancel()

    def _forget_soon(self, session: HttpSessionStream, stream_id: str) -> None:
        session.stored_streams.discard(stream_id)
        if self.event_store is not None and self._nursery is not None:
            self._nursery.start_soon(self._forget, [stream_id])

    def forget_later(self, session: HttpSessionStream, stream_id: str) -> None:
        """Forget a completed stream after the retention delay (or with its session)."""
        if self.event_store is None or stream_id not in session.stored_streams:
            return
        deadline = trio.current_time() + self.settings.completed_stream_retention
        retained = self._retained
        retained.append(deadline)
        retained.append(session)
        retained.append(stream_id)
        self._retained_wakeup.set()

    async def _janitor(self) -> None:
        """Forget completed streams once retained: all those due at each wake-up
        (every eighth of the retention at most), not one wake-up per stream."""
        retained = self._retained
        tick = min(1.0, self.settings.completed_stream_retention / 8)
        while True:
            if not retained:
                self._retained_wakeup = trio.Event()
                await self._retained_wakeup.wait()
                continue
            await trio.sleep_until(retained[0] + tick)
            now = trio.current_time()
            due = []
            take = retained.popleft
            while retained and retained[0] <= now:
                take()
                session: HttpSessionStream = take()
                stream_id: str = take()
                if stream_id in session.stored_streams:
                    session.stored_streams.discard(stream_id)
                    due.append(stream_id)
            if due:
                await self._forget(due)

    async def _forget(self, stream_ids: Iterable[str]) -> None:
        store = self.event_store
        if store is None:
            return
        with trio.move_on_after(self.settings.store_timeout):
            for stream_id in stream_ids:
                await store.forget_stream(stream_id)

    async def _reaper(self) -> None:
        period = self.expiry.period
        assert period is not None
        while True:
            await trio.sleep(period)
            for session, reason in await self.registry.expired(trio.current_time(), self.expiry):
                self._expired += 1
                self.end_session(session, reason)

    async def make_room(self) -> None:
        """Before a new session: at ``max_sessions``, end the idlest one
        (:meth:`SessionRegistry.idlest`); ``503`` when every one is busy."""
        self.check_taking_work()
        if self.registry.count() < self.settings.max_sessions:
            return
        victim = await self.registry.idlest()
        if victim is None:
            self._refused += 1
            raise HttpError(503, "Too many sessions")
        self._evicted += 1
        self.end_session(victim, "evicted for a new session at max_sessions")

    async def start_session(
        self, session_id: str | None, replica: HttpSessionStream | None = None
    ) -> HttpSessionStream:
        """Start a session (``None``: one that serves a single stateless
        request). ``replica``: start that one, which the registry does not
        hold: a cluster node's copy of a session owned by another node (see
        :mod:`trio_mcp.serving.cluster`), which gets no broadcasts (its
        owner's session does); :meth:`end_session` ends it."""
        self.check_taking_work()
        nursery = self._nursery
        assert nursery is not None
        session = HttpSessionStream(self, session_id) if replica is None else replica
        try:
            if session_id is not None and replica is None:
                await self.registry.add(session)
                self._created += 1
            session.server_session = await nursery.start(self._session_task, session)
        except BaseException:
            self.end_session(session, "failed to start")
            raise
        detach = None if replica is None else getattr(self._shared, "_detach", None)
        if detach is not None:
            detach(session.server_session)
        return session

    async def _session_task(self, session: HttpSessionStream, *, task_status: trio.TaskStatus[Any]) -> None:
        try:
            with trio.CancelScope() as scope:
                session.cancel_scope = scope
                if session.closed:
                    scope.cancel()
                name = f"http:{(session.id or 'stateless')[:8]}"
                if self._shared is not None:
                    await self._serve_session(self._shared, session, name, task_status)
                else:
                    assert self._factory is not None
                    app = self._factory()
                    async with app.running():
                        await self._serve_session(app, session, name, task_status)
        finally:
            self.end_session(session, "session finished")
            stored, session.stored_streams = list(session.stored_streams), set()
            if stored:
                with trio.CancelScope(shield=True):
                    await self._forget(stored)

    async def _serve_session(
        self, app: Any, session: HttpSessionStream, name: str, task_status: trio.TaskStatus[Any]
    ) -> None:
        server = ServerSession(app, session, limits=app.limits, name=name)
        metrics = self.metrics
        if metrics is None:
            await server.run(task_status=task_status)
            return
        metrics.track(server)
        try:
            await server.run(task_status=task_status)
        finally:
            metrics.untrack(server)

    # ----------------------------------------------------------------- ASGI

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # HTTP is served here rather than in _http: a frame less on every
        # resumption of the request's task.
        if scope["type"] != "http":
            await AsgiApp.__call__(self, scope, receive, send)
            return
        headers = header_map(scope)
        path = scope.get("path")
        settings = self.settings
        try:
            route = None
            if path != settings.path and path not in (settings.health_path, settings.ready_path):
                route = self.routes.find(path)
                if route is None:
                    raise HttpError(404, "Not found")
            if settings.dns_rebinding_protection:
                self._hosts.check(headers.get("host"), headers.get("origin"))
            if route is not None:
                await route(scope, receive, send)
                return
            if path == settings.health_path and path != settings.path:
                await answer_health(scope, send)
                return
            if path == settings.ready_path and path != settings.path:
                await answer_ready(self, scope, send)
                return
            origin = headers.get("origin")
            if origin is not None:
                send = with_cors(send, origin)
            cluster = self.cluster
            if cluster is not None:
                send = await cluster.intercept(scope, receive, send, headers)
                if send is None:
                    return  # served by the cluster (forwarded to another node)
            await self.dispatch(scope, receive, send, headers)
        except HttpError as exc:
            await respond(send, exc.status, error_body(exc.code, exc.message), exc.headers)

    async def dispatch(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        """Serve a request on the MCP endpoint past the checks and the cluster
        hook (which calls it for a request whose body it read first: it then
        passes a ``receive`` that gives that body again). Raises
        :class:`HttpError` for the caller to answer."""
        settings = self.settings
        method = scope.get("method", "GET")
        if self.auth is not None and method != "OPTIONS":
            headers = await self.auth.authenticate(headers)
        if method == "POST":
            await handle_post(self, scope, receive, send, headers)
        elif method == "GET":
            await handle_get(self, receive, send, headers)
        elif method == "DELETE":
            await handle_delete(self, send, headers)
        elif is_preflight(method, headers):
            await respond(send, 204, b"", preflight_headers(headers, settings.cors_max_age))
        else:
            raise HttpError(405, "Method not allowed", headers=[(b"allow", b"GET, POST, DELETE")])

    # ---------------------------------------------------------------- checks

    async def session_for(
        self, headers: dict[str, str], assigned: HttpSessionStream | None = None
    ) -> HttpSessionStream:
        """The session a request names (``400`` without an id, ``404`` unknown,
        ``400`` for a version this server does not speak); ``assigned``: the
        one the cluster hook chose (see :data:`ASSIGNED_SESSION`), not the registry's."""
        session_id = headers.get(SESSION_HEADER)
        if session_id is None:
            raise HttpError(400, "Bad Request: missing Mcp-Session-Id header")
        session = assigned if assigned is not None else await self.registry.get(session_id)
        if session is None:
            raise HttpError(404, "Session not found")
        if self.auth is not None:
            self.auth.claim(session, headers)
        version = headers.get(VERSION_HEADER)
        if version is not None and version.strip() not in HANDSHAKE_VERSIONS:
            raise HttpError(
                400,
                f"Bad Request: unsupported MCP-Protocol-Version {version.strip()!r}; "
                f"supported: {', '.join(HANDSHAKE_VERSIONS)}",
            )
        return session
