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

Failures reach the caller quickly as typed errors, never as a hang: a tool
call whose server is down, gives up mid-call or does not answer within
``request_timeout`` returns an ``isError`` result naming the server (what a
model can read); the same for prompts, reads and completions raises
:class:`ServerUnavailable` (code ``-32003``); unknown names raise
:class:`InvalidParams`. A call made while a server restarts waits for it at
most ``ConnectionSettings.reconnect_wait`` seconds.

When a server's lists change (a ``list_changed`` from it, a reconnect with a
different list, a server giving up) the gateway's clients get
``notifications/{tools,prompts,resources}/list_changed``.

Not forwarded: resource subscriptions, sampling and elicitation requests of
the servers (the Host is configured without an LLM, so servers are not
offered those capabilities), and the servers' log messages (they go to the
``trio_mcp`` loggers).
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

import attrs
import msgspec
import trio
from msgspec import UNSET

from .._util import collapse_groups, describe
from ..actors._connection import (
    Connected,
    Connection,
    ConnectionFailed,
    ConnectionSettings,
    ListsRefreshed,
)
from ..actors._host import SEPARATOR, ConsentPolicy, Host
from ..actors._server import Context
from ..protocol import (
    CallToolRequestParams,
    CallToolResult,
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
    ResourceNotFound,
    ResourceTemplateReference,
    TextContent,
)
from ..server._lowlevel import LowLevelServer, paginate
from ..supervision import Backoff
from ._config import ConfigError, GatewayConfig, ServerEntry, StdioEntry, load_config, parse_config
from ._tasks import TaskForwarding

__all__ = [
    "GATEWAY_SETTINGS",
    "URI_SCHEME",
    "Gateway",
    "GatewayStartError",
    "ServerUnavailable",
    "gateway_uri",
    "open_gateway",
    "split_gateway_uri",
]

log = logging.getLogger("trio_mcp.gateway")

#: Resources of server ``s`` are shown as ``gateway://s/<the server's URI>``.
URI_SCHEME: Final = "gateway://"

#: Connection settings of the gateway's servers: calls wait at most 5 s for a
#: restart; a server that does not answer a ping within 10 s is restarted.
GATEWAY_SETTINGS: Final = ConnectionSettings(
    backoff=Backoff(initial=0.1, maximum=5.0, multiplier=2.0, reset_after=30.0),
    reconnect_wait=5.0,
    ping_interval=30.0,
    ping_timeout=10.0,
)


class ServerUnavailable(McpError):
    """A server behind the gateway is down, gave up, or did not answer in time (-32003)."""

    code = -32003
    default_message = "The server behind the gateway is unavailable"


class GatewayStartError(Exception):
    """No configured server could be started; ``failures`` maps each name to why."""

    def __init__(self, failures: Mapping[str, str]) -> None:
        self.failures = dict(failures)
        detail = "; ".join(f"{name}: {reason}" for name, reason in self.failures.items())
        super().__init__(f"no server of the gateway could be started ({detail})")


def gateway_uri(server: str, uri: str) -> str:
    """The gateway's URI for ``uri`` of ``server``."""
    return f"{URI_SCHEME}{server}/{uri}"


def split_gateway_uri(uri: str) -> tuple[str, str]:
    """``gateway://server/original`` → ``(server, original)``; :class:`ResourceNotFound` otherwise."""
    if uri.startswith(URI_SCHEME):
        server, sep, original = uri[len(URI_SCHEME) :].partition("/")
        if sep and server and original:
            return server, original
    raise ResourceNotFound(
        f"Resource not found: {uri!r} is not a gateway URI ({URI_SCHEME}SERVER/URI)", data={"uri": uri}
    )


class Gateway(LowLevelServer):
    """An MCP server app showing the servers of ``host`` as one (see the module).

    ``order``: the server names in the order their items are listed (servers
    not named come after, in the Host's order)."""

    def __init__(
        self,
        host: Host,
        *,
        name: str = "trio-mcp-gateway",
        version: str = "0.1.0",
        order: Sequence[str] = (),
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
        self._order = {server: i for i, server in enumerate(order)}
        #: Servers that could not be started, with the reason.
        self.failed: dict[str, str] = {}
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
        self.set_request_handler("tools/call", CallToolRequestParams, self._call_tool)
        self.set_request_handler("prompts/get", GetPromptRequestParams, self._get_prompt)
        self.set_request_handler("resources/read", ReadResourceRequestParams, self._read_resource)
        self.set_request_handler("completion/complete", CompleteRequestParams, self._complete)
        #: Task-augmented calls and the tasks/* methods, routed to the owning server.
        self.task_forwarding = TaskForwarding(self)
        self.task_forwarding.install()

    # ---------------------------------------------------------- the lists

    def _servers(self) -> list[tuple[str, Connection]]:
        servers = list(self.host.servers.items())
        last = len(self._order)
        return sorted(servers, key=lambda item: self._order.get(item[0], last))

    def tools(self) -> list[Any]:
        """Every server's tools, renamed ``server__tool``."""
        return [
            msgspec.structs.replace(tool, name=f"{server}{SEPARATOR}{tool.name}")
            for server, conn in self._servers()
            for tool in conn.tools
        ]

    def prompts(self) -> list[Any]:
        return [
            msgspec.structs.replace(prompt, name=f"{server}{SEPARATOR}{prompt.name}")
            for server, conn in self._servers()
            for prompt in conn.prompts
        ]

    def resources(self) -> list[Any]:
        return [
            msgspec.structs.replace(res, uri=gateway_uri(server, res.uri))
            for server, conn in self._servers()
            for res in conn.resources
        ]

    def resource_templates(self) -> list[Any]:
        return [
            msgspec.structs.replace(t, uri_template=gateway_uri(server, t.uri_template))
            for server, conn in self._servers()
            for t in conn.resource_templates
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
            if isinstance(event, (Connected, ListsRefreshed, ConnectionFailed)):
                self.publish_changes()
        await trio.lowlevel.checkpoint()  # the Host forgets the server before we look again
        self.publish_changes()

    # ------------------------------------------------------------ routing

    def _route(self, kind: str, public: str) -> tuple[str, str]:
        server, sep, name = public.partition(SEPARATOR)
        if not sep or not name:
            raise InvalidParams(f"unknown {kind} {public!r}: gateway names are 'server{SEPARATOR}{kind}'")
        if server not in self.host.servers:
            raise InvalidParams(f"unknown {kind} {public!r}: no server named {server!r} is connected")
        return server, name

    async def _forward(self, server: str, what: str, call: Any) -> Any:
        """Run ``call()`` bounded by ``request_timeout``; a down server is a ServerUnavailable."""
        try:
            with trio.move_on_after(self.request_timeout):
                return await call()
        except ConnectionClosed as exc:
            raise ServerUnavailable(
                f"server {server!r} is unavailable: {exc.message}", data={"server": server}
            ) from None
        raise ServerUnavailable(
            f"server {server!r} did not answer {what} within {self.request_timeout} s",
            data={"server": server},
        )

    async def _call_tool(self, ctx: Context, params: CallToolRequestParams) -> Any:
        if self.task_forwarding.wants_task(ctx, params):
            return await self.task_forwarding.call_tool(ctx, params)
        server, _ = self._route("tool", params.name)
        arguments = None if params.arguments is UNSET else params.arguments
        options: dict[str, Any] = {}
        if ctx.progress_token is not None:
            options["on_progress"] = ctx.report_progress
        try:
            return await self._forward(
                server,
                f"tools/call {params.name!r}",
                lambda: self.host.call_tool(params.name, arguments, **options),
            )
        except ServerUnavailable as exc:
            # An isError result: the model reads it and may retry later.
            return CallToolResult(content=[TextContent(text=exc.message)], is_error=True)

    async def _get_prompt(self, ctx: Context, params: GetPromptRequestParams) -> GetPromptResult:
        server, name = self._route("prompt", params.name)
        arguments = None if params.arguments is UNSET else params.arguments
        conn = self.host.servers[server]
        return await self._forward(
            server, f"prompts/get {params.name!r}", lambda: conn.get_prompt(name, arguments)
        )

    async def _read_resource(self, ctx: Context, params: ReadResourceRequestParams) -> ReadResourceResult:
        server, uri = split_gateway_uri(params.uri)
        conn = self.host.servers.get(server)
        if conn is None:
            raise ResourceNotFound(
                f"Resource not found: no server named {server!r} is connected", data={"uri": params.uri}
            )
        result = await self._forward(server, f"resources/read {uri!r}", lambda: conn.read_resource(uri))
        contents = [msgspec.structs.replace(c, uri=gateway_uri(server, c.uri)) for c in result.contents]
        return msgspec.structs.replace(result, contents=contents)

    async def _complete(self, ctx: Context, params: CompleteRequestParams) -> CompleteResult:
        ref: Any = params.ref
        if isinstance(ref, PromptReference):
            server, name = self._route("prompt", ref.name)
            ref = msgspec.structs.replace(ref, name=name)
        else:
            server, uri = split_gateway_uri(ref.uri)
            if server not in self.host.servers:
                raise InvalidParams(f"unknown resource template {ref.uri!r}: no server named {server!r}")
            ref = ResourceTemplateReference(uri=uri)
        conn = self.host.servers[server]
        context = None
        if params.context is not UNSET and params.context.arguments is not UNSET:
            context = params.context.arguments
        arg = params.argument
        return await self._forward(
            server, "completion/complete", lambda: conn.complete(ref, arg.name, arg.value, context=context)
        )


# ------------------------------------------------------------------ opening


GatewaySource = GatewayConfig | Mapping[str, Any] | Iterable[ServerEntry] | str | os.PathLike[str]


def _entries(source: GatewaySource) -> tuple[ServerEntry, ...]:
    if isinstance(source, GatewayConfig):
        return source.servers
    if isinstance(source, (str, os.PathLike)):
        return load_config(source).servers
    if isinstance(source, Mapping):
        return parse_config(dict(source)).servers
    entries = tuple(source)
    names = [e.name for e in entries]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"servers named more than once: {', '.join(dupes)}")
    return entries


@attrs.frozen
class _Starter:
    gateway: Gateway
    nursery: trio.Nursery
    transport_options: Mapping[str, Mapping[str, Any]]

    async def start(self, entry: ServerEntry) -> None:
        host = self.gateway.host
        options = self.transport_options["stdio" if isinstance(entry, StdioEntry) else "remote"]
        try:
            conn = await host.add_server(entry.name, entry.transport_factory(**options))
        except McpError as exc:  # a start failure (ConnectionClosed): it never stops the others
            reason = describe(exc)
            self.gateway.failed[entry.name] = reason
            log.warning("gateway: server %s could not be started and is left out: %s", entry.name, reason)
            return
        self.nursery.start_soon(self.gateway.watch, conn)


@asynccontextmanager
async def open_gateway(
    config: GatewaySource,
    *,
    settings: ConnectionSettings | None = None,
    request_timeout: float = 300.0,
    stdio_options: Mapping[str, Any] | None = None,
    remote_options: Mapping[str, Any] | None = None,
    **gateway_options: Any,
) -> AsyncIterator[Gateway]:
    """Start a Host with every configured server and yield the :class:`Gateway`.

    ``config``: a :class:`GatewayConfig`, the decoded JSON, a file path, or
    :class:`ServerEntry` objects. The servers start concurrently; one that
    cannot start (after ``settings.start_retries``) is logged, recorded in
    ``gateway.failed`` and left out — unless none starts: then
    :class:`GatewayStartError`. An empty configuration is a :class:`ConfigError`.
    Leaving the block stops every server (and its process).

    ``stdio_options`` go to every :class:`StdioServerParameters`,
    ``remote_options`` to every network transport, ``gateway_options`` to
    :class:`Gateway`."""
    entries = _entries(config)
    if not entries:
        raise ConfigError("no servers to start (is every server disabled?)")
    names = [e.name for e in entries]
    host = Host(
        settings=settings or GATEWAY_SETTINGS, consent_policy=ConsentPolicy(trusted_servers=frozenset(names))
    )
    with collapse_groups():
        async with trio.open_nursery() as nursery:
            await nursery.start(host.run)
            gateway = Gateway(host, order=names, request_timeout=request_timeout, **gateway_options)
            starter = _Starter(
                gateway, nursery, {"stdio": stdio_options or {}, "remote": remote_options or {}}
            )
            async with trio.open_nursery() as starting:
                for entry in entries:
                    starting.start_soon(starter.start, entry)
            if not host.servers:
                raise GatewayStartError(gateway.failed)
            gateway.publish_changes()
            try:
                yield gateway
            finally:
                nursery.cancel_scope.cancel()
