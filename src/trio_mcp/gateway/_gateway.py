"""A gateway: one MCP server fronting a supervised fleet of MCP servers.

::

    async with open_gateway("mcp.json") as gateway:      # starts every server
        await gateway.serve(stream)                       # or HttpServer(gateway), …

:class:`Gateway` is a :class:`LowLevelServer`, so every server transport can
serve it. It fronts a :class:`Host` (one supervised :class:`Connection` per
server) and shows the fleet as one server:

* **tools** under the Host's collision-safe names ``server__tool`` (schemas
  and annotations unchanged, so the gateway's own client decides consent:
  the gateway trusts every server it was configured with);
* **prompts** likewise as ``server__prompt``;
* **resources** under ``gateway://SERVER/ORIGINAL-URI`` (for instance
  ``gateway://files/file:///tmp/a.txt``): the server's name is the URI's
  authority and the server's own URI follows the first ``/``, unescaped, so a
  read routes back to its server; resource templates are wrapped the same way
  and so are the ``uri`` fields of what a read returns;
* **completions** of prompt arguments and template variables, routed the
  same way.

Each server's filters (:class:`Filters`, from its configuration entry) hide
tools, prompts and resources from the lists, and a hidden name is unknown on
call. A tool call is forwarded as a proxy does: the arguments and the result
pass through as the JSON they arrived as (``msgspec.Raw``), never decoded
and re-encoded here. A session served by :meth:`Gateway.serve` or
``start_session`` (stdio, WebSocket, in-memory) takes a plain call on the
forwarding path of :mod:`._forward` (in its read loop, no handler worker);
the rest, and sessions with middleware, on the handler path below.

Failures reach the caller quickly as typed errors, never as a hang: a tool
call whose server is down, gives up mid-call or does not answer within
``request_timeout`` (or the entry's ``timeout``) returns an ``isError``
result naming the server (what a model can read); the same for prompts, reads and completions raises
:class:`ServerUnavailable` (code ``-32003``); unknown names raise
:class:`InvalidParams`. A call made while a server restarts waits for it at
most ``ConnectionSettings.reconnect_wait`` seconds; while a server is down
(its last start failed: it is retried with backoff) a call fails at once.

When a server's lists change (a ``list_changed`` from it, a reconnect with a
different list, a server lost, added or removed by a reload) the gateway's clients get
``notifications/{tools,prompts,resources}/list_changed``.

Not forwarded: resource subscriptions, sampling and elicitation requests of
the servers (the Host is configured without an LLM, so servers are not
offered those capabilities), and the servers' log messages (they go to the
``trio_mcp`` loggers).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio
from msgspec import UNSET

from .._util import collapse_groups
from ..actors._client import ClientSession
from ..actors._connection import (
    Connected,
    Connection,
    ConnectionFailed,
    Disconnected,
    ListsRefreshed,
    ReconnectScheduled,
)
from ..actors._host import SEPARATOR, Host
from ..actors._server import Context, ServerSession
from ..protocol import (
    CallToolRequestParams,
    CompleteRequestParams,
    CompleteResult,
    ConnectionClosed,
    GetPromptRequestParams,
    GetPromptResult,
    InvalidParams,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    McpError,
    PaginatedRequestParams,
    PromptReference,
    ReadResourceRequestParams,
    ReadResourceResult,
    ResourceContents,
    ResourceNotFound,
    ResourceTemplateReference,
    coerce,
)
from ..server._lowlevel import LowLevelServer, paginate
from ..server._uri_template import UriTemplate
from ..transports import MessageStream
from ._common import (
    GATEWAY_SETTINGS,
    STATUS_URI,
    URI_SCHEME,
    BackingServerStatistics,
    Counts,
    GatewayStartError,
    ServerUnavailable,
    gateway_uri,
    split_gateway_uri,
)
from ._config import Filter, Filters, ServerEntry, StdioEntry
from ._forward import ForwardingStream, forwarded_params, read_call
from ._routes import failed_call
from ._tasks import TaskForwarding

if TYPE_CHECKING:
    from ._fleet import Fleet

__all__ = [
    "GATEWAY_SETTINGS",
    "STATUS_URI",
    "URI_SCHEME",
    "BackingServerStatistics",
    "Gateway",
    "GatewayStartError",
    "ServerUnavailable",
    "gateway_uri",
    "split_gateway_uri",
]

log = logging.getLogger("trio_mcp.gateway")


class Gateway(LowLevelServer):
    """An MCP server app showing the servers of ``host`` as one (see the module).

    ``order``: the server names in the order their items are listed (servers
    not named come after, in the Host's order). ``entries``: the configured
    servers, for their filters, timeouts and status (a server without an
    entry shows everything)."""

    def __init__(
        self,
        host: Host,
        *,
        name: str = "trio-mcp-gateway",
        version: str = "0.1.0",
        order: Sequence[str] = (),
        entries: Iterable[ServerEntry] = (),
        request_timeout: float = 300.0,
        **options: Any,
    ) -> None:
        if not request_timeout > 0:
            raise ValueError(f"request_timeout must be positive, not {request_timeout!r}")
        options.setdefault(
            "instructions",
            "Tools, prompts and resources of several MCP servers: "
            f"names are 'server{SEPARATOR}name', resource URIs {URI_SCHEME}server/uri.",
        )
        super().__init__(name, version, **options)
        self.host = host
        self.request_timeout = request_timeout
        self.order = order
        #: The :class:`Fleet` that started the servers (set by ``open_gateway``).
        self.fleet: Fleet | None = None
        self.entries: dict[str, ServerEntry] = {e.name: e for e in entries}
        #: Servers whose first start failed, with the reason (they are retried).
        self.failed: dict[str, str] = {}
        self._counts: dict[str, Counts] = {}
        #: (tools list, names shown) per server: the allowed tool names of its current list.
        self._allowed: dict[str, tuple[list[Any], Filter, frozenset[str]]] = {}
        self._published: dict[str, list[Any]] = self._snapshot()
        lists = {
            "tools/list": self._lister(self.tools, lambda p, c: ListToolsResult(tools=p, next_cursor=c)),
            "prompts/list": self._lister(
                self.prompts, lambda p, c: ListPromptsResult(prompts=p, next_cursor=c)
            ),
            "resources/list": self._lister(
                self.resources, lambda p, c: ListResourcesResult(resources=p, next_cursor=c)
            ),
            "resources/templates/list": self._lister(
                self.resource_templates,
                lambda p, c: ListResourceTemplatesResult(resource_templates=p, next_cursor=c),
            ),
        }
        for method, handler in lists.items():
            self.set_request_handler(method, PaginatedRequestParams, handler)
        self.set_request_handler("tools/call", msgspec.Raw, self._call_tool)
        self.set_request_handler("prompts/get", GetPromptRequestParams, self._get_prompt)
        self.set_request_handler("resources/read", ReadResourceRequestParams, self._read_resource)
        self.set_request_handler("completion/complete", CompleteRequestParams, self._complete)
        #: Task-augmented calls and the tasks/* methods, routed to the owning server.
        self.task_forwarding = TaskForwarding(self)
        self.task_forwarding.install()

    # ---------------------------------------------------------- sessions

    async def serve(self, stream: MessageStream, *, name: str = "server") -> None:
        """Serve one session over ``stream`` until it ends (tool calls on the forwarding path)."""
        with collapse_groups():
            async with self.running():
                await self._serve_session(stream, name)

    async def start_session(
        self, stream: MessageStream, nursery: trio.Nursery, *, name: str = "server"
    ) -> ServerSession:
        """Start a session in ``nursery``; returns once it is serving."""
        session: ServerSession = await nursery.start(partial(self._serve_session, stream, name))
        return session

    async def _serve_session(
        self,
        stream: MessageStream,
        name: str,
        *,
        task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """A session whose plain tool calls take the forwarding path (:mod:`._forward`);
        with middleware, every request goes through it: the handler path only."""
        if self.middleware:
            await ServerSession(self, stream, limits=self.limits, name=name).run(task_status=task_status)
            return
        front = ForwardingStream.over(stream, self, self.limits)
        await front.serve(ServerSession(self, front, limits=self.limits, name=name), task_status)

    @property
    def order(self) -> list[str]:
        """The server names in the order their items are listed."""
        return list(self._order)

    @order.setter
    def order(self, names: Iterable[str]) -> None:
        self._order = {server: i for i, server in enumerate(names)}

    # ---------------------------------------------------------- the lists

    def _servers(self) -> list[tuple[str, Connection]]:
        servers = list(self.host.servers.items())
        last = len(self._order)
        return sorted(servers, key=lambda item: self._order.get(item[0], last))

    def _filters(self, server: str) -> Filters:
        entry = self.entries.get(server)
        return _ALL if entry is None else entry.filters

    def tools(self) -> list[Any]:
        """Every server's tools its filter shows, renamed ``server__tool``."""
        return [
            msgspec.structs.replace(tool, name=f"{server}{SEPARATOR}{tool.name}")
            for server, conn in self._servers()
            for tool in conn.tools
            if self._filters(server).tools.allows(tool.name)
        ]

    def prompts(self) -> list[Any]:
        return [
            msgspec.structs.replace(prompt, name=f"{server}{SEPARATOR}{prompt.name}")
            for server, conn in self._servers()
            for prompt in conn.prompts
            if self._filters(server).prompts.allows(prompt.name)
        ]

    def resources(self) -> list[Any]:
        return [
            msgspec.structs.replace(res, uri=gateway_uri(server, res.uri))
            for server, conn in self._servers()
            for res in conn.resources
            if self._filters(server).resources.allows(res.uri)
        ]

    def resource_templates(self) -> list[Any]:
        return [
            msgspec.structs.replace(t, uri_template=gateway_uri(server, t.uri_template))
            for server, conn in self._servers()
            for t in conn.resource_templates
            if self._filters(server).resources.allows(t.uri_template)
        ]

    def _lister(self, items: Callable[[], list[Any]], answer: Callable[[list[Any], Any], Any]) -> Any:
        """A ``*/list`` handler: one page of ``items()``, wrapped by ``answer(page, next_cursor)``."""

        async def handler(ctx: Context, params: PaginatedRequestParams) -> Any:
            page, cursor = paginate(items(), params.cursor, self.page_size)
            return answer(page, cursor)

        return handler

    # -------------------------------------------------------- list changes

    def _snapshot(self) -> dict[str, list[Any]]:
        return {
            "tools": self.tools(),
            "prompts": self.prompts(),
            "resources": self.resources() + self.resource_templates(),
        }

    def publish_changes(self) -> None:
        """Tell the clients about every list that changed since the last call."""
        now = self._snapshot()
        for kind, items in now.items():
            if items != self._published[kind]:
                self.broadcast_nowait(f"notifications/{kind}/list_changed")
        self._published = now

    async def watch(self, connection: Connection) -> None:
        """Follow a server's events and publish the list changes they bring."""
        async for event in connection.events():
            if isinstance(event, ReconnectScheduled):
                self._count(connection.name).delay = event.delay
            elif isinstance(event, (Connected, ListsRefreshed, ConnectionFailed, Disconnected)):
                if isinstance(event, Connected):
                    self.failed.pop(connection.name, None)
                self.publish_changes()
        await trio.lowlevel.checkpoint()  # the Host forgets the server before we look again
        self.publish_changes()

    # ------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        """Each server's state, as JSON-able builtins: ``state`` (connected,
        starting, down, reconnecting, failed) and ``connected``, ``pid`` or ``url``, ``uptime``
        (seconds), ``restarts``, ``last_error`` and the ``tools`` it exposes;
        ``ready`` is true when every configured server is connected."""
        servers: dict[str, Any] = {}
        for name, conn in self._servers():
            entry = self.entries.get(name)
            filters = self._filters(name)
            uptime = conn.uptime
            info: dict[str, Any] = {
                "state": conn.state,
                "connected": conn.connected,
                "transport": "stdio" if isinstance(entry, StdioEntry) else getattr(entry, "transport", None),
                "uptime": None if uptime is None else round(uptime, 3),
                "restarts": conn.restarts,
                "connects": conn.statistics()["connects"],
                "last_error": conn.last_error,
                "tools": [t.name for t in conn.tools if filters.tools.allows(t.name)],
            }
            if isinstance(entry, StdioEntry):
                info["pid"] = conn.pid
            elif entry is not None:
                info["url"] = entry.url
            servers[name] = info
        return {"ready": self.ready(), "servers": servers}

    def server_statistics(self) -> dict[str, BackingServerStatistics]:
        """Each backing server's figures, by name (what ``/metrics`` reports of it)."""
        out = {}
        for name, conn in self._servers():
            counts = self._count(name)
            connected = conn.connected
            delay = 0.0 if connected else counts.delay
            out[name] = BackingServerStatistics(connected, conn.restarts, delay, counts.calls, counts.errors)
        return out

    def _count(self, server: str) -> Counts:
        counts = self._counts.get(server)
        if counts is None:
            counts = self._counts[server] = Counts()
        return counts

    def ready(self) -> bool:
        """Every configured server is connected (and there is at least one)."""
        servers = self.host.servers
        names = self.entries.keys() or servers.keys()
        return bool(names) and all(n in servers and servers[n].connected for n in names)

    # ------------------------------------------------------------ routing

    def _route(self, kind: str, public: str) -> tuple[str, str]:
        server, sep, name = public.partition(SEPARATOR)
        if not sep or not name:
            raise InvalidParams(f"unknown {kind} {public!r}: gateway names are 'server{SEPARATOR}{kind}'")
        if server not in self.host.servers:
            raise InvalidParams(f"unknown {kind} {public!r}: no server named {server!r} is connected")
        return server, name

    def call_timeout(self, server: str) -> float:
        """Seconds a call to ``server`` may take (its entry's ``timeout``, else ``request_timeout``)."""
        entry = self.entries.get(server)
        return self.request_timeout if entry is None or entry.timeout is None else entry.timeout

    def counts(self, server: str) -> Counts:
        """What is counted of ``server``: its ``calls`` and ``errors`` (the forwarding path adds to them)."""
        return self._count(server)

    def forwarding_route(self, public: str) -> tuple[str, str, Connection, ClientSession] | None:
        """``(server, tool, connection, session)`` for a call the forwarding
        path may take (see :mod:`._forward`): a tool its server lists and its
        filter shows, of a server connected now in the handshake era, whose
        session is not traced; None sends the call to the handler path."""
        server, sep, tool = public.partition(SEPARATOR)
        conn = self.host.servers.get(server)
        if conn is None or not sep or not tool:
            return None
        session = conn.live_session
        if session is None or session.era != "handshake" or not self._has_tool(server, conn, tool):
            return None
        if "request" in vars(session.peer):
            return None  # traced: its spans come from Peer.request
        return server, tool, conn, session

    async def _forward(self, server: str, what: str, call: Any) -> Any:
        """Run ``call()`` bounded by the server's timeout; a down server is a ServerUnavailable."""
        timeout = self.call_timeout(server)
        counts = self._count(server)
        counts.calls += 1
        try:
            with trio.move_on_after(timeout):
                return await call()
        except ConnectionClosed as exc:
            counts.errors += 1
            raise ServerUnavailable(
                f"server {server!r} is unavailable: {exc.message}", data={"server": server}
            ) from None
        except McpError:
            counts.errors += 1
            raise
        counts.errors += 1
        raise ServerUnavailable(
            f"server {server!r} did not answer {what} within {timeout} s", data={"server": server}
        )

    def _has_tool(self, server: str, conn: Connection, name: str) -> bool:
        """``name`` is in the server's current list and its filter shows it
        (a set per list, rebuilt when the list or the filter changes)."""
        tools = conn.tools
        filters = self._filters(server).tools
        known = self._allowed.get(server)
        if known is None or known[0] is not tools or known[1] is not filters:
            names = frozenset(t.name for t in tools if filters.allows(t.name))
            known = self._allowed[server] = (tools, filters, names)
        return name in known[2]

    async def _call_tool(self, ctx: Context, raw: msgspec.Raw) -> Any:
        """Forward a call as a proxy: the arguments and the result pass
        through as JSON, never decoded here."""
        try:
            params = read_call.decode(raw)
        except msgspec.ValidationError as exc:
            raise InvalidParams(f"Invalid params for tools/call: {exc}") from None
        if self.task_forwarding.requested(ctx, params.task):
            full = coerce(raw, CallToolRequestParams)
            if self.task_forwarding.wants_task(ctx, full):
                return await self.task_forwarding.call_tool(ctx, full)
        public = params.name
        server, tool = self._route("tool", public)
        conn = self.host.servers[server]
        counts = self._count(server)
        if not self._has_tool(server, conn, tool):
            if not conn.connected and conn.state in ("starting", "down"):
                # Never connected (or its lists are not known yet): say why, at once.
                counts.calls += 1
                counts.errors += 1
                why = conn.last_error or "not connected yet"
                return failed_call(f"server {server!r} is unavailable: {why}")
            raise InvalidParams(f"server {server!r} has no tool {tool!r}")
        # The params as JSON: the server's own name, the client's arguments as they came.
        forwarded = forwarded_params(tool, params.arguments)
        on_progress = ctx.report_progress if ctx.progress_token is not None else None
        timeout = self.call_timeout(server)
        # _forward's logic, inlined on this hot path; a failure is an isError
        # result (the model reads it and may retry later).
        counts.calls += 1
        try:
            with trio.move_on_after(timeout):
                return await conn.forward("tools/call", forwarded, on_progress=on_progress)
            text = f"server {server!r} did not answer tools/call {public!r} within {timeout} s"
        except ConnectionClosed as exc:
            text = f"server {server!r} is unavailable: {exc.message}"
        except McpError:
            counts.errors += 1
            raise
        counts.errors += 1
        return failed_call(text)

    async def _get_prompt(self, ctx: Context, params: GetPromptRequestParams) -> GetPromptResult:
        server, name = self._route("prompt", params.name)
        if not self._filters(server).prompts.allows(name):
            raise InvalidParams(f"server {server!r} has no prompt {name!r}")
        arguments = None if params.arguments is UNSET else params.arguments
        conn = self.host.servers[server]
        result: GetPromptResult = await self._forward(
            server, f"prompts/get {params.name!r}", lambda: conn.get_prompt(name, arguments)
        )
        return result

    def _resource_server(self, uri: str, public: str) -> tuple[str, Connection]:
        server, _ = split_gateway_uri(uri)
        conn = self.host.servers.get(server)
        if conn is None:
            raise ResourceNotFound(
                f"Resource not found: no server named {server!r} is connected", data={"uri": public}
            )
        return server, conn

    async def _read_resource(self, ctx: Context, params: ReadResourceRequestParams) -> ReadResourceResult:
        if params.uri == STATUS_URI:
            text = json.dumps(self.status())
            return ReadResourceResult(
                contents=[ResourceContents.from_text(STATUS_URI, text, mime_type="application/json")]
            )
        server, uri = split_gateway_uri(params.uri)
        _, conn = self._resource_server(params.uri, params.uri)
        if not self._shows_resource(server, conn, uri):
            raise ResourceNotFound(f"Resource not found: {params.uri!r}", data={"uri": params.uri})
        result = await self._forward(server, f"resources/read {uri!r}", lambda: conn.read_resource(uri))
        contents = [msgspec.structs.replace(c, uri=gateway_uri(server, c.uri)) for c in result.contents]
        read: ReadResourceResult = msgspec.structs.replace(result, contents=contents)
        return read

    def _shows_resource(self, server: str, conn: Connection, uri: str) -> bool:
        """A filtered server reads only the URIs it lists, or those of the
        templates it shows; an unfiltered one reads anything."""
        f = self._filters(server).resources
        if f.everything:
            return True
        if any(r.uri == uri for r in conn.resources):
            return f.allows(uri)
        return any(
            f.allows(t.uri_template) and UriTemplate(t.uri_template).match(uri) is not None
            for t in conn.resource_templates
        )

    async def _complete(self, ctx: Context, params: CompleteRequestParams) -> CompleteResult:
        ref: Any = params.ref
        if isinstance(ref, PromptReference):
            server, name = self._route("prompt", ref.name)
            if not self._filters(server).prompts.allows(name):
                raise InvalidParams(f"server {server!r} has no prompt {name!r}")
            ref = msgspec.structs.replace(ref, name=name)
        else:
            server, uri = split_gateway_uri(ref.uri)
            if server not in self.host.servers:
                raise InvalidParams(f"unknown resource template {ref.uri!r}: no server named {server!r}")
            if not self._filters(server).resources.allows(uri):
                raise InvalidParams(f"unknown resource template {ref.uri!r}")
            ref = ResourceTemplateReference(uri=uri)
        conn = self.host.servers[server]
        context = None
        if params.context is not UNSET and params.context.arguments is not UNSET:
            context = params.context.arguments
        arg = params.argument
        completed: CompleteResult = await self._forward(
            server, "completion/complete", lambda: conn.complete(ref, arg.name, arg.value, context=context)
        )
        return completed


_ALL: Final = Filters()
