""":class:`HttpServer`: a :class:`StreamableHttpApp` served by hypercorn's trio
connections (see :mod:`._hypercorn`)."""

from __future__ import annotations

import gc
import logging
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from ...auth.resource import ResourceServer
from ...transports._base import host_in_url
from ...transports._server_info import ServerInfo
from ...transports.http._security import LOCAL_HOSTS, WILDCARD_BINDS, wildcard_hosts
from ._app import AsgiCallable, StreamableHttpApp
from ._config import DEFAULT_STORE, HttpServerInfo, HttpServerSettings, HttpServerStatistics
from ._eventstore import EventStore
from ._health import Readiness
from ._metrics import Metrics
from ._sessions import SessionRegistry

__all__ = ["HttpServer"]


class HttpServer:
    """An actor serving an MCP app over Streamable HTTP with hypercorn.

    ``await nursery.start(server.run)`` returns an :class:`HttpServerInfo`
    with the bound port (``port=0`` picks a free one). :meth:`stop` (or
    cancelling ``run``) ends every session and stream, then the listener.

    Options are :class:`HttpServerSettings` fields (or ``settings=``);
    ``routes``, ``readiness``, ``registry``, ``event_store``, ``metrics`` and
    ``auth`` (a :class:`~trio_mcp.auth.resource.ResourceServer`: the server is
    an OAuth 2.1 resource server; without its ``resource``, the URL served is
    the resource URI) are those of :class:`StreamableHttpApp`. ``cluster`` (a
    :class:`~trio_mcp.serving.cluster.RedisCluster`) shares the sessions with
    other processes; without one, the ``redis_url`` setting makes one (with
    the ``node_id`` setting). Without ``allowed_hosts``, the server answers
    the loopback names; binding a specific address adds that address; a
    wildcard bind (``0.0.0.0``, ``::``) adds any IP address and this
    machine's host names (:func:`wildcard_hosts`): pass ``allowed_hosts``
    (``"*"`` for any) to answer other names, such as a DNS name or the one a
    proxy forwards.

    ``fd``: serve the listening socket with this file descriptor (bound by
    a parent process that shares it with several worker processes) instead
    of binding ``host:port``. :meth:`drain` stops gracefully: the work under
    way gets ``drain_timeout`` seconds to end (see :meth:`StreamableHttpApp.drain`).

    ``freeze_heap``: once listening, move every object allocated so far (the
    imports, the app's set-up) out of the garbage collector's reach
    (``gc.freeze()``), as the stdio server does: its full collections then
    walk only what serving allocates. For a process that is the server (the
    CLI sets it); off by default, since it affects the whole process.
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str = "/mcp",
        settings: HttpServerSettings | None = None,
        event_store: EventStore | None | str = DEFAULT_STORE,
        registry: SessionRegistry | None = None,
        routes: Mapping[str, AsgiCallable] | None = None,
        readiness: Readiness | None = None,
        auth: ResourceServer | None = None,
        metrics: Metrics | bool = False,
        graceful_timeout: float = 2.0,
        drain_timeout: float = 10.0,
        fd: int | None = None,
        cluster: Any = None,
        freeze_heap: bool = False,
        **options: Any,
    ) -> None:
        if auth is not None and auth.resource is None and host in WILDCARD_BINDS:
            raise ValueError(
                "bound to every interface, the server cannot tell its public URL: "
                "give the ResourceServer its resource URI"
            )

        if not drain_timeout >= 0:
            raise ValueError(f"drain_timeout must be >= 0, not {drain_timeout!r}")
        if settings is None:
            if "allowed_hosts" not in options:
                if host in WILDCARD_BINDS:
                    options["allowed_hosts"] = wildcard_hosts()
                elif host not in ("127.0.0.1", "localhost", "::1"):
                    options["allowed_hosts"] = (*LOCAL_HOSTS, host_in_url(host))
            settings = HttpServerSettings(path=path, **options)
        else:
            if path != "/mcp":
                options["path"] = path
            if options:
                settings = attrs.evolve(settings, **options)
        self.asgi = StreamableHttpApp(
            app,
            settings=settings,
            event_store=event_store,
            registry=registry,
            routes=routes,
            readiness=readiness,
            auth=auth,
            metrics=metrics,
        )
        if cluster is None and settings.redis_url is not None:
            from ..cluster import ClusterSettings, RedisCluster

            cluster_settings = ClusterSettings(url=settings.redis_url)
            if settings.node_id is not None:
                cluster_settings = attrs.evolve(cluster_settings, node_id=settings.node_id)
            cluster = RedisCluster(cluster_settings)
        #: The cluster backend (None: this process alone).
        self.cluster = cluster
        self.host = host
        self.port = port
        self.graceful_timeout = graceful_timeout
        self.drain_timeout = drain_timeout
        self.fd = fd
        self.freeze_heap = freeze_heap
        self.info: HttpServerInfo | None = None
        self._draining = False
        self._stop = trio.Event()
        self._listener_stop = trio.Event()

    @property
    def url(self) -> str:
        if self.info is None:
            raise RuntimeError("the server is not running yet")
        return self.info.url

    def mount(self, path: str, app: AsgiCallable) -> None:
        """Serve the ASGI app ``app`` at ``path`` (see :meth:`StreamableHttpApp.mount`)."""
        self.asgi.mount(path, app)

    def stop(self) -> None:
        """Ask ``run`` to end (graceful; returns at once)."""
        self._stop.set()

    def drain(self) -> float:
        """Ask ``run`` to drain, then end (returns at once): no new work is
        taken, the GET streams' connections end, the responses in flight
        get ``drain_timeout`` seconds (see :meth:`StreamableHttpApp.drain`).
        Returns the bound, in seconds, within which ``run`` then ends."""
        self._draining = True
        self.asgi.start_draining()
        self._stop.set()
        return self.asgi.settings.store_timeout + self.drain_timeout + self.graceful_timeout + 2.0

    async def run(self, *, task_status: trio.TaskStatus[HttpServerInfo] = trio.TASK_STATUS_IGNORED) -> None:
        from hypercorn.config import Config

        from ._hypercorn import serve

        config = Config()
        host = self.host
        config.bind = [f"{host_in_url(host)}:{self.port}" if self.fd is None else f"fd://{self.fd}"]
        config.graceful_timeout = self.graceful_timeout
        config.accesslog = None
        config.errorlog = logging.getLogger("trio_mcp.http.hypercorn")
        async with trio.open_nursery() as nursery:
            if self.cluster is not None:
                await nursery.start(self.cluster.run, self.asgi)
            await nursery.start(self.asgi.run)
            binds = await nursery.start(serve, self.asgi, config, self._listener_stop.wait)
            port = _port_of(binds[0]) if binds else self.port
            self.info = ServerInfo.at("http", host, port, self.asgi.settings.path)
            if self.asgi.auth is not None:
                self.asgi.auth.bind(self.info.url)
            if self.freeze_heap:
                gc.freeze()
            task_status.started(self.info)
            await self._stop.wait()
            if self._draining:
                await self.asgi.drain(self.drain_timeout)
            # End every session and SSE response first, then stop hypercorn,
            # which closes its (now idle) connections; all within a bound.
            nursery.cancel_scope.deadline = trio.current_time() + self.graceful_timeout + 1.0
            if self.cluster is not None:
                await self.cluster.drain()
            await self.asgi.aclose()
            with trio.move_on_after(self.graceful_timeout / 2):
                await self.asgi.wait_responses_done()
            self._listener_stop.set()

    def statistics(self) -> HttpServerStatistics:
        return self.asgi.statistics()


def _port_of(bind: str) -> int:
    return int(bind.rpartition(":")[2])
