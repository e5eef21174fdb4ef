"""OpenTelemetry traces of MCP sessions, after the semantic conventions for
MCP (``docs/gen-ai/mcp.md`` of open-telemetry/semantic-conventions).

Every request and notification a session sends gets a ``CLIENT`` span, every
one it serves (its dispatcher handles) a ``SERVER`` span, on both sides: a
client's ``tools/call`` is a CLIENT span on the client and a SERVER span on
the server; a server's ``sampling/createMessage`` the other way round. The
span name is the method, followed by the tool or prompt name
(``tools/call get_weather``); the attributes are ``mcp.method.name``,
``gen_ai.tool.name`` / ``gen_ai.prompt.name`` / ``mcp.resource.uri``,
``gen_ai.operation.name`` (``execute_tool``), ``jsonrpc.request.id``,
``mcp.protocol.version``, ``mcp.session.id`` (Streamable HTTP and SSE),
``network.transport`` (``pipe`` for stdio, ``tcp`` for HTTP and WebSocket)
and ``network.protocol.name``. An error answer sets ``error.type`` and
``rpc.response.status_code`` to its JSON-RPC code (and the earlier
conventions' ``rpc.jsonrpc.error_code``), and the span status to ERROR with
its message; a tool result with ``isError`` sets ``error.type`` to
``tool_error``. A call of a client's API (``call_tool``...) is one CLIENT
span however many requests it takes (the 2026 era's input-required rounds
each carry its context: one SERVER span per round under it).

The trace context travels in the message's ``params._meta`` (``traceparent``,
``tracestate``, and ``baggage`` when in use), injected by the sender with the
configured propagator and extracted by the receiver as the parent of its
span, so one trace runs from a client through a gateway to the server behind
it. ``ping``, ``notifications/cancelled`` and progress for a call of our own
are handled by the peer itself: they get no span of their own.

When a session traces is decided once, when it is made: the
:class:`Tracing` attached to every session by default follows the global
tracer provider (``opentelemetry.trace.set_tracer_provider``) set at that
time; without one (or without ``opentelemetry-api`` installed) nothing is
wrapped and the session runs exactly as without this module.
``Tracing(provider)`` traces with a provider of its own.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio
from msgspec import UNSET, Struct

from ..actors._instrument import install_instrumentation
from ..protocol import META_PROTOCOL_VERSION, InternalError, McpError, coerce

if TYPE_CHECKING:
    from opentelemetry.context import Context as OtelContext
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from ..actors._peer_inbound import InboundRequest

__all__ = ["TRACER_NAME", "Tracing"]

#: The instrumentation scope of the spans.
TRACER_NAME: Final = "trio-mcp"

#: Methods whose target is a tool (the span name's suffix) and the attribute naming it.
_NAMED: Final = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}
#: Methods about one resource (its URI is an attribute, never in the span name).
_ABOUT_URI: Final = frozenset(
    {"resources/read", "resources/subscribe", "resources/unsubscribe", "notifications/resources/updated"}
)
#: (network.transport, network.protocol.name) by a part of the stream class's module.
_TRANSPORTS: Final = (
    ("stdio", "pipe", None),
    ("websocket", "tcp", "websocket"),
    ("sse", "tcp", "http"),
    ("http", "tcp", "http"),
)


class _Target(Struct):
    """What a span needs of a message's params (the rest is skipped)."""

    name: Any = UNSET
    uri: Any = UNSET
    meta: Any = msgspec.field(default=UNSET, name="_meta")


class _ToolOutcome(Struct):
    is_error: Any = msgspec.field(default=False, name="isError")


_read_target: Final = msgspec.json.Decoder(_Target)
_read_outcome: Final = msgspec.json.Decoder(_ToolOutcome)
_encode: Final = msgspec.json.Encoder().encode


class Tracing:
    """An instrumentation (``trio_mcp.actors._instrument``) that traces sessions.

    ``Tracing()`` (installed by default) traces a session when a global tracer
    provider is set as it is made; ``Tracing(provider)`` always traces, with
    ``provider``. Attach it to one session with ``instrumentation=[...]`` on
    :class:`~trio_mcp.ClientSession` or :class:`~trio_mcp.MCPServer`."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self.tracer_provider = tracer_provider
        self._tracer: tuple[Any, Tracer] | None = None

    def tracer(self) -> Tracer | None:
        """The tracer sessions made now use, or None: do not trace."""
        provider: Any = self.tracer_provider
        if provider is None:
            trace = sys.modules.get("opentelemetry.trace")
            if trace is None:
                return None  # OpenTelemetry not imported: no provider can have been set
            provider = trace.get_tracer_provider()
            if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
                return None
        cached = self._tracer
        if cached is not None and cached[0] is provider:
            return cached[1]
        from .. import __version__

        tracer: Tracer = provider.get_tracer(TRACER_NAME, __version__)
        self._tracer = (provider, tracer)
        return tracer

    def attach(self, session: Any) -> None:
        tracer = self.tracer()
        if tracer is not None:
            _SessionTracing(tracer, session)

    def __repr__(self) -> str:
        return f"Tracing({self.tracer_provider!r})"


class _Call:
    """The span of a client API call being made in this task."""

    __slots__ = ("method", "numbered", "span")

    def __init__(self, span: Span, method: str) -> None:
        self.span = span
        self.method = method
        self.numbered = False


_CALL: ContextVar[_Call | None] = ContextVar("trio_mcp_traced_call", default=None)


class _SessionTracing:
    """One session's spans: it stands in for the peer's dispatcher and wraps
    its ``request`` and ``notify``."""

    def __init__(self, tracer: Tracer, session: Any) -> None:
        from opentelemetry import propagate, trace
        from opentelemetry.trace import SpanKind, StatusCode

        self._trace = trace
        self._propagate = propagate
        self._client_kind = SpanKind.CLIENT
        self._server_kind = SpanKind.SERVER
        self._error = StatusCode.ERROR
        self.tracer = tracer
        self.session = session
        peer = session.peer
        self.peer = peer
        stream = peer.stream
        self._static: dict[str, str] = {}
        # Words of the module's dotted path: ``transports._stdio_stream`` gives stdio.
        words = {word for part in type(stream).__module__.split(".") for word in part.split("_")}
        for part, transport, protocol in _TRANSPORTS:
            if part in words:
                self._static["network.transport"] = transport
                if protocol is not None:
                    self._static["network.protocol.name"] = protocol
                break
        self._inner = peer.dispatcher
        self._request = peer.request
        self._notify = peer.notify
        peer.dispatcher = self
        peer.request = self.request
        peer.notify = self.notify
        self._call: Any = getattr(session, "_call", None)  # a ClientSession's API calls
        if self._call is not None:
            session._call = self.call

    # ------------------------------------------------------------ attributes

    def _attributes(self, method: str, params: Any) -> tuple[str, dict[str, Any], Any]:
        """The span name, its attributes, and the params' ``_meta`` (or UNSET)."""
        name, uri, meta = _target(params)
        attrs: dict[str, Any] = {"mcp.method.name": method, **self._static}
        span_name = method
        named = _NAMED.get(method)
        if named is not None and type(name) is str:
            attrs[named] = name
            span_name = f"{method} {name}"
        if method == "tools/call":
            attrs["gen_ai.operation.name"] = "execute_tool"
        elif method in _ABOUT_URI and type(uri) is str:
            attrs["mcp.resource.uri"] = uri
        version = self.session.protocol_version
        if version is None and type(meta) is dict:
            version = meta.get(META_PROTOCOL_VERSION)
        if type(version) is str:
            attrs["mcp.protocol.version"] = version
        stream = self.peer.stream
        session_id = getattr(stream, "session_id", None) or getattr(stream, "id", None)
        if type(session_id) is str:
            attrs["mcp.session.id"] = session_id
        return span_name, attrs, meta

    def _parent(self, meta: Any) -> OtelContext | None:
        """The context the sender put in ``_meta``, if any (else the ambient one)."""
        if type(meta) is not dict or "traceparent" not in meta:
            return None
        try:
            context = self._propagate.extract(meta)
        except (TypeError, ValueError):
            return None
        if not self._trace.get_current_span(context).get_span_context().is_valid:
            return None
        return context

    @contextmanager
    def _span(
        self, name: str, kind: Any, attrs: dict[str, Any], parent: Any = None, *, answering: bool = False
    ) -> Iterator[Span]:
        """A current span whose failure is recorded as the conventions say
        (``answering``: a request we serve, whose unexpected exception the
        peer answers as an internal error)."""
        with self.tracer.start_as_current_span(
            name,
            context=parent,
            kind=kind,
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except McpError as exc:
                self._failed(span, exc)
                raise
            except Exception as exc:
                span.record_exception(exc)
                if answering:
                    self._failed(span, InternalError(str(exc)), type(exc).__qualname__)
                else:
                    span.set_attribute("error.type", type(exc).__qualname__)
                    span.set_status(self._error, str(exc))
                raise
            except trio.Cancelled:
                span.set_attribute("error.type", "cancelled")
                raise

    def _failed(self, span: Span, error: McpError, kind: str | None = None) -> None:
        code = str(error.code)
        span.set_attribute("error.type", kind or code)
        span.set_attribute("rpc.response.status_code", code)
        span.set_attribute("rpc.jsonrpc.error_code", error.code)
        span.set_status(self._error, error.message)

    def _check_result(self, span: Span, method: str, result: Any) -> None:
        if method == "tools/call":
            if _is_tool_error(result):
                span.set_attribute("error.type", "tool_error")
                span.set_status(self._error)
        elif method == "initialize":  # the version just negotiated
            version = getattr(result, "protocol_version", None) or self.session.protocol_version
            if type(version) is str:
                span.set_attribute("mcp.protocol.version", version)

    # -------------------------------------------------- what the other side asks

    async def handle_request(self, request: InboundRequest) -> Any:
        method = request.method
        name, attrs, meta = self._attributes(method, request.params)
        attrs["jsonrpc.request.id"] = str(request.id)
        with self._span(name, self._server_kind, attrs, self._parent(meta), answering=True) as span:
            result = await self._inner.handle_request(request)
            self._check_result(span, method, result)
            return result

    async def handle_notification(self, method: str, params: Any) -> None:
        name, attrs, meta = self._attributes(method, params)
        with self._span(name, self._server_kind, attrs, self._parent(meta)):
            await self._inner.handle_notification(method, params)

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        start = time.time_ns()
        handled: bool = self._inner.handle_notification_inline(method, params)
        if handled:
            name, attrs, meta = self._attributes(method, params)
            span = self.tracer.start_span(
                name, context=self._parent(meta), kind=self._server_kind, attributes=attrs, start_time=start
            )
            span.end()
        return handled

    # ------------------------------------------------------------ what we send

    async def call(self, method: str, params: Any, result_type: Any, on_progress: Any = None) -> Any:
        """A call of the client's API (``call_tool``...): one span, whatever
        number of requests it takes (the 2026 era's input-required rounds)."""
        name, attrs, _ = self._attributes(method, params)
        with self._span(name, self._client_kind, attrs) as span:
            token = _CALL.set(_Call(span, method))
            try:
                result = await self._call(method, params, result_type, on_progress)
            finally:
                _CALL.reset(token)
            self._check_result(span, method, result)
            return result

    async def request(self, method: str, params: Any = UNSET, **options: Any) -> Any:
        call = _CALL.get()
        if call is not None and call.method == method and self._trace.get_current_span() is call.span:
            # A request of the call that span stands for: it carries its context.
            if not call.numbered:
                call.numbered = True
                call.span.set_attribute("jsonrpc.request.id", str(self.peer._next_id))
            return await self._request(method, self._carrying_context(params), **options)
        name, attrs, _ = self._attributes(method, params)
        # The id the peer gives this request: taken before its first await.
        attrs["jsonrpc.request.id"] = str(self.peer._next_id)
        with self._span(name, self._client_kind, attrs) as span:
            result = await self._request(method, self._carrying_context(params), **options)
            self._check_result(span, method, result)
            return result

    async def notify(self, method: str, params: Any = UNSET) -> None:
        name, attrs, _ = self._attributes(method, params)
        with self._span(name, self._client_kind, attrs):
            await self._notify(method, self._carrying_context(params))

    def _carrying_context(self, params: Any) -> Any:
        """``params`` with the current trace context in its ``_meta``."""
        carrier: dict[str, str] = {}
        self._propagate.inject(carrier)
        return with_meta(params, carrier) if carrier else params


def _target(params: Any) -> tuple[Any, Any, Any]:
    """(name, uri, _meta) of a message's params, each UNSET when absent."""
    if params is UNSET or params is None:
        return UNSET, UNSET, UNSET
    if type(params) is msgspec.Raw:
        try:
            target = _read_target.decode(params)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return UNSET, UNSET, UNSET
        return target.name, target.uri, target.meta
    if isinstance(params, dict):
        return params.get("name", UNSET), params.get("uri", UNSET), params.get("_meta", UNSET)
    return getattr(params, "name", UNSET), getattr(params, "uri", UNSET), getattr(params, "meta", UNSET)


def _is_tool_error(result: Any) -> bool:
    if type(result) is msgspec.Raw:
        try:
            return _read_outcome.decode(result).is_error is True
        except (msgspec.ValidationError, msgspec.DecodeError):
            return False
    if isinstance(result, dict):
        return result.get("isError") is True
    return getattr(result, "is_error", False) is True


def with_meta(params: Any, entries: dict[str, Any]) -> Any:
    """``params`` (absent, a dict, a wire Struct or JSON ``msgspec.Raw``) with
    ``entries`` added to its ``_meta`` (replacing keys already there); the
    original is left as it was."""
    if params is UNSET or params is None:
        return {"_meta": entries}
    if type(params) is msgspec.Raw:
        return _raw_with_meta(params, entries)
    if isinstance(params, dict):
        meta = params.get("_meta")
        return {**params, "_meta": {**meta, **entries} if isinstance(meta, dict) else entries}
    if isinstance(params, Struct) and "meta" in params.__struct_fields__:
        meta = getattr(params, "meta", UNSET)
        return msgspec.structs.replace(
            params, meta={**meta, **entries} if isinstance(meta, dict) else entries
        )
    return with_meta(coerce(params, dict[str, Any]), entries)


def _raw_with_meta(raw: msgspec.Raw, entries: dict[str, Any]) -> Any:
    """JSON params with ``entries`` in their ``_meta``: spliced in front when
    there is no ``_meta`` yet (the rest stays the bytes it was), else rebuilt."""
    data = bytes(raw).lstrip()
    try:
        has_meta = _read_target.decode(data).meta is not UNSET
    except (msgspec.ValidationError, msgspec.DecodeError):
        return raw  # not an object: the peer sends it as it is
    if has_meta:
        return msgspec.Raw(_encode(with_meta(msgspec.json.decode(data), entries)))
    head = b'{"_meta":' + _encode(entries)
    rest = data[1:].lstrip()
    return msgspec.Raw(head + rest if rest.startswith(b"}") else head + b"," + rest)


#: Sessions trace by default when a global tracer provider is set.
DEFAULT_TRACING: Final = Tracing()
install_instrumentation(DEFAULT_TRACING)
