"""How ``trio-mcp run`` and ``trio-mcp gateway`` serve: the transport, the
address, and the options of the network servers.

Allowed ``Host`` names (DNS-rebinding protection) are the loopback names,
plus the bound address when it is a specific one; bound to every interface
(``--host 0.0.0.0`` or ``::``), also any IP address and this machine's host
names. ``--allowed-host NAME`` adds a name (``'*'``: any), as the names a
proxy or a DNS record give the server must be named. ``--allowed-origin``
adds a browser origin to the loopback ones (CORS is answered for them). The
names in force are printed at start-up, after the line with the URL.

``-t http --redis URL`` (or the environment variable ``TRIO_MCP_REDIS_URL``)
makes this process one node of a cluster sharing its sessions through Redis
(see :mod:`trio_mcp.serving.cluster`; the ``redis`` extra): run several
behind any load balancer, no stickiness needed.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
from collections.abc import Mapping
from typing import Any, NoReturn

import attrs

from ._auth_options import AuthOptions, auth_options

__all__ = ["KEYS_ENV", "ServeOptions", "gateway_readiness", "serve", "serving_options", "usage_error"]

TRANSPORTS = ("stdio", "http", "sse", "ws")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Addresses that bind every interface (as ``transports.http._security.WILDCARD_BINDS``,
#: which is not imported here: the parser is built for every command).
_WILDCARD = ("0.0.0.0", "::")
#: The environment variable of the ``requestState`` keys (comma-separated, the first signs).
KEYS_ENV = "TRIO_MCP_REQUEST_STATE_KEYS"


def usage_error(message: str) -> NoReturn:
    """A command line that cannot be served: the message, exit status 2."""
    print(f"trio-mcp: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


#: Where ``--redis`` takes its default from.
REDIS_ENV = "TRIO_MCP_REDIS_URL"


def serving_options(parser: argparse.ArgumentParser) -> None:
    """The options of a serving command: transport, address, path, HTTP."""
    parser.add_argument("-t", "--transport", choices=TRANSPORTS, default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (0: a free one)")
    parser.add_argument("--path", default="/mcp", help="the MCP endpoint (http, ws)")
    http = parser.add_argument_group("network servers (http, sse, ws)")
    http.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="a Host name to answer besides the default ones (repeatable; '*': any)",
    )
    http.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin to allow besides the loopback ones, e.g. https://app.example.com (repeatable)",
    )
    http.add_argument("--json-response", action="store_true", help="http: answer JSON, never SSE")
    http.add_argument(
        "--stateless",
        action="store_true",
        help="http: serve handshake-era requests without sessions (GET and DELETE refused)",
    )
    http.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="http: N processes serving the port (without --redis, only stateless serving: add --stateless)",
    )
    http.add_argument(
        "--request-state-key",
        action="append",
        default=[],
        metavar="KEY",
        help=f"http: a key of the 2026-07-28 requestState (repeatable, the first signs; or {KEYS_ENV}, "
        "comma-separated): processes serving one endpoint need the same keys",
    )
    http.add_argument(
        "--drain-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="http: on SIGTERM, how long the calls under way may take to end (default 10)",
    )
    http.add_argument(
        "--no-metrics",
        dest="metrics",
        action="store_false",
        help="http: no Prometheus metrics (by default GET /metrics answers them)",
    )
    auth_options(parser)
    cluster = parser.add_argument_group("several processes and nodes (http)")
    cluster.add_argument(
        "--redis",
        default=os.environ.get(REDIS_ENV) or None,
        metavar="URL",
        help=f"share sessions with the other processes through this Redis (redis://host:port/db; "
        f"default: the environment variable {REDIS_ENV}); needs trio-mcp[redis]",
    )
    cluster.add_argument("--node-id", metavar="ID", help="this node's name in the cluster (default: random)")
    cluster.add_argument(
        "--owner-failure",
        choices=("adopt", "drop"),
        default="adopt",
        help="a session whose node died: adopt it (same session id) or drop it (404, the client "
        "initializes again); default adopt",
    )
    cluster.add_argument("--redis-prefix", default="mcp:", metavar="PREFIX", help="prefix of every Redis key")
    cluster.add_argument(
        "--lease-ttl",
        type=float,
        default=3.0,
        metavar="SECONDS",
        help="a node silent this long is dead (its calls fail, its sessions move); default 3",
    )
    cluster.add_argument(
        "--node-header", action="store_true", help="name the serving node in an Mcp-Node response header"
    )
    cluster.add_argument(
        "--direct-link",
        action="store_true",
        help="forward a request to its session's node over a direct connection between the nodes "
        "(Redis stays the registry and the fallback)",
    )
    cluster.add_argument(
        "--link-host",
        metavar="HOST",
        help="with --direct-link: the private address this node listens on (a port chosen at run time; "
        "default 127.0.0.1)",
    )
    cluster.add_argument(
        "--link-dir",
        metavar="DIR",
        help="with --direct-link: listen on a Unix socket in this directory instead (nodes on one "
        "machine; --workers N uses a private one unless --link-host or --link-dir is given)",
    )
    cluster.add_argument(
        "--link-advertise",
        metavar="HOST:PORT",
        help="with --direct-link: the address the other nodes dial (nodes on several machines)",
    )
    cluster.add_argument(
        "--serve-on-ingress",
        action="store_true",
        help="with --redis and --json-response: serve a session's tool calls, lists and reads on the "
        "node they reach, from its saved handshake state, instead of forwarding them to its node",
    )


@attrs.frozen(kw_only=True)
class ServeOptions:
    """What :func:`serving_options` read."""

    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8000
    path: str = "/mcp"
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    json_response: bool = False
    stateless: bool = False
    # -- authorization (http): the server as an OAuth 2.1 resource server
    auth: AuthOptions | None = None

    #: Processes serving the port (``--workers``; http).
    workers: int = 1
    #: The ``requestState`` keys, the signing one first (none: a random key per process).
    request_state_keys: tuple[str, ...] = attrs.field(default=(), repr=False)
    #: Sessions shared through Redis (None: each process keeps its own).
    redis_url: str | None = None
    #: Seconds the calls under way may take to end once SIGTERM arrives (http).
    drain_timeout: float = 10.0
    #: Serve this already bound socket (a worker process) instead of host:port.
    listen_fd: int | None = None
    #: http: count requests and answer ``GET /metrics`` (``--no-metrics``: off).
    metrics: bool = True
    # -- several processes and nodes (http): sessions shared through Redis (``redis_url``)
    node_id: str | None = None
    owner_failure: str = "adopt"
    redis_prefix: str = "mcp:"
    lease_ttl: float = 3.0
    node_header: bool = False
    direct_link: bool = False
    link_host: str = "127.0.0.1"
    link_dir: str | None = None
    link_advertise: str | None = None
    serve_on_ingress: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ServeOptions:
        keys = tuple(args.request_state_key) or _keys_from_env()
        if keys:
            from ..server import RequestStateKeys

            try:
                RequestStateKeys(keys)
            except ValueError as exc:
                usage_error(str(exc))
        if args.workers < 1:
            usage_error(f"--workers takes a number of processes, at least 1, not {args.workers}")
        if not args.drain_timeout >= 0:
            usage_error(f"--drain-timeout takes seconds, at least 0, not {args.drain_timeout}")
        if args.serve_on_ingress and not (args.redis and args.json_response):
            usage_error(
                "--serve-on-ingress serves requests of sessions shared through Redis, answered as JSON: "
                "it needs --redis and --json-response"
            )
        return cls(
            transport=args.transport,
            host=args.host,
            port=args.port,
            path=args.path,
            allowed_hosts=tuple(args.allowed_host),
            allowed_origins=tuple(args.allowed_origin),
            json_response=args.json_response,
            stateless=args.stateless,
            auth=AuthOptions.from_args(args),
            workers=args.workers,
            request_state_keys=keys,
            drain_timeout=args.drain_timeout,
            metrics=args.metrics,
            redis_url=args.redis,
            node_id=args.node_id,
            owner_failure=args.owner_failure,
            redis_prefix=args.redis_prefix,
            lease_ttl=args.lease_ttl,
            node_header=args.node_header,
            direct_link=args.direct_link,
            link_host=args.link_host or "127.0.0.1",
            link_dir=args.link_dir,
            link_advertise=args.link_advertise,
            serve_on_ingress=args.serve_on_ingress,
        )

    def cluster(self) -> Any:
        """The :class:`~trio_mcp.serving.cluster.RedisCluster` of ``--redis``, or None."""
        if self.redis_url is None:
            return None
        from ._targets import TargetError

        try:
            from ..serving.cluster import ClusterSettings, RedisCluster
        except ImportError as exc:
            raise TargetError(
                f"--redis needs the redis extra (pip install 'trio-mcp[redis]'): {exc}"
            ) from None
        lease = self.lease_ttl
        try:
            settings = ClusterSettings(
                url=self.redis_url,
                prefix=self.redis_prefix,
                owner_failure="drop" if self.owner_failure == "drop" else "adopt",
                lease_ttl=lease,
                renew_interval=min(1.0, lease / 3),
                node_header=self.node_header,
                direct_link=self.direct_link,
                link_host=self.link_host,
                link_dir=self.link_dir,
                link_advertise=self.link_advertise,
                serve_on_ingress=self.serve_on_ingress,
            )
            if self.node_id is not None:
                settings = attrs.evolve(settings, node_id=self.node_id)
        except ValueError as exc:
            raise TargetError(f"bad cluster option: {exc}") from None
        return RedisCluster(settings)

    def host_names(self) -> tuple[str, ...]:
        """The ``Host`` names answered (see the module)."""
        from ..transports.http._security import LOCAL_HOSTS, wildcard_hosts

        if "*" in self.allowed_hosts:
            return ("*",)
        if self.host in _WILDCARD:
            base = wildcard_hosts()
        elif self.host in _LOOPBACK:
            base = LOCAL_HOSTS
        else:
            base = (*LOCAL_HOSTS, self.host if ":" not in self.host else f"[{self.host}]")
        return tuple(dict.fromkeys((*base, *self.allowed_hosts)))

    def origins(self) -> tuple[str, ...]:
        from ..transports.http._security import LOCAL_HOSTS

        if "*" in self.allowed_origins:
            return ("*",)
        return tuple(dict.fromkeys((*LOCAL_HOSTS, *self.allowed_origins)))

    def security(self) -> dict[str, Any]:
        return {"allowed_hosts": self.host_names(), "allowed_origins": self.origins()}


def _keys_from_env() -> tuple[str, ...]:
    return tuple(key.strip() for key in os.environ.get(KEYS_ENV, "").split(",") if key.strip())


async def serve(
    app: Any, options: ServeOptions, *, readiness: Any = None, out: Any = None, signals: Any = None
) -> None:
    """Serve ``app`` until cancelled (stdio: until stdin closes). ``readiness``
    adds to the ``/readyz`` report of an HTTP server; ``signals`` (a
    :class:`~._gateway_cmd.Signals`) gets the HTTP server's drain as its
    graceful stop."""
    import trio

    from .._util import collapse_groups
    from ._targets import TargetError

    out = out or sys.stderr
    if options.request_state_keys:
        app.set_request_state_keys(options.request_state_keys)
    transport = options.transport
    if transport == "stdio":
        from ..transports.stdio import stdio_server_stream

        async with stdio_server_stream() as stream:
            await app.serve(stream)
        return
    if transport not in TRANSPORTS:
        raise TargetError(f"unknown transport {transport!r}: {', '.join(TRANSPORTS)}")
    if options.redis_url is not None and transport != "http":
        raise TargetError(f"--redis (or {REDIS_ENV}) shares Streamable HTTP sessions: it needs -t http")
    cluster = options.cluster()
    host, port, path = options.host, options.port, options.path
    security = options.security()
    if options.auth is not None and transport != "http":
        raise TargetError("the --auth-… options need -t http")
    auth = None if options.auth is None else options.auth.resource_server()
    with collapse_groups():
        async with app.running(), trio.open_nursery() as nursery:
            if transport == "http":
                from ..serving.http import HttpServer

                server: Any = HttpServer(
                    app,
                    host=host,
                    port=port,
                    path=path,
                    readiness=readiness,
                    json_response=True if options.json_response else None,
                    stateless=options.stateless,
                    auth=auth,
                    drain_timeout=options.drain_timeout,
                    fd=options.listen_fd,
                    metrics=options.metrics,
                    cluster=cluster,
                    freeze_heap=True,  # this process is the server
                    **security,
                )
                if signals is not None:
                    signals.on_stop(server.drain)
            elif transport == "sse":
                from ..transports.sse import SseServer

                server = SseServer(app, host=host, port=port, **security)
            else:
                from ..transports.websocket import WebSocketServer

                server = WebSocketServer(app, host=host, port=port, path=path, **security)
            info = await nursery.start(server.run)
            print(f"serving {app.info.name} over {transport} at {info.url}", file=out, flush=True)
            print(_security_line(options), file=out, flush=True)
            if transport == "http":
                health = server.asgi.settings
                metrics = f", metrics: GET {health.metrics_path}" if options.metrics else ""
                print(
                    f"health: GET {health.health_path}, readiness: GET {health.ready_path}{metrics}",
                    file=out,
                    flush=True,
                )
                if options.auth is not None and server.asgi.auth is not None:
                    line = f"{options.auth.describe()}; metadata: {server.asgi.auth.config.metadata_url()}"
                    print(line, file=out, flush=True)
                if cluster is not None:
                    print(
                        f"node {cluster.settings.node_id} of the cluster on {options.redis_url} "
                        f"(keys {cluster.settings.prefix}*, owner failure: {cluster.settings.owner_failure})",
                        file=out,
                        flush=True,
                    )


def _security_line(options: ServeOptions) -> str:
    hosts = ", ".join("any IP address" if h.startswith("<") else h for h in options.host_names())
    line = f"answering Host: {hosts}; browser origins: {', '.join(options.origins())}"
    if options.host in _WILDCARD and "*" not in options.allowed_hosts:
        line += " (add others with --allowed-host NAME, or --allowed-host '*' for any)"
    return line


def gateway_readiness(gateway: Any) -> Any:
    """The ``/readyz`` callback of a gateway: its own ``status()`` when it has
    one (a mapping; its ``"ready"`` key decides), else the state of each
    backing server; ready when every one is connected."""
    status = getattr(gateway, "status", None)
    if callable(status):

        async def from_status() -> Mapping[str, Any]:
            import msgspec

            found = status()
            if inspect.isawaitable(found):
                found = await found
            report = msgspec.to_builtins(found)
            return report if isinstance(report, dict) else {"status": report}

        return from_status

    def from_connections() -> Mapping[str, Any]:
        servers: dict[str, Any] = {
            name: {"connected": conn.connected} for name, conn in gateway.host.servers.items()
        }
        for name, reason in gateway.failed.items():
            servers[name] = {"connected": False, "error": reason}
        ready = all(entry["connected"] for entry in servers.values())
        return {"ready": ready, "servers": servers}

    return from_connections
