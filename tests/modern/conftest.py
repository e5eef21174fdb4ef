"""Fixtures of the stateless 2026-07-28 era suite.

The heart of it is :class:`Wire`: a recording wrapper around both ends of an
in-memory pair (:class:`RecordingStream`) that keeps every message each side
*sends*, as the JSON it would be on a wire (whichever memory mode is used),
and validates all of them against the official MCP schemas:

* each message is assigned an era. A client request is *modern* when its
  method exists only in the stateless era (``server/discover``,
  ``subscriptions/listen``) or its ``_meta`` carries
  ``io.modelcontextprotocol/protocolVersion``; otherwise it belongs to the
  handshake era. A response has the era of the request it answers; a
  ``notifications/cancelled`` that of the request it cancels; a server
  notification that of its subscription (``subscriptionId``), else that of the
  request whose handler sent it (the peer's ``RELATED_REQUEST``), else the
  handshake era once an ``initialize`` was answered;
* modern messages are validated against the 2026-07-28 schema, handshake ones
  against the version negotiated by ``initialize`` (the latest handshake
  version when none was);
* requests and notifications against their method's definition and the side
  allowed to send them; results against the result definition of the method
  of the request they answer (``CallToolResultResponse``...), plus explicit
  checks of ``resultType`` on every modern result and ``ttlMs`` /
  ``cacheScope`` on cacheable ones; error answers against the envelope, the
  id the other side used, and (modern) the error definition of their code
  (``UnsupportedProtocolVersionError``, ``MissingRequiredClientCapabilityError``,
  ``InvalidParamsError``...);
* a server never sends a request on behalf of a modern request, nor any
  request before a handshake.

Validation runs when a connection block exits normally (so a violation fails
the test body and a strict ``xfail`` can hold it) and again at teardown for
anything not validated yet. What a test sends on purpose outside the protocol
is sent inside ``wire.unchecked(side)``; the answers to it are still checked.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import attrs
import msgspec
import pytest
import trio

from trio_mcp.actors import Peer
from trio_mcp.actors._client import ERA_CACHE, ClientSession, open_session
from trio_mcp.actors._server import ServerSession
from trio_mcp.protocol import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    V2026_07_28,
    CreateMessageResult,
    ElicitResult,
    McpError,
    MethodNotFound,
    Root,
    TextContent,
    encode,
    raw_or_none,
)
from trio_mcp.server import Context, LowLevelServer, MCPServer
from trio_mcp.transports import memory_pair

try:  # run from the repository root or from tests/
    from recording import Inbox, RecordingStream
    from schema_check import validate_definition, validate_message
except ImportError:  # pragma: no cover
    from tests.recording import Inbox, RecordingStream  # noqa: F401 (Inbox: for the tests)
    from tests.schema_check import validate_definition, validate_message

MODERN = V2026_07_28
MODES = ("zero-copy", "bytes", "inline")
#: Seconds; a hang guard that a passing test never reaches.
TIMEOUT = 10

#: Requests that exist only in the stateless era.
MODERN_ONLY = frozenset({"server/discover", "subscriptions/listen"})
#: Methods whose 2026 result is a CacheableResult (ttlMs + cacheScope).
CACHEABLE = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
#: Error code -> (2026 definition, whether it describes the whole message).
ERROR_DEFINITIONS: dict[int, tuple[str, bool]] = {
    -32021: ("MissingRequiredClientCapabilityError", True),
    -32022: ("UnsupportedProtocolVersionError", True),
    -32602: ("InvalidParamsError", False),
    -32601: ("MethodNotFoundError", False),
    -32600: ("InvalidRequestError", False),
    -32603: ("InternalError", False),
    -32700: ("ParseError", False),
}


def modern_meta(
    *,
    version: Any = MODERN,
    caps: dict[str, Any] | None = None,
    log_level: Any = None,
    info: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """A request ``_meta`` of the stateless era (``version=None`` leaves it out)."""
    meta: dict[str, Any] = {}
    if version is not None:
        meta[META_PROTOCOL_VERSION] = version
    meta[META_CLIENT_CAPABILITIES] = {} if caps is None else caps
    if info:
        meta[META_CLIENT_INFO] = {"name": "raw-client", "version": "0"}
    if log_level is not None:
        meta[META_LOG_LEVEL] = log_level
    meta.update(extra)
    return meta


def is_modern_request(data: dict[str, Any]) -> bool:
    if data.get("method") in MODERN_ONLY:
        return True
    params = data.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


def unwrap(exc: BaseException) -> BaseException:
    """The innermost exception of nested one-member exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


# --------------------------------------------------------------------------
# The recording, validating wire


@attrs.define
class Sent:
    """One message a side sent, as JSON."""

    side: str  # "client" | "server"
    data: Any
    #: The inbound request the sender was serving when it sent this (server side).
    related: Any = None
    checked: bool = True

    @property
    def method(self) -> str | None:
        return self.data.get("method") if isinstance(self.data, dict) else None

    @property
    def is_request(self) -> bool:
        return isinstance(self.data, dict) and "method" in self.data and "id" in self.data

    @property
    def is_notification(self) -> bool:
        return isinstance(self.data, dict) and "method" in self.data and "id" not in self.data

    @property
    def is_response(self) -> bool:
        return isinstance(self.data, dict) and "method" not in self.data


def _other(side: str) -> str:
    return "server" if side == "client" else "client"


class Wire:
    """What both sides of one connection sent, and the schema check of it."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self._unchecked = {"client": 0, "server": 0}
        self.validated = False
        self._changed: trio.Event = trio.Event()

    # -- recording

    def record(self, side: str, message: Any, related: Any = None) -> Sent:
        try:
            data = json.loads(encode(message))
        except (TypeError, ValueError, msgspec.EncodeError) as exc:  # the transport refuses it too
            data = {"unencodable": repr(exc)}
        entry = Sent(side, data, related, checked=self._unchecked[side] == 0)
        self.sent.append(entry)
        self._changed.set()
        self._changed = trio.Event()
        return entry

    def forget(self, entry: Sent) -> None:
        for i in range(len(self.sent) - 1, -1, -1):
            if self.sent[i] is entry:
                del self.sent[i]
                return

    @contextmanager
    def unchecked(self, side: str) -> Iterator[None]:
        """What ``side`` sends in this block is recorded, not validated."""
        self._unchecked[side] += 1
        try:
            yield
        finally:
            self._unchecked[side] -= 1

    async def wait_for(self, predicate: Callable[[Wire], bool]) -> None:
        """Wait (without polling) until ``predicate(wire)`` holds."""
        while not predicate(self):
            await self._changed.wait()

    # -- queries

    def messages(self, side: str | None = None, *, method: str | None = None) -> list[dict[str, Any]]:
        return [
            s.data
            for s in self.sent
            if isinstance(s.data, dict)
            and (side is None or s.side == side)
            and (method is None or s.method == method)
        ]

    def requests(self, side: str, method: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.messages(side, method=method) if "method" in m and "id" in m]

    def notifications(self, side: str, method: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.messages(side, method=method) if "method" in m and "id" not in m]

    def notification_entries(self, side: str, method: str | None = None) -> list[Sent]:
        return [
            s
            for s in self.sent
            if s.side == side and s.is_notification and (method is None or s.method == method)
        ]

    def responses(self, side: str) -> list[dict[str, Any]]:
        return [m for m in self.messages(side) if "method" not in m]

    def response_to(self, side: str, request: dict[str, Any]) -> dict[str, Any] | None:
        """The answer ``side`` sent to ``request`` (which the other side sent)."""
        for m in self.responses(side):
            if m.get("id") == request["id"]:
                return m
        return None

    def methods(self, side: str) -> list[str]:
        return [m["method"] for m in self.messages(side) if "method" in m]

    def handshake_version(self) -> str:
        for request in self.requests("client", "initialize"):
            answer = self.response_to("server", request)
            if answer is not None and isinstance(answer.get("result"), dict):
                version = answer["result"].get("protocolVersion")
                if version in HANDSHAKE_VERSIONS:
                    return version
        return LATEST_HANDSHAKE_VERSION

    def _initialized_before(self, index: int) -> bool:
        ids = {m["id"] for m in self.requests("client", "initialize")}
        return any(
            s.side == "server" and s.is_response and s.data.get("id") in ids and "result" in s.data
            for s in self.sent[:index]
        )

    # -- validation

    def validate(self) -> None:
        """Validate every recorded message; raises AssertionError listing the failures."""
        self.validated = True
        handshake = self.handshake_version()
        # requester -> id -> (method, era)
        requests: dict[str, dict[Any, tuple[str, str]]] = {"client": {}, "server": {}}
        for item in self.sent:
            if item.is_request:
                try:
                    hash(item.data["id"])
                except TypeError:
                    continue
                era = "modern" if item.side == "client" and is_modern_request(item.data) else "handshake"
                requests[item.side].setdefault(item.data["id"], (str(item.data["method"]), era))
        problems: list[str] = []
        for index, item in enumerate(self.sent):
            if not isinstance(item.data, dict) or not item.checked:
                continue
            where = f"message #{index} sent by the {item.side}"
            try:
                era = self._era(index, item, requests)
                version = MODERN if era == "modern" else handshake
                where += f" ({era} era, MCP {version})"
                self._check(index, item, version, era, requests)
            except AssertionError as exc:
                problems.append(f"{where}: {exc}")
        if problems:
            raise AssertionError(f"{len(problems)} invalid message(s):\n" + "\n".join(problems))

    def _era(self, index: int, item: Sent, requests: dict[str, dict[Any, tuple[str, str]]]) -> str:
        data = item.data
        side = item.side
        if item.is_request:
            if side == "client":
                return "modern" if is_modern_request(data) else "handshake"
            return "handshake"
        if item.is_response:
            known = requests[_other(side)].get(data.get("id"))
            return known[1] if known is not None else "modern"
        # notifications
        method = data["method"]
        params = data.get("params") if isinstance(data.get("params"), dict) else {}
        if method == "notifications/cancelled":
            known = requests[side].get(params.get("requestId"))
            if known is not None:
                return known[1]
        if side == "client":
            if method in ("notifications/initialized", "notifications/roots/list_changed"):
                return "handshake"
            return "handshake" if self._initialized_before(index) else "modern"
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        if method == "notifications/subscriptions/acknowledged" or META_SUBSCRIPTION_ID in meta:
            return "modern"
        if item.related is not None:
            known = requests["client"].get(item.related)
            if known is not None:
                return known[1]
        return "handshake" if self._initialized_before(index) else "modern"

    def _check(
        self, index: int, item: Sent, version: str, era: str, requests: dict[str, dict[Any, tuple[str, str]]]
    ) -> None:
        data = item.data
        side = item.side
        if "method" in data:
            validate_message(data, version, sender=side)  # type: ignore[arg-type]
            if item.is_request and side == "server":
                related = requests["client"].get(item.related)
                if related is not None and related[1] == "modern":
                    raise AssertionError(
                        f"the server sent a request ({data['method']!r}) while serving the stateless "
                        f"request {item.related!r} ({related[0]})"
                    )
                if not self._initialized_before(index):
                    raise AssertionError(
                        f"the server sent a request ({data['method']!r}) before any handshake"
                    )
            return
        ident = data.get("id")
        known = requests[_other(side)].get(ident)
        if known is None:
            raise AssertionError(f"answer for id {ident!r}, which the {_other(side)} never used")
        method = known[0]
        if "result" in data:
            validate_message(data, version, method=method, sender=side)  # type: ignore[arg-type]
            if era == "modern":
                result = data["result"]
                if "resultType" not in result:
                    raise AssertionError(f"modern result of {method!r} without resultType: {result}")
                if method in CACHEABLE and result["resultType"] == "complete":
                    ttl, scope = result.get("ttlMs"), result.get("cacheScope")
                    if type(ttl) is not int or ttl < 0 or scope not in ("public", "private"):
                        raise AssertionError(
                            f"cacheable result of {method!r} without ttlMs/cacheScope: {result}"
                        )
            return
        validate_message(data, version)
        if era == "modern":
            code = data.get("error", {}).get("code")
            definition = ERROR_DEFINITIONS.get(code)
            if definition is not None:
                name, whole = definition
                validate_definition(data if whole else data["error"], MODERN, name)


class Wires:
    """Every wire a test opened; validated at teardown if the test did not."""

    def __init__(self) -> None:
        self.all: list[Wire] = []

    def recording_pair(self, mode: str) -> tuple[RecordingStream, RecordingStream, Wire]:
        wire = Wire()
        self.all.append(wire)
        client_end, server_end = memory_pair(mode=mode)  # type: ignore[arg-type]
        return RecordingStream(client_end, "client", wire), RecordingStream(server_end, "server", wire), wire


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def wires() -> Iterator[Wires]:
    recorded = Wires()
    yield recorded
    for wire in recorded.all:
        if not wire.validated:
            wire.validate()


@pytest.fixture(autouse=True)
def fresh_era_cache() -> Iterator[None]:
    ERA_CACHE.clear()
    yield
    ERA_CACHE.clear()


# --------------------------------------------------------------------------
# Connections


@attrs.define
class Conn:
    client: ClientSession
    server: ServerSession
    wire: Wire


@asynccontextmanager
async def open_connection(
    app: LowLevelServer, wires: Wires, *, mode: str, **client_options: Any
) -> AsyncIterator[Conn]:
    """A ClientSession (``era="modern"`` unless given) connected to a session of ``app``."""
    client_options.setdefault("era", "modern")
    client_end, server_end, wire = wires.recording_pair(mode)
    async with app.running(), trio.open_nursery() as nursery:
        server = await app.start_session(server_end, nursery)
        async with open_session(client_end, **client_options) as client:
            yield Conn(client, server, wire)
        nursery.cancel_scope.cancel()
    wire.validate()


class RawDispatcher:
    """A scripted dispatcher for a bare :class:`Peer` playing one side by hand.
    ``handlers[method](request)`` returns the result (maybe awaitable) or raises."""

    def __init__(self, handlers: dict[str, Callable[[Any], Any]] | None = None) -> None:
        self.handlers = dict(handlers or {})
        self.notifications: list[tuple[str, Any]] = []
        self.requests: list[tuple[str, Any]] = []
        self._arrived = trio.Event()

    async def handle_request(self, request: Any) -> Any:
        self.requests.append((request.method, raw_or_none(request.params)))
        handler = self.handlers.get(request.method)
        if handler is None:
            raise MethodNotFound(f"Method not found: {request.method}")
        result = handler(request)
        if hasattr(result, "__await__"):
            result = await result
        return result

    async def handle_notification(self, method: str, params: Any) -> None:
        self.notifications.append((method, raw_or_none(params)))
        self._arrived.set()
        self._arrived = trio.Event()

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        return False

    async def wait_notifications(self, count: int, method: str | None = None) -> list[tuple[str, Any]]:
        while True:
            got = [n for n in self.notifications if method is None or n[0] == method]
            if len(got) >= count:
                return got
            await self._arrived.wait()


@attrs.define
class RawConn:
    """A bare client :class:`Peer` (no handshake) talking to a session of an app."""

    peer: Peer
    server: ServerSession
    wire: Wire
    dispatcher: RawDispatcher
    nursery: trio.Nursery

    async def call(self, method: str, params: Any = None, **fields: Any) -> Any:
        """A request; returns the result as builtins, raises McpError on an error answer.
        ``params`` defaults to ``{"_meta": modern_meta()}`` plus ``fields``."""
        if params is None:
            params = {"_meta": modern_meta(), **fields}
        return raw_or_none(await self.peer.request(method, params))

    async def initialize(self, version: str = LATEST_HANDSHAKE_VERSION, capabilities: Any = None) -> Any:
        result = await self.peer.request(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        )
        await self.peer.notify("notifications/initialized")
        await self.server.wait_initialized()
        return raw_or_none(result)


@asynccontextmanager
async def open_raw_client(
    app: LowLevelServer, wires: Wires, *, mode: str, handlers: dict[str, Callable[[Any], Any]] | None = None
) -> AsyncIterator[RawConn]:
    client_end, server_end, wire = wires.recording_pair(mode)
    async with app.running(), trio.open_nursery() as nursery:
        server = await app.start_session(server_end, nursery)
        dispatcher = RawDispatcher(handlers)
        peer = Peer(client_end, dispatcher, name="raw-client")
        await nursery.start(peer.run)
        yield RawConn(peer, server, wire, dispatcher, nursery)
        await peer.aclose()
        nursery.cancel_scope.cancel()
    wire.validate()


@attrs.define
class RawServer:
    """A bare server :class:`Peer` scripted by a :class:`RawDispatcher`;
    connect a client to ``client_stream``."""

    peer: Peer
    dispatcher: RawDispatcher
    wire: Wire
    client_stream: RecordingStream


@asynccontextmanager
async def open_raw_server(
    wires: Wires, handlers: dict[str, Callable[[Any], Any]], *, mode: str
) -> AsyncIterator[RawServer]:
    client_end, server_end, wire = wires.recording_pair(mode)
    dispatcher = RawDispatcher(handlers)
    async with trio.open_nursery() as nursery:
        peer = Peer(server_end, dispatcher, name="raw-server")
        await nursery.start(peer.run)
        yield RawServer(peer, dispatcher, wire, client_end)
        await peer.aclose()
        nursery.cancel_scope.cancel()
    wire.validate()


# --------------------------------------------------------------------------
# Scripted server answers


def discover_result(versions: list[str] | None = None, **capabilities: Any) -> dict[str, Any]:
    """A ``server/discover`` result a scripted modern server answers with."""
    return {
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
        "supportedVersions": [MODERN] if versions is None else versions,
        "capabilities": capabilities,
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted-modern", "version": "2"}},
    }


def initialize_result(version: str = LATEST_HANDSHAKE_VERSION, **capabilities: Any) -> dict[str, Any]:
    """An ``initialize`` result a scripted handshake server answers with."""
    return {
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": {"name": "scripted-handshake", "version": "1"},
    }


def error_of(excinfo: pytest.ExceptionInfo[BaseException]) -> McpError:
    exc = unwrap(excinfo.value)
    assert isinstance(exc, McpError), repr(exc)
    return exc


# --------------------------------------------------------------------------
# The demo app and client-side answers


def demo_app(**options: Any) -> Any:
    """An MCPServer with a feature of every kind, and handlers that ask the
    client for input. ``app.runs`` counts handler runs by name; ``app.seen``
    keeps what the handlers observed."""
    options.setdefault("instructions", "Use the tools.")
    app = MCPServer("demo", "1.2.3", **options)
    runs: Counter[str] = Counter()
    seen: dict[str, Any] = {}
    app.runs = runs  # type: ignore[attr-defined]
    app.seen = seen  # type: ignore[attr-defined]
    app.gate = trio.Event()  # type: ignore[attr-defined]
    app.entered = trio.Event()  # type: ignore[attr-defined]

    @app.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @app.tool
    async def ask_llm(ctx: Context, question: str) -> str:
        """One sampling question."""
        runs["ask_llm"] += 1
        answer = await ctx.sample(question, max_tokens=50)
        return f"llm said: {answer.content.text}"

    @app.tool
    async def interview(ctx: Context) -> str:
        """Sampling, then elicitation: two questions, two rounds."""
        runs["interview"] += 1
        llm = await ctx.sample("Pick a name", max_tokens=10)
        form = await ctx.elicit(
            "Confirm the name",
            {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        )
        seen["interview"] = (llm.content.text, form.action, form.content)
        return f"{llm.content.text} -> {form.action}:{form.content}"

    @app.tool
    async def where(ctx: Context) -> str:
        """The client's roots."""
        runs["where"] += 1
        roots = await ctx.list_roots()
        return ",".join(r.uri for r in roots)

    @app.tool
    async def visit(ctx: Context) -> str:
        """A URL elicitation."""
        runs["visit"] += 1
        result = await ctx.elicit_url("Sign in", "https://example.com/login", "elic-1")
        return result.action

    @app.tool
    async def talk(ctx: Context, tag: str) -> str:
        """Logs once at each of four levels."""
        for level in ("debug", "info", "warning", "error"):
            await ctx.log(level, f"{tag}:{level}", logger="talk")
        return tag

    @app.tool
    async def who(ctx: Context) -> str:
        """The name of the client, as the handler sees it."""
        info = ctx.client_info
        return "unknown" if info is None else info.name

    @app.tool
    async def version(ctx: Context) -> str:
        """The protocol version and client capabilities the handler sees."""
        caps = sorted(k for k, v in msgspec_builtins(ctx.client_capabilities).items() if v is not None)
        return f"{ctx.protocol_version} {','.join(caps)}"

    @app.tool
    async def slow(ctx: Context, steps: int) -> str:
        """Reports progress."""
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        return "done"

    @app.tool
    async def endless(ctx: Context) -> str:
        """Asks one more question every round."""
        runs["endless"] += 1
        for i in range(100):
            await ctx.sample(f"question {i}", max_tokens=5)
        return "never"

    @app.tool
    async def in_child(ctx: Context) -> str:
        """Asks from a child task."""
        out: list[str] = []

        async def child() -> None:
            out.append((await ctx.sample("from a child", max_tokens=5)).content.text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
        return out[0]

    @app.tool
    async def blocker(ctx: Context) -> str:
        """Waits until ``app.gate`` is set (or the request is cancelled)."""
        runs["blocker"] += 1
        app.entered.set()  # type: ignore[attr-defined]
        try:
            await app.gate.wait()  # type: ignore[attr-defined]
        except trio.Cancelled:
            seen["blocker"] = "cancelled"
            raise
        return "released"

    @app.prompt
    def greet(name: str) -> str:
        """Greets someone."""
        return f"Hello, {name}!"

    @app.prompt
    async def ask_prompt(ctx: Context, topic: str) -> str:
        """A prompt that asks the client's LLM first."""
        runs["ask_prompt"] += 1
        answer = await ctx.sample(f"Say something about {topic}", max_tokens=20)
        return f"{topic}: {answer.content.text}"

    @app.prompt
    async def url_prompt(ctx: Context) -> str:
        """A prompt that needs a URL elicitation."""
        result = await ctx.elicit_url("Sign in", "https://example.com/login", "elic-2")
        return result.action

    @app.prompt
    async def form_prompt(ctx: Context) -> str:
        """A prompt that needs a form elicitation."""
        result = await ctx.elicit(
            "Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}
        )
        return f"{result.action}:{result.content}"

    @app.prompt
    async def roots_prompt(ctx: Context) -> str:
        roots = await ctx.list_roots()
        return ",".join(r.uri for r in roots)

    @app.completion("greet", "name")
    def complete_name(value: str, context: dict[str, str]) -> list[str]:
        return [n for n in ("alice", "albert", "bob") if n.startswith(value)]

    @app.resource("memo://note", mime_type="text/plain")
    def note() -> str:
        return "a note"

    @app.resource("memo://asks")
    async def asks(ctx: Context) -> str:
        answer = await ctx.sample("What is in the memo?", max_tokens=5)
        return f"memo: {answer.content.text}"

    @app.resource("greeting://{name}")
    def greeting(name: str) -> str:
        return f"Hello, {name}!"

    return app


def msgspec_builtins(obj: Any) -> dict[str, Any]:
    return msgspec.to_builtins(obj)


class Answers:
    """Client-side answers to the server's questions, recording what was asked."""

    def __init__(
        self, *, text: str = "Ada", action: str = "accept", content: dict[str, Any] | None = None
    ) -> None:
        self.text = text
        self.action = action
        self.content = {"name": "Ada"} if content is None else content
        self.sampled: list[Any] = []
        self.elicited: list[Any] = []

    async def sample(self, params: Any) -> Any:
        self.sampled.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(text=self.text), model="test-model")

    async def elicit(self, params: Any) -> Any:
        self.elicited.append(params)
        if params.mode == "url":
            return ElicitResult(action=self.action)
        return ElicitResult(action=self.action, content=self.content)

    def options(self, *, roots: bool = True) -> dict[str, Any]:
        opts: dict[str, Any] = {"sampling_handler": self.sample, "elicitation_handler": self.elicit}
        if roots:
            opts["roots"] = [Root(uri="file:///work", name="work"), Root(uri="file:///tmp")]
        return opts


def sampling_answer(text: str = "Ada") -> dict[str, Any]:
    """A CreateMessageResult as a raw client sends it in ``inputResponses``."""
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": "raw-model"}


def text_of(result: Any) -> str:
    """The text of the first content block of a tools/call result (builtins or Struct)."""
    if isinstance(result, dict):
        return result["content"][0]["text"]
    return result.content[0].text
