"""The host: many supervised clients, one per server, behind one registry.

In the MCP architecture the host is the LLM application. A :class:`Host`
owns one :class:`Connection` per server, each isolated (a server never sees
another server's data, requests or notifications), and

* routes server-initiated sampling and elicitation through policy hooks the
  embedding application provides (approve, modify, deny) and on to a
  pluggable :class:`LLMProvider`;
* gives each server its own roots;
* aggregates the tools, prompts and resources of all servers into one
  registry with collision-safe names (``server__tool``), follows their list
  changes, and routes calls to the owning server;
* runs a consent hook before tool calls, annotation-aware: a tool that may be
  destructive needs approval unless the policy says otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Protocol, cast

import attrs
import trio
from msgspec import UNSET

from ..protocol import (
    CallToolResult,
    ConnectionClosed,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    InvalidParams,
    McpError,
    Prompt,
    Resource,
    Root,
    Tool,
    ToolAnnotations,
)
from ._actor import ExitReason
from ._connection import Connection, ConnectionSettings, TransportFactory

__all__ = [
    "SEPARATOR",
    "Approve",
    "ConsentHook",
    "ConsentPolicy",
    "ConsentRequest",
    "Deny",
    "ElicitationPolicy",
    "Host",
    "HostedTool",
    "LLMProvider",
    "Modify",
    "SamplingDenied",
    "SamplingPolicy",
    "ToolCallDenied",
]

log = logging.getLogger("trio_mcp.host")

#: Between a server's name and its tool's name in the aggregated registry.
SEPARATOR: Final = "__"


class LLMProvider(Protocol):
    """Where approved sampling requests go (the host's model)."""

    async def create_message(
        self, server: str, params: CreateMessageRequestParams
    ) -> CreateMessageResult: ...


@attrs.frozen
class Approve:
    """Let the request through unchanged."""


@attrs.frozen
class Modify:
    """Let the request through with these params instead."""

    params: CreateMessageRequestParams


@attrs.frozen
class Deny:
    """Refuse the request."""

    reason: str = "denied by the host"


SamplingDecision = Approve | Modify | Deny
SamplingPolicy = Callable[[str, CreateMessageRequestParams], Awaitable[SamplingDecision]]
#: ``policy(server, params) -> ElicitResult``: the application's user interface.
ElicitationPolicy = Callable[[str, ElicitRequestParams], Awaitable[ElicitResult]]


@attrs.frozen
class ConsentRequest:
    """A tool call awaiting the user's consent."""

    server: str
    tool: str
    arguments: Mapping[str, Any]
    annotations: ToolAnnotations | None


ConsentHook = Callable[[ConsentRequest], Awaitable[bool]]


@attrs.frozen(kw_only=True)
class ConsentPolicy:
    """Which tool calls need the consent hook's approval."""

    #: Tools whose annotations say ``readOnlyHint: true`` run without asking.
    trust_read_only: bool = True
    #: Tools that say ``destructiveHint: false`` run without asking.
    trust_non_destructive: bool = False
    #: Servers whose every tool runs without asking.
    trusted_servers: frozenset[str] = frozenset()

    def needs_approval(self, server: str, annotations: ToolAnnotations | None) -> bool:
        if server in self.trusted_servers:
            return False
        ann = annotations or ToolAnnotations()
        if self.trust_read_only and ann.read_only_hint is True:
            return False
        # The specification's default: a tool may be destructive unless it says otherwise.
        return not (self.trust_non_destructive and ann.destructive_hint is False)


class ToolCallDenied(McpError):
    """The consent hook (or its absence) refused a tool call."""

    code = -32600
    default_message = "Tool call denied"


class SamplingDenied(McpError):
    """The host's sampling policy refused a server's request."""

    code = -32600
    default_message = "Sampling denied by the host"


@attrs.frozen
class HostedTool:
    """A tool in the aggregated registry."""

    name: str  # the collision-safe public name
    server: str
    tool: Tool


class _Reporter:
    """A task_status that tells us when the child started."""

    def __init__(self, report: Callable[[Any], None]) -> None:
        self.started = report


class Host:
    """Many supervised servers behind one registry. ``await nursery.start(host.run)``,
    then :meth:`add_server` for each."""

    def __init__(
        self,
        *,
        llm: LLMProvider | None = None,
        sampling_policy: SamplingPolicy | None = None,
        elicitation_policy: ElicitationPolicy | None = None,
        consent: ConsentHook | None = None,
        consent_policy: ConsentPolicy | None = None,
        settings: ConnectionSettings | None = None,
    ) -> None:
        self.llm = llm
        self.sampling_policy = sampling_policy
        self.elicitation_policy = elicitation_policy
        self.consent = consent
        self.consent_policy = consent_policy or ConsentPolicy()
        self.settings = settings
        self._connections: dict[str, Connection] = {}
        self._scopes: dict[str, trio.CancelScope] = {}
        self._gone: dict[str, trio.Event] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[Host] = trio.TASK_STATUS_IGNORED) -> ExitReason:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started(self)
            await trio.sleep_forever()
        return ExitReason("closed")  # pragma: no cover - only cancellation ends it

    # -------------------------------------------------------------- servers

    async def add_server(
        self,
        name: str,
        transport: TransportFactory,
        *,
        roots: Sequence[Root] | None = None,
        settings: ConnectionSettings | None = None,
        **client_options: Any,
    ) -> Connection:
        """Connect to a server and keep it connected. Raises the start failure.

        ``client_options`` go to this server's :class:`ClientSession` only
        (``on_log``, ``on_resource_updated``, ``era``, …)."""
        if self._nursery is None:
            raise RuntimeError("start the host first: await nursery.start(host.run)")
        if not name or SEPARATOR in name:
            raise ValueError(f"server name must be non-empty and must not contain {SEPARATOR!r}")
        if name in self._connections:
            raise ValueError(f"a server named {name!r} is already connected")
        options: dict[str, Any] = dict(client_options)
        if self.llm is not None or self.sampling_policy is not None:
            options["sampling_handler"] = self._sampling_for(name)
        if self.elicitation_policy is not None:
            options["elicitation_handler"] = self._elicitation_for(name)
        connection = Connection(
            transport, name=name, settings=settings or self.settings, roots=roots, **options
        )
        scope = trio.CancelScope()
        gone = trio.Event()

        async def supervised(*, task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED) -> None:
            started = False

            def report(value: Connection) -> None:
                nonlocal started
                started = True
                task_status.started(value)

            with scope:
                try:
                    reporter = cast("trio.TaskStatus[Connection]", _Reporter(report))
                    await connection.run(task_status=reporter)
                except ConnectionClosed as exc:
                    if not started:
                        raise  # a start failure: add_server raises it
                    # One server giving up never takes the host (or its other servers) down.
                    log.warning("server %s gave up and was removed: %s", name, exc)
                finally:
                    if self._connections.get(name) is connection:
                        self._connections.pop(name, None)
                        self._scopes.pop(name, None)
                        self._gone.pop(name, None)
                    gone.set()

        self._scopes[name] = scope
        self._gone[name] = gone
        self._connections[name] = connection
        try:
            await self._nursery.start(supervised)
        except BaseException:
            if self._connections.get(name) is connection:
                self._connections.pop(name, None)
                self._scopes.pop(name, None)
                self._gone.pop(name, None)
            raise
        return connection

    async def remove_server(self, name: str) -> None:
        """Stop a server and wait until it is gone (its shutdown is bounded by
        ``ConnectionSettings.shutdown_grace``, its process's by the transport)."""
        scope = self._scopes.get(name)
        if scope is None:
            raise KeyError(f"no server named {name!r}")
        gone = self._gone[name]
        scope.cancel()
        await gone.wait()

    @property
    def servers(self) -> Mapping[str, Connection]:
        return dict(self._connections)

    def connection(self, server: str) -> Connection:
        try:
            return self._connections[server]
        except KeyError:
            raise InvalidParams(f"no server named {server!r}") from None

    # ------------------------------------------------------------- registry

    def tools(self) -> list[HostedTool]:
        """Every server's tools under collision-safe names ``server__tool``."""
        return [
            HostedTool(f"{server}{SEPARATOR}{tool.name}", server, tool)
            for server, conn in self._connections.items()
            for tool in conn.tools
        ]

    def prompts(self) -> list[tuple[str, Prompt]]:
        return [(f"{s}{SEPARATOR}{p.name}", p) for s, c in self._connections.items() for p in c.prompts]

    def resources(self) -> list[tuple[str, Resource]]:
        return [(s, r) for s, c in self._connections.items() for r in c.resources]

    def resolve(self, public_name: str) -> tuple[str, str]:
        server, sep, name = public_name.partition(SEPARATOR)
        if not sep or server not in self._connections:
            raise InvalidParams(f"unknown tool {public_name!r}: expected 'server{SEPARATOR}tool'")
        return server, name

    async def call_tool(
        self, public_name: str, arguments: dict[str, Any] | None = None, **options: Any
    ) -> CallToolResult:
        """Route a call to the owning server, after consent."""
        server, name = self.resolve(public_name)
        conn = self._connections[server]
        tool = next((t for t in conn.tools if t.name == name), None)
        if tool is None:
            raise InvalidParams(f"server {server!r} has no tool {name!r}")
        annotations = None if tool.annotations is UNSET else tool.annotations
        if self.consent_policy.needs_approval(server, annotations):
            if self.consent is None:
                raise ToolCallDenied(
                    f"{public_name} may change things and no consent hook is configured to approve it"
                )
            if not await self.consent(ConsentRequest(server, name, dict(arguments or {}), annotations)):
                raise ToolCallDenied(f"the user did not approve {public_name}")
        return await conn.call_tool(name, arguments, **options)

    async def get_prompt(self, public_name: str, arguments: dict[str, str] | None = None) -> Any:
        server, name = self.resolve(public_name)
        return await self._connections[server].get_prompt(name, arguments)

    async def read_resource(self, server: str, uri: str) -> Any:
        return await self.connection(server).read_resource(uri)

    # ------------------------------------------------------ server -> host

    def _sampling_for(
        self, server: str
    ) -> Callable[[CreateMessageRequestParams], Awaitable[CreateMessageResult]]:
        async def handle(params: CreateMessageRequestParams) -> CreateMessageResult:
            decision: SamplingDecision = Approve()
            if self.sampling_policy is not None:
                decision = await self.sampling_policy(server, params)
            if isinstance(decision, Deny):
                raise SamplingDenied(f"{server}: {decision.reason}")
            if isinstance(decision, Modify):
                params = decision.params
            if self.llm is None:
                raise SamplingDenied(f"{server}: the host has no LLM provider")
            return await self.llm.create_message(server, params)

        return handle

    def _elicitation_for(self, server: str) -> Callable[[ElicitRequestParams], Awaitable[ElicitResult]]:
        async def handle(params: ElicitRequestParams) -> ElicitResult:
            assert self.elicitation_policy is not None
            return await self.elicitation_policy(server, params)

        return handle
