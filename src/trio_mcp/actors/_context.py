"""What a server handler sees of its request and session: :class:`Context`
(progress, logging, and questions to the client: sampling, elicitation,
roots), and the logging levels it knows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import msgspec
from msgspec import UNSET

from ..protocol import (
    V2025_11_25,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    Implementation,
    ListRootsRequest,
    ListRootsResult,
    LoggingMessageNotificationParams,
    Root,
    SamplingMessage,
    TextContent,
)
from ..protocol._types import LoggingLevel
from ..transports._base import REQUEST_HEADERS
from ._modern import ModernRequest
from ._peer_inbound import InboundRequest

if TYPE_CHECKING:
    from ..auth.resource import AccessToken
    from ._server import ServerSession

__all__ = ["LOG_LEVELS", "Context"]

_T = TypeVar("_T")

#: Logging levels, least severe first (RFC 5424 order).
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_LEVEL_RANK: Final = {name: i for i, name in enumerate(LOG_LEVELS)}


class Context:
    """What a handler sees of its request and session. Never part of a tool's schema."""

    __slots__ = ("modern", "request", "session", "task")

    def __init__(
        self, session: ServerSession, request: InboundRequest, modern: ModernRequest | None = None
    ) -> None:
        self.session = session
        self.request = request
        #: Per-request state of a stateless (2026-era) request, else None.
        self.modern = modern
        #: The task this context runs in (a ``TaskHandle``), else None.
        self.task: Any = None

    @property
    def _detached(self) -> bool:
        """A stateless request's task: its request was answered, nothing may travel on it."""
        return self.task is not None and self.modern is not None

    async def _ask(
        self, request: Any, capability: str, result_type: type[_T], direct: Callable[[], Awaitable[_T]]
    ) -> _T:
        if self.task is not None:
            answer: _T = await self.task.ask(request, capability, result_type, direct)
            return answer
        if self.modern is not None:
            return self.modern.ask(request, capability, result_type)
        return await direct()

    @property
    def request_id(self) -> int | str:
        return self.request.id

    @property
    def meta(self) -> dict[str, Any]:
        return self.request.meta

    @property
    def method(self) -> str:
        return self.request.method

    @property
    def params(self) -> dict[str, Any]:
        """The request's params as plain JSON values (decoded on each use)."""
        params = self.request.params
        if type(params) is msgspec.Raw:
            decoded = msgspec.json.decode(params)
        else:
            decoded = {} if params is UNSET or params is None else msgspec.to_builtins(params)
        return decoded if isinstance(decoded, dict) else {}

    @property
    def request_headers(self) -> Mapping[str, str] | None:
        """The headers of the HTTP request that carried this request (lower-case
        names), or None when it did not come over HTTP."""
        peer = self.session.peer
        inline = REQUEST_HEADERS.get()
        if inline is not None and inline[0] is peer:
            return inline[1]
        of = getattr(peer.stream, "request_headers", None)
        return None if of is None else of(self.request.id)

    @property
    def auth(self) -> AccessToken | None:
        """The verified access token this request came with (subject, scopes,
        client id, claims), when the server checks tokens
        (:class:`~trio_mcp.auth.resource.ResourceServer`); else None. In a
        session's task, after its request was answered: the session's latest token."""
        found: AccessToken | None = getattr(self.request_headers, "auth", None)
        if found is None:
            found = getattr(self.session.peer.stream, "auth", None)
        return found

    @property
    def progress_token(self) -> int | str | None:
        return self.request.progress_token

    @property
    def protocol_version(self) -> str | None:
        return self.modern.version if self.modern is not None else self.session.protocol_version

    @property
    def client_capabilities(self) -> ClientCapabilities:
        return self.modern.capabilities if self.modern is not None else self.session.client_capabilities

    @property
    def client_info(self) -> Implementation | None:
        return self.modern.client_info if self.modern is not None else self.session.client_info

    @property
    def app(self) -> Any:
        return self.session.app

    @property
    def state(self) -> Any:
        """What the app's lifespan yielded (``None`` without a lifespan)."""
        return getattr(self.session.app, "state", None)

    async def start_task(self, work: Callable[[Context], Awaitable[Any]]) -> Any:
        """Answer this request with a task running ``work(ctx)`` in the
        background (a handler's ``return await ctx.start_task(work)``; the app
        needs tasks). The request's input-required rounds may come first."""
        from ._tasks import start_task

        params = self.request.params
        task = params.get("task", UNSET) if isinstance(params, dict) else getattr(params, "task", UNSET)
        return await start_task(self, work, task_param=task)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress if the caller asked for it (else a no-op)."""
        if self._detached:
            return
        await self.request.report_progress(progress, total, message)

    async def log(self, level: str, data: Any, *, logger: str | None = None) -> None:
        if self._detached:
            return
        if self.modern is not None:
            # Stateless era: only at or above the level this request asked for.
            threshold = self.modern.log_level
            if level not in _LEVEL_RANK:
                raise ValueError(f"unknown log level {level!r}; one of {', '.join(LOG_LEVELS)}")
            if threshold is None or _LEVEL_RANK[level] < _LEVEL_RANK[threshold]:
                return
            params = LoggingMessageNotificationParams(
                level=cast(LoggingLevel, level), data=data, logger=UNSET if logger is None else logger
            )
            await self.session.peer.notify("notifications/message", params)
            return
        await self.session.send_log(level, data, logger=logger)

    async def debug(self, message: Any, *, logger: str | None = None) -> None:
        await self.log("debug", message, logger=logger)

    async def info(self, message: Any, *, logger: str | None = None) -> None:
        await self.log("info", message, logger=logger)

    async def warning(self, message: Any, *, logger: str | None = None) -> None:
        await self.log("warning", message, logger=logger)

    async def error(self, message: Any, *, logger: str | None = None) -> None:
        await self.log("error", message, logger=logger)

    async def sample(
        self,
        messages: str | list[SamplingMessage] | list[dict[str, Any]],
        *,
        max_tokens: int = 1000,
        system_prompt: str | None = None,
        temperature: float | None = None,
        **extra: Any,
    ) -> CreateMessageResult:
        """Ask the client's LLM for a completion (needs the sampling capability)."""
        if isinstance(messages, str):
            msgs: Any = [SamplingMessage(role="user", content=TextContent(text=messages))]
        else:
            msgs = [
                m if isinstance(m, SamplingMessage) else msgspec.convert(m, SamplingMessage) for m in messages
            ]
        fields: dict[str, Any] = {"messages": msgs, "max_tokens": max_tokens, **extra}
        if system_prompt is not None:
            fields["system_prompt"] = system_prompt
        if temperature is not None:
            fields["temperature"] = temperature
        params = CreateMessageRequestParams(**fields)
        return await self._ask(
            CreateMessageRequest(params=params),
            "sampling",
            CreateMessageResult,
            lambda: self.session.create_message(params),
        )

    async def elicit(self, message: str, schema: Any) -> ElicitResult:
        """Ask the user to fill a form. ``schema`` is a flat object JSON schema
        (dict) or a Struct / dataclass type whose fields are primitives."""
        requested = schema if isinstance(schema, dict) else _elicitation_schema(schema)
        params = msgspec.convert(
            {"message": message, "requestedSchema": requested, "mode": "form"}
            if (self.protocol_version or "") >= V2025_11_25
            else {"message": message, "requestedSchema": requested},
            ElicitRequestParams,
        )
        return await self._ask(
            ElicitRequest(params=params),
            _form_capability(self.client_capabilities),
            ElicitResult,
            lambda: self.session.elicit(params),
        )

    async def elicit_url(self, message: str, url: str, elicitation_id: str) -> ElicitResult:
        """Send the user to a URL (out-of-band interaction; 2025-11-25)."""
        params = ElicitRequestParams(message=message, mode="url", url=url, elicitation_id=elicitation_id)
        return await self._ask(
            ElicitRequest(params=params), "elicitation.url", ElicitResult, lambda: self.session.elicit(params)
        )

    async def list_roots(self) -> list[Root]:
        """The client's roots (needs the roots capability)."""
        if self.task is None and self.modern is None:
            return await self.session.list_roots()

        async def direct() -> ListRootsResult:
            return ListRootsResult(roots=await self.session.list_roots())

        result: ListRootsResult = await self._ask(ListRootsRequest(), "roots", ListRootsResult, direct)
        return result.roots


def _form_capability(caps: ClientCapabilities) -> str:
    """``elicitation`` declared as ``{}`` means forms; ``{url: {}}`` alone does not."""
    elicitation = caps.elicitation
    if elicitation is not UNSET and elicitation.form is UNSET and elicitation.url is not UNSET:
        return "elicitation.form"
    return "elicitation"


def _elicitation_schema(tp: Any) -> dict[str, Any]:
    """A flat elicitation form schema from a Struct / dataclass / TypedDict type."""
    (schema,), components = msgspec.json.schema_components([tp], ref_template="{name}")
    if "$ref" in schema:
        schema = components[schema["$ref"]]
    props: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        if "$ref" in prop:  # enums are components
            prop = {**components[prop.pop("$ref")], **prop}
        if prop.get("title") == name:
            prop.pop("title")
        if "enum" in prop and "type" not in prop:
            values = prop["enum"]
            if not all(isinstance(v, str) for v in values):
                raise TypeError(f"elicitation field {name!r}: enum values must be strings")
            prop["type"] = "string"
        if prop.get("type") not in ("string", "number", "integer", "boolean") and not (
            prop.get("type") == "array" and isinstance(prop.get("items"), dict)
        ):
            raise TypeError(f"elicitation field {name!r} must be a primitive (str, int, float, bool, enum)")
        props[name] = prop
    out: dict[str, Any] = {"type": "object", "properties": props}
    if schema.get("required"):
        out["required"] = list(schema["required"])
    return out
